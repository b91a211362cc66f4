"""Admission: a phase counts as queued by the share of its decode lines with waiters.

The runs are written with the diagnose fixtures' writers (``tests/data/diagnose/
make_fixtures.py``: SGLang 0.5.23 lines, every PP stage in lock-step): PP8 with
``--max-running-requests 64`` (8 a slot) offered 128 requests in one closed-loop run, so the
second wave of 64 waits while the first decodes, then runs with nothing queued.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from helpers import TEST_DATA

from toolkit.diagnose.admission import binding_limits, queue_backlog, running_cap
from toolkit.diagnose.thresholds import METHOD_ERROR
from toolkit.run_analysis import RunAnalysis


def _writers() -> ModuleType:
    path = TEST_DATA / "diagnose" / "make_fixtures.py"
    spec = importlib.util.spec_from_file_location("diagnose_fixtures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


FX = _writers()


def _run(tmp_path: Path, queued_lines: int, free_lines: int) -> RunAnalysis:
    """One c=128 run: ``queued_lines`` decode lines with 64 waiting, then the second wave's
    prefill and ``free_lines`` lines with none waiting."""
    la = FX.Launch(pp=8, depth=0, mrr=64, mrr_resolved=64)
    first = FX.Phase(400, [8] * 8, 520.0, lines=queued_lines, interval=0.8, queue=64)
    second_at = 400 + 1 + queued_lines * 0.8
    second = FX.Phase(second_at, [8] * 8, 520.0, lines=free_lines, interval=0.8)
    lines = FX.startup(la, 0.0) + FX.phase_lines(la, first) + FX.phase_lines(la, second)
    lines.sort(key=lambda s: s[1:20])
    (tmp_path / "server.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "bench.jsonl").write_text(FX.bench_line(128, 520.0) + "\n", encoding="utf-8")
    (tmp_path / "run.toml").write_text(
        f'label = "PP8 mrr64"\ncommand = "{FX.command(la)}"\nsynthetic = true\n',
        encoding="utf-8",
    )
    return RunAnalysis(tmp_path)


@pytest.mark.parametrize(("queued", "free"), [(14, 14), (12, 14), (6, 14)])
def test_a_queue_through_part_of_the_phase_is_a_queued_phase(
    tmp_path: Path, queued: int, free: int
) -> None:
    """Fewer than half the lines queued (median #queue-req 0) still binds the cap."""
    ctx = _run(tmp_path, queued, free)
    (row,) = binding_limits(ctx)
    assert row["queued_share"] == pytest.approx(queued / (queued + free), abs=0.05)
    assert row["queue_req"] == 64  # how many wait while any do, not the median over all lines
    assert row["limit"] == "max_running_requests"
    found = running_cap(ctx)
    assert found is not None and found.title.startswith("max_running_requests holds ~64")
    assert queue_backlog(ctx) is None


def test_a_queue_only_at_the_opening_burst_is_no_queued_phase(tmp_path: Path) -> None:
    ctx = _run(tmp_path, 2, 20)
    assert binding_limits(ctx) == []
    assert running_cap(ctx) is None


def test_a_cap_on_every_phase_leaves_the_growth_unmeasured(tmp_path: Path) -> None:
    """Without the cap the 128 would run 16 a slot; no phase of the run ran more than 8 a slot
    (the cap holds in every phase) and the run has no sweep, so the growth is assumed between
    the square root of the load and in proportion, and the range says so."""
    ctx = _run(tmp_path, 14, 14)
    found = running_cap(ctx)
    assert found is not None and found.basis == "assumed"
    # square-root to proportional growth, widened by the arithmetic's own error on the
    # remedied throughput
    low, high = 0.5**0.5 * (1 + METHOD_ERROR), 0.5 * (1 - METHOD_ERROR)
    assert found.impact_range == pytest.approx((1 - low, 1 - high), abs=0.02)
    assert found.impact == pytest.approx(1 - 0.5**0.75, abs=0.02)
    assert found.severity == "high"  # even the square-root growth loses 22 %
    assert "between the square root of the load and in proportion" in found.summary
