"""What the sections share: the chart budget, the run a view shows, a run's frames."""

from __future__ import annotations

import altair as alt
import polars as pl

from toolkit.analyze.headline import by_concurrency
from toolkit.analyze.series import epoch_ms
from toolkit.errors import ToolkitError
from toolkit.load.gpu.trace import gpu_roles
from toolkit.load.run import Run
from toolkit.report.runs import RunSet
from toolkit.report.view import (
    View,
    note,
)

__all__ = [
    "MAX_POINTS",
    "by_concurrency",
    "gpu_labels",
    "no_bench",
    "phase_labels",
    "pick_run",
    "pp_size_of",
    "run_frames",
    "titled",
]


MAX_POINTS = 20_000
"""Most data points one chart may carry; longer series are bucketed (means) to fit."""


def titled(chart: alt.TopLevelMixin, label: str) -> alt.TopLevelMixin:
    """A chart of one run, its title prefixed with the run's label (sections show several)."""
    title = chart.to_dict(validate=False).get("title")
    if isinstance(title, dict) and "text" in title:
        text = f"{label}: {title['text']}"
        return chart.properties(title=alt.TitleParams(**{**title, "text": text}))
    if isinstance(title, str):
        return chart.properties(title=f"{label}: {title}")
    return chart.properties(title=label)


def phase_labels(runs: RunSet, run: Run, times: pl.Series) -> pl.DataFrame | None:
    """Epoch ms (``t``) of each benchmark phase's first decode line and ``c=<concurrency>``
    (``label``), for the phases within the range of ``times`` (epoch ms or datetimes); None
    when the run's phases have no concurrency."""
    phases = runs.analysis(run).phases
    times = times.drop_nulls()
    if not phases.height or phases["offered"].is_null().all() or not times.len():
        return None
    if times.dtype.is_temporal():
        times = times.dt.epoch("ms")
    return (
        phases.filter(pl.col("offered").is_not_null())
        .select(epoch_ms("start"), pl.format("c={}", "offered").alias("label"))
        .filter(pl.col("t").is_between(times.min(), times.max()))
    )


def no_bench(key: str) -> View:
    return View(key, [note("No benchmark results in these runs: nothing to compare.")], {key: None})


def pp_size_of(run: Run) -> int | None:
    """The run's pipeline stages (1 without PP), None when its layout is unknown."""
    return run.layout.pp if run.layout.known else None


def run_frames(runs: RunSet, run: Run) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """The run's batch lines and GPU samples, each on its node (None when missing)."""
    trace = runs.gpu(run)
    batches = run.log.batches if run.log is not None else None
    return batches, run.node_samples if trace is not None else None


def pick_run(runs: RunSet, run: str | None) -> Run:
    """The named run, else the first pipeline-parallel run with a log, else the first run."""
    if run:
        return runs.get(run)
    for r in runs:
        if r.log is not None and r.layout.pp > 1:
            return r
    return next((r for r in runs if r.log is not None), runs.runs[0])


def gpu_labels(runs: RunSet, run: Run) -> dict[tuple[int | None, int], str]:
    """(node, GPU index) → ``PP3 (GPU 3)`` (``PP11 (node 1 GPU 3)`` on several nodes) from the
    launch's layout, else ``GPU 3``; a GPU of a node no witness named (node None) is
    ``GPU 3 (node unknown)``. In node, then index order."""
    samples = run_frames(runs, run)[1]
    pairs = (
        samples.select("node", "gpu").drop_nulls("gpu").unique().rows()
        if samples is not None
        else []
    )
    multi = run.layout.nnodes > 1
    names = {(n, g): _gpu_name(n, g, multi) for n, g in sorted(pairs, key=_key)}
    if run.layout.known and run.layout.pp > 1:
        try:
            roles = gpu_roles(run.layout, inventory=run.gpu_inventory)
        except ToolkitError:
            return names
        for n, g, label in roles.select("node", "gpu", "label").iter_rows():
            if (n, g) in names:
                names[(n, g)] = label
    return names


def _gpu_name(node: int | None, gpu: int, multi: bool) -> str:
    if node is None:
        return f"GPU {gpu} (node unknown)"
    return f"node {node} GPU {gpu}" if multi else f"GPU {gpu}"


def _key(pair: tuple[int | None, int]) -> tuple[int, int]:
    return (pair[0] if pair[0] is not None else -1, pair[1])
