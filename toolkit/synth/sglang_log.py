"""``server.log``: one launch of SGLang under journald, then the benchmark sweep's lines.

Per phase and per logging rank (every PP stage's TP rank 0; ``TP0`` alone under TP), from the
simulation's per-rank batch events:

* a ``Prefill batch`` line when the rank schedules a prefill (all stages print the same batch,
  a few ms apart);
* a ``Decode batch`` line each time the rank has processed 40 more decode micro-batches
  (``decode_log_interval``; the count runs on across phases, as in one server process);
  ``#running-req`` is that micro-batch's size, ``#token`` and ``#queue-req`` the scheduler's
  state when the rank processes it (the same on every stage), ``gen throughput`` the tokens of
  all slots this rank processed since its previous line over the wall time between the two;
* the main process's uvicorn access line for each request (``/generate`` streams, so uvicorn
  logs it when the response starts) and the client's ``server_info`` request after each run.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from toolkit.analyze.model import Layout
from toolkit.synth.machine import pool_tokens
from toolkit.synth.phases import Phase
from toolkit.synth.profiles import Profile
from toolkit.synth.records import Processes, Record, access_line, render
from toolkit.synth.server_args import graph_max_bs
from toolkit.synth.startup import WARMUP_DECODE_STEPS, WARMUP_PROMPT_TOKENS, Startup

__all__ = ["DECODE_LOG_INTERVAL", "server_log_lines", "write_server_log"]

DECODE_LOG_INTERVAL = 40
# The simulation charges no CPU time for building a prefill batch, so two chunks can be
# scheduled a loop iteration apart; SGLang spends about a microsecond per prompt token there
# (allocation, the extend tensors, the eager launch), which bounds the rate it prints.
PREFILL_BUILD_S_PER_TOKEN = 1e-6


@dataclass
class _RankState:
    """What each scheduler keeps between its log lines (``forward_ct_decode`` and the tics)."""

    decode_ct: int
    gen_tokens: int
    decode_tic: float
    prefill_tokens: int
    prefill_tic: float


class _SchedulerState:
    """Rank 0's decisions by iteration: the KV and queue state every stage logs alike."""

    def __init__(self, phase: Phase) -> None:
        rank0 = phase.batches().filter(pl.col("pp_rank") == 0).sort("iteration")
        self.iterations = rank0["iteration"].to_list()
        self.kv = rank0["kv_tokens"].to_list()
        self.queue = rank0["queue_req"].to_list()
        prefills = rank0.filter(pl.col("kind") == "prefill")
        arrivals = phase.requests().sort("arrival_s").select("arrival_s", "input_len").rows()
        times = [a for a, _ in arrivals]
        done, arrived = 0, [0]
        for _, n in arrivals:
            arrived.append(arrived[-1] + n)
        # Prompt tokens that have arrived but are not prefilled yet, after each prefill.
        self.pending: dict[int, int] = {}
        for it, t, new in prefills.select("iteration", "scheduled_s", "new_tokens").iter_rows():
            done += new
            self.pending[it] = max(0, arrived[bisect.bisect_right(times, t + 1e-9)] - done)

    def at(self, iteration: int) -> tuple[int, int]:
        """``(#token, #queue-req)`` after the last decision at or before ``iteration``."""
        i = bisect.bisect_right(self.iterations, iteration) - 1
        return (self.kv[i], self.queue[i]) if i >= 0 else (0, 0)


_COLUMNS = ["iteration", "kind", "scheduled_s", "processed_s", "batch_size", "new_seq",
            "new_tokens", "running_req", "queue_req", "kv_tokens"]  # fmt: skip


def _rank_records(
    phase: Phase,
    layout: Layout,
    profile: Profile,
    sched: _SchedulerState,
    rank: tuple[int, int, int | None, int | None],
    st: _RankState,
) -> list[Record]:
    """One scheduler rank's Prefill and Decode lines for one phase."""
    pid, k, pp_tag, tp_tag = rank
    tags = profile.rank_tags(pp_tag, tp_tag)
    pool, max_bs = pool_tokens(layout), graph_max_bs(layout)
    mine = phase.batches().filter(pl.col("pp_rank") == k).select(_COLUMNS)
    events = []
    for row in mine.iter_rows(named=True):
        # A prefill is logged when the rank schedules it, a decode when it processes it.
        t = row["scheduled_s"] if row["kind"] == "prefill" else row["processed_s"]
        if t is not None:
            events.append((t, row["iteration"], row))
    events.sort(key=lambda e: (e[0], e[1]))
    recs = []
    for t, it, row in events:
        if row["kind"] == "prefill":
            # SGLang reports the previous prefill's tokens over the time since it.
            gap = max(t - st.prefill_tic, st.prefill_tokens * PREFILL_BUILD_S_PER_TOKEN)
            rate = st.prefill_tokens / gap if gap > 0 else 0.0
            st.prefill_tokens, st.prefill_tic = row["new_tokens"], t
            msg = profile.prefill(
                row["new_seq"],
                row["new_tokens"],
                row["kv_tokens"] / pool,
                row["running_req"],
                row["queue_req"],
                sched.pending[it],
                rate,
            )
            recs.append(Record(t, pid, tags, msg))
            continue
        st.decode_ct += 1
        st.gen_tokens += row["batch_size"]
        if st.decode_ct % DECODE_LOG_INTERVAL:
            continue
        gen = st.gen_tokens / (t - st.decode_tic) if t > st.decode_tic else 0.0
        st.gen_tokens, st.decode_tic = 0, t
        kv, queue = sched.at(it + layout.loop_size - 1)  # processed L−1 iterations later
        size = row["batch_size"]
        msg = profile.decode(size, kv, kv / pool, size <= max_bs, gen, queue)
        recs.append(Record(t, pid, tags, msg))
    return recs


def _http_records(
    phase: Phase, profile: Profile, procs: Processes, rng: random.Random
) -> list[Record]:
    """The main process's uvicorn access lines for one phase."""
    recs = []
    for (arrival,) in phase.requests().sort("arrival_s").select("arrival_s").iter_rows():
        # The HTTP process answers (and uvicorn logs) before the tokenized request reaches
        # the scheduler, a couple of ms later.
        port = rng.randrange(32768, 61000)
        t = arrival - 0.0025 + rng.uniform(-0.0005, 0.0005)
        recs.append(Record(t, procs.main, None, access_line(port, "POST /generate")))
    # bench_serving asks for the server's info after each run, for its result file.
    info = access_line(rng.randrange(32768, 61000), f"GET {profile.server_info_path}")
    recs.append(Record(phase.end_s + 0.083, procs.main, None, info))
    return recs


def server_log_lines(
    layout: Layout,
    profile: Profile,
    procs: Processes,
    startup: Startup,
    phases: Sequence[Phase],
    seed: int,
) -> list[str]:
    """Every line of the log, in time order (the order journald would show them)."""
    states = {
        k: _RankState(
            WARMUP_DECODE_STEPS, WARMUP_DECODE_STEPS, startup.scheduler_ready_s,
            WARMUP_PROMPT_TOKENS, startup.warmup_prefill_s,
        )
        for k in range(layout.pp)
    }  # fmt: skip
    rng = random.Random(f"ports-{seed}")
    records = list(startup.records)
    for phase in phases:
        sched = _SchedulerState(phase)
        for rank in procs.logging_ranks():
            records += _rank_records(phase, layout, profile, sched, rank, states[rank[1]])
        records += _http_records(phase, profile, procs, rng)
    order = sorted(range(len(records)), key=lambda i: (records[i].t, i))
    return [render(records[i]) for i in order]


def write_server_log(path: Path, lines: Sequence[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
