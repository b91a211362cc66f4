"""Per pipeline stage: batch events on one clock, log-ordinal alignment, desync, cadence, load.

Every PP stage runs the same scheduler on the same request stream and counts its decode
micro-batches the same way, so all stages print their n-th ``Decode batch`` line for the
*same* micro-batch, with the same ``#running-req`` and ``#token``.
Lock-step lines are therefore the baseline; the fault is a **desync**: stages that disagree at
the same log ordinal (a correctness bug, cf. sgl-project/sglang#28424).

A decode line closes a window of ``decode_log_interval`` (40) micro-batch decode steps on its
rank, so the interval between a rank's lines gives the step cadence, and
``T_round = step × active slots`` (each active slot takes one step per round).
"""

from __future__ import annotations

import polars as pl

from toolkit.analyze.alignment import ALIGN_TOLERANCE_S, aligned_ordinals
from toolkit.analyze.series import busy_in_windows, decoding_windows
from toolkit.load.gpu.roles import join_roles
from toolkit.schema import Column, schema_of

__all__ = [
    "PHASE_BUSY",
    "STAGE_BUSY",
    "STAGE_CADENCE",
    "STAGE_DESYNC",
    "STAGE_TIMELINE",
    "apart_lines",
    "apart_note",
    "desync_share",
    "phase_busy",
    "reference_lines",
    "stage_busy",
    "stage_cadence",
    "stage_desync",
    "stage_timeline",
]

LOG_INTERVAL = 40
"""SGLang's default ``decode_log_interval``: micro-batch decode steps per decode line."""

_I, _F, _S, _B, _T = pl.Int64(), pl.Float64(), pl.String(), pl.Boolean(), pl.Datetime("ms")

STAGE_TIMELINE_COLUMNS: tuple[Column, ...] = (
    Column("ts", _T, "time the stage printed the line"),
    Column("dp", _I, "data-parallel rank (0 without DP)"),
    Column("pp", _I, "pipeline stage (0 without PP)"),
    Column("kind", _S, "prefill or decode"),
    Column(
        "ordinal",
        _I,
        "0-based count of this kind of line, aligned to the reference stage's; null = a line "
        "the reference stage lacks",
    ),
    Column("running_req", _I, "#running-req: one micro-batch slot under PP"),
    Column("token", _I, "#token: KV tokens in use"),
    Column("token_usage", _F, "KV pool in use, 0–1"),
    Column("queue_req", _I, "#queue-req: waiting requests (global)"),
    Column("gen_tok_s", _F, "decode: tokens/s over the line's window (≈ whole-model rate)"),
    Column("cuda_graph", _B, "the micro-batch ran a captured graph"),
    Column("new_seq", _I, "prefill: requests in the batch"),
    Column("new_token", _I, "prefill: prompt tokens in the batch"),
    Column("fwd_occupancy_pct", _F, "device time busy in forward, % (≥0.5.16 metrics)"),
    Column("lag_s", _F, "seconds after the first stage printed the same ordinal"),
    Column("complete", _B, "every stage printed this ordinal"),
    Column(
        "agrees",
        _B,
        "same #running-req and #token as stage 0 at this ordinal; null = cannot compare",
    ),
    Column("interval_s", _F, "seconds since this stage's previous line of the same kind"),
    Column("step_ms", _F, "decode: interval / decode_log_interval = one micro-batch step, ms"),
)
STAGE_TIMELINE = schema_of(STAGE_TIMELINE_COLUMNS)

STAGE_DESYNC_COLUMNS: tuple[Column, ...] = (
    Column("dp", _I, "data-parallel rank"),
    Column("kind", _S, "prefill or decode"),
    Column("ordinal", _I, "log ordinal every stage printed"),
    Column("ts", _T, "first stage's time"),
    Column("stages", _I, "stages that printed it"),
    Column("running_req_min", _I, "smallest #running-req among the stages"),
    Column("running_req_max", _I, "largest #running-req among the stages"),
    Column("token_min", _I, "smallest #token among the stages"),
    Column("token_max", _I, "largest #token among the stages"),
    Column("spread_s", _F, "last minus first stage's time, s"),
    Column("agrees", _B, "all stages printed the same #running-req and #token"),
)
STAGE_DESYNC = schema_of(STAGE_DESYNC_COLUMNS)

STAGE_CADENCE_COLUMNS: tuple[Column, ...] = (
    Column("dp", _I, "data-parallel rank"),
    Column("pp", _I, "pipeline stage"),
    Column("decode_lines", _I, "decode lines of the stage"),
    Column("interval_s", _F, "median seconds between the stage's decode lines"),
    Column("step_ms", _F, "one micro-batch decode step: interval / decode_log_interval, ms"),
    Column("round_ms", _F, "T_round = step × active slots (= TPOT), ms; null if unknown"),
    Column("gen_tok_s", _F, "median gen throughput of the stage's decode lines"),
    Column("tokens_per_round", _F, "gen_tok_s × T_round ≈ requests decoding (consistency check)"),
)
STAGE_CADENCE = schema_of(STAGE_CADENCE_COLUMNS)

STAGE_BUSY_COLUMNS: tuple[Column, ...] = (
    Column("pp", _I, "pipeline stage"),
    Column("gpus", pl.List(pl.Int32()), "GPU indices of the stage"),
    Column("busy_pct", _F, "mean GPU busy % while decoding (trace); null without a trace"),
    Column("below_half_share", _F, "share of the decoding time read under 50 % (trace)"),
    Column("samples", pl.UInt32(), "trace samples per GPU of the stage while decoding"),
    Column("fwd_occupancy_pct", _F, "mean `fwd occupancy` of the stage's decode lines, %"),
    Column(
        "metric",
        _S,
        "busy measure: sm_active, util_pct (trace), fwd_occupancy (log), or the /metrics "
        "counter read (``RunAnalysis.busy`` without a trace)",
    ),
    Column("vs_mean", _F, "the stage's busy over the mean of all stages (1.0 = balanced)"),
)
STAGE_BUSY = schema_of(STAGE_BUSY_COLUMNS)

_VALUES = (
    "running_req",
    "token",
    "token_usage",
    "queue_req",
    "gen_tok_s",
    "cuda_graph",
    "new_seq",
    "new_token",
    "fwd_occupancy_pct",
)


def _ranked(batches: pl.DataFrame) -> pl.DataFrame:
    """Batch lines with integer dp/pp (0 when absent), one TP rank per stage."""
    df = batches.filter(pl.col("kind").is_in(["decode", "prefill"]) & pl.col("ts").is_not_null())
    for name in _VALUES:
        if name not in df.columns:
            df = df.with_columns(pl.lit(None).alias(name))
    df = df.with_columns(
        dp=pl.col("dp").cast(_I).fill_null(0),
        pp=pl.col("pp").cast(_I).fill_null(0),
        _tp=pl.col("tp").cast(_I).fill_null(0),
        _row=pl.int_range(pl.len()),
    )
    # With --enable-metrics-for-all-schedulers every TP rank prints the same lines: keep one.
    first_tp = pl.col("_tp") == pl.col("_tp").min().over("dp", "pp")
    return df.filter(first_tp)


def stage_timeline(batches: pl.DataFrame, *, log_interval: int = LOG_INTERVAL) -> pl.DataFrame:
    """Every stage's batch lines on one clock, aligned by log ordinal (schema ``STAGE_TIMELINE``).

    Parameters
    ----------
    batches
        ``SGLangLog.batches`` of one launch.
    log_interval
        ``decode_log_interval`` of the launch (decode steps per decode line).
    """
    df = _ranked(batches)
    if not df.height:
        return pl.DataFrame(schema=STAGE_TIMELINE)
    # Only the columns the timeline keeps: each step below copies the frame it is given.
    df = df.select("ts", "dp", "pp", "kind", *_VALUES, "_row",
                   *(["complete"] if "complete" in df.columns else []))  # fmt: skip
    per_stage = ["dp", "pp", "kind"]
    df = df.sort("_row").with_columns(
        interval_s=pl.col("ts").diff().over(per_stage).dt.total_milliseconds() / 1000.0,
    )
    df = df.with_columns(ordinal=aligned_ordinals(df))
    stages = df.group_by("dp").agg(_stages=pl.col("pp").n_unique())
    df = df.join(stages, on="dp", how="left")
    at = ["dp", "kind", "ordinal"]
    # The reference stage's values per ordinal, aggregated once and joined back (window
    # expressions over ~lines/stages groups cost a group-by each).
    per_ordinal = df.group_by(at).agg(
        _ref_running=pl.col("running_req").sort_by("pp").first(),
        _ref_token=pl.col("token").sort_by("pp").first(),
        _ts0=pl.col("ts").min(),
        _n_pp=pl.col("pp").n_unique(),
        _whole=pl.col("complete").fill_null(True).all() if "complete" in df.columns else True,
    )
    df = df.join(per_ordinal, on=at, how="left", nulls_equal=True, maintain_order="left")
    ref_running, ref_token = pl.col("_ref_running"), pl.col("_ref_token")
    same = (pl.col("running_req") == ref_running) & pl.col("token").eq_missing(ref_token)
    # A line cut short (null #running-req, or #token missing on one side only) cannot be
    # compared: its agreement stays unknown rather than counting as a desync.
    known = (
        pl.col("running_req").is_not_null()
        & ref_running.is_not_null()
        & (pl.col("token").is_null() == ref_token.is_null())
        & pl.col("_whole")
    )
    # A line the reference stage lacks (null ordinal) is kept on the timeline, never compared.
    complete = pl.col("ordinal").is_not_null() & (pl.col("_n_pp") == pl.col("_stages"))
    lag = (pl.col("ts") - pl.col("_ts0")).dt.total_milliseconds() / 1000.0
    df = df.with_columns(
        lag_s=lag,
        complete=complete,
        # Lines printed further apart than a few log intervals are not one batch (logs of
        # other launches or clocks): they are not compared (``apart_lines``).
        agrees=pl.when(complete & known & (lag <= _same_batch_s())).then(same),
        step_ms=pl.when(pl.col("kind") == "decode").then(
            pl.col("interval_s") * 1000.0 / log_interval
        ),
    )
    return df.sort("_row").select(STAGE_TIMELINE.names()).cast(dict(STAGE_TIMELINE))


SAME_BATCH_INTERVALS = 4
"""Stage lines of one log ordinal more than this many log intervals apart (and more than
``ALIGN_TOLERANCE_S``) are not the same batch: misaligned logs, never a desync."""


def _same_batch_s() -> pl.Expr:
    """Seconds the stages' lines of one batch may lie apart, per DP rank and kind."""
    typical = pl.col("interval_s").median().over("dp", "kind")
    return pl.max_horizontal(pl.lit(ALIGN_TOLERANCE_S), SAME_BATCH_INTERVALS * typical)


def apart_lines(timeline: pl.DataFrame) -> pl.DataFrame:
    """Stage lines of ``timeline`` (``STAGE_TIMELINE``) left uncompared because they lie too far
    from the other stages' line of their ordinal to be one batch."""
    if not timeline.height:
        return timeline
    return timeline.filter(
        pl.col("complete") & pl.col("agrees").is_null() & (pl.col("lag_s") > _same_batch_s())
    )


def apart_note(timeline: pl.DataFrame) -> list[dict[str, str]]:
    """``apart_lines`` as a ``mismatches`` note (empty when there are none)."""
    apart = apart_lines(timeline)
    if not apart.height:
        return []
    return [
        {
            "input": "stage lines",
            "files": "the server log",
            "detail": f"{apart.height} stage line(s) lie up to {apart['lag_s'].max():,.0f} s from "
            "the other stages' line of the same log ordinal: not one batch but misaligned "
            "or unrelated logs, so they are not compared for a desync",
        }
    ]


def stage_desync(timeline: pl.DataFrame) -> pl.DataFrame:
    """Per log ordinal that every stage printed: do the stages agree? (schema ``STAGE_DESYNC``)

    Identical values are how SGLang PP logs normally; disagreement is the fault signal.
    """
    done = timeline.filter(pl.col("complete") & pl.col("agrees").is_not_null())
    if not done.height:
        return pl.DataFrame(schema=STAGE_DESYNC)
    out = (
        done.group_by("dp", "kind", "ordinal")
        .agg(
            ts=pl.col("ts").min(),
            stages=pl.len(),
            running_req_min=pl.col("running_req").min(),
            running_req_max=pl.col("running_req").max(),
            token_min=pl.col("token").min(),
            token_max=pl.col("token").max(),
            spread_s=pl.col("lag_s").max(),
            agrees=pl.col("agrees").all(),
        )
        .sort("dp", "ts", "kind", "ordinal")
    )
    return out.select(STAGE_DESYNC.names()).cast(dict(STAGE_DESYNC))


def desync_share(desync: pl.DataFrame, kind: str | None = "decode") -> float:
    """Share of compared ordinals (of ``kind``; None = all) where stages disagree; 0 if none."""
    df = desync if kind is None else desync.filter(pl.col("kind") == kind)
    if not df.height:
        return 0.0
    return float((~df["agrees"]).mean() or 0.0)


def reference_lines(batches: pl.DataFrame, kind: str | None = None) -> pl.DataFrame:
    """The lines of one reference stage: the lowest (dp, pp, tp) that printed batch lines.

    Under PP every stage prints the same micro-batches, so one stage's lines describe
    the scheduler; counting all of them would count each micro-batch ``pp_size`` times.
    """
    # Lazy: only the reference stage's lines are ever copied, not every line once per step.
    lf = batches.lazy().filter(
        pl.col("kind").is_in(["decode", "prefill"]) & pl.col("ts").is_not_null()
    )
    if kind is not None:
        lf = lf.filter(pl.col("kind") == kind)
    key = [pl.col(c).cast(_I).fill_null(0) for c in ("dp", "pp", "tp")]
    stages = lf.select(key).unique().sort("dp", "pp", "tp").collect()
    if not stages.height:
        return lf.collect()
    first = stages.row(0)
    return lf.filter(pl.all_horizontal(k == v for k, v in zip(key, first, strict=True))).collect()


def stage_cadence(
    timeline: pl.DataFrame,
    *,
    active_slots: float | None = None,
    log_interval: int = LOG_INTERVAL,
) -> pl.DataFrame:
    """Per stage: decode-line interval, micro-batch step and round time (schema
    ``STAGE_CADENCE``).

    ``round_ms = step_ms × active_slots``: each active slot takes one step per round. Without
    PP the round is one step. ``tokens_per_round`` (gen tok/s × round) should be close to the
    number of requests decoding; a large mismatch means the slot estimate is off.
    """
    decode = timeline.filter(pl.col("kind") == "decode")
    if not decode.height:
        return pl.DataFrame(schema=STAGE_CADENCE)
    pipelined = decode["pp"].n_unique() > 1
    slots = active_slots if pipelined else 1.0
    out = (
        decode.group_by("dp", "pp")
        .agg(
            decode_lines=pl.len(),
            interval_s=pl.col("interval_s").median(),
            gen_tok_s=pl.col("gen_tok_s").median(),
        )
        .with_columns(step_ms=pl.col("interval_s") * 1000.0 / log_interval)
        .with_columns(round_ms=pl.col("step_ms") * slots if slots is not None else pl.lit(None, _F))
        .with_columns(tokens_per_round=pl.col("gen_tok_s") * pl.col("round_ms") / 1000.0)
        .sort("dp", "pp")
    )
    return out.select(STAGE_CADENCE.names()).cast(dict(STAGE_CADENCE))


def stage_busy(
    batches: pl.DataFrame,
    samples: pl.DataFrame | None = None,
    roles: pl.DataFrame | None = None,
    *,
    max_gap_s: float | None = None,
    timeline: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per stage: how busy its GPUs were while the server decoded (schema ``STAGE_BUSY``).

    The GPU trace (``GpuTrace.samples`` with ``gpu_roles(launch)``) is read only inside
    decoding windows, so startup and idle gaps do not dilute it; ``sm_active`` is preferred to
    ``util_pct``, which counts a NCCL kernel waiting for its peer as busy. The log's own
    ``fwd occupancy`` (≥0.5.16 metrics) is the fallback measure. ``timeline`` is
    ``stage_timeline(batches)`` when the caller has it already.
    """
    if timeline is None:
        timeline = stage_timeline(batches)
    decode = timeline.filter(pl.col("kind") == "decode")
    log_busy = (
        decode.group_by("pp").agg(fwd_occupancy_pct=pl.col("fwd_occupancy_pct").mean()).sort("pp")
    )
    trace = _trace_busy(batches, samples, roles, max_gap_s) if samples is not None else None
    if trace is not None and trace.height:
        out = trace.join(log_busy, on="pp", how="left")
        base = "busy_pct"
    else:
        out = log_busy.filter(pl.col("fwd_occupancy_pct").is_not_null()).with_columns(
            gpus=pl.lit(None, pl.List(pl.Int32())),
            busy_pct=pl.lit(None, _F),
            below_half_share=pl.lit(None, _F),
            samples=pl.lit(None, pl.UInt32()),
            metric=pl.lit("fwd_occupancy"),
        )
        base = "fwd_occupancy_pct"
    if not out.height:
        return pl.DataFrame(schema=STAGE_BUSY)
    mean = out[base].mean()
    out = out.with_columns(
        vs_mean=pl.col(base) / mean if isinstance(mean, float) and mean > 0 else pl.lit(None, _F)
    )
    return out.sort("pp").select(STAGE_BUSY.names()).cast(dict(STAGE_BUSY))


def _trace_busy(
    batches: pl.DataFrame,
    samples: pl.DataFrame,
    roles: pl.DataFrame | None,
    max_gap_s: float | None,
) -> pl.DataFrame | None:
    """Mean busy % per stage over the trace samples that fall inside decoding windows."""
    windows = decoding_windows(batches, max_gap_s=max_gap_s).with_columns(phase=pl.lit(0, _I))
    out = _busy_in(samples, roles, windows)
    return None if out is None else out.drop("phase")


def _busy_in(
    samples: pl.DataFrame, roles: pl.DataFrame | None, windows: pl.DataFrame
) -> pl.DataFrame | None:
    """Per window ``phase`` and stage: busy % (``series.busy_in_windows``), share under 50 %,
    samples per GPU, GPUs, the metric."""
    if roles is None or not roles.height or "ts" not in samples.columns or not windows.height:
        return None
    staged = join_roles(samples, roles.with_columns(pl.col("pp").cast(_I)))
    out, metric = busy_in_windows(staged, windows.select("start", "end", "phase"), ["pp"])
    if not out.height:
        return None
    return out.with_columns(metric=pl.lit(metric)).sort("phase", "pp")


PHASE_BUSY_COLUMNS: tuple[Column, ...] = (
    Column("phase", _I, "phase (``occupancy.decode_phases``)"),
    Column("pp", _I, "pipeline stage"),
    Column("gpus", pl.List(pl.Int32()), "GPU indices of the stage"),
    Column("busy_pct", _F, "mean GPU busy % of the stage during the phase"),
    Column("below_half_share", _F, "share of the phase's time read under 50 %"),
    Column("samples", pl.UInt32(), "trace samples per GPU of the stage in the phase (fewest)"),
    Column("metric", _S, "sm_active or util_pct; the /metrics counter read without a trace"),
)
PHASE_BUSY = schema_of(PHASE_BUSY_COLUMNS)


def phase_busy(
    samples: pl.DataFrame, roles: pl.DataFrame | None, phases: pl.DataFrame
) -> pl.DataFrame:
    """Per phase and stage: how busy the GPUs were between the phase's first and last decode
    line, each sample weighted by its overlap with that span (schema ``PHASE_BUSY``); empty
    without a trace, roles or overlap."""
    out = _busy_in(samples, roles, phases)
    if out is None:
        return pl.DataFrame(schema=PHASE_BUSY)
    return out.select(PHASE_BUSY.names()).cast(dict(PHASE_BUSY))
