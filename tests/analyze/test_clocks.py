"""Each input's clock lined up with the log's by their activity: zone shifts named and applied,
an alignment two shifts fit alike withheld, the phase file placed too.

The zone cases are the sample's PP8 run as a server in a container on UTC logs it beside a host
on local time: SGLang's own times in the log (``[2026-05-25 18:46:05 PP0]``) are UTC, while the
journald header of each line, the ``nvidia-smi`` trace and the compute-apps listing keep the
host's local time, hours ahead.
"""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from helpers import SAMPLE

from toolkit.analyze.clocks import CLOCK_AGREEMENT, ZONE_SHIFTS_S, zone_of, zone_words
from toolkit.diagnose import diagnose, skipped_checks
from toolkit.run_analysis import RunAnalysis

_SGLANG_TIME = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def _log_on_utc(run_dir: Path, hours_ahead: float) -> None:
    """The run's log as a server on UTC writes it when the host is ``hours_ahead`` of UTC:
    SGLang's own times moved back, the journald headers left on the host's clock."""

    def back(m: re.Match[str]) -> str:
        t = datetime.fromisoformat(m.group(1)) - timedelta(hours=hours_ahead)
        return f"[{t:%Y-%m-%d %H:%M:%S}"

    log = run_dir / "server.log"
    log.write_text(_SGLANG_TIME.sub(back, log.read_text()))


def _copy(tmp_path: Path, name: str = "pp8") -> Path:
    run_dir = tmp_path / name
    shutil.copytree(SAMPLE / name, run_dir)
    return run_dir


@pytest.mark.parametrize(
    ("hours", "offset", "words"),
    [
        (3.0, -10800, "3 h ahead of"),
        (5.5, -19800, "5 h 30 min ahead of"),
        (-1.0, 3600, "1 h behind"),
    ],
)
def test_a_trace_a_zone_away_from_the_log_is_named_and_read_shifted(
    tmp_path: Path, hours: float, offset: int, words: str
) -> None:
    run_dir = _copy(tmp_path)
    _log_on_utc(run_dir, hours)
    ctx = RunAnalysis(run_dir)
    base = RunAnalysis(SAMPLE / "pp8")
    (record,) = ctx.clocks
    assert record["input"] == "GPU trace" and record["files"] == "gpu.csv"
    assert record["offset_s"] == offset and record["source"] == "estimated"
    assert record["agreement"] >= CLOCK_AGREEMENT
    assert f"on a clock {words} the log's" in record["note"]
    assert f"set clock_offset_s = {offset} in run.toml" in record["note"]
    # the "no overlap" note is replaced by the zone shift, and the trace is read on the log's
    # clock: every stage's busy share is the aligned sample's
    (note,) = ctx.mismatches
    assert note["input"] == "GPU clock" and note["detail"] == record["note"]
    assert ctx.gpu_samples is not None
    assert ctx.busy["busy_pct"].to_list() == pytest.approx(base.busy["busy_pct"].to_list())
    # setting the offset the note gives is the same reading, with nothing left to say
    toml = run_dir / "run.toml"
    toml.write_text(toml.read_text().replace("clock_offset_s = 0.0", f"clock_offset_s = {offset}"))
    fixed = RunAnalysis(run_dir)
    assert fixed.clocks[0]["source"] == "run.toml" and fixed.clocks[0]["offset_s"] == offset
    assert fixed.mismatches == []
    assert fixed.busy["busy_pct"].to_list() == pytest.approx(base.busy["busy_pct"].to_list())


def test_the_findings_of_a_shifted_run_are_the_aligned_ones(tmp_path: Path) -> None:
    run_dir = _copy(tmp_path)
    _log_on_utc(run_dir, 3.0)
    found = {f.id: f for f in diagnose([RunAnalysis(run_dir)])}
    aligned = {f.id: f for f in diagnose([RunAnalysis(SAMPLE / "pp8")])}
    assert set(found) == set(aligned) | {"input-mismatch"}
    rules = {"stage-imbalance", "gpu-idle-bubbles", "unexplained-slowdown"} & set(aligned)
    assert {"stage-imbalance", "gpu-idle-bubbles"} <= rules
    for rule in rules:
        assert found[rule].title == aligned[rule].title
        assert found[rule].summary == aligned[rule].summary
    assert "set clock_offset_s = -10800 in run.toml" in found["input-mismatch"].summary


def test_zone_shifts_cover_whole_half_and_quarter_hours() -> None:
    for hours in range(1, 15):
        assert -3600 * hours in ZONE_SHIFTS_S and 3600 * hours in ZONE_SHIFTS_S
    for minutes in (330, 345, 570):  # India, Nepal, central Australia
        assert 60 * minutes in ZONE_SHIFTS_S and -60 * minutes in ZONE_SHIFTS_S
    assert zone_of(-10803) == -10800 and zone_of(-5000) is None
    assert zone_words(-20700) == "5 h 45 min ahead of"


# ---------------------------------------------------------------------- periodic activity
T0 = datetime(2026, 5, 1, 10, 0, 0)
ON_S, PERIOD_S, CYCLES = 30, 60, 20
SERVER_ARGS = (
    "{'model_path': '/models/in-house-model', 'tokenizer_path': '/models/in-house-model', "
    "'trust_remote_code': True, 'host': '0.0.0.0', 'port': 30000, 'mem_fraction_static': 0.86, "
    "'max_running_requests': None, 'chunked_prefill_size': 8192, 'page_size': 1, "
    "'tp_size': 1, 'pp_size': 2, 'pp_max_micro_batch_size': None, 'pp_async_batch_depth': 0, "
    "'decode_log_interval': 40, 'dp_size': 1, 'ep_size': 1, 'nnodes': 1, "
    "'disable_cuda_graph': False}"
)
UUIDS = ("GPU-6a1f3c52-9be0-4f1e-8d33-0c5e7a9b2d41", "GPU-b37e0d19-52c4-4a8b-9e61-7f2d8c1a5e93")


def _decoding(second: int) -> bool:
    return second % PERIOD_S < ON_S


def _periodic_run(run_dir: Path, hours_ahead: float) -> None:
    """A PP2 server decoding 30 s of every minute for 20 minutes (a sweep of alike runs), and
    an ``nvidia-smi`` trace of its GPUs every 500 ms on a clock ``hours_ahead`` of the log's."""
    run_dir.mkdir()
    lines = [f"[{T0 - timedelta(minutes=2):%Y-%m-%d %H:%M:%S}] server_args={SERVER_ARGS}"]
    for s in range(PERIOD_S * CYCLES):
        if not _decoding(s):
            continue
        stamp = f"{T0 + timedelta(seconds=s):%Y-%m-%d %H:%M:%S}"
        for pp in (0, 1):
            lines.append(
                f"[{stamp} PP{pp}] Decode batch, #running-req: 4, #token: {4000 + s}, "
                "token usage: 0.02, cuda graph: True, gen throughput (token/s): 120.00, "
                "#queue-req: 0"
            )
    (run_dir / "server.log").write_text("\n".join(lines) + "\n")
    head = "timestamp, index, name, uuid, utilization.gpu [%], memory.used [MiB], power.draw [W]"
    rows = [head]
    ahead = timedelta(hours=hours_ahead)
    for k in range(2 * PERIOD_S * CYCLES):
        when = T0 + timedelta(milliseconds=500 * k)
        util = 88 if _decoding(int((when - T0).total_seconds())) else 0
        for gpu in (0, 1):
            at = when + ahead + timedelta(milliseconds=gpu)
            stamp = at.strftime("%Y/%m/%d %H:%M:%S.") + f"{at.microsecond // 1000:03d}"
            rows.append(
                f"{stamp}, {gpu}, NVIDIA H100 80GB HBM3, {UUIDS[gpu]}, {util} %, 71234 MiB, "
                f"{90 + 3 * util:.2f} W"
            )
    (run_dir / "gpu.csv").write_text("\n".join(rows) + "\n")


def test_an_alignment_two_shifts_fit_alike_is_withheld(tmp_path: Path) -> None:
    run_dir = tmp_path / "pp2"
    _periodic_run(run_dir, 3.0)
    ctx = RunAnalysis(run_dir)
    (fit,) = ctx.trace_fits.values()
    assert fit.outcome == "ambiguous" and not fit.used
    # one minute early or late lines up 19 of the 20 stretches: as good as the right shift
    assert fit.rival is not None and fit.agreement is not None
    assert fit.agreement - fit.rival < 0.15
    assert {fit.shift_s, fit.rival_s} <= {-10800 + d for d in (-PERIOD_S, 0, PERIOD_S)}
    (record,) = ctx.clocks
    assert record["offset_s"] is None and record["source"] == "none"
    assert "cannot be placed" in record["note"] and "not used" in record["note"]
    assert ctx.gpu_samples is None and ctx.busy_by_phase is None
    (note,) = [m for m in ctx.mismatches if m["input"] == "GPU clock"]
    assert note["detail"] == record["note"]
    found = diagnose([ctx])
    assert not [f for f in found if f.id in ("gpu-idle-bubbles", "stage-imbalance")]
    skipped = {r["check"]: r for r in skipped_checks([ctx])}
    for check, missing in (("gpu-idle-bubbles", "GPU trace"), ("stage-imbalance", "stage times")):
        assert skipped[check]["missing"] == missing
        assert "gpu.csv" in skipped[check]["supply"]
        assert "set clock_offset_s in run.toml" in skipped[check]["supply"]


def test_the_same_periodic_trace_on_the_log_s_clock_is_read(tmp_path: Path) -> None:
    """The recorded clock is trusted when it lines up: a rival a minute away changes nothing."""
    run_dir = tmp_path / "pp2"
    _periodic_run(run_dir, 0.0)
    ctx = RunAnalysis(run_dir)
    (record,) = ctx.clocks
    assert record["source"] == "none" and record["offset_s"] == 0.0
    assert ctx.gpu_samples is not None and not ctx.mismatches
    assert ctx.busy["busy_pct"].to_list() == pytest.approx([88.0, 88.0], abs=1.0)


# ---------------------------------------------------------------------- the phase file
def test_a_phase_file_on_local_time_is_placed_by_its_runs(tmp_path: Path) -> None:
    """``ppscope capture``'s ``phases.jsonl`` on the host's clock, beside a log on UTC: its
    benchmark runs line up with the log's decoding 3 h earlier, and the runs are placed there."""
    run_dir = _copy(tmp_path)
    base = RunAnalysis(SAMPLE / "pp8")
    _log_on_utc(run_dir, 3.0)
    (run_dir / "gpu.csv").unlink()
    records = []
    for r in base.phases.iter_rows(named=True):
        start, end = r["start"] - timedelta(seconds=2), r["end"] + timedelta(seconds=1)
        records.append(
            {
                "phase": r["phase"],
                "concurrency": r["offered"],
                "num_prompts": max(r["offered"], 2),
                "start": start.isoformat(timespec="milliseconds"),
                "end": end.isoformat(timespec="milliseconds"),
                "exit_code": 0,
                "results": 1,
                "command": ["python3", "-m", "sglang.bench_serving"],
            }
        )
    (run_dir / "phases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    ctx = RunAnalysis(run_dir)
    (record,) = ctx.clocks
    assert record["input"] == "phases" and record["files"] == "phases.jsonl"
    assert record["offset_s"] == -10800 and record["source"] == "estimated"
    marks = ctx.phase_marks
    assert marks is not None
    assert marks["start"].min() == base.phases["start"].min() - timedelta(hours=3, seconds=2)
    shifted = ctx.phases.select("phase", "offered", pl.col("start") + timedelta(hours=3))
    assert shifted.rows() == base.phases.select("phase", "offered", "start").rows()
