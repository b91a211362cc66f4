"""Micro-batch slot occupancy: how many PP slots really held requests, phase by phase.

Under pipeline parallelism ``#running-req`` in a decode line is the size of **one** micro-batch
slot (the one that hit the 40-step log boundary), not the scheduler's total, while ``#token``
counts the KV tokens of *all* slots (the KV pool is one pool per stage, shared by all slots). So

    running ≈ #token / mean context,   active slots ≈ running / #running-req

where the mean context is prompt + tokens generated so far. The prompt length comes from the
benchmark (``input_len``) or from the Prefill lines (``#new-token`` per ``#new-seq``, chunk
splits accounted for); the generated part from the integrated ``gen throughput`` while the
first wave of requests is still running, else half the output length (requests at all stages
of their life); a sharp drop of ``#token`` (a closed-loop wave finishing together) restarts
the count. ``occupancy_summary`` cross-checks each phase against a replay of SGLang's
admission (``toolkit.analyze.model.admission``) with the launch's chunk budget and slot cap.

Each phase (``analyze.phases``: a stretch of decoding, normally one benchmark run of a sweep)
is judged on its own, over its steady window.
"""

from __future__ import annotations

import math

import polars as pl

from toolkit.analyze.model import Layout, Workload, admission
from toolkit.analyze.phases import decode_phases
from toolkit.analyze.stages import reference_lines
from toolkit.errors import ToolkitError
from toolkit.schema import Column, schema_of

__all__ = [
    "OCCUPANCY",
    "OCCUPANCY_PHASES",
    "STEADY_SHARE",
    "occupancy_summary",
    "slot_occupancy",
    "steady_lines",
]

_I, _F, _S, _T = pl.Int64(), pl.Float64(), pl.String(), pl.Datetime("ms")


OCCUPANCY_COLUMNS: tuple[Column, ...] = (
    Column("ts", _T, "time of the decode line (reference stage)"),
    Column("phase", _I, "phase the line belongs to"),
    Column("offered", _I, "requests the benchmark kept in flight; null = unknown"),
    Column("running_req", _I, "logged #running-req: ONE micro-batch slot under PP"),
    Column("token", _I, "#token: KV tokens of all slots"),
    Column("token_usage", _F, "KV pool in use, 0–1"),
    Column("queue_req", _I, "#queue-req: requests waiting for admission"),
    Column("gen_tok_s", _F, "gen throughput of the line's window, tok/s"),
    Column("cuda_graph", pl.Boolean(), "the logged micro-batch ran on a CUDA graph; null = unsaid"),
    Column("generated_est", _F, "estimated tokens generated so far per running request"),
    Column("mean_context", _F, "estimated tokens per running request: prompt + generated"),
    Column("running_est", _F, "#token / mean_context: requests the KV pool holds"),
    Column("active_slots_est", _F, "running_est / #running-req: slots holding requests"),
    Column("stages", _I, "pp_size"),
    Column("slots", _I, "pp_loop_size = pp_size + pp_async_batch_depth (1 without PP)"),
)
OCCUPANCY = schema_of(OCCUPANCY_COLUMNS)


WAVE_DROP = 0.9
"""``#token`` falling below this share of the previous line's marks a wave of requests ending."""
WAVE_OVERSHOOT = 1.25
"""Generated tokens per request up to this share past the output length still read as the first
wave (the line's window overshoots); beyond, the estimate falls back to half the output."""


OCCUPANCY_PHASE_COLUMNS: tuple[Column, ...] = (
    Column("phase", _I, "phase"),
    Column("offered", _I, "requests the benchmark kept in flight; null = unknown"),
    Column("steady_lines", _I, "decode lines in the steady window"),
    Column("steady_start", _T, "first line of the steady window (≥ 90 % of the peak running)"),
    Column("steady_end", _T, "last line of the steady window"),
    Column("running_est", _F, "median requests running (from #token)"),
    Column("slot_req", _F, "median logged #running-req (one slot)"),
    Column("slot_req_max", _I, "largest logged #running-req"),
    Column("active_slots_est", _F, "median active slots: running_est / #running-req"),
    Column("queue_req", _F, "median #queue-req"),
    Column("token_usage", _F, "median KV pool usage"),
    Column("gen_tok_s", _F, "median gen throughput, tok/s"),
    Column("stages", _I, "pp_size"),
    Column("slots", _I, "pp_loop_size"),
    Column("replay", _S, "admission replay of the offered burst: slots × requests (e.g. 4×8)"),
    Column("replay_active", _I, "slots the replay fills"),
    Column("replay_slot_max", _I, "largest slot in the replay"),
)
OCCUPANCY_PHASES = schema_of(OCCUPANCY_PHASE_COLUMNS)


def slot_occupancy(
    batches: pl.DataFrame,
    phases: pl.DataFrame | None = None,
    *,
    pp_size: int = 1,
    async_depth: int = 0,
) -> pl.DataFrame:
    """Per decode line of the reference stage: logged slot size vs estimated running requests
    and active slots (schema ``OCCUPANCY``).

    Parameters
    ----------
    batches
        ``SGLangLog.batches`` of one launch.
    phases
        ``decode_phases`` of the same batches (computed when not given).
    pp_size, async_depth
        The launch's ``pp_size`` and ``pp_async_batch_depth``.
    """
    if phases is None:
        phases = decode_phases(batches)
    decode = reference_lines(batches, "decode").sort("ts")
    if not decode.height or not phases.height:
        return pl.DataFrame(schema=OCCUPANCY)
    tagged = decode.join_asof(
        phases.select("start", "phase", "offered", "input_len", "output_len").sort("start"),
        left_on="ts",
        right_on="start",
    )
    interval = (pl.col("ts").diff().dt.total_milliseconds() / 1000.0).over("phase")
    # The first line of a phase covers 40 steps since decoding began: use the median interval.
    first_interval = interval.median().over("phase")
    # A closed-loop benchmark with equal output lengths finishes a whole wave of requests at
    # once: #token drops and the next wave starts from its prompts. The tokens generated per
    # request are counted from the start of the phase or the last such drop.
    drop = (pl.col("token") < WAVE_DROP * pl.col("token").shift(1)).over("phase")
    tagged = tagged.with_columns(
        _window=pl.coalesce(interval, first_interval, pl.lit(0.0)),
        _wave=drop.fill_null(False).cum_sum().over("phase"),
    )
    made = pl.col("gen_tok_s").fill_null(0.0) * pl.col("_window")
    # The new wave began somewhere inside the window of the line that shows the drop.
    first_in_wave = pl.int_range(pl.len()).over("phase", "_wave") == 0
    made = pl.when(first_in_wave & (pl.col("_wave") > 0)).then(made / 2).otherwise(made)
    tagged = tagged.with_columns(_generated=made.cum_sum().over("phase", "_wave"))
    isl = pl.col("input_len")
    osl = pl.coalesce(pl.col("output_len"), isl)  # unknown output: assume about the prompt
    first_wave = (pl.col("token") - pl.col("_generated")) / isl
    per_request = pl.col("_generated") / first_wave
    # A little past the output length is the timing of the window, not a new wave: clamp it.
    in_first_wave = (first_wave > 0) & (per_request <= WAVE_OVERSHOOT * osl)
    generated = pl.when(in_first_wave).then(pl.min_horizontal(per_request, osl))
    generated = generated.otherwise(osl / 2.0)
    slots = pp_size + async_depth if pp_size > 1 else 1
    out = tagged.with_columns(generated_est=generated).with_columns(
        mean_context=isl + pl.col("generated_est"),
    )
    out = out.with_columns(running_est=pl.col("token") / pl.col("mean_context")).with_columns(
        active_slots_est=pl.when(pl.col("running_req") > 0).then(
            pl.col("running_est") / pl.col("running_req")
        ),
        stages=pl.lit(pp_size),
        slots=pl.lit(slots),
    )
    return out.select(OCCUPANCY.names()).cast(dict(OCCUPANCY))


STEADY_SHARE = 0.9
"""Share of a phase's peak concurrency that counts as steady."""


def steady_lines(occupancy: pl.DataFrame) -> pl.DataFrame:
    """The lines of each phase's steady window (see ``occupancy_summary``)."""
    # The peak of a level held over three lines: one line's estimate can jump (a wave that ends
    # inside its window) and must not set the bar for the whole phase.
    held = pl.col("running_est").rolling_median(3, min_samples=1, center=True).over("phase")
    peak = held.max().over("phase")
    flagged = occupancy.sort("ts").with_columns(_high=pl.col("running_est") >= STEADY_SHARE * peak)
    flagged = flagged.with_columns(
        _run=(pl.col("_high") != pl.col("_high").shift(1)).fill_null(True).cum_sum().over("phase")
    )
    spans = (
        flagged.filter(pl.col("_high"))
        .group_by("phase", "_run")
        .agg(
            _lines=pl.len(),
            _span=(pl.col("ts").max() - pl.col("ts").min()).dt.total_milliseconds(),
        )
        .sort("phase", "_span", "_lines", descending=[False, True, True])
        .group_by("phase", maintain_order=True)
        .first()
    )
    window = flagged.join(spans, on=["phase", "_run"], how="inner")
    short = spans.filter(pl.col("_lines") < 3)["phase"].to_list()
    loose = occupancy.filter(pl.col("phase").is_in(short) & (pl.col("running_est") >= 0.8 * peak))
    window = window.filter(~pl.col("phase").is_in(short)).select(occupancy.columns)
    return pl.concat([window, loose.select(occupancy.columns)]).sort("ts")


def occupancy_summary(
    occupancy: pl.DataFrame,
    phases: pl.DataFrame,
    layout: Layout | None = None,
) -> pl.DataFrame:
    """Per phase: the steady occupancy and an admission replay of the offered burst (schema
    ``OCCUPANCY_PHASES``).

    The steady window is the longest unbroken stretch of lines at ≥ ``STEADY_SHARE`` of the
    phase's peak running estimate (the ``steady_state_serving`` rule of SGLang's benchmark): it
    leaves out the ramp after the burst and the drain at the end. A window of fewer than three
    lines (refills that dip every few lines) falls back to every line at ≥ 80 % of the peak.
    The replay admits ``offered`` requests (else
    the running estimate) of the phase's lengths into the launch's slots, front-first slot by
    slot: when it fills the same number of slots as the logs imply, the slot estimate is
    confirmed.
    """
    if not occupancy.height:
        return pl.DataFrame(schema=OCCUPANCY_PHASES)
    steady = steady_lines(occupancy)
    agg = (
        steady.group_by("phase")
        .agg(
            offered=pl.col("offered").first(),
            steady_lines=pl.len(),
            steady_start=pl.col("ts").min(),
            steady_end=pl.col("ts").max(),
            running_est=pl.col("running_est").median(),
            slot_req=pl.col("running_req").cast(_F).median(),
            slot_req_max=pl.col("running_req").max(),
            active_slots_est=pl.col("active_slots_est").median(),
            queue_req=pl.col("queue_req").cast(_F).median(),
            token_usage=pl.col("token_usage").median(),
            gen_tok_s=pl.col("gen_tok_s").median(),
            stages=pl.col("stages").first(),
            slots=pl.col("slots").first(),
        )
        .sort("phase")
    )
    lengths = {r["phase"]: r for r in phases.iter_rows(named=True)}
    replays = []
    for r in agg.iter_rows(named=True):
        replays.append(_replay(layout, r, lengths.get(r["phase"], {})))
    agg = agg.with_columns(
        replay=pl.Series([x[0] for x in replays], dtype=_S),
        replay_active=pl.Series([x[1] for x in replays], dtype=_I),
        replay_slot_max=pl.Series([x[2] for x in replays], dtype=_I),
    )
    return agg.select(OCCUPANCY_PHASES.names()).cast(dict(OCCUPANCY_PHASES))


def _replay(
    layout: Layout | None, row: dict[str, object], phase: dict[str, object]
) -> tuple[str | None, int | None, int | None]:
    if layout is None:
        return None, None, None
    c = row["offered"]
    if c is None and isinstance(row["running_est"], float) and math.isfinite(row["running_est"]):
        c = round(row["running_est"])
    isl, osl = phase.get("input_len"), phase.get("output_len")
    if not isinstance(c, int) or c < 1 or not isinstance(isl, float) or not math.isfinite(isl):
        return None, None, None
    out = osl if isinstance(osl, float) and math.isfinite(osl) and osl >= 1 else isl
    try:
        occupancy = admission(layout, Workload(c, max(round(isl), 1), max(round(out), 1)))
    except ToolkitError:  # a request that can never fit the pool: no replay, not a crash
        return None, None, None
    sizes = [b for b in occupancy if b > 0]
    if not sizes:
        return "empty", 0, 0
    shape = f"{len(sizes)}×{sizes[0]}" if len(set(sizes)) == 1 else "+".join(map(str, sizes))
    return shape, len(sizes), max(sizes)
