"""The sections of a postmortem, one function per question: runs in, a ``View`` out.

Notebooks call these and nothing else, so a cell is one line; widgets call them again with the
controls' values. A section computes with the analyses of ``toolkit.analyze`` (through the
runs' shared ``RunAnalysis``) and draws with ``toolkit.chart``; it degrades to a note when its
input is missing ("no GPU trace in this run") instead of failing. Text from a log or a config
is HTML-escaped and, unless ``--no-redact``, stripped of secrets.

``load_runs`` and ``RunSet`` (``report_runs``) and ``View`` (``report_view``) are re-exported,
so a notebook needs this one module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from toolkit.analyze.config import config_diff as diff_launches
from toolkit.analyze.model import expected_vs_observed, fit, what_if_table
from toolkit.analyze.scaling import crossover, frontier, knee, scaling_gap, scaling_table
from toolkit.analyze.series import downsample_means, epoch_ms, since_first, thin
from toolkit.analyze.timeline import (
    in_window,
    span_minutes,
    stage_frame,
    stage_names,
    time_span,
)
from toolkit.chart.config import config_diff_chart
from toolkit.chart.cudagraph import graph_coverage_chart
from toolkit.chart.gpu import gpu_metric_chart
from toolkit.chart.kv import kv_pressure_chart
from toolkit.chart.model import model_chart, what_if_chart
from toolkit.chart.occupancy import occupancy_chart
from toolkit.chart.scaling import efficiency_chart, frontier_chart, latency_chart, throughput_chart
from toolkit.chart.timeline import stage_strips_chart
from toolkit.diagnose import diagnose
from toolkit.errors import ToolkitError
from toolkit.load.gpu.trace import gpu_roles
from toolkit.load.run import Run
from toolkit.report.context import in_report, provenance_record, redacting
from toolkit.report.provenance import provenance, provenance_html
from toolkit.report.redact import REDACTED, escape, is_secret_key, redact_text
from toolkit.report.runs import RunSet, load_runs, resolve_run_dir
from toolkit.report.view import (
    STYLE,
    View,
    clean,
    clean_frame,
    jsonable,
    note,
    para,
    table_html,
)
from toolkit.schema.bench import METRIC_GLOSSARY
from toolkit.schema.sglang import BATCH_FIELDS

__all__ = [
    "MAX_POINTS",
    "STYLE",
    "RunSet",
    "View",
    "config_diff",
    "cuda_graphs",
    "efficiency",
    "findings",
    "frontier_view",
    "glossary",
    "gpu_extent",
    "gpu_metrics",
    "header",
    "kv_pressure",
    "latency",
    "load_runs",
    "log_excerpts",
    "model",
    "note",
    "occupancy",
    "provenance_view",
    "resolve_run_dir",
    "scaling",
    "setup",
    "stage_timeline",
    "table_html",
    "thin",
    "timeline_extent",
    "what_if",
]

_FLOAT = pl.Float64()
MAX_POINTS = 20_000
"""Most data points one chart may carry; longer series are bucketed (means) to fit."""

# ── header ───────────────────────────────────────────────────────────────────────────────────


def _sglang_version(run: Run) -> str | None:
    launch = run.launch
    if launch is None:
        return None
    # SGLang does not print its version in the server log; a loader that finds it elsewhere
    # (a banner, pip freeze) reports it as a startup fact
    for key in ("sglang_version", "version"):
        value = launch.facts().get(key)
        if isinstance(value, str | int | float):
            return str(value)
    return None


def _gpus(runs: RunSet, run: Run) -> int | None:
    trace = runs.gpu(run)
    if trace is not None:
        return int(trace.samples.select(pl.struct("host", "gpu").n_unique()).item())
    return run.layout.gpus if run.layout.known else None


def header(runs: RunSet) -> View:
    """Which runs, on what hardware and interconnect, which SGLang; a banner for synthetic data."""
    rows = []
    for run, label, given in zip(runs, runs.labels, runs.paths, strict=True):
        topo = runs.topology(run)
        interconnect = run.config.interconnect or (topo.interconnect if topo else None)
        span = None
        if run.log is not None and run.log.batches.height:
            ts = run.log.batches["ts"].drop_nulls()
            if ts.len():
                span = f"{ts.min()} – {ts.max()}"
        model_path = run.launch.server_args.get("model_path") if run.launch else None
        rows.append(
            {
                "run": label,
                "directory": given,
                "layout": run.layout.describe(),
                "layout from": run.layout.layout_from,
                "hardware": run.config.hardware,
                "interconnect": interconnect
                + (" (from topology)" if topo and not run.config.interconnect else "")
                if interconnect
                else None,
                "GPUs": _gpus(runs, run),
                "SGLang": _sglang_version(run) or "not in the log",
                "model": clean(Path(str(model_path)).name) if model_path else None,
                "log span": span,
                "synthetic": run.config.synthetic,
            }
        )
    frame = pl.DataFrame(rows, infer_schema_length=None)
    notes = [(label, run.config.notes) for run, label in zip(runs, runs.labels, strict=True)]
    items: list[Any] = [STYLE]
    synthetic = [r["run"] for r in rows if r["synthetic"]]
    if synthetic:
        items.append(
            '<div class="ppscope-banner">Synthetic data: '
            f"{escape(', '.join(synthetic))} "
            f"{'was' if len(synthetic) == 1 else 'were'} generated, not measured. "
            "Numbers illustrate the method; they describe no real machine.</div>"
        )
    hardware = sorted({r["hardware"] for r in rows if r["hardware"]})
    link = sorted({r["interconnect"].split(" ")[0] for r in rows if r["interconnect"]})
    items.append(
        para(
            f"{', '.join(runs.labels)}"
            + (f" on {', '.join(hardware)}" if hardware else "")
            + (f" ({', '.join(link)})" if link else "")
            + "."
        )
    )
    items.append(frame.drop("synthetic"))
    for label, text in notes:
        if text:
            items.append(
                f"<details><summary>notes on {escape(label)} (run.toml)</summary>"
                f"<p>{escape(clean(text))}</p></details>"
            )
    records = [
        r | {"notes": clean(t) if t else None} for r, (_, t) in zip(rows, notes, strict=True)
    ]
    return View("header", items, {"runs": records})


# ── findings ─────────────────────────────────────────────────────────────────────────────────

_SEVERITY = {"high": 1, "medium": 2, "low": 3, "info": 4}


def _severity_rank(finding: Any) -> int:
    return _SEVERITY.get(str(getattr(finding, "severity", "")).lower(), 5)


def _titled(chart: alt.TopLevelMixin, label: str) -> alt.TopLevelMixin:
    """A chart of one run, its title prefixed with the run's label (sections show several)."""
    title = chart.to_dict(validate=False).get("title")
    if isinstance(title, dict) and "text" in title:
        text = f"{label}: {title['text']}"
        return chart.properties(title=alt.TitleParams(**{**title, "text": text}))
    if isinstance(title, str):
        return chart.properties(title=f"{label}: {title}")
    return chart.properties(title=label)


def findings(runs: RunSet, *, evidence_rows: int = 12) -> View:
    """The diagnosis: findings ranked by severity, each with its evidence and remedy."""
    found = diagnose(runs.analyses)
    if not found:
        return View(
            "findings",
            [para("No rule found a cause: every hypothesis checked came out clear.")],
            {"findings": []},
        )
    items: list[Any] = [STYLE]
    records = []
    for f in found:
        table = clean_frame(f.evidence) if isinstance(f.evidence, pl.DataFrame) else None
        run = f" ({f.run})" if f.run else ""
        items.append(
            f'<div class="ppscope-finding sev-{_severity_rank(f)}">'
            f"<h3>{escape(f.severity.upper())}{escape(run)}: {escape(clean(f.title))} "
            f"<code>{escape(f.id)}</code></h3>"
            f"<p>{escape(clean(f.summary))}</p>"
            f"<p><b>Remedy:</b> {escape(clean(f.remedy))}</p>"
        )
        if table is not None and table.height:
            items.append(table.head(evidence_rows))
        items.append("</div>")
        if isinstance(f.chart, alt.TopLevelMixin):
            items.append(f.chart)
        record = f.to_dict()
        for key in ("title", "summary", "remedy"):
            record[key] = clean(record[key])
        if redacting() and table is not None:
            record["evidence"] = jsonable(table)
        records.append(record)
    return View("findings", items, {"findings": records})


# ── scaling and the model ────────────────────────────────────────────────────────────────────


def _no_bench(key: str) -> View:
    return View(key, [note("No benchmark results in these runs: nothing to compare.")], {key: None})


def scaling(runs: RunSet, a: str = "", b: str = "") -> View:
    """Throughput against concurrency per layout and the gap between ``a`` and ``b``.

    ``a`` and ``b`` default to the first two layouts with throughput data.
    """
    bench = runs.bench()
    if bench is None:
        return _no_bench("gap")
    table = scaling_table(bench)
    if not table.height:
        return View("gap", [note("No run has both a concurrency and an output tok/s.")])
    labels = table["label"].unique(maintain_order=True).to_list()
    a = a or labels[0]
    b = b or next((x for x in labels if x != a), "")
    gap = scaling_gap(bench, a, b) if b else None
    items: list[Any] = [throughput_chart(table, gap)]
    record: dict[str, Any] = {
        "scaling": table.select(
            "label", "concurrency", "n_runs", "output_tok_s", "efficiency"
        ).to_dicts(),
        "gap": None,
        "knee": knee(table),
    }
    if gap is not None:
        shown = gap.select(
            "concurrency", "a_tok_s", "b_tok_s", "ratio", "leader", "advantage"
        ).rename({"a_tok_s": f"{a} tok/s", "b_tok_s": f"{b} tok/s", "ratio": f"{a}/{b}"})
        items.append(shown)
        record["gap"] = gap.to_dicts()
        record["crossover"] = crossover(gap)
    else:
        items.append(note("Only one layout has throughput data: no gap to show."))
    return View("gap", items, record)


def efficiency(runs: RunSet, threshold: float = 0.5) -> View:
    """Scaling efficiency per layout (1 = linear) with the knee threshold."""
    bench = runs.bench()
    if bench is None:
        return _no_bench("efficiency")
    table = scaling_table(bench)
    return View(
        "efficiency", [efficiency_chart(table, threshold)], {"knee": knee(table, threshold)}
    )


def latency(runs: RunSet, metric: str = "tpot_median_ms") -> View:
    """One latency (TPOT, TTFT, ITL, E2E) against concurrency per layout."""
    bench = runs.bench()
    if bench is None:
        return _no_bench("latency")
    table = scaling_table(bench)
    if table[metric].is_null().all():
        return View("latency", [note(f"No {metric} in these benchmark results.")])
    return View("latency", [latency_chart(table, metric)])


def frontier_view(runs: RunSet) -> View:
    """Throughput against per-token latency: the trade-off each layout offers."""
    bench = runs.bench()
    if bench is None:
        return _no_bench("frontier")
    points = frontier(bench)
    if not points.height:
        return View("frontier", [note("No per-token latency in these results: no frontier.")])
    return View("frontier", [frontier_chart(points)])


def model(runs: RunSet) -> View:
    """The serving model fitted to the runs: expected against observed tok/s, and residuals."""
    observed = runs.observed()
    if observed is None or not observed.height:
        return _no_bench("model")
    try:
        fitted = fit(observed)
        points = expected_vs_observed(fitted, observed)
    except ToolkitError as e:
        return View("model", [note(f"The model cannot be fitted to these runs: {e}")])
    shown = points.select(
        "label",
        "concurrency",
        "observed_tok_s",
        "expected_tok_s",
        "residual_pct",
        "occupancy",
        "gpu_idle_share",
        "regime",
        "unexplained_round_ms",
        "calibration",
    )
    items: list[Any] = [model_chart(points), shown]
    return View("model", items, {"model": {"params": fitted.summary(), "points": shown}})


def what_if(runs: RunSet, changes: Mapping[str, int | None]) -> View:
    """The model's prediction for every measured point under changed flags or workload."""
    observed = runs.observed()
    if observed is None or not observed.height:
        return _no_bench("what_if")
    changes = dict(changes)
    if not changes:
        return View("what_if", [note("No change chosen: move a slider to ask the model.")])
    try:
        fitted = fit(observed)
        table = what_if_table(fitted, observed, changes)
    except ToolkitError as e:
        return View("what_if", [note(f"The model cannot answer: {e}")])
    text = ", ".join(f"{k}={'auto' if v is None else v}" for k, v in changes.items())
    shown = table.select(
        "label",
        "base_concurrency",
        "concurrency",
        "expected_tok_s",
        "what_if_tok_s",
        "change_pct",
        "occupancy",
        "regime",
    )
    return View(
        "what_if",
        [what_if_chart(table, text), shown],
        {"what_if": {"changes": changes, "points": shown}},
    )


# ── log-derived views ────────────────────────────────────────────────────────────────────────


def occupancy(runs: RunSet, max_points: int = MAX_POINTS) -> View:
    """Per pipeline-parallel run: requests offered, running and per slot, and the slots they
    fill against the stages (``analyze.occupancy``), phase by phase."""
    items: list[Any] = []
    records = []
    for run, label in zip(runs, runs.labels, strict=True):
        ctx = runs.analysis(run)
        if ctx.pp <= 1:
            continue
        if not ctx.occupancy.height:
            items.append(note(f"{label}: no Decode batch lines to estimate occupancy from."))
            continue
        # the chart draws every row in two panels
        items.append(_titled(occupancy_chart(thin(ctx.occupancy, max_points // 2)), label))
        summary = ctx.phase_summary
        records.append({"run": label, "phases": summary})
        if summary.height:
            items.append(summary)
    if not items:
        items.append(note("No pipeline-parallel run here: every request shares one batch."))
    return View("occupancy", items, {"occupancy": records})


def _pp_size(run: Run) -> int | None:
    """The run's pipeline stages (1 without PP), None when its layout is unknown."""
    return run.layout.pp if run.layout.known else None


def _frames(runs: RunSet, run: Run) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """The run's batch lines and GPU samples (None when missing)."""
    trace = runs.gpu(run)
    batches = run.log.batches if run.log is not None else None
    return batches, trace.samples if trace is not None else None


def timeline_extent(runs: RunSet, run: str | None = None) -> tuple[float, list[str]]:
    """Minutes the run's stage timeline spans, and its stages in order (for widget ranges)."""
    chosen = pick_run(runs, run)
    batches, samples = _frames(runs, chosen)
    span = time_span(batches, samples)
    if span is None:
        return 0.0, []
    gpus = sorted(gpu_labels(runs, chosen)) if samples is not None else None
    return span_minutes(span), stage_names(batches, gpus, _pp_size(chosen))


def gpu_extent(runs: RunSet, run: str | None = None) -> tuple[float, list[str], list[str]]:
    """Minutes the run spans (log and trace), its GPU labels and the trace's metrics."""
    chosen = pick_run(runs, run)
    trace = runs.gpu(chosen)
    span = time_span(*_frames(runs, chosen))
    if trace is None or span is None:
        return 0.0, [], []
    names = gpu_labels(runs, chosen)
    return span_minutes(span), [names[g] for g in sorted(names)], trace.metrics


def pick_run(runs: RunSet, run: str | None) -> Run:
    """The named run, else the first pipeline-parallel run with a log, else the first run."""
    if run:
        return runs.get(run)
    for r in runs:
        if r.log is not None and r.layout.pp > 1:
            return r
    return next((r for r in runs if r.log is not None), runs.runs[0])


def stage_timeline(
    runs: RunSet,
    run: str | None = None,
    *,
    window: tuple[float, float] | None = None,
    stages: Sequence[str] | None = None,
    max_points: int = MAX_POINTS,
) -> View:
    """Per-stage decode activity and GPU busy (SM active, else utilization) of one run over time.

    Parameters
    ----------
    run
        Run label; default the first PP run.
    window
        (start, end) in minutes from the run's first line or sample; default everything.
    stages
        Stages to show (``PP0``...); default all.
    max_points
        Most cells the chart carries; time buckets widen to fit.
    """
    chosen = pick_run(runs, run)
    label = runs.label_of(chosen)
    pp_size = _pp_size(chosen)
    roles = gpu_roles(chosen.launch) if chosen.launch is not None and (pp_size or 1) > 1 else None
    batches, samples = _frames(runs, chosen)
    long, order = stage_frame(
        batches, samples, roles, pp_size, window=window, max_points=max_points
    )
    if stages:
        wanted = set(stages)
        long = long.filter(pl.col("stage").is_in(wanted) | (pl.col("series") == "gen_tok_s"))
        order = [s for s in order if s in wanted]
    if not long.height:
        text = "nothing in the chosen window" if window else "no Decode batch lines, no GPU trace"
        return View("stage_timeline", [note(f"{label}: {text}: no stage timeline.")])
    long, width = downsample_means(long, ["stage", "series"], ["value"], max_points)
    if not width:  # not bucketed: cells as wide as the typical gap between lines
        times = long["t"].unique().sort()
        width = int(times.diff().median() or 1_000) if times.len() > 1 else 1_000
    items: list[Any] = []
    if runs.gpu(chosen) is None:
        items.append(note(f"No GPU trace in {label}: the stage view shows the log only."))
    items.append(stage_strips_chart(long, width, run=label, stages=order))
    summary = (
        long.filter(pl.col("series") != "gen_tok_s")
        .group_by("stage", "series")
        .agg(pl.col("value").mean().alias("mean"))
        .pivot(on="series", index="stage", values="mean")
    )
    summary = summary.sort(pl.col("stage").replace_strict(_ranks(order), return_dtype=pl.Int64))
    return View("stage_timeline", items, {"stage_timeline": {"run": label, "stages": summary}})


def _ranks(order: Sequence[str]) -> dict[str, int]:
    return {name: i for i, name in enumerate(order)}


def gpu_metrics(
    runs: RunSet,
    run: str | None = None,
    *,
    metric: str = "util_pct",
    gpus: Sequence[str] | None = None,
    window: tuple[float, float] | None = None,
    max_points: int = MAX_POINTS,
) -> View:
    """One GPU metric of one run over time, a line per GPU labelled by its pipeline stage.

    ``window`` is (start, end) in minutes from the run's first line or sample.
    """
    chosen = pick_run(runs, run)
    label = runs.label_of(chosen)
    trace = runs.gpu(chosen)
    span = time_span(*_frames(runs, chosen))
    if trace is None or span is None:
        return View("gpu", [note(f"No GPU trace in {label}.")], {"gpu": None})
    if metric not in trace.metrics:
        have = ", ".join(trace.metrics)
        return View("gpu", [note(f"{label}: the trace has no {metric} (it has {have}).")])
    names = gpu_labels(runs, chosen)
    frame = trace.samples.select(epoch_ms(), "gpu", pl.col(metric).cast(_FLOAT).alias("value"))
    keep = pl.col("t").is_not_null() & pl.col("value").is_not_null() & in_window(span, window)
    if gpus:
        keep &= pl.col("gpu").is_in([g for g, n in names.items() if n in set(gpus)])
    frame = frame.filter(keep)
    if not frame.height:
        return View("gpu", [note(f"{label}: no samples in the chosen window or GPUs.")])
    frame, _ = downsample_means(frame, ["gpu"], ["value"], max_points)
    frame = frame.sort("gpu", "t").with_columns(
        pl.col("gpu").replace_strict(names, default=None, return_dtype=pl.String)
    )
    summary = frame.group_by("gpu", maintain_order=True).agg(
        pl.col("value").mean().alias("mean"), pl.col("value").max().alias("max")
    )
    chart = gpu_metric_chart(frame.select("t", "gpu", "value"), metric, run=label)
    return View("gpu", [chart], {"gpu": {"run": label, "metric": metric, "gpus": summary}})


def gpu_labels(runs: RunSet, run: Run) -> dict[int, str]:
    """GPU index → ``PP3 (GPU 3)`` from the launch's layout, else ``GPU 3``."""
    trace = runs.gpu(run)
    indices = sorted(trace.samples["gpu"].drop_nulls().unique().to_list()) if trace else []
    names = {g: f"GPU {g}" for g in indices}
    if run.launch is not None:
        try:
            roles = gpu_roles(run.launch)
        except ToolkitError:
            return names
        if run.layout.pp > 1:
            names |= dict(zip(roles["gpu"].to_list(), roles["label"].to_list(), strict=True))
    return names


def cuda_graphs(runs: RunSet) -> View:
    """Per run: decode lines by batch size, on a captured CUDA graph or eager, against the
    capture list (``analyze.cudagraph``)."""
    items: list[Any] = []
    records = []
    for run, label in zip(runs, runs.labels, strict=True):
        ctx = runs.analysis(run)
        coverage = ctx.coverage
        if not coverage.height:
            continue
        summary = ctx.graphs
        items.append(_titled(graph_coverage_chart(coverage, summary.get("max_captured")), label))
        records.append({"run": label, **summary})
    if not records:
        text = "These logs do not say whether decode ran on CUDA graphs (SGLang ≥ 0.4.6 does)."
        return View("cuda_graph", [note(text)], {"cuda_graph": records})
    return View("cuda_graph", items, {"cuda_graph": records})


def kv_pressure(runs: RunSet, threshold: float = 0.9, max_points: int = MAX_POINTS) -> View:
    """KV pool usage over time per run, and the retractions a full pool caused
    (``analyze.kv``)."""
    frames, records = [], []
    for run, label in zip(runs, runs.labels, strict=True):
        kv = runs.analysis(run).kv.filter(
            pl.col("ts").is_not_null() & pl.col("token_usage").is_not_null()
        )
        if not kv.height:
            continue
        frames.append(
            since_first(kv.select(epoch_ms(), pl.lit(label).alias("label"), "token_usage"))
        )
        records.append(
            {
                "run": label,
                "peak_usage": kv["token_usage"].max(),
                "mean_usage": kv["token_usage"].mean(),
                "retractions": int(kv["retracted"].fill_null(0).sum()),
                "lines_blocked_by_tokens": int(kv["blocked_by_tokens"].fill_null(False).sum()),
                "max_total_num_tokens": run.layout.max_total_num_tokens,
            }
        )
    if not frames:
        return View("kv", [note("No KV usage (token usage) in these logs.")], {"kv": records})
    data, _ = downsample_means(pl.concat(frames), ["label"], ["token_usage"], max_points)
    table = pl.DataFrame(records, infer_schema_length=None)
    return View("kv", [kv_pressure_chart(data, threshold), table], {"kv": records})


# ── config ───────────────────────────────────────────────────────────────────────────────────


def _redacted_diff(diff: pl.DataFrame) -> pl.DataFrame:
    """The diff with secret settings' values replaced and every value's text redacted."""
    if not redacting() or not diff.height:
        return diff
    secret = pl.col("key").map_elements(is_secret_key, return_dtype=pl.Boolean)
    value = pl.col("value").map_elements(redact_text, return_dtype=pl.String)
    shown = pl.col("value").is_not_null() & (pl.col("value") != "null")
    return diff.with_columns(
        value=pl.when(secret & shown).then(pl.lit(f'"{REDACTED}"')).otherwise(value)
    )


def config_diff(
    runs: RunSet,
    *,
    labels: Sequence[str] | None = None,
    only_different: bool = True,
    contains: str = "",
) -> View:
    """ServerArgs and the values SGLang derived from them, side by side (``analyze.config``).

    Parameters
    ----------
    labels
        Runs to compare (default all).
    only_different
        Only the settings the runs disagree on; else every performance setting too.
    contains
        Keep settings whose name contains this text.
    """
    chosen = [runs.get(lab) for lab in labels] if labels else list(runs)
    with_launch = [r for r in chosen if r.launch is not None]
    missing = [runs.label_of(r) for r in chosen if r.launch is None]
    items: list[Any] = []
    if missing:
        items.append(note(f"No ServerArgs dump for {', '.join(missing)}."))
    if not with_launch:
        items.append(note("No ServerArgs dump: nothing to compare."))
        return View("config", items)
    names = [runs.label_of(r) for r in with_launch]
    diff = diff_launches(
        *[r.launch for r in with_launch],
        labels=names,
        only_changed=only_different and len(with_launch) > 1,
    )
    if contains:
        diff = diff.filter(pl.col("key").str.contains(contains, literal=True))
    diff = _redacted_diff(diff)
    shown = diff.select("key", "group", "run", "value")
    if not diff.height:
        items.append(para("No setting differs" + (f" matching {contains!r}." if contains else ".")))
        return View("config", items, {"config_diff": shown})
    items.append(config_diff_chart(diff))
    return View("config", items, {"config_diff": shown})


# ── text sections ────────────────────────────────────────────────────────────────────────────


def log_excerpts(runs: RunSet, n: int = 12) -> View:
    """Warnings, errors and tracebacks of each log (first ``n``), escaped and redacted."""
    frames, counts = [], {}
    for run, label in zip(runs, runs.labels, strict=True):
        if run.log is None:
            continue
        errors = run.log.errors
        counts[label] = dict(errors.group_by("level").len().iter_rows())
        frames.append(
            errors.head(n).select(pl.lit(label).alias("run"), "lineno", "ts", "level", "summary")
        )
    if not frames or not sum(f.height for f in frames):
        return View(
            "log", [para("No warnings, errors or tracebacks in these logs.")], {"log": counts}
        )
    data = clean_frame(pl.concat(frames))
    return View("log", [data], {"log": counts})


def glossary() -> View:
    """What the metrics and log fields in this report mean."""
    rows = [
        {"name": m.name, "meaning": m.meaning, "where it comes from": m.tools}
        for m in METRIC_GLOSSARY
    ]
    wanted = {"running_req", "token", "token_usage", "cuda_graph", "gen_tok_s", "queue_req"}
    rows += [
        {"name": f.column, "meaning": f.doc, "where it comes from": f"`{f.key}` in batch lines"}
        for f in BATCH_FIELDS
        if f.column in wanted
    ]
    rows.append(
        {
            "name": "util_pct",
            "meaning": "share of time a kernel ran on the GPU; a NCCL kernel waiting for its "
            "pipeline peer counts as busy, so read it with power and SM clock",
            "where it comes from": "nvidia-smi utilization.gpu, dmon sm, DCGM GPU_UTIL",
        }
    )
    return View("glossary", [pl.DataFrame(rows)])


def provenance_view(runs: RunSet, params: Mapping[str, Any] | None = None) -> View:
    """Version, parameters and every input file with its size and sha256.

    In a batch render the record is the one ``render`` computed (inputs hashed once).
    """
    record = provenance_record() or provenance(
        runs.paths, dict(params) if params is not None else {"runs": ",".join(runs.paths)}
    )
    return View("provenance", [provenance_html(record)])


# ── setup ────────────────────────────────────────────────────────────────────────────────────

_shown_bundle = False


def setup() -> None:
    """Offline charts and the ppscope theme for this kernel.

    In a batch render the nbconvert template inlines the vega bundle once; in a live
    notebook it is shown here, once per kernel, so charts draw without network access.
    """
    global _shown_bundle
    from toolkit.chart import theme
    from toolkit.report import offline as report_render

    theme.enable()
    report_render.enable()
    if in_report() or _shown_bundle:
        return
    try:
        from IPython.display import HTML, display
    except ImportError:
        return
    display(HTML(STYLE + report_render.bundle_html()))
    _shown_bundle = True
