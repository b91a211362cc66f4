"""Micro-batch slot occupancy: how many PP slots really held requests, phase by phase.

Under pipeline parallelism ``#running-req`` in a decode line is the size of **one** micro-batch
slot (the one that hit the log boundary), not the scheduler's total, while ``#token`` counts the
KV tokens of *all* slots (the KV pool is one pool per stage, shared by all slots). The requests
running are counted from ``#token`` and the prompts the Prefill lines admitted
(``analyze.running``: no assumption about output lengths), bounded below by the logged slot and
above by the load the benchmark offered; then

    active slots ≈ running / #running-req

Without PP ``#running-req`` is the whole batch and is the count. The prompt length comes from
the benchmark (``input_len``) or from the Prefill lines (``#new-token`` per ``#new-seq``,
chunk splits accounted for). ``occupancy_summary`` cross-checks each phase against a replay of
SGLang's admission (``toolkit.analyze.model.admission``) with the launch's chunk budget and
slot cap.

Each phase (``analyze.phases``: a stretch of decoding, normally one benchmark run of a sweep)
is judged on its own, over its steady window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import polars as pl

from toolkit.analyze.model import Layout, ModelSpec, Workload, admission
from toolkit.analyze.model.admission import occupancy_shape, replay_model
from toolkit.analyze.phases import decode_phases
from toolkit.analyze.running import PhaseLine, running_in_phase
from toolkit.analyze.stages import reference_lines
from toolkit.errors import ToolkitError
from toolkit.schema import Column, schema_of

__all__ = [
    "OCCUPANCY",
    "OCCUPANCY_PHASES",
    "STEADY_SHARE",
    "occupancy_summary",
    "peak_headline",
    "slot_occupancy",
    "slots_shown",
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
    Column("running_est", _F, "requests running: #running-req without PP, else estimated"),
    Column("active_slots_est", _F, "running_est / #running-req: slots holding requests (≤ slots)"),
    Column("active_slots_raw", _F, "running_est / #running-req, not capped at the slots"),
    Column("stages", _I, "pp_size"),
    Column("slots", _I, "pp_loop_size = pp_size + pp_async_batch_depth (1 without PP)"),
)
OCCUPANCY = schema_of(OCCUPANCY_COLUMNS)


OCCUPANCY_PHASE_COLUMNS: tuple[Column, ...] = (
    Column("phase", _I, "phase"),
    Column("offered", _I, "requests the benchmark kept in flight; null = unknown"),
    Column("steady_lines", _I, "decode lines in the steady window"),
    Column("steady_start", _T, "first line of the steady window (≥ 90 % of the peak running)"),
    Column("steady_end", _T, "last line of the steady window"),
    Column("running_est", _F, "median requests running (``OCCUPANCY.running_est``)"),
    Column("slot_req", _F, "median logged #running-req (one slot)"),
    Column("slot_req_max", _I, "largest logged #running-req"),
    Column("active_slots_est", _F, "median active slots: running_est / #running-req (≤ slots)"),
    Column("active_slots_raw", _F, "median running_est / #running-req, not capped"),
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
    decode = _in_log_order(reference_lines(batches, "decode"))
    if not decode.height or not phases.height:
        return pl.DataFrame(schema=OCCUPANCY)
    tagged = decode.join_asof(
        phases.select("start", "phase", "offered", "input_len", "output_len").sort("start"),
        left_on="ts",
        right_on="start",
    )
    interval = (pl.col("ts").diff().dt.total_milliseconds() / 1000.0).over("phase")
    # The first line of a phase covers the steps since decoding began: use the median interval.
    window = pl.coalesce(interval, interval.median().over("phase"), pl.lit(0.0))
    ms = decode["ts"].dt.millisecond()
    resolution = 1.0 if ms.len() and ms.max() == 0 else 0.001  # SGLANG_LOG_MS or not
    tagged = tagged.with_columns(
        _made=pl.col("gen_tok_s").fill_null(0.0) * window,
        _slack=pl.col("gen_tok_s").fill_null(0.0) * resolution,
        _admitted=_admitted_tokens(decode, reference_lines(batches, "prefill")),
    )
    slots = pp_size + async_depth if pp_size > 1 else 1
    isl = pl.col("input_len")
    if pp_size > 1:
        running, generated = _estimated(tagged)
        # One slot holds #running-req requests; a closed loop never has more than it offered.
        bounded = pl.max_horizontal(pl.col("_running"), pl.col("running_req").cast(_F))
        bounded = pl.min_horizontal(bounded, pl.col("offered").cast(_F))
        tagged = tagged.with_columns(_running=running, generated_est=generated).with_columns(
            running_est=pl.when(pl.col("_running").is_not_null()).then(bounded)
        )
        tagged = tagged.with_columns(mean_context=isl + pl.col("generated_est"))
    else:  # without PP #running-req is the whole batch: the count itself
        count = pl.when(pl.col("running_req") > 0).then(pl.col("running_req").cast(_F))
        tagged = tagged.with_columns(running_est=count).with_columns(
            mean_context=pl.col("token") / pl.col("running_est")
        )
        tagged = tagged.with_columns(generated_est=pl.col("mean_context") - isl)
    raw = pl.when(pl.col("running_req") > 0).then(pl.col("running_est") / pl.col("running_req"))
    out = tagged.with_columns(
        # the layout has no more slots than pp_loop_size: a ratio above it is estimate error
        # (slots_shown says why), never more slots
        active_slots_est=pl.when(raw.is_not_null()).then(
            pl.min_horizontal(raw, pl.lit(float(slots)))
        ),
        active_slots_raw=raw,
        stages=pl.lit(pp_size),
        slots=pl.lit(slots),
    )
    return out.select(OCCUPANCY.names()).cast(dict(OCCUPANCY))


def slots_shown(row: Mapping[str, Any]) -> str:
    """The active slots of an occupancy row (a line or a phase) as every format states them:
    ``~4 of 16 slots``, never more than the layout's slots; when the estimate exceeds them, the
    words say by how much and why it was capped.

    >>> slots_shown({"active_slots_est": 4.0, "active_slots_raw": 5.33, "slots": 4})
    '~4 of 4 slots (#token implies 5.3, more than the layout has: the slot #running-req shows is smaller than the others, or prefilling requests count in #token; capped at 4)'
    """  # noqa: E501
    active, raw, slots = row.get("active_slots_est"), row.get("active_slots_raw"), row.get("slots")
    if active is None:
        return f"? of {slots} slots"
    text = f"~{active:.0f} of {slots} slots"
    if raw is not None and slots and raw >= slots + 0.5:
        text += (
            f" (#token implies {raw:.1f}, more than the layout has: the slot #running-req shows "
            f"is smaller than the others, or prefilling requests count in #token; capped at "
            f"{slots})"
        )
    return text


def peak_headline(occupancy: pl.DataFrame, summary: pl.DataFrame | None = None) -> str | None:
    """The occupancy chart's sentence: requests running at the busiest phase (``summary``,
    so the title and the phase table state one number) or line, in how many slots, and the one
    slot ``#running-req`` shows; None without an estimate."""
    if not occupancy.height or occupancy["active_slots_est"].null_count() == occupancy.height:
        return None
    rows = summary if summary is not None and summary.height else occupancy
    busiest = rows.sort("running_est", descending=True, nulls_last=True).row(0, named=True)
    shown = busiest.get("slot_req", busiest.get("running_req"))
    return (
        f"At peak ~{busiest['running_est']:.0f} requests run in {slots_shown(busiest)} "
        f"({busiest['stages']} stages); #running-req shows one slot: "
        + (f"{shown:.0f}" if shown is not None else "?")
    )


def _in_log_order(lines: pl.DataFrame) -> pl.DataFrame:
    """Lines by time, then by their place in the log (lines of one second keep their order)."""
    keys = [c for c in ("ts", "source", "lineno") if c in lines.columns]
    return lines.sort(keys, nulls_last=True, maintain_order=True)


def _admitted_tokens(decode: pl.DataFrame, prefill: pl.DataFrame) -> pl.Series:
    """Per decode line (in ``decode``'s order): prompt tokens of the Prefill lines logged since
    the decode line before it (``#new-token`` + ``#cached-token``: the KV pool holds both)."""
    keys = [c for c in ("source", "lineno") if c in decode.columns and c in prefill.columns]
    if not prefill.height or "new_token" not in prefill.columns:
        return pl.Series("_admitted", [0.0] * decode.height, dtype=_F)
    cached = pl.col("cached_token").fill_null(0) if "cached_token" in prefill.columns else 0
    tokens = (pl.col("new_token").fill_null(0) + cached).cast(_F)
    lines = pl.concat(
        [
            decode.select("ts", *keys, _k=pl.int_range(pl.len()), _tok=pl.lit(0.0), _pf=1),
            prefill.select("ts", *keys, _k=pl.lit(None, _I), _tok=tokens, _pf=0),
        ],
        how="vertical_relaxed",
    )
    # Each Prefill line counts toward the next decode line; one of the same second and no
    # line number went first (a burst prefills, then decodes).
    order = ["ts", *keys] if keys else ["ts", "_pf"]
    lines = lines.sort(order, nulls_last=True, maintain_order=True).with_columns(
        pl.col("_k").fill_null(strategy="backward")
    )
    sums = lines.filter(pl.col("_k").is_not_null()).group_by("_k").agg(pl.col("_tok").sum())
    index = pl.DataFrame({"_k": pl.int_range(decode.height, eager=True, dtype=_I)})
    joined = index.join(sums.cast({"_k": _I}), on="_k", how="left").sort("_k")
    return joined["_tok"].fill_null(0.0).alias("_admitted")


def _estimated(tagged: pl.DataFrame) -> tuple[pl.Series, pl.Series]:
    """``running.running_in_phase`` over each phase of the tagged decode lines."""
    running = [math.nan] * tagged.height
    generated = [math.nan] * tagged.height
    rows = tagged.select(
        pl.int_range(pl.len()).alias("_i"),
        "phase",
        "input_len",
        "token",
        "_made",
        "_admitted",
        "_slack",
    )
    for (phase,), part in rows.group_by("phase", maintain_order=True):
        if phase is None:
            continue
        prompt = part["input_len"][0]
        lines = [
            PhaseLine(float(t or 0), float(m or 0.0), float(a or 0.0), float(e or 0.0))
            for t, m, a, e in zip(
                part["token"], part["_made"], part["_admitted"], part["_slack"], strict=True
            )
        ]
        logged = bool(part["_admitted"].sum() or 0)
        values = running_in_phase(lines, float(prompt or math.nan), prefill_logged=logged)
        for i, (n, g) in zip(part["_i"], values, strict=True):
            running[i], generated[i] = n, g
    as_series = [pl.Series(v, dtype=_F).fill_nan(None) for v in (running, generated)]
    return as_series[0], as_series[1]


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
    model: ModelSpec | None = None,
) -> pl.DataFrame:
    """Per phase: the steady occupancy and an admission replay of the offered burst (schema
    ``OCCUPANCY_PHASES``), against ``model`` (``model.replay_model``).

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
            active_slots_raw=pl.col("active_slots_raw").median(),
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
        replays.append(_replay(layout, r, lengths.get(r["phase"], {}), model))
    agg = agg.with_columns(
        replay=pl.Series([x[0] for x in replays], dtype=_S),
        replay_active=pl.Series([x[1] for x in replays], dtype=_I),
        replay_slot_max=pl.Series([x[2] for x in replays], dtype=_I),
    )
    return agg.select(OCCUPANCY_PHASES.names()).cast(dict(OCCUPANCY_PHASES))


def _replay(
    layout: Layout | None,
    row: dict[str, object],
    phase: dict[str, object],
    model: ModelSpec | None,
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
        load = Workload(c, max(round(isl), 1), max(round(out), 1))
        occupancy = admission(layout, load, replay_model(model, None))
    except ToolkitError:  # a request that can never fit the pool: no replay, not a crash
        return None, None, None
    sizes = [b for b in occupancy if b > 0]
    return occupancy_shape(occupancy), len(sizes), max(sizes, default=0)
