"""``foreign-gpu-process``: a process that is not the SGLang server holds a GPU the run uses.

Another process on a stage's GPU takes compute from that stage and memory from its KV pool
(``mem_fraction_static`` is a share of the whole card, so what another process held at launch is
missing from the pool). The processes come from the run's ``--query-compute-apps`` listing,
judged the server's or not by ``analyze.processes.judge_processes`` (pids the log's wrapper
headers name, SGLang's process names, the name the server's processes share). The run's GPUs
are those ``gpu_roles`` gives the layout; without a layout, those the server's processes hold.
A GPU no inventory maps to an index is named by UUID or bus id, and the evidence says so.
"""

from __future__ import annotations

import polars as pl

from toolkit.analyze.processes import judge_processes
from toolkit.diagnose.finding import Finding
from toolkit.diagnose.thresholds import FOREIGN_MEMORY_SHARE
from toolkit.run_analysis import RunAnalysis

__all__ = ["foreign_gpu_process"]

_EVIDENCE = {
    "gpu": pl.Int32,
    "stage": pl.String,
    "pid": pl.Int64,
    "process_name": pl.String,
    "used_memory_mib": pl.Float64,
    "memory_share": pl.Float64,
    "listings": pl.String,
    "gpu_note": pl.String,
}


def foreign_gpu_process(ctx: RunAnalysis) -> Finding | None:
    """Processes other than the server's on the run's GPUs, a note whose cost no input sizes;
    it says when one holds at least ``FOREIGN_MEMORY_SHARE`` of the memory listed on its
    GPU."""
    apps = ctx.run.compute_apps
    if apps is None or not apps.height:
        return None
    pids = ctx.run.log.pids() if ctx.run.log is not None else frozenset()
    judged = judge_processes(apps, pids)
    foreign = judged.filter(pl.col("server") == False)  # noqa: E712 (null: unjudged)
    if not foreign.height:
        return None
    roles = ctx.roles
    server_gpus = _gpu_keys(judged.filter(pl.col("server") == True))  # noqa: E712
    stages: dict[int, list[str]] = {}
    if roles is not None:
        for gpu, pp, tp in roles.select("gpu", "pp", "tp").iter_rows():
            stages.setdefault(gpu, []).append(f"PP{pp}" if ctx.pp > 1 else f"TP{tp}")
    rows, elsewhere = [], 0
    for row in foreign.iter_rows(named=True):
        key = _gpu_key(row)
        if row["gpu"] is not None and roles is not None:
            if row["gpu"] not in stages:
                elsewhere += 1  # a GPU the layout does not use
                continue
            stage, note = " / ".join(dict.fromkeys(stages[row["gpu"]])), None
        elif row["gpu"] is not None:
            if key not in server_gpus:
                elsewhere += 1  # no layout, and no server process on that GPU
                continue
            stage, note = None, "no layout known: a GPU the server's processes hold"
        elif row["uuid"] is None and row["pci_bus_id"] is None:
            stage = None
            note = "the listing names no GPU (no gpu_uuid or gpu_bus_id field)"
        else:
            stage = None
            note = (
                f"{key}: no nvidia-smi -L listing or GPU trace with uuid/pci.bus_id maps it "
                "to an index"
                + ("" if key in server_gpus else "; no server process on it, may not be the run's")
            )
        rows.append(
            {
                "gpu": row["gpu"],
                "stage": stage,
                "pid": row["pid"],
                "process_name": row["process_name"],
                "used_memory_mib": row["used_memory_mib"],
                "memory_share": row["memory_share"],
                "listings": f"{row['listings']} of {row['of_listings']}",
                "gpu_note": note,
            }
        )
    if not rows:
        return None
    evidence = pl.DataFrame(rows, schema=_EVIDENCE).sort(
        "memory_share", "used_memory_mib", descending=True, nulls_last=True
    )
    top = evidence.row(0, named=True)
    share = top["memory_share"]
    large = share is not None and share >= FOREIGN_MEMORY_SHARE
    gpus = evidence.select(pl.coalesce(pl.col("gpu").cast(pl.String), "gpu_note")).n_unique()
    where = f"GPU {top['gpu']}" if top["gpu"] is not None else "a GPU of unknown index"
    if top["stage"]:
        where += f" ({top['stage']})"
    used = top["used_memory_mib"]
    mib = "memory not listed" if used is None else f"{used:.0f} MiB"
    part = f", {share:.0%} of the memory listed there" if share is not None else ""
    summary = (
        f"{evidence.height} process(es) that are not the SGLang server hold {gpus} of the "
        f"run's GPUs; the largest is pid {top['pid']} ({top['process_name']}) on {where}: "
        f"{mib}{part}, in {top['listings']} listing(s). It competes with that stage for "
        "compute and, held at launch, shrinks its KV pool."
    )
    if elsewhere:
        summary += f" {elsewhere} other process(es) on GPUs the run does not use are left out."
    unjudged = judged.filter(pl.col("server").is_null()).height
    if unjudged:
        summary += f" {unjudged} process(es) listed without a name could not be judged."
    summary += (
        " Its cost is not sized (no input measures what the other process takes from the "
        "stage), so it is a note: "
        + (
            "it holds a large share of the GPU's memory, which the KV pool lacks."
            if large
            else "check whether it computes while the server runs."
        )
    )
    return Finding(
        id="foreign-gpu-process",
        severity="info",
        title=f"{evidence.height} process(es) besides the server on its GPUs: {mib} on {where}",
        summary=summary,
        evidence=evidence.head(20),
        remedy=(
            "Stop or move the other process (nvidia-smi --query-compute-apps=pid,process_name,"
            "used_memory lists it), or give the server GPUs of its own (CUDA_VISIBLE_DEVICES); "
            "relaunch the server after it is gone, so its KV pool takes the freed memory."
        ),
    )


def _gpu_key(row: dict[str, object]) -> str:
    """The GPU of a judged row: ``GPU n``, else its UUID, else its bus id."""
    if row["gpu"] is not None:
        return f"GPU {row['gpu']}"
    return str(row["uuid"] or row["pci_bus_id"] or "an unnamed GPU")


def _gpu_keys(judged: pl.DataFrame) -> set[str]:
    return {_gpu_key(r) for r in judged.iter_rows(named=True)}
