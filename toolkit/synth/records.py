"""One log line before it is rendered, and the processes that print them.

SGLang runs one process per scheduler rank plus the main (HTTP/tokenizer) process; journald
shows each with its own pid. Lines are kept with their exact time so the writer can put the
interleaved streams in time order.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import NamedTuple

from toolkit.analyze.model import Layout
from toolkit.synth.clock import HOST, journal_ts, sglang_ts

__all__ = ["Processes", "Record", "access_line", "render"]


class Record(NamedTuple):
    """A line: when, which process, its rank tags (None = the main process), the message.

    ``bracket`` False is text a process writes without SGLang's prefix (tqdm bars).
    """

    t: float
    pid: int
    tags: str | None
    message: str
    bracket: bool = True


@dataclass(frozen=True)
class Processes:
    """Pids of the launch: the main process, then one scheduler per rank (PP-major)."""

    main: int
    schedulers: tuple[int, ...]
    layout: Layout

    @classmethod
    def of(cls, layout: Layout, seed: int) -> Processes:
        rng = random.Random(f"pids-{seed}-{layout.tp}-{layout.pp}")
        main = rng.randrange(20000, 90000)
        # The schedulers are forked together a moment after the main process.
        first = main + 60 + rng.randrange(20)
        return cls(main, tuple(first + i for i in range(layout.tp * layout.pp)), layout)

    def logging_ranks(self) -> list[tuple[int, int, int | None, int | None]]:
        """``(pid, pp_rank, pp tag, tp tag)`` of the ranks that print scheduler lines: each
        stage's TP rank 0 (the tags are None where that size is 1)."""
        lay = self.layout
        out = []
        for k in range(lay.pp):
            pid = self.schedulers[k * lay.tp]
            out.append((pid, k, k if lay.pp > 1 else None, 0 if lay.tp > 1 else None))
        return out


def render(rec: Record) -> str:
    """The journald ``-o short`` line of one record."""
    head = f"{journal_ts(rec.t)} {HOST} python3[{rec.pid}]: "
    if not rec.bracket:
        return head + rec.message
    return f"{head}[{sglang_ts(rec.t)}{rec.tags or ''}] {rec.message}"


def access_line(port: int, request: str) -> str:
    """uvicorn's access line under SGLang's formatter: ``INFO:     client - "request" 200 OK``."""
    return f'INFO:     127.0.0.1:{port} - "{request} HTTP/1.1" 200 OK'
