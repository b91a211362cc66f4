"""Reference-log shapes: the wrapper a log was collected through, and older SGLang lines.

``bench/make_log.py`` writes ``journalctl -o short`` lines of a v0.5.10-style server. Users'
logs also come from ``docker logs --timestamps`` and ``kubectl logs --timestamps`` (what
``ppscope capture --docker/--kubectl`` records: an RFC 3339 time with nanoseconds, one space,
the line), and from older servers. ``reshape`` rewrites a block of journald lines into the
wanted wrapper and puts every ``OLD_EVERY``-th batch line into the 0.5.5 profile: rank tags
``TP1 PP3`` instead of ``PP3 TP1``, a trailing ``, `` after ``#queue-req: N``, and prefill
lines without the graph flag and input rate.
"""

from __future__ import annotations

WRAPPERS = ("journald", "docker", "kubectl")
OLD_EVERY = 4
"""One batch line in this many is in the ≤ 0.5.5 profile (a quarter)."""

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    )
}
_JOURNAL_TS = 15  # "May 25 21:40:21"
_STEP_NS = 11_000_000  # ≤ 90 lines in one second stay inside that second


class Reshaper:
    """Rewrites blocks of journald lines; keeps its counters across blocks (one per file)."""

    def __init__(self, wrapper: str, year: int, old_every: int = OLD_EVERY) -> None:
        if wrapper not in WRAPPERS:
            raise ValueError(f"unknown wrapper {wrapper!r}: one of {', '.join(WRAPPERS)}")
        self.wrapper = wrapper
        self.year = year
        self.old_every = old_every
        self.batch_lines = 0
        self.second = ""
        self.in_second = 0
        self.iso = ""

    def __call__(self, block: str) -> str:
        """The block's lines, reshaped (a block holds whole lines)."""
        out = []
        app = out.append
        for line in block.splitlines(keepends=True):
            cut = line.find("]: ") + 3
            head, rest = line[:cut], line[cut:]
            if " batch, #" in rest:
                self.batch_lines += 1
                if self.old_every and self.batch_lines % self.old_every == 0:
                    rest = _old_profile(rest)
            if self.wrapper == "journald":
                app(head + rest)
                continue
            app(self._stamp(head[:_JOURNAL_TS]) + rest)
        return "".join(out)

    def _stamp(self, journal_ts: str) -> str:
        """``2026-05-25T21:40:21.011000042Z `` from ``May 25 21:40:21``, rising within a second."""
        if journal_ts != self.second:
            self.second, self.in_second = journal_ts, 0
            month, day, clock = journal_ts.split()
            self.iso = f"{self.year:04d}-{_MONTHS[month]:02d}-{int(day):02d}T{clock}"
        ns = self.in_second * _STEP_NS + (self.batch_lines * 7919) % 1_000_000
        self.in_second += 1
        return f"{self.iso}.{ns:09d}Z "


def _old_profile(rest: str) -> str:
    """A v0.5.10 batch line (after the wrapper) as 0.5.5 printed it."""
    close = rest.find("] ")
    tags = rest[:close]
    if " TP" in tags:  # "[... PP3 TP1" -> "[... TP1 PP3"
        head, pp, tp = tags.rsplit(" ", 2)
        tags = f"{head} {tp} {pp}"
    body = rest[close:]
    graph = body.find(", cuda graph: ")
    if body.startswith("] Prefill") and graph > 0:  # 0.5.5 had no graph flag or rate here
        body = body[:graph] + "\n"
    if body.endswith("\n") and not body.endswith(", \n"):
        body = body[:-1] + ", \n"
    return tags + body
