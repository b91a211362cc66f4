"""Running requests under PP from #token and admissions; without PP #running-req itself."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import polars as pl
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from toolkit.analyze.occupancy import occupancy_summary, slot_occupancy
from toolkit.analyze.phases import decode_phases
from toolkit.analyze.running import PhaseLine, running_in_phase

T0 = datetime(2026, 5, 12, 9, 31, 0)
_RANKS = {"ts": pl.Datetime("ms"), "dp": pl.Int32, "pp": pl.Int32, "tp": pl.Int32}


def _simulated(
    osl: list[int],
    *,
    isl: int = 500,
    steps_per_line: int = 20,
    refill: bool = False,
    prefill_lines: bool = True,
    pp: bool = True,
) -> tuple[pl.DataFrame, list[int]]:
    """A closed-loop phase of ``len(osl)`` requests sent at once, their output lengths
    ``osl``, as PP0 (PP4) or TP0 lines with whole-second stamps: a decode line every
    ``steps_per_line`` rounds of 0.1 s; with ``refill`` each finished request is replaced once
    (a Prefill line in the round it was). Returns the lines and the requests running at each
    decode line."""
    rank = {"dp": None, "pp": 0 if pp else None, "tp": None if pp else 0}
    rows: list[dict[str, object]] = []
    truth: list[int] = []

    def stamp(step: int) -> datetime:
        return (T0 + timedelta(seconds=0.1 * step)).replace(microsecond=0)

    def prefill(step: int, n: int) -> None:
        if prefill_lines and n:
            rows.append(
                {"ts": stamp(step), "kind": "prefill", **rank, "new_seq": n,
                 "new_token": n * isl, "cached_token": 0, "running_req": 0, "queue_req": 0}
            )  # fmt: skip

    running = [(o, 0) for o in osl]  # (output length, generated)
    spare = list(osl) if refill else []
    prefill(0, len(running))
    step = made = 0
    while running:
        step += 1
        made += len(running)
        running = [(o, g + 1) for o, g in running]
        done = len([r for r in running if r[1] >= r[0]])
        running = [r for r in running if r[1] < r[0]]
        if done and spare:
            n = min(done, len(spare))
            running += [(spare.pop(0), 0) for _ in range(n)]
            prefill(step, n)
        if step % steps_per_line == 0 and running:
            rows.append(
                {
                    "ts": stamp(step),
                    "kind": "decode",
                    **rank,
                    "running_req": -(-len(running) // 4) if pp else len(running),
                    "token": sum(isl + g for _, g in running),
                    "token_usage": round(sum(isl + g for _, g in running) / 200_000, 2),
                    "cuda_graph": True,
                    "gen_tok_s": made / (0.1 * steps_per_line),
                    "queue_req": 0,
                }
            )
            truth.append(len(running))
            made = 0
    return pl.DataFrame(rows, schema_overrides=_RANKS, infer_schema_length=None), truth


def _phase(df: pl.DataFrame, offered: int | None, isl: float = 500.0) -> pl.DataFrame:
    decode = df.filter(pl.col("kind") == "decode")
    return pl.DataFrame(
        {
            "phase": [0],
            "start": [decode["ts"].min()],
            "offered": [offered],
            "input_len": [isl],
            "output_len": [None],
        },
        schema_overrides={
            "start": pl.Datetime("ms"),
            "offered": pl.Int64,
            "output_len": pl.Float64,
        },
    )


def test_requests_finishing_one_by_one_are_counted_down() -> None:
    """16 requests of drawn output lengths (250..500) finish one by one with no replacement:
    the estimate follows the true count and never exceeds the 16 offered."""
    osl = [250 + (i * 97) % 251 for i in range(16)]
    df, truth = _simulated(osl)
    occ = slot_occupancy(df, _phase(df, 16), pp_size=4)
    est = occ["running_est"].to_list()
    assert len(est) == len(truth)
    assert max(est) <= 16
    for e, n in zip(est, truth, strict=True):
        assert e == pytest.approx(n, abs=1.5)


def test_the_steady_window_ends_where_the_drain_begins() -> None:
    osl = [250 + (i * 97) % 251 for i in range(16)]
    df, truth = _simulated(osl)
    phases = _phase(df, 16)
    summary = occupancy_summary(slot_occupancy(df, phases, pp_size=4), phases)
    row = summary.row(0, named=True)
    assert row["running_est"] == pytest.approx(16, abs=0.5)
    full = sum(1 for n in truth if n >= 0.9 * 16)
    assert row["steady_lines"] == pytest.approx(full, abs=1)


def test_without_results_the_admissions_bound_the_count() -> None:
    """No benchmark (no offered load, no output length): the Prefill lines' prompts say how
    many were admitted, and the count still drains with the requests."""
    osl = [250 + (i * 97) % 251 for i in range(16)]
    df, truth = _simulated(osl)
    est = slot_occupancy(df, _phase(df, None), pp_size=4)["running_est"].to_list()
    for e, n in zip(est, truth, strict=True):
        assert e == pytest.approx(n, abs=1.5)


def test_a_refilled_wave_keeps_the_count() -> None:
    """Equal output lengths, each finished request replaced once: a whole wave ends and the
    next one is prefilled between two lines; the count stays at 16."""
    df, truth = _simulated([300] * 16, refill=True, steps_per_line=40)
    est = slot_occupancy(df, _phase(df, 16), pp_size=4)["running_est"].to_list()
    for e, n in zip(est, truth, strict=True):
        assert e == pytest.approx(n, abs=1.0)


def test_without_prefill_lines_the_kv_tokens_show_admissions() -> None:
    """Decode lines only: the first line's prompts are the admissions, then the count drains."""
    osl = [250 + (i * 97) % 251 for i in range(16)]
    df, truth = _simulated(osl, prefill_lines=False)
    est = slot_occupancy(df, _phase(df, None), pp_size=4)["running_est"].to_list()
    for e, n in zip(est, truth, strict=True):
        assert e == pytest.approx(n, abs=1.5)


def test_without_pp_running_req_is_the_count() -> None:
    osl = [250 + (i * 97) % 251 for i in range(16)]
    df, truth = _simulated(osl, pp=False)
    occ = slot_occupancy(df, decode_phases(df), pp_size=1)
    assert occ["running_est"].to_list() == [float(n) for n in truth]
    assert occ["active_slots_est"].to_list() == [1.0] * len(truth)


def test_the_estimate_of_one_phase_by_hand() -> None:
    """4 requests of 100-token prompts: 400 admitted, 40 generated in the first window (10
    each); then one finishes at 30 generated (130 freed) while the others make 30 more."""
    lines = [
        PhaseLine(token=440, made=40, admitted=400),
        PhaseLine(token=440, made=130, admitted=0),
    ]
    out = running_in_phase(lines, 100.0, prefill_logged=True)
    assert out[0] == pytest.approx((4.0, 10.0))
    assert out[1][0] == pytest.approx(3.0, abs=0.15)
    assert running_in_phase(lines, float("nan"), prefill_logged=True)[0][0] != 4.0


_tokens = st.floats(0, 1e7, allow_nan=False, allow_infinity=False)
_lines_st = st.lists(
    st.builds(PhaseLine, token=_tokens, made=_tokens, admitted=_tokens, slack=st.floats(0, 1e4)),
    max_size=40,
)


@given(_lines_st, st.floats(1, 1e5), st.booleans())
@example(  # a subnormal sliver of a prompt once made the generated count inf - inf
    [PhaseLine(1.0, 0.0, 2.2250738585072014e-309), PhaseLine(0.0, 0.0, 1.0)], 1.0, True
)
def test_the_count_is_finite_and_never_above_the_admissions(
    lines: list[PhaseLine], prompt: float, logged: bool
) -> None:
    out = running_in_phase(lines, prompt, prefill_logged=logged)
    assert len(out) == len(lines)
    admitted = out[0][0] if out else 0.0  # the first line's requests, logged or not
    for k, (line, (running, generated)) in enumerate(zip(lines, out, strict=True)):
        admitted += line.admitted / prompt if k > 0 else 0.0
        assert math.isfinite(running) and running >= 0
        assert math.isfinite(generated) and generated >= 0
        if logged:
            assert running <= admitted * (1 + 1e-9) + 1e-6


@given(st.lists(st.floats(0, 2e3), min_size=1, max_size=30), st.integers(1, 64))
def test_with_nothing_freed_every_admitted_request_runs(made: list[float], n: int) -> None:
    """#token = prompts + everything generated: nobody finished, all ``n`` still run."""
    prompt, token, lines = 300.0, n * 300.0, []
    for m in made:
        token += m
        lines.append(PhaseLine(token=token, made=m, admitted=n * prompt if not lines else 0.0))
    for running, _ in running_in_phase(lines, prompt, prefill_logged=True):
        assert running == pytest.approx(n, rel=1e-6)


def test_a_log_that_starts_while_requests_run() -> None:
    """The Prefill lines of the requests running when the log begins are not in it: the first
    line's prompts are what #token holds beyond the window's generation."""
    lines = [
        PhaseLine(token=4400, made=400, admitted=0),
        PhaseLine(token=4800, made=400, admitted=0),
    ]
    assert [n for n, _ in running_in_phase(lines, 100.0, prefill_logged=True)] == [40.0, 40.0]
