"""Phases: the stretches of decoding in a log, and which benchmark run each one was.

A *phase* is one stretch of decoding, normally one benchmark run of a concurrency sweep.
``decode_phases`` finds them from pauses in the reference stage's decode lines, then places the
benchmark's runs on the log's clock from the log's own evidence: the requests each phase had in
flight at its peak must be close to what the run offered, and never above it. Without PP the peak is
the largest ``#running-req`` (the whole batch); under PP a line shows one micro-batch, so the peak
is counted from ``#token``: less the tokens generated since the phase began, what is left are
prompts, and over the prompt length that is requests. Runs and phases are matched in order by the
alignment that fits these counts best; a warm-up phase no run claims, or a run whose phase is
missing, is left unmatched. A phase whose count does not fit its run (``PLACEMENT_RANGE``) is
flagged and its ``offered`` stays null, so no finding judges it against the wrong load.

A phase file (``ppscope capture``'s ``phases.jsonl``) states when each run started and ended:
given as ``marks``, it takes precedence over the evidence. Each phase is then the decode lines
inside one mark (on a log that prints whole seconds, the seconds the mark touches; widened by
``MARK_SLACK_S``, never back into the previous mark), the run is the mark's, and ``offered`` is
the mark's concurrency whatever the lines count.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from toolkit.analyze.stages import reference_lines
from toolkit.schema import Column, schema_of

__all__ = ["PHASES", "PLACEMENT_RANGE", "WARMUP_REQUESTS", "decode_phases", "prompt_length"]

_I, _F, _S, _T = pl.Int64(), pl.Float64(), pl.String(), pl.Datetime("ms")

PHASE_COLUMNS: tuple[Column, ...] = (
    Column("phase", _I, "0-based stretch of decoding, in time order"),
    Column("start", _T, "first decode line of the phase"),
    Column("end", _T, "last decode line of the phase"),
    Column("decode_lines", _I, "decode lines of the reference stage in the phase"),
    Column("offered", _I, "requests the benchmark kept in flight; null = unknown or unplaced"),
    Column("input_len", _F, "prompt tokens per request (benchmark, else Prefill lines)"),
    Column("output_len", _F, "generated tokens per request (benchmark); null = unknown"),
    Column("input_len_from", _S, "benchmark or prefill lines"),
    Column("bench_tok_s", _F, "output tok/s the benchmark measured for the phase"),
    Column("bench_tpot_ms", _F, "median time per output token the benchmark measured, ms"),
    Column("bench_run", _I, "the benchmark run placed on this phase (its order); null = none"),
    Column("peak_running", _F, "requests in flight at the phase's peak"),
    Column("placement", _F, "peak_running / offered: how well the run fits the phase (≤ 1)"),
    Column("placed", pl.Boolean(), "a run is placed on the phase and its count fits"),
)
PHASES = schema_of(PHASE_COLUMNS)

WARMUP_REQUESTS = 1.5
"""A stretch before the first benchmark run with no more requests than this in flight, and no
run placed on it, is a warm-up (SGLang's own, or the benchmark's single warm-up request)."""

MIN_PHASE_GAP_S = 2.0
"""No pause shorter than this separates two phases."""

UNGUIDED_GAP_S = 4.0
"""Without benchmark runs to match, a pause must be this long to start a phase."""

PAUSE_SCORE = 1.0
"""Without benchmark runs to match, a pause must also exceed the typical line interval before
it plus the one after it (``_phase_breaks``)."""

BURST_GAP_S = 4.0
"""Prefill lines before a phase's first decode line belong to its burst back to a pause this
long between two of them."""

PREFILL_LOOKBACK_S = 30.0
"""Prefill lines this long before a phase's first decode line still belong to the phase."""

PLACEMENT_RANGE = (0.5, 1.2)
"""Peak requests in flight over the run's concurrency that count as this run's phase: a closed
loop rarely keeps all of them in flight (ramp, refills), and never more."""

QUEUED_FLOOR = 0.02
"""The lower end of ``PLACEMENT_RANGE`` for a phase whose lines show requests queued: a request
cap or a full KV pool keeps far fewer running than the run offered."""

MARK_SLACK_S = 0.5
"""A phase file's times are widened by this much, for a log clock a little off the capture's."""

QUEUED_WEIGHT = 0.25
"""Weight of a shortfall of running requests in a phase with queued requests (see ``_place``)."""


def prompt_length(prefill: pl.DataFrame, chunked_prefill_size: int | None = None) -> float | None:
    """Mean prompt tokens per request from Prefill lines of one stage; None without any.

    A pass that fills the chunk budget may end with a request cut in two, whose rest shows up as
    one more ``#new-seq`` in the next pass; those continuations are not counted as requests.
    Whether the next pass carried one is read from ``#queue-req`` where it says: a request
    taken from the queue lowers it by one, a continuation does not (a prompt exactly the size
    of the budget fills passes without any cut). Elsewhere a full pass is taken as cut.
    """
    if not {"new_seq", "new_token"} <= set(prefill.columns):
        return None
    df = prefill.filter(pl.col("new_seq").is_not_null() & pl.col("new_token").is_not_null())
    if not df.height:
        return None
    cached = pl.col("cached_token").fill_null(0) if "cached_token" in df.columns else pl.lit(0)
    tokens = float(df.select((pl.col("new_token") + cached).sum()).item() or 0)
    seqs = int(df["new_seq"].sum() or 0)
    if chunked_prefill_size and chunked_prefill_size > 0:
        seqs -= _continuations(df, chunked_prefill_size)
    return tokens / seqs if seqs > 0 and tokens > 0 else None


def _continuations(prefill: pl.DataFrame, chunk: int) -> int:
    """Passes that carried on a request the pass before cut (see ``prompt_length``)."""
    full = (prefill["new_token"] >= chunk).to_list()
    seqs = prefill["new_seq"].to_list()
    queue = prefill["queue_req"].to_list() if "queue_req" in prefill.columns else [None] * len(seqs)
    count = 0
    for k in range(1, len(seqs)):
        if not full[k - 1]:
            continue
        before, after = queue[k - 1], queue[k]
        carried = None if before is None or after is None else seqs[k] - (before - after)
        count += carried if carried in (0, 1) else 1
    return count


def decode_phases(
    batches: pl.DataFrame,
    bench_runs: pl.DataFrame | None = None,
    *,
    gap_s: float | None = None,
    chunked_prefill_size: int | None = None,
    pp_size: int | None = None,
    marks: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Stretches of decoding and the benchmark run placed on each (schema ``PHASES``).

    Parameters
    ----------
    batches
        ``SGLangLog.batches`` of one launch.
    bench_runs
        The run's benchmark results (``load_bench(...).runs``), in the order they ran.
    gap_s
        A pause between decode lines longer than this starts a new phase. By default a pause
        starts one when it is at least 4 s and longer than the typical line interval before it
        plus the one after it (a PP layout with one busy slot logs every few seconds, a full
        one several times a second; ``--decode-log-interval`` scales both); when that finds
        fewer phases than benchmark runs, the most outstanding pauses are taken.
    pp_size
        The launch's ``pp_size``: above 1 a decode line's ``#running-req`` is one micro-batch.
        By default, the stages that printed lines.
    marks
        When each run started and ended (``load_phase_marks``, on the log's clock): phases
        and placement come from these times instead of pauses and counts.
    """
    decode = reference_lines(batches, "decode").sort("ts")
    prefill = reference_lines(batches, "prefill").sort("ts")
    if not decode.height:
        return pl.DataFrame(schema=PHASES)
    if "queue_req" not in decode.columns:  # a log format without #queue-req
        decode = decode.with_columns(queue_req=pl.lit(None, pl.Int64))
    if pp_size is None:
        ranks = batches["pp"].drop_nulls() if "pp" in batches.columns else pl.Series([])
        pp_size = int(ranks.max()) + 1 if ranks.len() else 1  # type: ignore[operator]
    runs = _bench_rows(bench_runs)
    marked = _marks(marks)
    if marked:
        decode = _inside_marks(decode, marked)
        if not decode.height:
            return pl.DataFrame(schema=PHASES)
    else:
        pauses = _pauses(decode, prefill["ts"])
        breaks = _phase_breaks(pauses, gap_s, None)
        if runs and gap_s is None and sum(breaks) + 1 < len(runs):
            breaks = _phase_breaks(pauses, None, len(runs))
        decode = decode.with_columns(_phase=pl.Series(breaks).cum_sum().cast(_I))
    interval = (pl.col("ts").diff().dt.total_milliseconds() / 1000.0).over("_phase")
    window = pl.coalesce(interval, interval.median().over("_phase"), pl.lit(0.0))
    made = (pl.col("gen_tok_s").cast(_F).fill_null(0.0) * window).cum_sum().over("_phase")
    spans = (
        decode.group_by("_phase")
        .agg(
            start=pl.col("ts").min(),
            end=pl.col("ts").max(),
            decode_lines=pl.len(),
            peak_token=pl.col("token").max(),
            peak_prompts=(pl.col("token").cast(_F) - made).max(),
            peak_req=pl.col("running_req").max(),
            queued=(pl.col("queue_req").fill_null(0) > 0).any(),
        )
        .sort("_phase")
    )
    rows = []
    previous_end = None
    for i, span in enumerate(spans.iter_rows(named=True)):
        # The burst that starts a phase is prefilled just before its first decode line; older
        # prefill lines (a warm-up request minutes earlier) say nothing about its prompts.
        lookback = span["start"] - timedelta(seconds=PREFILL_LOOKBACK_S)
        window = prefill.filter(pl.col("ts").is_between(lookback, span["end"]))
        if previous_end is not None:
            window = window.filter(pl.col("ts") > previous_end)
        window = window.filter(pl.col("ts") >= _burst_start(window["ts"], span["start"]))
        previous_end = span["end"]
        rows.append(
            {
                "phase": i,
                "start": span["start"],
                "end": span["end"],
                "decode_lines": span["decode_lines"],
                "_peak_token": span["peak_token"],
                "_peak": span["peak_req"] if pp_size <= 1 else None,
                "_prompts": span["peak_prompts"],
                "_queued": bool(span["queued"]),
                "_prompt": prompt_length(window, chunked_prefill_size),
                "_mark": span["_phase"],
            }
        )
    placed = _place_marked(rows, runs, marked) if marked else _place(rows, runs)
    out = []
    for row in rows:
        b = placed.get(row["phase"], {})
        isl, isl_from = b.get("input_len"), "benchmark"
        if isl is None:
            isl, isl_from = row["_prompt"], "prefill lines"
        osl = b.get("output_len")
        peak = _peak_running(row, isl, osl)
        offered = b.get("offered")
        fit = peak / offered if peak is not None and offered else None
        low = QUEUED_FLOOR if row["_queued"] else PLACEMENT_RANGE[0]
        ok = bool(marked) or (fit is not None and low <= fit <= PLACEMENT_RANGE[1])
        out.append(
            {
                "phase": row["phase"],
                "start": row["start"],
                "end": row["end"],
                "decode_lines": row["decode_lines"],
                "offered": offered if ok or (offered and fit is None) else None,
                "input_len": isl,
                "output_len": osl,
                "input_len_from": isl_from if isl is not None else None,
                "bench_tok_s": b.get("output_tok_s") if ok or fit is None else None,
                "bench_tpot_ms": b.get("tpot_ms") if ok or fit is None else None,
                "bench_run": b.get("order"),
                "peak_running": peak,
                "placement": fit,
                "placed": bool(b) and (ok or fit is None),
            }
        )
    return pl.DataFrame(out, schema=PHASES, orient="row")


def _burst_start(prefill_ts: pl.Series, start: datetime) -> datetime:
    """The first Prefill line of the burst that led into a phase starting at ``start``: the
    lines before its first decode line back to a pause of ``BURST_GAP_S`` without any (a
    request decoded alone before the run, such as SGLang's warm-up, is not the run's)."""
    before = sorted(t for t in prefill_ts.to_list() if t is not None and t < start)
    first = start
    for t in reversed(before):
        if first is not start and (first - t).total_seconds() > BURST_GAP_S:
            break
        first = t
    return first


def _peak_running(phase: dict[str, Any], isl: float | None, osl: float | None) -> float | None:
    """Requests in flight at a phase's peak: the largest whole batch when lines show one, else
    the prompt tokens ``#token`` holds over the prompt length, never below what ``#token``
    holds with every request at its full length."""
    if phase["_peak"] is not None:
        return float(phase["_peak"])
    token = phase["_peak_token"]
    if token is None or not isl or isl <= 0:
        return None
    # Without an output length nothing bounds it from below: every request could be at its end.
    floor = float(token) / (isl + osl) if osl else 0.0
    prompts = phase["_prompts"]
    if prompts is None or not math.isfinite(prompts):
        return floor or None
    return max(floor, min(float(prompts), float(token)) / isl)


def _marks(marks: pl.DataFrame | None) -> list[dict[str, Any]]:
    """The phase file's phases in time order."""
    if marks is None or not marks.height:
        return []
    rows = marks.filter(pl.col("start").is_not_null() & pl.col("end").is_not_null())
    return rows.sort("start").to_dicts()


def _inside_marks(decode: pl.DataFrame, marks: list[dict[str, Any]]) -> pl.DataFrame:
    """Decode lines within a mark's times, ``_phase`` the mark's index; the others dropped."""
    ts = decode["ts"].drop_nulls()
    whole = ts.len() > 0 and ts.dt.millisecond().max() == 0  # SGLang without SGLANG_LOG_MS
    slack = timedelta(seconds=MARK_SLACK_S)

    def cut(t: datetime) -> datetime:
        return t.replace(microsecond=0) if whole else t

    starts, ends = [cut(m["start"]) - slack for m in marks], [cut(m["end"]) for m in marks]
    for k in range(1, len(marks)):
        starts[k] = max(starts[k], ends[k - 1] + timedelta(milliseconds=1))
    bounds = pl.DataFrame(
        {"_from": starts, "_to": [e + slack for e in ends], "_phase": list(range(len(marks)))},
        schema={"_from": decode["ts"].dtype, "_to": decode["ts"].dtype, "_phase": _I},
    ).sort("_from")
    lines = decode.filter(pl.col("ts").is_not_null()).join_asof(
        bounds, left_on="ts", right_on="_from", strategy="backward"
    )
    return lines.filter(pl.col("ts") <= pl.col("_to")).drop("_from", "_to")


def _place_marked(
    phases: list[dict[str, Any]], runs: list[dict[str, Any]], marks: list[dict[str, Any]]
) -> dict[int, dict]:
    """Each phase's run by the phase file: the marks take the benchmark runs in order, each
    the next run of its concurrency (a mark that added no result takes none); a mark without
    a run still states the load it offered."""
    unused = list(runs)
    of_mark: list[dict[str, Any]] = []
    for mark in marks:
        run = None
        if mark.get("results") != 0:
            run = next((r for r in unused if r["offered"] == mark["concurrency"]), None)
            if run is None:
                run = next((r for r in unused if r["offered"] is None), None)
        if run is not None:
            unused.remove(run)
            run = run if run["offered"] is not None else {**run, "offered": mark["concurrency"]}
        of_mark.append(run or {"order": None, "offered": mark["concurrency"]})
    return {p["phase"]: of_mark[p["_mark"]] for p in phases}


def _bench_rows(runs: pl.DataFrame | None) -> list[dict[str, Any]]:
    """The benchmark runs in the order they ran, with what a phase needs of each."""
    if runs is None or not runs.height:
        return []
    order = [c for c in ("ts", "entry", "run") if c in runs.columns]
    runs = runs.sort(order, nulls_last=True) if order else runs
    concurrency = "max_concurrency" if "max_concurrency" in runs.columns else "concurrency"
    return [
        {
            "order": i,
            "offered": _whole(r.get(concurrency) or r.get("concurrency")),
            "input_len": r.get("input_len"),
            "output_len": r.get("output_len"),
            "output_tok_s": r.get("output_tok_s"),
            "tpot_ms": r.get("tpot_median_ms") or r.get("tpot_mean_ms"),
        }
        for i, r in enumerate(runs.iter_rows(named=True))
    ]


def _place(phases: list[dict[str, Any]], runs: list[dict[str, Any]]) -> dict[int, dict]:
    """Runs matched to phases in order, by the alignment whose counts fit best.

    Each pairing costs ``|log(peak running / offered)|`` (more running than offered costs double: a
    run cannot have more in flight than it offered; fewer costs a quarter when requests queued in
    the phase, for a cap or a full KV pool holds them back); a phase or run left unmatched costs a
    fixed ``SKIP``. Without any count to compare, runs go to phases in order when their numbers
    agree, and a single concurrency goes to every phase.
    """
    if not runs:
        return {}
    n, m = len(phases), len(runs)
    if all(p["_peak_token"] is None and p["_peak"] is None for p in phases):
        if n == m:
            return {p["phase"]: r for p, r in zip(phases, runs, strict=True)}
        if len({r["offered"] for r in runs}) == 1:
            return {p["phase"]: runs[0] for p in phases}
        return {}

    def cost(p: dict[str, Any], r: dict[str, Any]) -> float:
        isl = r.get("input_len") or p["_prompt"]
        peak = _peak_running(p, isl, r.get("output_len"))
        if peak is None or not r["offered"] or peak <= 0:
            return SKIP  # nothing to judge by: as good as leaving it unmatched
        ratio = peak / r["offered"]
        if ratio > 1:
            return 2.0 * math.log(ratio)
        return -math.log(ratio) * (QUEUED_WEIGHT if p["_queued"] else 1.0)

    # best[i][j]: least cost aligning the first i phases with the first j runs
    best = [[math.inf] * (m + 1) for _ in range(n + 1)]
    step: dict[tuple[int, int], tuple[int, int]] = {}
    best[0][0] = 0.0
    for i in range(n + 1):
        for j in range(m + 1):
            here = best[i][j]
            if here == math.inf:
                continue
            for di, dj, extra in ((1, 1, None), (1, 0, SKIP), (0, 1, SKIP)):
                a, b = i + di, j + dj
                if a > n or b > m:
                    continue
                c = here + (cost(phases[i], runs[j]) if extra is None else extra)
                if c < best[a][b] - 1e-12:
                    best[a][b] = c
                    step[(a, b)] = (i, j)
    out: dict[int, dict] = {}
    i, j = n, m
    while (i, j) != (0, 0):
        pi, pj = step[(i, j)]
        if i - pi == 1 and j - pj == 1:
            out[phases[pi]["phase"]] = runs[pj]
        i, j = pi, pj
    return out


SKIP = 1.0
"""Cost of leaving a phase or a run unmatched: as bad as a count off by a factor e."""


def _idle_gaps(decode_ts: pl.Series, prefill_ts: pl.Series) -> pl.Series:
    """For each decode line (in time order), the longest stretch without any line, decode or
    prefill, since the decode line before it; null for the first.

    Decoding pauses while a new wave of long prompts prefills, but the server is busy and logs
    a line per prefill pass: only a stretch with no line at all is a pause between runs.
    """
    lines = pl.concat(
        [
            pl.DataFrame({"ts": decode_ts, "decode": True}),
            pl.DataFrame({"ts": prefill_ts.cast(decode_ts.dtype), "decode": False}),
        ]
    ).sort("ts", "decode", descending=[False, True], maintain_order=True)
    lines = lines.with_columns(
        gap=pl.col("ts").diff().dt.total_milliseconds() / 1000.0,
        group=pl.col("decode").cast(pl.Int64).cum_sum() - pl.col("decode").cast(pl.Int64),
    )
    longest = lines.group_by("group").agg(pl.col("gap").max())
    index = pl.DataFrame({"group": range(decode_ts.len())}, schema={"group": pl.Int64})
    gaps = index.join(longest.cast({"group": pl.Int64}), on="group", how="left").sort("group")
    first = pl.Series([None], dtype=pl.Float64)
    return pl.concat([first, gaps["gap"].slice(1).cast(pl.Float64)]).alias("gap")


def _pauses(decode: pl.DataFrame, prefill_ts: pl.Series) -> pl.Series:
    """For each decode line (in time order), the pause since the decode line before it that
    could separate two runs; null where it cannot.

    Two kinds of pause belong to one run: one after a line showing requests waiting (they are
    admitted after it, as when a full KV pool re-prefills its queue), and one the server spent
    prefilling a new wave of long prompts, logging a line per pass (``_idle_gaps``: under
    ``MIN_PHASE_GAP_S`` without any line, and under half the pause).
    """
    gaps = decode["ts"].diff().dt.total_milliseconds() / 1000.0
    idle = _idle_gaps(decode["ts"], prefill_ts)
    waiting = (decode["queue_req"].fill_null(0) > 0).shift(1).fill_null(False)
    busy = (idle < MIN_PHASE_GAP_S) & (idle < 0.5 * gaps)
    frame = pl.DataFrame({"gap": gaps, "waiting": waiting, "busy": busy.fill_null(False)})
    cut = pl.col("waiting") | pl.col("busy")
    return frame.select(pl.when(cut).then(None).otherwise(pl.col("gap")).alias("gap")).to_series()


def _phase_breaks(gaps: pl.Series, gap_s: float | None, runs: int | None) -> list[bool]:
    """For each decode line: does a new phase start there? ``gaps`` are ``_pauses``."""
    if gap_s is not None:
        return (gaps > gap_s).fill_null(False).to_list()
    # How outstanding a pause is: over the line cadence on both sides of it. The line after a
    # pause closes a window that holds the rest of the old phase's cadence, the pause and the
    # start of the new phase's cadence, so the two typical intervals add up (a slow phase, e.g.
    # one busy PP slot with a long --decode-log-interval, next to a fast one).
    frame = pl.DataFrame(gaps).with_columns(
        before=pl.col("gap").shift(1).rolling_median(3, min_samples=1),
        after=pl.col("gap").reverse().shift(1).rolling_median(3, min_samples=1).reverse(),
    )
    before = pl.coalesce("before", "after").fill_null(0.0)
    after = pl.coalesce("after", "before").fill_null(0.0)
    cadence = before + after
    frame = frame.with_columns(
        score=pl.when(cadence > 0).then(pl.col("gap") / cadence).otherwise(float("inf")),
        index=pl.int_range(pl.len()),
    )
    candidates = frame.filter(pl.col("gap") >= MIN_PHASE_GAP_S)
    if runs is not None and runs > 1 and candidates.height >= runs - 1:
        chosen = candidates.sort("score", descending=True, maintain_order=True).head(runs - 1)
    else:
        # Unguided, a refill of a closed-loop benchmark (all requests finish together, the next
        # wave prefills) pauses the lines for a second or two: not a new phase.
        chosen = candidates.filter(
            (pl.col("gap") >= UNGUIDED_GAP_S) & (pl.col("score") >= PAUSE_SCORE)
        )
    starts = set(chosen["index"].to_list())
    return [i in starts for i in range(frame.height)]


def _whole(x: object) -> int | None:
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, int):
        return x
    if isinstance(x, float) and math.isfinite(x):
        return round(x)
    return None
