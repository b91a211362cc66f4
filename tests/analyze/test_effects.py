"""``graph_effect`` and ``eager_window_share``: eager decode steps against comparable graph steps.

The frames are a TP reference stage's decode lines as ``RunAnalysis.decode`` gives them: one
line every 2 s (``--decode-log-interval 40``), ``running`` = ``#running-req`` = ``batch``, and
``gen_tok_s`` such that a step takes ``running / gen_tok_s``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pytest

from toolkit.analyze.effects import eager_window_share, graph_effect

T0 = datetime(2026, 5, 1, 10, 0, 0)


def _lines(spec: list[tuple[int, int, bool, float, int]]) -> pl.DataFrame:
    """(phase, batch, cuda graph, step ms, lines) → decode lines, phases 60 s apart."""
    rows = []
    for phase, batch, graph, step_ms, n in spec:
        for _ in range(n):
            rows.append((phase, batch, graph, batch / (step_ms / 1e3)))
    ts, last, clock = [], None, T0
    for phase, *_ in rows:
        clock += timedelta(seconds=60 if last is not None and phase != last else 2)
        ts.append(clock)
        last = phase
    return pl.DataFrame(
        {
            "ts": ts,
            "phase": [r[0] for r in rows],
            "cuda_graph": [r[2] for r in rows],
            "gen_tok_s": [r[3] for r in rows],
            "running": [float(r[1]) for r in rows],
            "batch": [r[1] for r in rows],
        },
        schema_overrides={"ts": pl.Datetime("ms"), "batch": pl.Int64},
    )


def _role(effect, phase: int, batch: int) -> str:
    rows = effect.evidence.filter((pl.col("phase") == phase) & (pl.col("batch") == batch))
    return rows["role"].item()


def test_eager_steps_read_against_a_line_through_graph_levels() -> None:
    # graph steps 10 ms at 8, 12 ms at 16 (0.25 ms a request): 16 ms expected at 32
    decode = _lines([(0, 8, True, 10.0, 6), (1, 16, True, 12.0, 6), (2, 32, False, 24.0, 6)])
    effect = graph_effect(decode)
    assert effect is not None
    assert effect.slowdown == pytest.approx(1.5)
    assert _role(effect, 0, 8) == _role(effect, 1, 16) == "reference"
    assert "batch 8, 16 in phases 0, 1" in effect.reference
    assert not effect.bounded
    # named by their loads when the caller knows them (a finding's text never says "phase 2")
    loads = {p: f"at {c} concurrent requests" for p, c in ((0, 8), (1, 16), (2, 32))}
    named = graph_effect(decode, loads=loads)
    assert named is not None and "phase" not in named.reference
    assert named.reference.startswith("eager steps at 32 concurrent requests (batch 32)")
    assert "at 8 concurrent requests; at 16 concurrent requests" in named.reference


def test_a_pool_bound_phase_is_no_reference_for_other_phases() -> None:
    # phase 2's pace is the KV pool's: its graph steps (windows full of re-admission) are noise
    decode = _lines(
        [
            (0, 8, True, 10.0, 6),
            (1, 16, True, 12.0, 6),
            (2, 2, True, 1.0, 6),
            (2, 3, True, 11.0, 6),
            (3, 32, False, 24.0, 6),
        ]
    )
    assert graph_effect(decode).slowdown != pytest.approx(1.5)  # the noise tilts the line
    effect = graph_effect(decode, bound_phases=[2])
    assert effect.slowdown == pytest.approx(1.5)
    assert _role(effect, 2, 3) == "not compared"


def test_a_bound_phase_still_compares_its_own_graph_steps() -> None:
    decode = _lines([(0, 8, True, 10.0, 6), (0, 16, True, 12.0, 6), (0, 32, False, 24.0, 6)])
    effect = graph_effect(decode, bound_phases=[0])
    assert effect.slowdown == pytest.approx(1.5)
    assert "graph lines at batch 8, 16 of the same phase" in effect.reference


def test_a_test_request_and_a_phase_opening_are_no_levels() -> None:
    # one b=1 line of a test request, and a phase whose first line averages over the pause
    decode = _lines(
        [
            (0, 1, True, 12.0, 1),
            (0, 8, True, 10.0, 6),
            (1, 4, True, 40.0, 1),
            (1, 16, True, 12.0, 6),
            (2, 32, False, 24.0, 6),
        ]
    )
    effect = graph_effect(decode)
    assert effect.slowdown == pytest.approx(1.5)
    assert _role(effect, 0, 1) == _role(effect, 1, 4) == "not compared"


def test_one_graph_batch_size_scales_in_proportion_a_lower_bound() -> None:
    # 8 ms at batch 8; a graph step at 16 is at most 16 ms (t0 + k·b, t0 ≥ 0): eager 24 ms
    # is at least 1.5× it
    decode = _lines([(0, 8, True, 8.0, 6), (1, 16, False, 24.0, 6)])
    effect = graph_effect(decode)
    assert effect.slowdown == pytest.approx(1.5)
    assert "one batch size" in effect.reference and "at least" in effect.reference
    assert effect.bounded


def test_no_level_within_reach_gives_no_slowdown() -> None:
    decode = _lines([(0, 8, True, 8.0, 6), (1, 64, False, 24.0, 6)])
    effect = graph_effect(decode)
    assert effect.slowdown is None and effect.reference == ""
    assert effect.eager_lines == 6 and effect.phase == 1


def test_the_eager_share_of_a_stretch_weighs_its_lines_as_the_phase_share_does() -> None:
    # phase 1: 6 eager lines at 32 (24 ms), then a drain of 6 graph lines at 16 (12 ms)
    decode = _lines([(0, 8, True, 10.0, 6), (1, 32, False, 24.0, 6), (1, 16, True, 12.0, 6)])
    effect = graph_effect(decode)
    assert effect is not None and effect.phase == 1
    eager_ts = decode.filter(~pl.col("cuda_graph"))["ts"]
    steady = eager_window_share(decode, 1, eager_ts.min(), eager_ts.max())
    assert steady == (1.0, 6)
    phase = decode.filter(pl.col("phase") == 1)["ts"]
    whole = eager_window_share(decode, 1, phase.min(), phase.max())
    assert whole is not None and whole[1] == 12
    # 32/24 ms against 16/12 ms: as many tokens a second, so half of them eager
    assert whole[0] == pytest.approx(effect.phase_share) == pytest.approx(0.5)
    assert eager_window_share(decode.with_columns(cuda_graph=None), 1, T0, phase.max()) is None
