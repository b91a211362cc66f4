"""``gpu_roles``: which GPU runs which pipeline stage, from a launch's layout.

SGLang's engine places scheduler processes like this: per node, the stages
``pp_size // nnodes`` of them, and for each stage the TP ranks ``tp_size // nodes_per_stage``
of them, at ``base_gpu_id + (pp % pp_per_node) × tp_per_node + (tp % tp_per_node) ×
gpu_id_step``. Plain data parallelism (``dp_size`` > 1 without ``enable_dp_attention``) runs
``dp_size`` such groups one after another on the GPUs; DP attention splits the TP ranks.
These are CUDA ordinals: with ``CUDA_VISIBLE_DEVICES=2,3,…`` in the launch command ordinal *k*
is the *k*-th listed GPU (nvidia-smi numbers GPUs by PCI bus; CUDA does too when
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and on a machine of one GPU model in practice).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from toolkit.errors import ToolkitError
from toolkit.load.layout import RunLayout
from toolkit.schema.gpu import ROLES


def gpu_roles(launch_or_server_args: Any) -> pl.DataFrame:
    """GPU index → (node, pp, tp, dp) and a chart label such as ``PP3 (GPU 3)``.

    Parameters
    ----------
    launch_or_server_args
        A ``RunLayout`` (``Run.layout``: sizes from every witness, with the command's
        ``CUDA_VISIBLE_DEVICES``), a ``Launch`` (anything with ``.server_args``) or the
        ServerArgs dict itself. Missing keys take SGLang's defaults (sizes 1, ``base_gpu_id``
        0, ``gpu_id_step`` 1).

    Returns
    -------
    pl.DataFrame
        One row per scheduler process, ``toolkit.schema.gpu.ROLES``, sorted by node and GPU.
    """
    visible: tuple[int, ...] | None = None
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
                    if visible is not None:
                        if gpu >= len(visible):
                            raise ToolkitError(
                                f"CUDA_VISIBLE_DEVICES lists {len(visible)} GPUs, the layout "
                                f"places a rank on ordinal {gpu}"
                            )
                        gpu = visible[gpu]
                    rows.append((node, gpu, pp_rank, tp_rank, dp_rank))
    multi_dp = dp > 1
    out = []
    for node, gpu, pp_rank, tp_rank, dp_rank in sorted(rows, key=lambda r: (r[0], r[1])):
        parts = []
        if multi_dp:
            parts.append(f"DP{dp_rank}")
        parts.append(f"PP{pp_rank}")
        if tp > 1:
            parts.append(f"TP{tp_rank}")
        where = f"node {node} GPU {gpu}" if nnodes > 1 else f"GPU {gpu}"
        out.append((node, gpu, pp_rank, tp_rank, dp_rank, f"{' '.join(parts)} ({where})"))
    return pl.DataFrame(out, schema=ROLES, orient="row")


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
