"""Which GPU each scheduler rank ran on, by identity wherever the run's inputs give one.

A GPU has one name everywhere: its UUID. ``nvidia-smi`` numbers GPUs by PCI bus; CUDA numbers
them fastest first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, so a CUDA ordinal (what the launch
places ranks on, and what ``CUDA_VISIBLE_DEVICES=3,1`` lists) is an ``nvidia-smi`` index only
in bus order. Witnesses of a rank's GPU, strongest first (``GpuMapping.witness``):

1. ``--query-compute-apps`` rows of SGLang's schedulers: each titles itself with its rank tags
   (``sglang::scheduler_PP3_TP1``) and holds its memory on the GPU it runs on, named by UUID
   (or bus id), which the run's inventory (``nvidia-smi -L``, a trace's ``uuid`` column) turns
   into an index;
2. ``CUDA_VISIBLE_DEVICES`` of UUIDs (``roles.gpu_roles``);
3. CUDA ordinals taken as indices: exact with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; in CUDA's
   default order a guess, close to certain among identical GPUs, and likely wrong on a machine
   of mixed models.

``uuid_nodes`` gives the node of each GPU the schedulers name, a witness for ``place_nodes``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from toolkit.load.gpu.roles import device_index

__all__ = ["GpuMapping", "identify_roles", "scheduler_ranks", "uuid_nodes"]

_TITLE = re.compile(r"sglang::scheduler((?:_(?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\b")
_RANKS = {"dp": pl.Int32(), "pp": pl.Int32(), "tp": pl.Int32()}

SCHEDULERS = "scheduler processes"
VISIBLE_UUIDS = "CUDA_VISIBLE_DEVICES UUIDs"
BUS_ORDER = "CUDA ordinals in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID)"
ASSUMED_ORDER = "CUDA ordinals taken as nvidia-smi indices"


@dataclass(frozen=True)
class GpuMapping:
    """The roles with each rank's GPU by the strongest witness, and what to say about it.

    ``witness`` names the witness of most ranks; ``guess`` is True when that is CUDA's default
    order; ``note`` says how ranks were mapped; ``problems`` are lines for ``mismatches``: the
    mapping contradicts the launch's ordinals, or is a guess on mixed GPU models.
    """

    roles: pl.DataFrame
    witness: str
    guess: bool
    note: str
    problems: tuple[str, ...] = ()


def scheduler_ranks(
    apps: pl.DataFrame | None, inventory: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Per SGLang scheduler rank a compute-apps listing shows (``dp``, ``pp``, ``tp``; absent
    tags are 0): the GPU index and UUID where it holds the most memory. Empty without one."""
    empty = pl.DataFrame(schema={**_RANKS, "gpu": pl.Int32(), "uuid": pl.String()})
    if apps is None or not apps.height or "process_name" not in apps.columns:
        return empty
    title = pl.col("process_name").str.extract(_TITLE.pattern, 1)
    rows = apps.with_columns(_tags=title).filter(pl.col("_tags").is_not_null())
    if not rows.height:
        return empty
    tags = pl.col("_tags")
    rows = rows.with_columns(
        **{
            key: tags.str.extract(rf"_{key.upper()}(\d+)", 1).cast(pl.Int32).fill_null(0)
            for key in _RANKS
        }
    )
    top = rows.sort(pl.col("used_memory_mib").fill_null(0.0), descending=True).unique(
        ["dp", "pp", "tp"], keep="first", maintain_order=True
    )
    out = []
    for dp, pp, tp, gpu, uuid in top.select("dp", "pp", "tp", "gpu", "uuid").iter_rows():
        index = gpu if gpu is not None else (device_index(uuid, inventory) if uuid else None)
        out.append((dp, pp, tp, index, uuid))
    return pl.DataFrame(out, schema=empty.schema, orient="row")


def identify_roles(
    roles: pl.DataFrame,
    *,
    apps: pl.DataFrame | None = None,
    inventory: pl.DataFrame | None = None,
    device_order: str | None = None,
    visible: Sequence[int | str] | None = None,
    models: Sequence[str] = (),
) -> GpuMapping:
    """``roles`` (``gpu_roles``) with each rank's GPU taken from its scheduler process where a
    listing shows it, and what the mapping rests on.

    Parameters
    ----------
    roles
        ``gpu_roles`` of the launch: GPUs by CUDA ordinal (or ``CUDA_VISIBLE_DEVICES``).
    apps, inventory
        ``Run.compute_apps`` and ``Run.gpu_inventory``.
    device_order
        ``CUDA_DEVICE_ORDER`` of the launch command, if set.
    visible
        ``CUDA_VISIBLE_DEVICES`` of the launch command (indices or UUIDs).
    models
        GPU model names of the machine (inventory or trace): mixed models make CUDA's default
        order differ from the bus order.
    """
    ranks = scheduler_ranks(apps, inventory).filter(pl.col("gpu").is_not_null())
    keys = ["dp", "pp", "tp"]
    if ranks.height:
        joined = roles.join(
            ranks.rename({"gpu": "_seen", "uuid": "_uuid"}), on=keys, how="left"
        ).with_columns(pl.col("_seen").cast(pl.Int32))
        moved = joined.filter(
            pl.col("_seen").is_not_null()
            & pl.col("gpu").is_not_null()
            & (pl.col("_seen") != pl.col("gpu"))
        )
        seen = joined.filter(pl.col("_seen").is_not_null()).height
        out = joined.with_columns(
            gpu=pl.coalesce("_seen", "gpu"),
            label=pl.when(pl.col("_seen").is_not_null() & (pl.col("_seen") != pl.col("gpu")))
            .then(pl.col("label").str.replace(r"GPU \d+\)$", pl.format("GPU {})", "_seen")))
            .otherwise("label"),
        ).drop("_seen", "_uuid")
        note = (
            f"{seen} of {roles.height} ranks mapped to GPUs by the scheduler process each "
            "holds (compute-apps, by UUID)"
        )
        problems = []
        if moved.height:
            pairs = ", ".join(
                f"{_rank(r)} on GPU {r['_seen']} (ordinal {r['gpu']})"
                for r in moved.head(4).iter_rows(named=True)
            )
            problems.append(
                f"the scheduler processes hold other GPUs than the launch's CUDA ordinals name "
                f"({pairs}{', …' if moved.height > 4 else ''}): CUDA does not number this "
                "machine's GPUs as nvidia-smi does (set CUDA_DEVICE_ORDER=PCI_BUS_ID), so each "
                "stage is read from the GPU its process holds"
            )
        return GpuMapping(out, SCHEDULERS, False, note, tuple(problems))
    if visible and any(isinstance(v, str) for v in visible):
        note = "ranks mapped to GPUs by the UUIDs CUDA_VISIBLE_DEVICES lists"
        return GpuMapping(roles, VISIBLE_UUIDS, False, note)
    if (device_order or "").strip().upper() == "PCI_BUS_ID":
        note = "CUDA ordinals are nvidia-smi indices: CUDA_DEVICE_ORDER=PCI_BUS_ID"
        return GpuMapping(roles, BUS_ORDER, False, note)
    kinds = sorted({m for m in models if m})
    note = (
        "CUDA ordinal k taken as nvidia-smi index k, a guess: CUDA's default order (fastest "
        "first) is the PCI bus order among identical GPUs in practice, but not by contract; "
        "a compute-apps listing (--query-compute-apps=gpu_uuid,pid,process_name) or "
        "CUDA_DEVICE_ORDER=PCI_BUS_ID makes it certain"
    )
    problems = ()
    if len(kinds) > 1:
        problems = (
            f"the machine mixes GPU models ({', '.join(kinds)}) and the launch does not set "
            "CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA numbers its GPUs fastest first, so the stage "
            "each GPU index is read for is a guess that is likely wrong; record compute-apps "
            "(--query-compute-apps=gpu_uuid,pid,process_name) with nvidia-smi -L to map "
            "stages by UUID",
        )
    return GpuMapping(roles, ASSUMED_ORDER, True, note, problems)


def uuid_nodes(apps: pl.DataFrame | None, roles: pl.DataFrame | None) -> dict[str, int]:
    """GPU UUID (lower case) → node, for each GPU a scheduler process of a rank ``roles``
    places on a node holds (``scheduler_ranks``)."""
    if roles is None or "node" not in roles.columns:
        return {}
    ranks = scheduler_ranks(apps).filter(pl.col("uuid").is_not_null())
    if not ranks.height:
        return {}
    nodes = roles.select(*(pl.col(k).cast(pl.Int32) for k in ("dp", "pp", "tp")), "node")
    placed = ranks.join(nodes, on=["dp", "pp", "tp"], how="inner")
    out: dict[str, set[int]] = {}
    for uuid, node in placed.select("uuid", "node").iter_rows():
        out.setdefault(str(uuid).lower(), set()).add(int(node))
    return {u: next(iter(n)) for u, n in out.items() if len(n) == 1}


def _rank(row: Mapping[str, object]) -> str:
    parts = [f"DP{row['dp']}"] if row.get("dp") else []
    parts.append(f"PP{row['pp']}")
    if row.get("tp"):
        parts.append(f"TP{row['tp']}")
    return " ".join(parts)
