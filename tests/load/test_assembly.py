"""A run is one server start plus what was measured against it; inputs that disagree are named."""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from helpers import SAMPLE, TEST_DATA

from toolkit.diagnose import diagnose
from toolkit.load.run import load_run
from toolkit.run_analysis import RunAnalysis

DIAG = TEST_DATA / "diagnose"


def _shift_log(text: str, days: int) -> str:
    """The log with every ``[YYYY-mm-dd HH:MM:SS`` moved by ``days``."""
    out = []
    for line in text.splitlines(keepends=True):
        if line.startswith("[20"):
            ts = datetime.strptime(line[1:20], "%Y-%m-%d %H:%M:%S") - timedelta(days=days)
            line = f"[{ts:%Y-%m-%d %H:%M:%S}" + line[20:]
        out.append(line)
    return "".join(out)


def test_two_unrelated_logs_are_two_launches_not_a_desync(tmp_path: Path) -> None:
    """A TP8 log from 482 days earlier beside a PP4 log: no stage comparison across them."""
    (tmp_path / "old-tp8.log").write_text(
        _shift_log((DIAG / "tp8" / "server.log").read_text(), 482)
    )
    shutil.copy(DIAG / "pp4-desync" / "server.log", tmp_path / "pp4.log")
    ctx = RunAnalysis(tmp_path)
    found = {f.id: f for f in diagnose([ctx])}
    assert ctx.run.layout.pp == 4 and ctx.label == "PP4"
    note = found["input-mismatch"]
    assert note.severity == "info" and "old-tp8.log" in note.summary
    assert set(ctx.batches["source"].map_elements(lambda s: Path(s).name, return_dtype=str)) == {
        "pp4.log"
    }
    # the PP4 log's own desync (three skewed ordinals) is still found, within that launch only
    desync = found["stage-desync"]
    assert desync.evidence["spread_s"].max() < 60


def test_a_log_with_several_starts_is_analysed_for_one(tmp_path: Path) -> None:
    """Three restarts: the last that decoded is the run; the others are named."""
    text = (DIAG / "tp8" / "server.log").read_text()
    early = _shift_log(text, 2) + _shift_log(text, 1)
    (tmp_path / "server.log").write_text(early + text)
    run = load_run(tmp_path)
    assert run.launch_spans.height == 3 and run.launch_spans["group"].n_unique() == 3
    group, why = run.launch_choice
    assert group == 2 and "last launch" in why
    assert run.batches.height == RunAnalysis(DIAG / "tp8").batches.height
    (note,) = [m for m in run.mismatches if m["input"] == "launches"]
    assert "2 other server start(s)" in note["detail"]


def test_a_gpu_trace_from_another_time_is_not_used(tmp_path: Path) -> None:
    run_dir = tmp_path / "pp8"
    shutil.copytree(SAMPLE / "pp8", run_dir)
    csv = run_dir / "gpu.csv"
    csv.write_text(csv.read_text().replace("2026/05/25", "2024/05/25"))
    ctx = RunAnalysis(run_dir)
    assert ctx.gpu_samples is None
    (note,) = [m for m in ctx.mismatches if m["input"] == "GPU trace"]
    assert "no overlap" in note["detail"]


@pytest.mark.parametrize("seconds", [15, -40])
def test_a_shifted_gpu_clock_is_found_within_a_second(tmp_path: Path, seconds: int) -> None:
    run_dir = tmp_path / "pp8"
    shutil.copytree(SAMPLE / "pp8", run_dir)
    csv = run_dir / "gpu.csv"
    lines = csv.read_text().splitlines(keepends=True)
    shifted = [lines[0]]
    for line in lines[1:]:
        stamp, rest = line.split(",", 1)
        ts = datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f") + timedelta(seconds=seconds)
        shifted.append(f"{ts:%Y/%m/%d %H:%M:%S}.{ts.microsecond // 1000:03d},{rest}")
    csv.write_text("".join(shifted))
    ctx = RunAnalysis(run_dir)
    assert ctx.clock_shift is not None
    assert ctx.clock_shift[0] == pytest.approx(-seconds, abs=1)
    (note,) = [m for m in ctx.mismatches if m["input"] == "GPU clock"]
    assert f"clock_offset_s = {-seconds:g}" in note["detail"]
    assert RunAnalysis(SAMPLE / "pp8").clock_shift is None  # the sample's own clock is right


def _dcgmi(rounds: int, gpus: int = 8) -> str:
    """``dcgmi dmon -e 1002`` text (no time of its own): ``rounds`` polling rounds."""
    lines = ["#Entity    SMACT", "ID"]
    for r in range(rounds):
        lines += [f"GPU {g}      {0.5 + 0.01 * ((r + g) % 40):.3f}" for g in range(gpus)]
    return "\n".join(lines) + "\n"


def _with_dcgmi(tmp_path: Path, toml_extra: str, keep_csv: bool = False) -> Path:
    run_dir = tmp_path / "pp8"
    shutil.copytree(SAMPLE / "pp8", run_dir)
    if not keep_csv:
        (run_dir / "gpu.csv").unlink()
    (run_dir / "dcgmi.txt").write_text(_dcgmi(60))
    toml = run_dir / "run.toml"
    toml.write_text(toml.read_text() + "\n[gpu_trace]\ninterval_s = 1\n" + toml_extra)
    return run_dir


def test_a_gpu_trace_with_no_time_is_named_and_left_out(tmp_path: Path) -> None:
    """dcgmi prints no time: without ``[gpu_trace] start`` its samples are off the log's clock,
    so no time-based check reads them, the checks that need them are skipped, and the note
    says how to place them."""
    from toolkit.diagnose import skipped_checks

    ctx = RunAnalysis(_with_dcgmi(tmp_path, ""))
    assert ctx.run.gpu is not None and ctx.run.gpu.samples.height == 480
    # a minute of steady work lines up as well in many places: it is not placed
    assert not ctx.gpu_placed
    assert ctx.gpu_samples is None and ctx.clock_shift is None
    (note,) = [m for m in ctx.mismatches if m["input"] == "GPU trace"]
    assert note["files"] == "dcgmi.txt" and "[gpu_trace] start" in note["detail"]
    assert "not used" in note["detail"]
    skipped = {r["check"]: r["missing"] for r in skipped_checks([ctx])}
    assert skipped.get("gpu-idle-bubbles") == "GPU trace"
    found = {f.id: f for f in diagnose([ctx])}
    assert "dcgmi.txt" in found["input-mismatch"].summary


def test_a_gpu_trace_given_its_start_is_on_the_clock(tmp_path: Path) -> None:
    ctx = RunAnalysis(_with_dcgmi(tmp_path, "start = 2026-05-25T21:46:52\n"))
    samples = ctx.gpu_samples
    assert samples is not None and samples["ts"].null_count() == 0
    assert samples["ts"].min() == datetime(2026, 5, 25, 21, 46, 52)
    assert not [m for m in ctx.mismatches if m["input"].startswith("GPU trace")]


def test_an_untimed_file_beside_a_timed_trace_is_named_alone(tmp_path: Path) -> None:
    ctx = RunAnalysis(_with_dcgmi(tmp_path, "", keep_csv=True))
    (note,) = [m for m in ctx.mismatches if m["input"].startswith("GPU trace")]
    assert note["input"] == "GPU trace files" and note["files"] == "dcgmi.txt"
    assert ctx.gpu_samples is not None and ctx.busy["busy_pct"].null_count() == 0
    assert ctx.gpu_samples["ts"].null_count() == 0
    assert ctx.busy["metric"].unique().to_list() == ["util_pct"]


def test_a_weak_clock_shift_is_named_but_not_applied(tmp_path: Path) -> None:
    """A shift that agrees better than the recorded clock, but under ``CLOCK_AGREEMENT``, is
    told to the reader with the offset to set; the trace stays on its recorded clock."""
    from toolkit.analyze.clocks import CLOCK_AGREEMENT, ClockFit

    ctx = RunAnalysis(SAMPLE / "pp8")
    recorded = ctx.run.gpu.samples["ts"].min()
    (source,) = ctx.trace_fits
    weak = ClockFit("GPU trace", "gpu.csv", 0.0, "weak", True, -40.0, CLOCK_AGREEMENT - 0.05, 0.2)
    ctx.__dict__["trace_fits"] = {source: weak}
    assert ctx.clock_candidate == (-40.0, CLOCK_AGREEMENT - 0.05, 0.2)
    assert ctx.clock_shift is None
    assert ctx.gpu_samples is not None and ctx.gpu_samples["ts"].min() == recorded
    (note,) = [m for m in ctx.mismatches if m["input"] == "GPU clock"]
    assert "-40 s later" in note["detail"] and "read as recorded" in note["detail"]
    assert "clock_offset_s = -40" in note["detail"]


def _incident_as_dcgmi(run_dir: Path) -> str:
    """The incident's nvidia-smi trace recorded as ``dcgmi dmon -e 1002 -d 1000`` would print it
    (one round a second, SM active as a ratio, no time); returns the first round's time."""
    csv = run_dir / "gpu.csv"
    header, *rows = csv.read_text().splitlines()
    cols = [c.strip() for c in header.split(",")]
    at, gpu, util = cols.index("timestamp"), cols.index("index"), cols.index("utilization.gpu [%]")
    lines, first = ["#Entity    SMACT", "ID"], None
    for row in rows:
        cells = [c.strip() for c in row.split(",")]
        if cells[at][20:21] != "0":  # the first round of each second (.0xx ms)
            continue
        first = first or cells[at]
        lines.append(f"GPU {cells[gpu]}      {float(cells[util].rstrip(' %')) / 100:.3f}")
    csv.unlink()
    (run_dir / "gpu.dcgmi").write_text("\n".join(lines) + "\n")
    (run_dir / "run.toml").write_text(
        (run_dir / "run.toml").read_text() + "\n[gpu_trace]\ninterval_s = 1\n"
    )
    assert first is not None
    return first


def test_a_gpu_trace_with_no_time_is_placed_by_its_busy_stretches(tmp_path: Path) -> None:
    """dcgmi without a start: the trace is placed where its busy stretches line up with the
    log's decoding, within two seconds of where it was recorded, and the note gives the start
    to set."""
    run_dir = tmp_path / "pp8"
    shutil.copytree(SAMPLE / "pp8", run_dir)
    first = datetime.strptime(_incident_as_dcgmi(run_dir), "%Y/%m/%d %H:%M:%S.%f")
    ctx = RunAnalysis(run_dir)
    assert ctx.gpu_placed and ctx.gpu_placement is not None
    start, score, elsewhere = ctx.gpu_placement
    assert abs((start - first).total_seconds()) <= 2 and score - elsewhere >= 0.15
    samples = ctx.gpu_samples
    assert samples is not None and samples["ts"].null_count() == 0
    assert samples["ts"].min() == start
    (note,) = [m for m in ctx.mismatches if m["input"] == "GPU trace"]
    assert note["files"] == "gpu.dcgmi"
    assert f"start = {start:%Y-%m-%dT%H:%M:%S}" in note["detail"] and "read there" in note["detail"]
    assert ctx.busy_by_phase is not None and ctx.busy_by_phase.height
    assert ctx.clock_shift is None  # placed once, not shifted again
    (record,) = ctx.clocks
    assert record["files"] == "gpu.dcgmi" and record["source"] == "estimated"
    assert f"first sample at {start:%Y-%m-%d %H:%M:%S}" in record["note"]
