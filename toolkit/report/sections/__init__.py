"""The sections of a postmortem, one module per question: runs in, a ``View`` out.

Notebooks call these and nothing else, so a cell is one line; widgets call them again with the
controls' values. A section computes with ``toolkit.analyze`` (through the runs' shared
``RunAnalysis``) and draws with ``toolkit.chart``; it degrades to a note when its input is
missing ("no GPU trace in this run") instead of failing. Text from a log or a config is
HTML-escaped and, unless ``--no-redact``, stripped of secrets.

``load_runs`` and ``RunSet`` (``report.runs``) and ``View`` (``report.view``) are re-exported, so
a notebook needs this one module.
"""

from __future__ import annotations

from toolkit.analyze.series import thin
from toolkit.report.runs import RunSet, load_runs, resolve_run_dir
from toolkit.report.sections.config import config_diff
from toolkit.report.sections.cudagraph import cuda_graphs
from toolkit.report.sections.findings import findings
from toolkit.report.sections.gpu import gpu_extent, gpu_metrics
from toolkit.report.sections.header import header
from toolkit.report.sections.kv import kv_pressure
from toolkit.report.sections.model import model, what_if
from toolkit.report.sections.occupancy import occupancy
from toolkit.report.sections.parts import MAX_POINTS, gpu_labels, pick_run
from toolkit.report.sections.requests import request_split
from toolkit.report.sections.scaling import efficiency, frontier_view, latency, scaling
from toolkit.report.sections.setup import setup
from toolkit.report.sections.stage_round import stage_rounds
from toolkit.report.sections.summary import summary
from toolkit.report.sections.text import glossary, log_excerpts, provenance_view
from toolkit.report.sections.timeline import stage_timeline, stage_timelines, timeline_extent
from toolkit.report.view import STYLE, View, note, table_html

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
    "gpu_labels",
    "gpu_metrics",
    "header",
    "kv_pressure",
    "latency",
    "load_runs",
    "log_excerpts",
    "model",
    "note",
    "occupancy",
    "pick_run",
    "provenance_view",
    "request_split",
    "resolve_run_dir",
    "scaling",
    "setup",
    "stage_rounds",
    "stage_timeline",
    "stage_timelines",
    "summary",
    "table_html",
    "thin",
    "timeline_extent",
    "what_if",
]
