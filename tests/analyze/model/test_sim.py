"""The discrete-event simulation of the PP loop, checked against the closed form and §1/§6."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.analyze.model import (
    INCIDENT,
    KIMI_K2,
    Hardware,
    Layout,
    ModelSpec,
    Params,
    StageClock,
    Workload,
    admission,
    predict,
)
from toolkit.analyze.model.sim import (
    SIM_BATCHES,
    SIM_FORWARDS,
    SIM_REQUESTS,
    SIM_UTILIZATION,
    simulate,
)
from toolkit.errors import ToolkitError

PP8 = Layout(pp=8, pp_async_batch_depth=8, max_total_num_tokens=327680)
LONG = 100_000  # output long enough that nobody finishes: steady decode

# Identical dense stages (no experts, no lm_head): the closed form's simple case.
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
TOY_PARAMS = Params(
    TOY, Hardware("toy", 8, 1e12, hop_s=0.5e-3, allreduce_s=50e-6, overhead_s=0.5e-3, token_s=1e-4)
)


def _steady(layout, c, params, **kw):
    sim = simulate(layout, Workload(c, 100, LONG), params, steps=24 * layout.loop_size, **kw)
    return sim, predict(layout, Workload(c, 100, LONG), params)


# ── agreement with the closed form ────────────────────────────────────────────────────────────


@pytest.mark.parametrize(("pp", "d"), [(1, 0), (2, 0), (2, 2), (8, 0), (8, 8)])
def test_one_slot_matches_the_closed_form_exactly(pp, d):
    layout = Layout(pp=pp, pp_async_batch_depth=d)
    sim, pred = _steady(layout, 1, INCIDENT)
    s = sim.summary
    assert s.round_s == pytest.approx(pred.round_s, rel=1e-9)
    assert s.tok_s == pytest.approx(pred.tok_s, rel=1e-9)
    # no overlap: each stage is busy its own step time out of one trip
    clock = StageClock(layout, INCIDENT)
    expected = [clock.decode(k, 1) / clock.trip(1) for k in range(pp)]
    assert s.stage_busy == pytest.approx(expected, rel=1e-9)
    assert s.active_slots == 1


@pytest.mark.parametrize("c", [1, 8, 32])
def test_without_pp_the_simulation_is_one_batch_per_step(c):
    sim, pred = _steady(Layout(tp=8), c, INCIDENT)
    assert sim.summary.tok_s == pytest.approx(pred.tok_s, rel=1e-9)


@pytest.mark.parametrize(
    ("layout", "c", "regime"),
    [
        (Layout(pp=8, pp_async_batch_depth=8, pp_max_micro_batch_size=8), 32, "A"),  # 4 of 8
        (Layout(pp=4, pp_async_batch_depth=2, pp_max_micro_batch_size=4), 8, "A"),  # 2 of 4
        (Layout(pp=4, pp_async_batch_depth=8, pp_max_micro_batch_size=4), 48, "B"),  # 12 of 4
        (Layout(pp=2, pp_async_batch_depth=8, pp_max_micro_batch_size=2, tp=2), 20, "B"),
        (Layout(pp=8, pp_async_batch_depth=8, pp_max_micro_batch_size=1, tp=2), 16, "CPU"),
    ],
)
def test_balanced_stages_match_the_closed_form(layout, c, regime):
    sim, pred = _steady(layout, c, TOY_PARAMS)
    assert pred.regime == regime
    assert sim.summary.tok_s == pytest.approx(pred.tok_s, rel=5e-3)
    assert sim.summary.gpu_idle_share == pytest.approx(pred.gpu_idle_share, abs=0.01)
    assert sim.summary.active_slots == pred.active_slots


@settings(max_examples=12, deadline=None)
@given(
    pp=st.sampled_from([1, 2, 4]),
    d=st.integers(0, 4),
    c=st.integers(1, 24),
    cap=st.one_of(st.none(), st.integers(1, 8)),
    toy=st.booleans(),
    coupling=st.booleans(),
)
def test_the_closed_form_bounds_the_simulation(pp, d, c, cap, toy, coupling):
    # Every term of the closed form's max is a lower bound on the steady simulated round. Uneven
    # slots approach it from below (short trips run ahead until they queue), hence the 1 %.
    layout = Layout(pp=pp, pp_async_batch_depth=d if pp > 1 else 0, pp_max_micro_batch_size=cap)
    sim, pred = _steady(layout, c, TOY_PARAMS if toy else INCIDENT, relay_coupling=coupling)
    assert sim.summary.tok_s <= pred.tok_s * 1.01
    assert sim.summary.active_slots == pred.active_slots


def test_the_incident_loop_costs_a_little_more_than_the_closed_form():
    # Step 7 (proxy send) follows step 6 (processing slot i+1), so uneven stages stall the
    # next stage; the optional stream fence adds more. Neither comes near the 52 ms gap.
    layout, load = PP8, Workload(32, 1000, LONG)
    pred = predict(layout, load, INCIDENT)
    plain = simulate(layout, load, INCIDENT, steps=24 * 16).summary
    fenced = simulate(layout, load, INCIDENT, steps=24 * 16, relay_coupling=True).summary
    assert plain.active_slots == fenced.active_slots == 4
    assert pred.round_s < plain.round_s < 1.1 * pred.round_s
    assert plain.round_s < fenced.round_s < pred.round_s + 0.020
    assert 0.5 < plain.gpu_idle_share < 0.65


# ── the event tables ──────────────────────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def burst():
    """The incident burst: 32 requests of ≈1000 tokens, 64 out, finished and not replaced."""
    load = Workload(32, 1000, 64, num_requests=32)
    return simulate(PP8, load, INCIDENT, duration_s=1e9)


def test_tables_have_their_declared_schemas(burst):
    assert burst.forwards.schema == SIM_FORWARDS
    assert burst.batches.schema == SIM_BATCHES
    assert burst.requests.schema == SIM_REQUESTS
    assert burst.utilization(0.5).schema == SIM_UTILIZATION


def test_prefill_lines_follow_section_6_3(burst):
    prefill = burst.batches.filter((pl.col("pp_rank") == 0) & (pl.col("kind") == "prefill"))
    prefill = prefill.sort("iteration")
    # #new-seq 9 (the 9th a partial chunk), #new-token 8192, #queue-req 23 → 15 → 7 → 0
    assert prefill["new_seq"].to_list() == [9, 9, 9, 8]
    assert prefill["new_tokens"].to_list() == [8192, 8192, 8192, 32000 - 3 * 8192]
    assert prefill["queue_req"].to_list() == [23, 15, 7, 0]
    assert prefill["slot"].to_list() == [0, 1, 2, 3]
    # every stage logs the same batch (lock-step, §1.4)
    assert burst.batches.filter(pl.col("kind") == "prefill").height == 4 * 8


def test_requests_stay_in_the_slot_that_admitted_them(burst):
    req = burst.requests
    assert req.group_by("slot").len().sort("slot")["len"].to_list() == [8, 8, 8, 8]
    assert (req["generated"] == req["output_len"]).all()
    assert (req["first_token_s"] > req["admitted_s"]).all()
    assert (req["finished_s"] > req["first_token_s"]).all()
    dec = burst.forwards.filter(pl.col("kind") == "decode")
    assert set(dec["slot"].unique().to_list()) == {0, 1, 2, 3}
    assert (dec["batch_size"] == 8).all()
    assert burst.summary.active_slots == 4


def test_each_gpu_runs_one_forward_at_a_time_and_stages_follow_each_other(burst):
    f = burst.forwards
    for rank in range(8):
        mine = f.filter(pl.col("pp_rank") == rank).sort("start_s")
        assert (mine["start_s"].slice(1) >= mine["end_s"].slice(0, mine.height - 1) - 1e-12).all()
    joined = f.join(
        f.with_columns(pl.col("pp_rank") + 1).select("pp_rank", "iteration", prev_end="end_s"),
        on=("pp_rank", "iteration"),
    )
    assert (joined["start_s"] >= joined["prev_end"] + INCIDENT.hardware.hop_s).all()
    counts = f.group_by("iteration").len()["len"].unique().to_list()
    assert counts == [8]  # every batch ran on every stage


def test_kv_tokens_grow_by_one_per_request_per_step(burst):
    dec = burst.batches.filter((pl.col("pp_rank") == 0) & (pl.col("kind") == "decode"))
    first = dec.sort("iteration").head(4)
    assert first["kv_tokens"].diff().drop_nulls().to_list() == [8, 8, 8]
    # the prompts, then one KV slot per request of the slot decoding first (its first token)
    assert first["kv_tokens"][0] == 32000 + 8


def test_decode_lines_are_processed_after_their_forward(burst):
    last = burst.forwards.filter(pl.col("pp_rank") == 7).select("iteration", "end_s")
    rows = burst.batches.join(last, on="iteration")
    assert (rows["processed_s"] > rows["end_s"]).all()
    assert rows["processed_s"].null_count() == 0


def test_utilization_matches_the_busy_share():
    sim, _ = _steady(PP8, 32, INCIDENT)
    util = sim.utilization(interval_s=0.1)
    assert util["util_pct"].min() >= 0 and util["util_pct"].max() <= 100
    assert util["gpu"].n_unique() == 8
    t0, t1 = sim.summary.window_s
    inside = util.filter(pl.col("t_s").is_between(t0, t1 - 0.1))
    mean = inside.group_by("gpu").agg(pl.col("util_pct").mean()).sort("gpu")["util_pct"]
    assert list(mean / 100) == pytest.approx(list(sim.summary.stage_busy), abs=0.05)
    with pytest.raises(ToolkitError, match="interval must be positive"):
        sim.utilization(0)


def test_tp_ranks_share_their_stage_timeline():
    sim = simulate(Layout(tp=2, pp=2), Workload(4, 100, LONG), INCIDENT, steps=40)
    util = sim.utilization(0.05)
    assert util["gpu"].n_unique() == 4
    a = util.filter(pl.col("gpu") == 0)["util_pct"]
    b = util.filter(pl.col("gpu") == 1)["util_pct"]
    assert a.to_list() == b.to_list()


def test_a_closed_loop_replaces_finished_requests():
    load = Workload(8, 200, 20, num_requests=24)
    sim = simulate(Layout(pp=2, pp_async_batch_depth=2), load, INCIDENT, duration_s=1e9)
    assert sim.requests.height == 24
    assert sim.requests["finished_s"].null_count() == 0
    assert sim.summary.output_tok_s > 0


# ── determinism and options ───────────────────────────────────────────────────────────────────


def test_the_same_seed_gives_the_same_run():
    load = Workload(16, 1000, 40, input_jitter=0.2, output_jitter=0.3, num_requests=20)
    kw = {"steps": 400, "jitter": 0.05}
    a = simulate(PP8, load, INCIDENT, seed=3, **kw)
    b = simulate(PP8, load, INCIDENT, seed=3, **kw)
    c = simulate(PP8, load, INCIDENT, seed=4, **kw)
    assert a.forwards.equals(b.forwards) and a.requests.equals(b.requests)
    assert not a.requests.equals(c.requests)


def test_cpu_costs_only_slow_the_loop_down():
    base, _ = _steady(PP8, 32, INCIDENT)
    slow, _ = _steady(PP8, 32, INCIDENT, message_s=200e-6, iteration_s=300e-6)
    assert slow.summary.round_s > base.summary.round_s


def test_the_simulation_admits_like_the_replay():
    layout = replace(PP8, pp_max_micro_batch_size=4)
    sim, _ = _steady(layout, 32, INCIDENT)
    slots = sim.requests.group_by("slot").len().sort("slot")["len"].to_list()
    assert tuple(slots) == tuple(b for b in admission(layout, Workload(32, 100), KIMI_K2) if b)


def test_one_replica_at_a_time():
    with pytest.raises(ToolkitError, match="dp must be 1"):
        simulate(Layout(dp=2), Workload(2), INCIDENT)
