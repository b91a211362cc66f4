"""The notes a run directory's inputs earn: other launches, unplaced or damaged files, traces
that miss the launch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from toolkit.errors import ToolkitError
from toolkit.load.assembly import overlap_s
from toolkit.load.damage import damaged_kind, input_damage
from toolkit.load.gpu import trace_formats
from toolkit.load.phase_marks import PHASE_FORMAT, phase_file_problems
from toolkit.load.placement import placement_problems
from toolkit.load.prometheus import TEXT as METRICS_TEXT
from toolkit.load.windows import stray_notes

if TYPE_CHECKING:
    from toolkit.load.run import Run

__all__ = ["input_mismatches"]


def input_mismatches(run: Run) -> list[dict[str, str]]:
    """Inputs that do not belong with the chosen launch: other launches (a restart, another
    file's server), a GPU trace from another time. Each: ``input``, ``files``, ``detail``."""
    out: list[dict[str, str]] = []
    spans = run.launch_spans
    group, why = run.launch_choice
    if spans.height and spans["group"].n_unique() > 1:
        chosen = spans.filter(pl.col("group") == group)
        others = spans.filter(pl.col("group") != group)
        start, end = chosen["start"].min(), chosen["end"].max()
        foreign = sorted(set(others["source"]) - set(chosen["source"]))
        out.append(
            {
                "input": "launches",
                "files": ", ".join(Path(s).name for s in sorted(set(spans["source"]))),
                "detail": f"{others['group'].n_unique()} other server start(s) in the log; "
                f"analysed the one of {start} – {end} ({why}); the others are left out",
            }
        )
        if foreign:
            out.append(
                {
                    "input": "log files",
                    "files": ", ".join(Path(s).name for s in foreign),
                    "detail": "these logs hold only other launches (other times or servers) "
                    "and are not part of this run",
                }
            )
    bad = phase_file_problems(run.files.get(PHASE_FORMAT, []))
    if bad:
        where = ", ".join(f"{Path(f).name}:{n}" for f, n, _ in bad[:5])
        out.append(
            {
                "input": "phase file",
                "files": ", ".join(sorted({Path(f).name for f, _, _ in bad})),
                "detail": f"{len(bad)} line(s) are no phase record and were left out "
                f"({where}: {bad[0][2]})",
            }
        )
    untimed = run.untimed_gpu_files
    if untimed:
        whole = run.gpu_span is None
        out.append(
            {
                "input": "GPU trace" if whole else "GPU trace files",
                "files": ", ".join(Path(s).name for s in untimed),
                "detail": "these files print no time (dcgmi dmon, exporter scrapes, an nvidia-smi "
                "table pasted without its date lines) and "
                "nothing places them on the log's clock, so their samples are not used: set "
                "[gpu_trace] start (local time of the first sample) and interval_s in "
                "run.toml",
            }
        )
    untimed = _untimed_metrics(run)
    if untimed:
        out.append(
            {
                "input": "metrics",
                "files": ", ".join(Path(s).name for s in untimed),
                "detail": "saved /metrics answers with no time (no date line or HTTP Date "
                "header saved with them): their gauges and lifetime counters are listed, "
                "but a single untimed snapshot gives no rates and none is placed in a phase "
                "(save `date '+%F %T'` before each curl, or use ppscope capture)",
            }
        )
    out += placement_problems(run)
    out += run.profile.notes() if run.profile is not None else []
    trace, span = run.gpu_span, run.launch_span
    if trace is not None and span is not None and overlap_s(trace, span) <= 0:
        out.append(
            {
                "input": "GPU trace",
                "files": ", ".join(
                    p.name for fmt in trace_formats() for p in run.files.get(fmt, [])
                ),
                "detail": f"the trace covers {trace[0]} – {trace[1]}, the launch "
                f"{span[0]} – {span[1]}: no overlap, so it is not used (set "
                "clock_offset_s in run.toml if its clock is off)",
            }
        )
    out += input_damage(run)
    said = {
        (damaged_kind(m["input"]) or m["input"], f) for m in out for f in m["files"].split(", ")
    }
    out += [n for n in stray_notes(run.stray_inputs) if (n["input"], n["files"]) not in said]
    return out


def _untimed_metrics(run: Run) -> list[str]:
    """Saved ``/metrics`` answers of no known time (``Metrics.untimed_sources``)."""
    if not run.files.get(METRICS_TEXT):
        return []
    try:
        metrics = run.metrics
    except ToolkitError:
        return []  # an unreadable file is the loader's error, where it is used
    return metrics.untimed_sources if metrics is not None else []
