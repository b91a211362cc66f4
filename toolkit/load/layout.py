"""``resolve_layout``: the one answer to "how was this server laid out?" for a run.

Witnesses, strongest first:

1. the ``server_args=`` dump of the launch, with the scheduler's startup summary for the values
   SGLang resolves at start (``max_running_requests``, ``max_total_num_tokens``,
   ``chunked_prefill_size``);
2. the launch command (``run.toml``'s ``command`` or a ``launch_server`` line of the log);
3. the server's own answer to ``/server_info`` (``server_info.jsonl`` of a capture, or a saved
   answer): the arguments it runs with, for a log that starts after the dump;
4. the rank tags of the scheduler prefix (`` PP3 TP1``): the highest rank seen plus one is a
   lower bound of each size (a TP group logs batches from ``TP0`` only, but loads weights on
   every rank).

Each setting is taken from the strongest witness that states it; ``layout_from`` names the
witness of the parallel sizes.

>>> resolve_layout({"tp_size": 2, "pp_size": 4, "pp_async_batch_depth": 4}).label
'PP4xTP2'
>>> resolve_layout(None, tags={"pp": 4}).layout_from
'rank tags'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["PARALLEL_SIZES", "RunLayout", "resolve_layout"]

PARALLEL_SIZES: dict[str, str] = {
    "tp": "tp_size",
    "pp": "pp_size",
    "dp": "dp_size",
    "ep": "ep_size",
}
"""Short name of each parallel size → its ServerArgs key."""

_UUID = re.compile(r"(?:GPU|MIG)-[0-9A-Za-z/-]+", re.IGNORECASE)
# A GPU named by UUID in CUDA_VISIBLE_DEVICES: GPU-<uuid>, MIG-<uuid>, MIG-GPU-<uuid>/<gi>/<ci>.
_SCHEDULER_KEYS = (
    "pp_async_batch_depth",
    "pp_max_micro_batch_size",
    "max_running_requests",
    "chunked_prefill_size",
    "max_total_num_tokens",
)
# Values the scheduler resolves at start and prints in its summary line; they beat the flags.
_RESOLVED_AT_START = ("max_running_requests", "max_total_num_tokens", "chunked_prefill_size")


@dataclass(frozen=True)
class RunLayout:
    """Parallel sizes and scheduler settings of one launch, and where they came from."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    nnodes: int = 1
    pp_async_batch_depth: int = 0
    pp_max_micro_batch_size: int | None = None  # None: auto, max_running_requests // pp
    max_running_requests: int | None = None
    chunked_prefill_size: int | None = None
    max_total_num_tokens: int | None = None
    layout_from: str = "unknown"  # "ServerArgs", "launch command", "/server_info", "rank tags"
    base_gpu_id: int = 0  # first GPU of the launch (CUDA ordinal)
    gpu_id_step: int = 1  # ordinals between a stage's TP ranks
    dp_attention: bool = False  # enable_dp_attention: DP splits the TP ranks
    visible_devices: tuple[int | str, ...] | None = None  # CUDA_VISIBLE_DEVICES: index or UUID

    @property
    def known(self) -> bool:
        return self.layout_from != "unknown"

    @property
    def gpus(self) -> int:
        """GPUs the layout occupies: ``tp × pp × dp`` (DP attention shares the TP ranks)."""
        return self.tp * self.pp * self.dp

    @property
    def loop_size(self) -> int:
        """Micro-batch slots: ``pp + pp_async_batch_depth`` under PP, else one."""
        return self.pp + self.pp_async_batch_depth if self.pp > 1 else 1

    @property
    def label(self) -> str | None:
        """``TP8``, ``PP8``, ``PP4xTP2`` (``xDP2`` when data parallel); None when unknown."""
        if not self.known:
            return None
        parts = [f"PP{self.pp}"] if self.pp > 1 else []
        if self.tp > 1 or not parts:
            parts.append(f"TP{self.tp}")
        if self.dp > 1:
            parts.append(f"DP{self.dp}")
        return "x".join(parts)

    def describe(self) -> str:
        """One line for tables: ``PP8, async depth 8, micro-batch cap 4``; ``—`` if unknown."""
        if not self.known:
            return "—"
        sizes = {"tp": self.tp, "pp": self.pp, "dp": self.dp, "ep": self.ep}
        parts = [f"{k.upper()}{v}" for k, v in sizes.items() if v > 1]
        if self.pp_async_batch_depth:
            parts.append(f"async depth {self.pp_async_batch_depth}")
        if self.pp_max_micro_batch_size:
            parts.append(f"micro-batch cap {self.pp_max_micro_batch_size}")
        return ", ".join(parts) or "1 GPU"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve_layout(
    server_args: Mapping[str, Any] | None,
    facts: Mapping[str, Any] | None = None,
    *,
    command: Mapping[str, Any] | None = None,
    info: Mapping[str, Any] | None = None,
    tags: Mapping[str, int] | None = None,
) -> RunLayout:
    """The layout of a launch from every witness at hand (see the module docstring).

    Parameters
    ----------
    server_args
        The launch's ServerArgs dump (None or empty when the log printed none).
    facts
        ``Launch.facts()``: the startup summary; a value that differs by rank is reduced to
        its smallest (the binding one).
    command
        Flags of the launch command (``parse_launch_command``), keyed by ServerArgs name.
    info
        The arguments the server stated in its first ``/server_info`` answer
        (``first_answer_args``), keyed by ServerArgs name.
    tags
        Size implied by the rank tags: highest rank seen + 1, keyed ``tp``/``pp``/``dp``/``ep``.
    """
    args = dict(server_args or {})
    flags = dict(command or {})
    stated = dict(info or {})
    seen = {k: v for k, v in (tags or {}).items() if _count(v)}
    facts = facts or {}
    if args:
        source, sizes_from = "ServerArgs", args
    elif any(key in flags for key in PARALLEL_SIZES.values()):
        source, sizes_from = "launch command", flags
    elif any(key in stated for key in PARALLEL_SIZES.values()):
        source, sizes_from = "/server_info", stated
    elif any(v > 1 for v in seen.values()):
        source, sizes_from = "rank tags", {PARALLEL_SIZES[k]: v for k, v in seen.items()}
    else:
        source, sizes_from = "unknown", {}
    sizes = {short: _count(sizes_from.get(key)) or 1 for short, key in PARALLEL_SIZES.items()}
    settings: dict[str, int | None] = {}
    for key in _SCHEDULER_KEYS:
        value = _smallest(facts.get(key)) if key in _RESOLVED_AT_START else None
        for witness in (args, flags, stated):
            if value is None:
                value = _count(witness.get(key))
            if value is None and key == "pp_max_micro_batch_size":
                value = _count(witness.get("max_micro_batch_size"))  # its name in 0.4.6–0.5.1
        settings[key] = value
    if settings["max_total_num_tokens"] is None:
        settings["max_total_num_tokens"] = _count(args.get("max_total_tokens"))
    return RunLayout(
        **sizes,
        nnodes=_count(args.get("nnodes"))
        or _count(flags.get("nnodes"))
        or _count(stated.get("nnodes"))
        or 1,
        pp_async_batch_depth=settings["pp_async_batch_depth"] or 0,
        pp_max_micro_batch_size=settings["pp_max_micro_batch_size"],
        max_running_requests=settings["max_running_requests"],
        chunked_prefill_size=settings["chunked_prefill_size"],
        max_total_num_tokens=settings["max_total_num_tokens"],
        layout_from=source,
        base_gpu_id=_placement(args, flags, "base_gpu_id", 0),
        gpu_id_step=max(_placement(args, flags, "gpu_id_step", 1), 1),
        dp_attention=bool(args.get("enable_dp_attention", flags.get("enable_dp_attention"))),
        visible_devices=_visible_devices(flags.get("__env__")),
    )


def _placement(args: Mapping[str, Any], flags: Mapping[str, Any], key: str, default: int) -> int:
    """A GPU placement setting (``base_gpu_id``, ``gpu_id_step``): ServerArgs, else the
    command, else SGLang's default."""
    for witness in (args, flags):
        value = witness.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return default


def _visible_devices(env: Any) -> tuple[int | str, ...] | None:
    """``CUDA_VISIBLE_DEVICES`` of the launch command: GPU indices (``2,3,4,5``) and UUIDs
    (``GPU-8a3f…``, ``MIG-…``, kept as text for an inventory to resolve); None when unset or
    when an entry is neither."""
    value = env.get("CUDA_VISIBLE_DEVICES") if isinstance(env, Mapping) else None
    if not isinstance(value, str) or not value.strip():
        return None
    parts = [p.strip() for p in value.split(",")]
    if not all((p.isdecimal() and len(p) <= 4) or _UUID.fullmatch(p) for p in parts):
        return None
    return tuple(int(p) if p.isdecimal() else p for p in parts)


def _count(value: Any) -> int | None:
    """A positive integer setting, else None (booleans, text, -1 "auto" are not counts)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def _smallest(value: Any) -> int | None:
    """A startup fact, or the smallest of its per-rank values (the one that binds)."""
    if isinstance(value, Mapping):
        counts = [c for c in (_count(v) for v in value.values()) if c is not None]
        return min(counts) if counts else None
    return _count(value)
