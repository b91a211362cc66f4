"""Where a run's GPU samples could not be placed: on a node, or on a rank named by UUID."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit.load.gpu import trace_formats
from toolkit.load.gpu.inventory import LIST_FORMAT
from toolkit.load.gpu.roles import unresolved_devices

if TYPE_CHECKING:
    from toolkit.load.run import Run

__all__ = ["placement_problems"]


def placement_problems(run: Run) -> list[dict[str, str]]:
    """Trace samples no witness puts on a node, and GPUs ``CUDA_VISIBLE_DEVICES`` names by a
    UUID no inventory of the run lists (``Run.mismatches`` rows)."""
    out = []
    traces = [p.name for fmt in trace_formats() for p in run.files.get(fmt, [])]
    for problem in run.gpu_nodes.problems if run.gpu_nodes is not None else ():
        out.append({"input": "GPU trace nodes", "files": ", ".join(traces), "detail": problem})
    lost = unresolved_devices(run.layout.visible_devices, run.gpu_inventory)
    if lost:
        where = (
            "the run's nvidia-smi -L listing"
            if run.files.get(LIST_FORMAT)
            else "the GPU trace's uuid column"
        )
        out.append(
            {
                "input": "CUDA_VISIBLE_DEVICES",
                "files": run.command[1] if run.command is not None else "",
                "detail": f"{', '.join(lost)} is named by UUID and {where} does not list "
                "it, so its rank has no GPU index and no stage reads its samples: add "
                "uuid to the --query-gpu fields, or an nvidia-smi -L listing, to the run",
            }
        )
    return out
