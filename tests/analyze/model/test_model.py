"""The closed-form serving model: admission replay, stage times, §5.4 spot values, fit, what-if."""

from __future__ import annotations

import math
from dataclasses import replace

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.analyze.model import (
    INCIDENT,
    INCIDENT_HARDWARE,
    KIMI_K2,
    MODEL_POINTS,
    WHAT_IF,
    Hardware,
    Layout,
    ModelSpec,
    ObservedPoint,
    Params,
    StageClock,
    Workload,
    admission,
    expected_vs_observed,
    fit,
    incident_points,
    layer_partition,
    observed_frame,
    predict,
    what_if,
    what_if_table,
    what_if_workload,
)
from toolkit.errors import ToolkitError

INCIDENT_PRIORS = {"model": KIMI_K2, "prior": INCIDENT_HARDWARE}
"""The sample incident's model and machine: these tests check the model's arithmetic on them."""

SETTINGS = settings(max_examples=60, deadline=None)

PP8 = Layout(pp=8, pp_async_batch_depth=8, chunked_prefill_size=8192, max_total_num_tokens=327680)
TP8 = Layout(tp=8, max_total_num_tokens=140000)
BURST = Workload(32, 1000, 1000)

# A dense toy with identical stages: no experts, no lm_head.
TOY = ModelSpec(
    name="toy",
    layers=8,
    first_dense_layers=8,
    experts=1,
    top_k=1,
    expert_bytes=0.0,
    dense_bytes_per_layer=1e9,
    dense_ffn_bytes=0.0,
    lm_head_bytes=0.0,
    hidden_size=1024,
    e_eff=1.0,
    active_params=1e9,
    context_len=8192,
)
TOY_HW = Hardware("toy", 8, 1e12, hop_s=0.5e-3, allreduce_s=50e-6, overhead_s=0.5e-3, token_s=1e-4)


@pytest.fixture(scope="module")
def incident_fit():
    return fit(incident_points(), high_load=True, **INCIDENT_PRIORS)


# ── stages ────────────────────────────────────────────────────────────────────────────────────


def test_layer_partition_puts_the_remainder_on_the_last_stages():
    assert layer_partition(61, 8) == (7, 7, 7, 8, 8, 8, 8, 8)
    assert layer_partition(61, 1) == (61,)
    assert layer_partition(8, 4) == (2, 2, 2, 2)
    assert layer_partition(61, 2, [30, 31]) == (30, 31)


@pytest.mark.parametrize("override", [[30, 30], [61], [0, 61]])
def test_a_partition_override_must_split_every_layer(override):
    with pytest.raises(ToolkitError, match="does not split 61 layers"):
        layer_partition(61, 2, override)


def test_distinct_experts_grow_slower_than_the_batch():
    m = KIMI_K2
    assert m.distinct_experts(0) == 0
    assert m.distinct_experts(1) == pytest.approx(8)
    values = [m.distinct_experts(b) for b in range(1, 200)]
    assert values == sorted(values) and values[-1] < m.e_eff
    # §5.1: B(1) ≈ 32 GB, B(8) ≈ 103 GB, B(32) ≈ 241 GB with E_eff = 207 (+0.8 GB dense FFN here)
    assert m.step_bytes(1) / 1e9 == pytest.approx(32.7, abs=0.5)
    assert m.step_bytes(8) / 1e9 == pytest.approx(104, abs=1.5)
    assert m.step_bytes(32) / 1e9 == pytest.approx(241.6, abs=2)


def test_the_last_stage_holds_the_lm_head_and_rank_0_the_dense_layer():
    clock = StageClock(PP8, INCIDENT)
    assert [s.layers for s in clock.stages] == [7, 7, 7, 8, 8, 8, 8, 8]
    assert [s.dense_layers for s in clock.stages] == [1, 0, 0, 0, 0, 0, 0, 0]
    assert [s.lm_head for s in clock.stages] == [False] * 7 + [True]
    assert clock.slowest(4) == clock.decode(7, 4)
    assert sum(clock.stage_bytes(k, 8) for k in range(8)) == pytest.approx(KIMI_K2.step_bytes(8))


def test_tp_pays_two_all_reduces_per_layer():
    hw = INCIDENT_HARDWARE
    clock = StageClock(TP8, INCIDENT)
    expected = KIMI_K2.step_bytes(1) / (8 * hw.hbm_bytes_s) + 2 * 61 * hw.allreduce_s
    assert clock.decode(0, 1) == pytest.approx(expected)
    assert clock.trip(1) == pytest.approx(expected + hw.overhead_s)


# ── admission (§1.2) ──────────────────────────────────────────────────────────────────────────


def test_a_burst_of_32_front_packs_four_slots_of_eight():
    assert admission(PP8, BURST, KIMI_K2) == (8, 8, 8, 8) + (0,) * 12


def test_a_cap_of_four_fills_eight_slots():
    assert admission(replace(PP8, pp_max_micro_batch_size=4), BURST, KIMI_K2) == (4,) * 8 + (0,) * 8


def test_a_single_stream_is_one_slot_of_one():
    assert admission(PP8, Workload(1), KIMI_K2) == (1,) + (0,) * 15


def test_fewer_requests_than_stages_share_the_first_slot():
    assert admission(PP8, Workload(5), KIMI_K2) == (5,) + (0,) * 15
    one_each = admission(replace(PP8, pp_max_micro_batch_size=1), Workload(5), KIMI_K2)
    assert one_each == (1,) * 5 + (0,) * 11


def test_the_auto_cap_is_max_running_requests_over_pp_size():
    assert PP8.running_cap(KIMI_K2.context_len) == 2048  # clamps to at least 2048
    assert PP8.micro_batch_cap(KIMI_K2.context_len) == 256
    short = Workload(32, 100, 100)  # the chunk would take all 32 at once
    assert admission(PP8, short, KIMI_K2) == (32,) + (0,) * 15
    capped = replace(PP8, max_running_requests=64)  # auto cap 64 // 8 = 8 (§1.3 cause a)
    assert admission(capped, short, KIMI_K2) == (8, 8, 8, 8) + (0,) * 12


def test_a_chunked_request_joins_its_last_slot_even_past_the_cap():
    # SGLang always continues the chunked request ("the max_running_requests per microbatch
    # should not be strict"), so prompts of one chunk + 1 token all finish in slot 1.
    layout = Layout(pp=2, max_running_requests=3)  # auto cap 3 // 2 = 1
    assert admission(layout, Workload(3, 8193, 10), KIMI_K2) == (0, 3)


def test_max_running_requests_is_global_across_slots():
    layout = replace(PP8, max_running_requests=16, pp_max_micro_batch_size=4)
    assert sum(admission(layout, BURST, KIMI_K2)) == 16


def test_the_kv_pool_limits_admission_per_slot():
    # Room for 8 requests of 1000 + 1000 reserved. Admission reserves future tokens only for the
    # admitting slot's own requests (§1.2), so later slots see just the allocated prompts and
    # overcommit the shared pool: 8, then 4, 2, 1.
    small = replace(PP8, max_total_num_tokens=8 * 2000)
    assert admission(small, BURST, KIMI_K2)[:5] == (8, 4, 2, 1, 0)


def test_a_request_larger_than_the_pool_is_an_error():
    with pytest.raises(ToolkitError, match="can never fit the KV pool"):
        admission(replace(PP8, max_total_num_tokens=1500), BURST, KIMI_K2)


def test_without_pp_everything_joins_one_batch():
    assert admission(TP8, BURST, KIMI_K2) == (32,)
    assert TP8.loop_size == 1 and PP8.loop_size == 16


@SETTINGS
@given(
    c=st.integers(1, 200),
    isl=st.integers(1, 20000),
    pp=st.sampled_from([1, 2, 4, 8]),
    d=st.integers(0, 8),
    cap=st.one_of(st.none(), st.integers(1, 64)),
    rows=st.one_of(st.none(), st.integers(1, 256)),
)
def test_admission_respects_every_budget(c, isl, pp, d, cap, rows):
    layout = Layout(pp=pp, pp_async_batch_depth=d, pp_max_micro_batch_size=cap)
    layout = replace(layout, max_running_requests=rows)
    occ = admission(layout, Workload(c, isl, 100), KIMI_K2)
    assert len(occ) == layout.loop_size
    limit = min(c, layout.running_cap(KIMI_K2.context_len))
    assert sum(occ) <= limit
    if layout.chunked_prefill_size % isl == 0:  # no prompt is ever split across turns
        assert max(occ) <= layout.micro_batch_cap(KIMI_K2.context_len)
    if cap is None and rows is None:
        assert sum(occ) == c  # nothing else limits a burst this small
    filled = [i for i, b in enumerate(occ) if b]
    if isl <= layout.chunked_prefill_size:
        assert filled == list(range(len(filled)))  # front-packed: no gaps
    # (a longer prompt joins the slot that runs its last chunk)


# ── closed form: degenerate cases ─────────────────────────────────────────────────────────────


@pytest.mark.parametrize("c", [1, 7, 32])
def test_pp_size_1_is_a_single_gpu(c):
    params = INCIDENT
    hw = params.hardware
    pred = predict(Layout(), Workload(c), params)
    step = KIMI_K2.step_bytes(c) / hw.hbm_bytes_s + hw.overhead_s
    assert pred.round_s == pytest.approx(step)
    assert pred.tok_s == pytest.approx(c / step)
    assert pred.active_slots == 1 and pred.regime == "A"


def test_one_slot_gives_no_overlap():
    pred = predict(PP8, Workload(1), INCIDENT)
    clock = StageClock(PP8, INCIDENT)
    trip = clock.trip(1)
    assert pred.round_s == pytest.approx(trip)
    assert pred.stage_busy == pytest.approx([clock.decode(k, 1) / trip for k in range(8)])
    assert pred.in_flight == pytest.approx(1.0)
    assert pred.gpu_idle_share > 0.85


def test_data_parallel_replicas_add_up():
    one = predict(PP8, Workload(16), INCIDENT)
    two = predict(replace(PP8, dp=2), Workload(32), INCIDENT)
    assert two.tok_s == pytest.approx(2 * one.tok_s)


def test_regime_b_is_set_by_the_slowest_stage():
    pred = predict(replace(PP8, pp_max_micro_batch_size=4), BURST, INCIDENT)
    clock = StageClock(PP8, INCIDENT)
    assert pred.regime == "B"
    assert pred.round_s == pytest.approx(8 * clock.decode(7, 4))
    assert pred.stage_busy[7] == pytest.approx(1.0)


def test_a_loop_of_many_results_is_cpu_bound():
    slow_cpu = Params(TOY, replace(TOY_HW, overhead_s=5e-3))
    layout = Layout(pp=2, pp_async_batch_depth=14, pp_max_micro_batch_size=1)
    pred = predict(layout, Workload(16, 10, 100), slow_cpu)
    assert pred.regime == "CPU"
    assert pred.round_s == pytest.approx(16 * (5e-3 + 0.5e-3))


# ── closed form: the incident (§5.4) ──────────────────────────────────────────────────────────


def test_the_fit_reproduces_the_incident_calibration(incident_fit):
    hw = incident_fit.params.hardware
    assert hw.hbm_bytes_s / 1e12 == pytest.approx(1.50, abs=0.02)  # §5.4: β ≈ 1.50 TB/s
    assert 250e-6 <= hw.allreduce_s <= 300e-6  # ≈ 250 µs with launch folded in
    assert hw.overhead_s == INCIDENT_HARDWARE.overhead_s  # three points, three unknowns
    # §5.4: H ≈ 7.9 ms; here layer 0's dense FFN (0.79 GB) moved into the stage time
    h = 8 * hw.hop_s + hw.overhead_s + KIMI_K2.dense_ffn_bytes / hw.hbm_bytes_s
    assert h * 1e3 == pytest.approx(7.9, abs=0.2)
    assert set(incident_fit.fitted) == {"hbm_bytes_s", "hop_s", "allreduce_s"}
    assert incident_fit.calibration == (("PP8", 1), ("TP8", 1), ("TP8", 32))


def test_pp8_at_32_leaves_half_of_each_round_idle_and_40_percent_unexplained(incident_fit):
    table = expected_vs_observed(incident_fit, incident_points())
    assert table.schema == MODEL_POINTS
    row = table.filter((pl.col("label") == "PP8") & (pl.col("concurrency") == 32)).row(
        0, named=True
    )
    assert row["expected_tok_s"] == pytest.approx(416, abs=10)  # §5.4: 415–417
    assert row["active_slots"] == 4 and row["occupancy"] == "4×8"
    assert 0.45 <= row["gpu_idle_share"] <= 0.56  # §5.4: busy ≈ 0.45
    idle = row["stage_idle"]
    assert len(idle) == 8 and min(idle) == idle[-1]  # the lm_head stage is the busiest
    assert row["residual_pct"] == pytest.approx(-40, abs=3)
    assert row["unexplained_round_ms"] == pytest.approx(52, abs=4)  # 129 ms observed vs ≈ 77
    assert not row["calibration"]
    fitted_rows = table.filter(pl.col("calibration"))
    assert fitted_rows.height == 3
    assert fitted_rows["residual_pct"].abs().max() < 1e-6


def test_pp_size_1_beats_nothing_at_one_stream_but_pp_wins_on_pcie(incident_fit):
    pp = predict(PP8, Workload(1), incident_fit.params).tok_s
    tp = predict(TP8, Workload(1), incident_fit.params).tok_s
    assert pp == pytest.approx(34.3, rel=1e-6) and tp == pytest.approx(26.3, rel=1e-6)


@pytest.mark.parametrize(
    ("cap", "chunk", "shape", "round_ms", "tok_s"),
    [
        # §5.4's table, real 7,7,7,8,8,8,8,8 partition with the lm_head on the last stage
        (32, 32768, "1×32", 168, 190),
        (16, 16384, "2×16", 117, 273),
        (None, 8192, "4×8", 77, 417),
        (4, 8192, "8×4", 57, 563),
        (2, 8192, "16×2", 83, 386),
    ],
)
def test_the_section_5_4_table(incident_fit, cap, chunk, shape, round_ms, tok_s):
    layout = replace(PP8, pp_max_micro_batch_size=cap, chunked_prefill_size=chunk)
    pred = predict(layout, BURST, incident_fit.params)
    assert pred.shape == shape
    assert pred.round_s * 1e3 == pytest.approx(round_ms, rel=0.03)
    assert pred.tok_s == pytest.approx(tok_s, rel=0.03)


def test_capping_slots_at_four_predicts_about_tp8(incident_fit):
    table = what_if_table(incident_fit, incident_points(), {"pp_max_micro_batch_size": 4})
    assert table.schema == WHAT_IF
    row = table.filter((pl.col("label") == "PP8") & (pl.col("concurrency") == 32)).row(
        0, named=True
    )
    assert 560 <= row["what_if_tok_s"] <= 630  # §5.4: ≈ 560–630, TP8 measured 577.8
    assert row["occupancy"] == "8×4" and row["active_slots"] == 8
    tp = table.filter(pl.col("label") == "TP8")
    assert (tp["what_if_tok_s"] == tp["expected_tok_s"]).all()  # a PP flag leaves TP alone


# ── monotonic what-if ─────────────────────────────────────────────────────────────────────────


@SETTINGS
@given(
    c=st.integers(1, 96),
    pp=st.sampled_from([2, 4, 8]),
    d=st.integers(0, 8),
    caps=st.lists(st.integers(1, 96), min_size=2, max_size=2, unique=True),
    toy=st.booleans(),
)
def test_more_filled_slots_never_predict_less_below_saturation(c, pp, d, caps, toy):
    params = Params(TOY, TOY_HW) if toy else INCIDENT
    layout = Layout(pp=pp, pp_async_batch_depth=d)
    load = Workload(c, 500, 1000)
    few, many = (
        predict(what_if(layout, {"pp_max_micro_batch_size": cap}), load, params) for cap in caps
    )
    if few.active_slots > many.active_slots:
        few, many = many, few
    # same requests running (a cap can also queue some: a different effect), more slots filled,
    # and the pipeline not saturated (the trip still binds)
    same = few.running == many.running == c
    if same and many.active_slots > few.active_slots and many.regime == "A":
        assert many.tok_s >= few.tok_s * (1 - 1e-12)


@SETTINGS
@given(c=st.integers(1, 128), pp=st.sampled_from([1, 2, 4, 8]), d=st.integers(0, 8))
def test_predictions_are_sane(c, pp, d):
    pred = predict(Layout(pp=pp, pp_async_batch_depth=d), Workload(c, 800, 800), INCIDENT)
    assert pred.tok_s > 0 and math.isfinite(pred.round_s)
    assert pred.round_s >= max(pred.trip_s, pred.stage_bound_s, pred.cpu_bound_s) - 1e-15
    assert all(0 <= b <= 1 for b in pred.stage_busy)
    assert 0 <= pred.gpu_idle_share <= 1
    assert 0 < pred.in_flight <= pred.active_slots + 1e-9
    assert pred.running == c
    assert len(pred.gpu_busy) == pp


# ── what-if ───────────────────────────────────────────────────────────────────────────────────


def test_what_if_uses_sglang_flag_names():
    changed = what_if(PP8, {"pp_async_batch_depth": 0, "pp_max_micro_batch_size": 4})
    assert changed.pp_async_batch_depth == 0 and changed.pp_max_micro_batch_size == 4
    assert what_if(changed, {"pp_max_micro_batch_size": None}).pp_max_micro_batch_size is None
    assert what_if(PP8, {"tp_size": 2, "pp_size": 4}) == replace(PP8, tp=2, pp=4)
    assert what_if(PP8, {"concurrency": 64}) == PP8
    load = what_if_workload(BURST, {"concurrency": 64, "random_input_len": 2000, "tp": 2})
    assert load == Workload(64, 2000, 1000)


def test_pp_flags_leave_a_layout_without_pp_alone_unless_pp_changes_too():
    assert what_if(TP8, {"pp_max_micro_batch_size": 4}) == TP8
    both = what_if(TP8, {"pp_max_micro_batch_size": 4, "pp_size": 2})
    assert both.pp == 2 and both.pp_max_micro_batch_size == 4


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"pp_max_micro_batchsize": 4}, "unknown setting 'pp_max_micro_batchsize'"),
        ({"pp_async_batch_depth": None}, "needs a number"),
        ({"pp_async_batch_depth": -1}, "must be ≥ 0"),
        ({"tp": 0}, "tp must be at least 1"),
    ],
)
def test_bad_what_ifs_say_what_is_wrong(changes, message):
    with pytest.raises(ToolkitError, match=message):
        what_if(PP8, changes)


def test_bad_workload_what_ifs_say_what_is_wrong():
    with pytest.raises(ToolkitError, match="concurrency must be at least 1"):
        what_if_workload(BURST, {"concurrency": 0})
    with pytest.raises(ToolkitError, match="unknown setting 'isl'"):
        what_if_workload(BURST, {"isl": 10})


# ── fit ───────────────────────────────────────────────────────────────────────────────────────


def _observe(params, layout, c, label):
    tok_s = predict(layout, Workload(c), params).tok_s
    return {
        "label": label,
        "tp": layout.tp,
        "pp": layout.pp,
        "pp_async_batch_depth": layout.pp_async_batch_depth,
        "concurrency": c,
        "output_tok_s": tok_s,
    }


def test_the_fit_recovers_known_parameters_including_the_overhead():
    truth = replace(
        INCIDENT_HARDWARE, hbm_bytes_s=1.3e12, hop_s=0.4e-3, allreduce_s=180e-6, overhead_s=3e-3
    )
    params = Params(KIMI_K2, truth)
    points = [
        _observe(params, TP8, 1, "TP8"),
        _observe(params, TP8, 32, "TP8"),
        _observe(params, Layout(pp=8, pp_async_batch_depth=8), 1, "PP8"),
        _observe(params, Layout(tp=2, pp=4), 1, "PP4xTP2"),
        _observe(params, Layout(pp=8, pp_async_batch_depth=8), 32, "PP8"),
    ]
    got = fit(points, high_load=True, **INCIDENT_PRIORS).params.hardware
    assert got.hbm_bytes_s == pytest.approx(truth.hbm_bytes_s, rel=1e-6)
    assert got.hop_s == pytest.approx(truth.hop_s, rel=1e-6)
    assert got.allreduce_s == pytest.approx(truth.allreduce_s, rel=1e-6)
    assert got.overhead_s == pytest.approx(truth.overhead_s, rel=1e-6)
    table = expected_vs_observed(fit(points, high_load=True, **INCIDENT_PRIORS), points)
    assert table["residual_pct"].abs().max() < 1e-6


def test_a_single_pp_point_fits_the_hop_and_keeps_the_rest():
    fitted = fit([ObservedPoint("PP8", 1, 8, 1, 34.3, pp_async_batch_depth=8)], **INCIDENT_PRIORS)
    assert fitted.fitted == ("hop_s",)
    assert fitted.params.hardware.hbm_bytes_s == INCIDENT_HARDWARE.hbm_bytes_s
    assert predict(PP8, Workload(1), fitted.params).tok_s == pytest.approx(34.3)


def test_without_single_stream_points_everything_is_the_prior():
    fitted = fit([ObservedPoint("PP8", 1, 8, 32, 248.1, pp_async_batch_depth=8)], **INCIDENT_PRIORS)
    assert fitted.fitted == () and fitted.calibration == ()
    assert fitted.params.hardware == INCIDENT_HARDWARE


def test_a_point_the_model_cannot_support_keeps_the_prior():
    # a PP8 stream faster than its bare weight reads would need a negative hop
    fitted = fit([ObservedPoint("PP8", 1, 8, 1, 60.0)], **INCIDENT_PRIORS)
    assert fitted.params.hardware.hop_s == INCIDENT_HARDWARE.hop_s
    assert "hop_s" in fitted.fixed


def test_observed_frames_fill_defaults_and_accept_bench_runs():
    runs = pl.DataFrame(
        {
            "label": ["PP8", "TP8"],
            "tp": [1, 8],
            "pp": [8, None],
            "concurrency": [1, 1],
            "output_tok_s": [34.3, 26.3],
            "input_len": [998.6, None],
            "source": ["a", "b"],
        }
    )
    frame = observed_frame(runs)
    assert frame.columns[0] == "label" and "source" not in frame.columns
    assert frame["pp"].to_list() == [8, 1]
    assert frame["input_len"].to_list() == [999, 1000]
    assert frame["chunked_prefill_size"].to_list() == [8192, 8192]
    assert frame["pp_max_micro_batch_size"].null_count() == 2


def test_observed_points_need_the_core_columns_and_a_throughput():
    with pytest.raises(ToolkitError, match="missing column"):
        observed_frame(pl.DataFrame({"label": ["x"], "tp": [1]}))
    with pytest.raises(ToolkitError, match="positive output_tok_s"):
        observed_frame([ObservedPoint("x", 1, 1, 1, float("nan"))])
    with pytest.raises(ToolkitError, match="no observed points"):
        fit([], **INCIDENT_PRIORS)


def test_a_replay_takes_the_runs_context_length_not_the_defaults() -> None:
    """The default request cap depends on the context length: a replay of another model's run
    reads the run's own (its spec, else the length its log states, else none: the cap's
    floor), never the sample's model."""
    from dataclasses import replace

    from toolkit.analyze.model import replay_model

    other = replace(KIMI_K2, name="other", context_len=32768)
    assert replay_model(other, 8192) is other
    assert replay_model(None, 8192).context_len == 8192
    unknown = replay_model(None, None)
    assert unknown.name == "unknown model" and unknown.step_bytes(8) == 0
    layout = Layout(tp=1, pp=8, max_total_num_tokens=1_500_000)
    assert layout.running_cap(unknown.context_len) == 2048  # the floor of SGLang's clamp
    assert layout.running_cap(replay_model(None, 8192).context_len) == 4096
    assert layout.running_cap(KIMI_K2.context_len) == 2929
