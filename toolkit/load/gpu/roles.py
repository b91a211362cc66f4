"""``gpu_roles``: which GPU runs which pipeline stage, from a launch's layout.

SGLang's engine places scheduler processes like this: per node, the stages
``pp_size // nnodes`` of them, and for each stage the TP ranks ``tp_size // nodes_per_stage``
of them, at ``base_gpu_id + (pp % pp_per_node) × tp_per_node + (tp % tp_per_node) ×
gpu_id_step``. Plain data parallelism (``dp_size`` > 1 without ``enable_dp_attention``) runs
``dp_size`` such groups one after another on the GPUs; DP attention splits the TP ranks.
These are CUDA ordinals: with ``CUDA_VISIBLE_DEVICES=2,3,…`` in the launch command ordinal *k*
is the *k*-th listed GPU (nvidia-smi numbers GPUs by PCI bus; CUDA does too when
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and on a machine of one GPU model in practice). A listed UUID
(``GPU-8a3f…``, a unique prefix of one, or a MIG device's ``MIG-…``) is the index an inventory
of the run gives it (``nvidia-smi -L``, or a trace's ``uuid`` column); without one the rank
has no index.

``join_roles`` is the one join of GPU samples to roles: on (node, GPU index) when the launch
spans nodes, since every node numbers its GPUs from 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import polars as pl

from toolkit.errors import ToolkitError
from toolkit.load.layout import RunLayout
from toolkit.schema.gpu import ROLES


def gpu_roles(launch_or_server_args: Any, *, inventory: pl.DataFrame | None = None) -> pl.DataFrame:
    """GPU index → (node, pp, tp, dp) and a chart label such as ``PP3 (GPU 3)``.

    Parameters
    ----------
    launch_or_server_args
        A ``RunLayout`` (``Run.layout``: sizes from every witness, with the command's
        ``CUDA_VISIBLE_DEVICES``), a ``Launch`` (anything with ``.server_args``) or the
        ServerArgs dict itself. Missing keys take SGLang's defaults (sizes 1, ``base_gpu_id``
        0, ``gpu_id_step`` 1).
    inventory
        ``gpu`` and ``uuid`` of the run's GPUs (``Run.gpu_inventory``): the index of each
        GPU ``CUDA_VISIBLE_DEVICES`` names by UUID. A UUID it does not resolve leaves its
        ranks with a null ``gpu``.

    Returns
    -------
    pl.DataFrame
        One row per scheduler process, ``toolkit.schema.gpu.ROLES``, sorted by node and GPU.
    """
    visible: tuple[int | str, ...] | None = None
    if isinstance(launch_or_server_args, RunLayout):
        layout = launch_or_server_args
        visible = layout.visible_devices
        launch_or_server_args = {
            "tp_size": layout.tp,
            "pp_size": layout.pp,
            "dp_size": layout.dp,
            "nnodes": layout.nnodes,
            "base_gpu_id": layout.base_gpu_id,
            "gpu_id_step": layout.gpu_id_step,
            "enable_dp_attention": layout.dp_attention,
        }
    args = getattr(launch_or_server_args, "server_args", launch_or_server_args)
    if not isinstance(args, Mapping):
        raise ToolkitError(f"gpu_roles needs a launch or a server_args dict, not {type(args)}")
    tp = _size(args, "tp_size")
    pp = _size(args, "pp_size")
    dp = _size(args, "dp_size")
    nnodes = _size(args, "nnodes")
    base = _int(args, "base_gpu_id", 0)
    step = _int(args, "gpu_id_step", 1)
    dp_attention = bool(args.get("enable_dp_attention"))
    if tp % max(nnodes // pp, 1):
        raise ToolkitError(f"tp_size {tp} does not split over {nnodes} nodes")
    nodes_per_stage = max(nnodes // pp, 1)
    pp_per_node = max(pp // nnodes, 1)
    tp_per_node = tp // nodes_per_stage
    groups = 1 if dp_attention else dp
    rows = []
    for node in range(nnodes):
        stages = range(
            pp_per_node * (node // nodes_per_stage), pp_per_node * (node // nodes_per_stage + 1)
        )
        ranks = range(
            tp_per_node * (node % nodes_per_stage), tp_per_node * (node % nodes_per_stage + 1)
        )
        for group in range(groups):
            offset = group * tp * pp * step if groups > 1 else 0
            for pp_rank in stages:
                for tp_rank in ranks:
                    gpu = (
                        base
                        + offset
                        + (pp_rank % pp_per_node) * tp_per_node
                        + (tp_rank % tp_per_node) * step
                    )
                    dp_rank = tp_rank // (tp // dp) if dp_attention and dp > 1 else group
                    name = None
                    if visible is not None:
                        if gpu >= len(visible):
                            raise ToolkitError(
                                f"CUDA_VISIBLE_DEVICES lists {len(visible)} GPUs, the layout "
                                f"places a rank on ordinal {gpu}"
                            )
                        listed = visible[gpu]
                        gpu = listed if isinstance(listed, int) else device_index(listed, inventory)
                        name = listed if gpu is None else None
                    rows.append((node, gpu, pp_rank, tp_rank, dp_rank, name))
    multi_dp = dp > 1
    out = []
    for node, gpu, pp_rank, tp_rank, dp_rank, name in sorted(rows, key=_order):
        parts = []
        if multi_dp:
            parts.append(f"DP{dp_rank}")
        parts.append(f"PP{pp_rank}")
        if tp > 1:
            parts.append(f"TP{tp_rank}")
        device = f"GPU {gpu}" if gpu is not None else str(name)
        where = f"node {node} {device}" if nnodes > 1 else device
        out.append((node, gpu, pp_rank, tp_rank, dp_rank, f"{' '.join(parts)} ({where})"))
    return pl.DataFrame(out, schema=ROLES, orient="row")


def join_roles(
    samples: pl.DataFrame,
    roles: pl.DataFrame,
    columns: Sequence[str] = ("pp",),
    *,
    how: Literal["inner", "left"] = "inner",
) -> pl.DataFrame:
    """``samples`` with the role ``columns`` (``pp``, ``tp``, ``label``…) of their GPU.

    On one node the GPU index says it; when ``roles`` span several nodes a sample matches on
    (``node``, ``gpu``), so a sample of no known node (``node`` null, or no such column)
    matches no role: it is dropped (``how="inner"``) or keeps null roles (``"left"``).
    """
    multi = "node" in roles.columns and roles.get_column("node").n_unique() > 1
    keys = ["node", "gpu"] if multi else ["gpu"]
    if multi and "node" not in samples.columns:
        samples = samples.with_columns(node=pl.lit(None, pl.Int32))
    wanted = roles.filter(pl.col("gpu").is_not_null()).select(
        *(pl.col(k).cast(pl.Int32) for k in keys),
        *(c for c in columns if c not in keys),
    )
    typed = samples.with_columns(pl.col(k).cast(pl.Int32) for k in keys)
    return typed.join(wanted, on=keys, how=how, maintain_order="left")


def device_index(entry: str, inventory: pl.DataFrame | None) -> int | None:
    """The GPU index of a ``CUDA_VISIBLE_DEVICES`` UUID entry, from ``inventory`` (``gpu``,
    ``uuid``); None when it lists no such GPU or several.

    CUDA takes a whole UUID or a unique prefix of one (``GPU-8a3f``); a MIG device is
    ``MIG-GPU-<gpu uuid>/<gi>/<ci>`` (its GPU's UUID inside) or ``MIG-<uuid>`` (listed by
    ``nvidia-smi -L`` under its GPU).
    """
    if inventory is None or "uuid" not in inventory.columns or not inventory.height:
        return None
    pairs = inventory.select(pl.col("uuid").str.to_lowercase(), "gpu").drop_nulls().unique()
    wanted = entry.strip().lower()
    parent = re.fullmatch(r"mig-(gpu-[0-9a-f-]+)/\d+/\d+", wanted)
    candidates = [wanted, parent.group(1)] if parent else [wanted]
    for uuid in candidates:
        hits = pairs.filter(pl.col("uuid") == uuid)["gpu"].unique()
        if not hits.len():
            hits = pairs.filter(pl.col("uuid").str.starts_with(uuid))["gpu"].unique()
        if hits.len() == 1:
            return int(hits[0])
        if hits.len() > 1:
            return None
    return None


def unresolved_devices(
    visible: Sequence[int | str] | None, inventory: pl.DataFrame | None
) -> list[str]:
    """The UUID entries of ``CUDA_VISIBLE_DEVICES`` that ``inventory`` gives no index."""
    names = [v for v in visible or () if isinstance(v, str)]
    return [v for v in names if device_index(v, inventory) is None]


def _order(row: tuple[Any, ...]) -> tuple[int, int]:
    return row[0], row[1] if row[1] is not None else -1


def _size(args: Mapping[str, Any], key: str) -> int:
    value = _int(args, key, 1)
    if value < 1:
        raise ToolkitError(f"server_args {key}={value!r} must be at least 1")
    return value


def _int(args: Mapping[str, Any], key: str, default: int) -> int:
    value = args.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolkitError(f"server_args {key}={value!r} is not an integer")
    return value
