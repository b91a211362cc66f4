"""Text sections: log excerpts, the glossary and the provenance block."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from toolkit.report.context import provenance_record
from toolkit.report.paths import join_runs
from toolkit.report.provenance import provenance, provenance_html
from toolkit.report.runs import RunSet
from toolkit.report.view import (
    View,
    clean_frame,
    para,
)
from toolkit.schema.bench import METRIC_GLOSSARY
from toolkit.schema.requests import SERVER_REQUEST_COLUMNS
from toolkit.schema.sglang import BATCH_FIELDS

__all__ = ["glossary", "log_excerpts", "provenance_view"]


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


_REQUEST_SOURCES = {
    "queue_ms": "server request records: `queue_time` (metrics export, --log-requests with "
    "--enable-metrics), `queue_duration` (ReqTimeStats lines)",
    "prefill_ms": "server request records: first-token time less arrival, less queue_ms",
}


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
    rows += [
        {"name": c.name, "meaning": c.doc, "where it comes from": _REQUEST_SOURCES[c.name]}
        for c in SERVER_REQUEST_COLUMNS
        if c.name in _REQUEST_SOURCES
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
    # the files are hashed where the runs were found (a notebook in notebooks/ names
    # data/... and finds it in the parent); the parameters keep the names as given
    record = provenance_record() or provenance(
        [run.path for run in runs],
        dict(params) if params is not None else {"runs": join_runs(runs.paths)},
    )
    return View("provenance", [provenance_html(record)])
