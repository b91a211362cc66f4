"""Slot occupancy: phases, the #token estimate of running requests and active slots."""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.analyze.config import launch_layout
from toolkit.analyze.occupancy import (
    OCCUPANCY,
    OCCUPANCY_PHASES,
    occupancy_summary,
    peak_headline,
    slot_occupancy,
    slots_shown,
)
from toolkit.analyze.phases import PHASES, decode_phases, prompt_length
from toolkit.chart.occupancy import occupancy_chart
from toolkit.load.run import load_run

DIAG = TEST_DATA / "diagnose"


def _summary(name: str, bench: bool = True) -> pl.DataFrame:
    run = load_run(DIAG / name, cache=False)
    launch = run.launch
    args = launch.server_args
    batches = run.log.batches
    phases = decode_phases(batches, run.bench.runs if bench else None, chunked_prefill_size=8192)
    occ = slot_occupancy(
        batches, phases, pp_size=args["pp_size"], async_depth=args["pp_async_batch_depth"]
    )
    assert phases.schema == PHASES and occ.schema == OCCUPANCY
    out = occupancy_summary(occ, phases, launch_layout(args, launch.facts()))
    assert out.schema == OCCUPANCY_PHASES
    return out


def test_incident_pp8_runs_32_requests_in_4_of_16_slots() -> None:
    summary = _summary("pp8-underfilled")
    c32 = summary.filter(pl.col("offered") == 32).row(0, named=True)
    assert c32["slot_req"] == 8  # what the log shows: one slot
    assert c32["running_est"] == pytest.approx(32, rel=0.1)
    assert c32["active_slots_est"] == pytest.approx(4, abs=0.5)
    assert (c32["slots"], c32["stages"]) == (16, 8)
    assert (c32["replay"], c32["replay_active"]) == ("4×8", 4)  # admission replay agrees


def test_tp8_has_one_slot_holding_every_request() -> None:
    c32 = _summary("tp8").filter(pl.col("offered") == 32).row(0, named=True)
    assert c32["active_slots_est"] == pytest.approx(1, abs=0.1)
    assert c32["slots"] == 1


def test_phases_without_benchmark_come_from_pauses() -> None:
    summary = _summary("pp8-underfilled", bench=False)
    assert summary["offered"].null_count() == summary.height
    assert summary.height == 2
    # prompt length from the Prefill lines instead of the benchmark
    assert summary.row(1, named=True)["active_slots_est"] == pytest.approx(4, abs=0.5)


def test_prompt_length_discounts_chunk_continuations() -> None:
    # 32 requests of 1000 tokens in passes of 8192: 9 + 9 + 9 + 8 seqs, three of them cut.
    prefill = pl.DataFrame(
        {
            "new_seq": [9, 9, 9, 8],
            "new_token": [8192, 8192, 8192, 7424],
            "cached_token": [0, 0, 0, 0],
        }
    )
    assert prompt_length(prefill, 8192) == pytest.approx(1000)
    assert prompt_length(prefill.head(0), 8192) is None


def test_prompt_length_reads_whole_budget_prompts_from_the_queue() -> None:
    """Prompts of exactly the 8192-token budget: every pass is full, yet none is cut, for each
    takes one request from the queue (63 → 60). Prompts of 20000 tokens: the queue stands
    still while a request's rest carries on (2.44 passes each)."""
    whole = pl.DataFrame(
        {
            "new_seq": [1, 1, 1, 1],
            "new_token": [8192] * 4,
            "cached_token": [0] * 4,
            "queue_req": [63, 62, 61, 60],
        }
    )
    assert prompt_length(whole, 8192) == pytest.approx(8192)
    cut = pl.DataFrame(
        {
            "new_seq": [1, 1, 2, 1, 1],
            "new_token": [8192, 8192, 8192, 8192, 7232],
            "cached_token": [0] * 5,
            "queue_req": [3, 3, 2, 2, 2],
        }
    )
    assert prompt_length(cut, 8192) == pytest.approx(20000)
    assert prompt_length(cut.drop("queue_req"), 8192) == pytest.approx(20000)


def test_phase_breaks_follow_the_benchmark_count() -> None:
    t0 = datetime(2026, 1, 1)
    # Two phases with a 5 s pause, and wave refills (2 s) inside the second one.
    offsets = [0, 1, 2, 3, 8, 9, 10, 12, 13, 14, 16, 17]
    batches = pl.DataFrame(
        {
            "ts": [t0 + timedelta(seconds=s) for s in offsets],
            "kind": ["decode"] * len(offsets),
            "dp": [None] * len(offsets),
            "pp": [None] * len(offsets),
            "tp": [0] * len(offsets),
            "running_req": [1] * 4 + [4] * 8,
            "token": [1050] * 4 + [4200] * 8,
            "gen_tok_s": [100.0] * len(offsets),
        },
        schema_overrides={"dp": pl.Int32, "pp": pl.Int32, "tp": pl.Int32},
    )
    assert decode_phases(batches)["decode_lines"].to_list() == [4, 8]
    bench = pl.DataFrame(
        {
            "entry": [0, 1],
            "max_concurrency": [1, 4],
            "input_len": [1000.0] * 2,
            "output_len": [100.0] * 2,
            "output_tok_s": [30.0, 100.0],
        }
    )
    phases = decode_phases(batches, bench)
    assert phases["offered"].to_list() == [1, 4]
    assert phases["input_len_from"].to_list() == ["benchmark"] * 2


def _sweep_lines(t0: datetime, phases: list[tuple[int, int]]) -> pl.DataFrame:
    """Decode lines of consecutive phases (start second, requests in flight), 8 lines each,
    ``#token`` = requests × (1000 + 50)."""
    rows = []
    for start, c in phases:
        for i in range(8):
            rows.append((t0 + timedelta(seconds=start + i), c, c * 1050))
    return pl.DataFrame(
        {
            "ts": [r[0] for r in rows],
            "kind": ["decode"] * len(rows),
            "dp": [None] * len(rows),
            "pp": [None] * len(rows),
            "tp": [0] * len(rows),
            "running_req": [r[1] for r in rows],
            "token": [r[2] for r in rows],
            "gen_tok_s": [100.0] * len(rows),
        },
        schema_overrides={"dp": pl.Int32, "pp": pl.Int32, "tp": pl.Int32},
    )


def _bench(concurrencies: list[int]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "entry": list(range(len(concurrencies))),
            "max_concurrency": concurrencies,
            "input_len": [1000.0] * len(concurrencies),
            "output_len": [100.0] * len(concurrencies),
            "output_tok_s": [10.0 * c for c in concurrencies],
        }
    )


def test_a_warm_up_phase_no_run_claims_is_skipped() -> None:
    """A warm-up request decodes before the sweep of 8 and 32: it gets no run."""
    lines = _sweep_lines(datetime(2026, 1, 1), [(0, 1), (60, 8), (120, 32)])
    phases = decode_phases(lines, _bench([8, 32]))
    assert phases["offered"].to_list() == [None, 8, 32]
    assert phases["bench_run"].to_list() == [None, 0, 1]
    assert phases["placement"].to_list()[1:] == [pytest.approx(1.0)] * 2


def test_running_never_exceeds_what_a_placed_run_offered() -> None:
    """Phases that ran 32 and 8 in flight cannot be runs that offered 1 and 2: flagged."""
    lines = _sweep_lines(datetime(2026, 1, 1), [(0, 32), (60, 8)])
    phases = decode_phases(lines, _bench([1, 2]))
    assert phases["offered"].to_list() == [None, None]
    assert not any(phases["placed"].to_list())


def _decode_lines(rows: list[tuple[datetime, int, int, float]]) -> pl.DataFrame:
    """PP0 decode lines of a PP8 launch: (time, #running-req, #token, gen throughput)."""
    return pl.DataFrame(
        {
            "ts": [r[0] for r in rows],
            "kind": ["decode"] * len(rows),
            "dp": [None] * len(rows),
            "pp": [0] * len(rows),
            "tp": [None] * len(rows),
            "running_req": [r[1] for r in rows],
            "token": [r[2] for r in rows],
            "gen_tok_s": [r[3] for r in rows],
            "queue_req": [0] * len(rows),
        },
        schema_overrides={"dp": pl.Int32, "pp": pl.Int32, "tp": pl.Int32},
    )


def test_a_pause_is_judged_against_the_line_cadence_on_both_sides() -> None:
    """PP8 with --decode-log-interval 100: one request logs every ~16.5 s, then a burst of 32
    fills 8 slots and logs every ~2 s. The 21 s gap between the runs is less than twice the slow
    cadence, but more than the two cadences together; a 3 s gap inside the fast run is not."""
    t0 = datetime(2026, 5, 12, 9, 31, 46)
    slow = [(t0 + timedelta(seconds=16.5 * i), 1, 350 + 100 * i, 6.1) for i in range(5)]
    start = slow[-1][0] + timedelta(seconds=21)
    fast_s = [0, 2, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 28, 30, 32, 34, 36, 38, 40]
    fast = [(start + timedelta(seconds=s), 4, 8556 + 400 * i, 191.0) for i, s in enumerate(fast_s)]
    lines = _decode_lines(slow + fast)
    for bench in (None, _bench([1, 32])):
        phases = decode_phases(lines, bench, pp_size=8)
        assert phases["decode_lines"].to_list() == [5, 20]
        assert phases["start"][1] == start


def test_the_warm_up_before_a_run_is_not_its_prompt() -> None:
    """SGLang's warm-up request (7 tokens) prefills 15 s before the first request of a c=1 run
    (256 tokens), within the look-back: only the burst that leads into the phase counts, and
    without an output length the peak is not read as if nothing had been generated."""
    t0 = datetime(2026, 5, 12, 9, 31, 53)
    prefill = pl.DataFrame(
        {
            "ts": [t0, t0 + timedelta(seconds=15)],
            "kind": ["prefill"] * 2,
            "dp": [None] * 2,
            "pp": [0] * 2,
            "tp": [None] * 2,
            "new_seq": [1, 1],
            "new_token": [7, 256],
            "cached_token": [0, 0],
            "running_req": [0, 0],
            "queue_req": [0, 0],
        },
        schema_overrides={"ts": pl.Datetime("ms"), **dict.fromkeys(("dp", "pp", "tp"), pl.Int32)},
    )
    start = t0 + timedelta(seconds=17)
    decode = _decode_lines(
        [(start + timedelta(seconds=3 * i), 1, 290 + 40 * i, 14.2) for i in range(10)]
    ).with_columns(pl.col("ts").cast(pl.Datetime("ms")))
    lines = pl.concat([prefill, decode], how="diagonal_relaxed").sort("ts")
    phase = decode_phases(lines, pp_size=8).row(0, named=True)
    assert phase["input_len"] == pytest.approx(256)
    assert phase["peak_running"] == pytest.approx(1, abs=0.2)


def _pp4_uneven(root: Path) -> Path:
    """The pp8-underfilled fixture as a PP4 launch without async depth (4 slots) whose log
    shows, at c=32, a slot of 6: 32 running over 6 a slot reads as 5.3 slots, more than 4."""
    src = DIAG / "pp8-underfilled"
    out = root / "pp4-uneven"
    out.mkdir()
    shutil.copy(src / "bench.jsonl", out / "bench.jsonl")
    lines = []
    for line in (src / "server.log").read_text().splitlines():
        if any(f" PP{k}]" in line for k in range(4, 8)):
            continue
        line = line.replace("'pp_size': 8", "'pp_size': 4")
        line = line.replace("'pp_async_batch_depth': 8", "'pp_async_batch_depth': 0")
        lines.append(line.replace("#running-req: 8,", "#running-req: 6,"))
    (out / "server.log").write_text("\n".join(lines) + "\n")
    return out


def test_active_slots_never_exceed_the_layouts_and_the_excess_is_explained(
    tmp_path: Path,
) -> None:
    """A PP4 report said "~5 of 4 slots": the estimate is capped at the layout's slots, the
    uncapped figure kept beside it, and the words every format uses say why."""
    run = load_run(_pp4_uneven(tmp_path), cache=False)
    args, batches = run.launch.server_args, run.log.batches
    phases = decode_phases(batches, run.bench.runs, chunked_prefill_size=8192)
    occ = slot_occupancy(batches, phases, pp_size=args["pp_size"], async_depth=0)
    assert occ["active_slots_est"].drop_nulls().max() <= 4
    assert occ["active_slots_raw"].drop_nulls().max() > 4.5
    summary = occupancy_summary(occ, phases, launch_layout(args, run.launch.facts()))
    c32 = summary.filter(pl.col("offered") == 32).row(0, named=True)
    assert c32["slots"] == 4 and c32["active_slots_est"] == 4
    words = slots_shown(c32)
    assert words.startswith("~4 of 4 slots (#token implies 5.3")
    assert "capped at 4" in words
    chart = occupancy_chart(occ, None, peak_headline(occ, summary)).to_dict()
    assert words in chart["vconcat"][0]["title"]["text"]  # the chart title says the same


def test_slots_within_the_layout_need_no_explanation() -> None:
    c32 = _summary("pp8-underfilled").filter(pl.col("offered") == 32).row(0, named=True)
    assert slots_shown(c32) == "~4 of 16 slots"
