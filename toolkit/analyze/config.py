"""ServerArgs side by side, the values SGLang derives from them, and intended vs effective.

Three questions a diagnosis asks of a launch's configuration:

* ``config_diff``: how do two (or more) launches differ? Performance-relevant keys come first,
  each with a one-line meaning, then everything else that differs.
* ``derived_settings``: what did SGLang make of the flags? ``pp_loop_size``, the per-slot
  request cap, the resolved request limit, the KV pool, the captured CUDA-graph sizes.
* ``intended_vs_effective``: did the flags the user typed take effect? The launch command
  (``run.toml``'s ``command``, or a ``launch_server`` line in the log) is parsed into flags and
  compared with the logged ServerArgs and the scheduler's startup summary.

Values are carried as JSON text in the frames (one column cannot hold ints, lists and strings
at once); ``json.loads`` gives the typed value back.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from toolkit.analyze.model import DEFAULT_CHUNKED_PREFILL, Layout
from toolkit.load.layout import RunLayout, resolve_layout
from toolkit.schema import Column, schema_of

__all__ = [
    "CONFIG_DIFF",
    "DERIVED_KEYS",
    "INTENDED",
    "PERF_KEYS",
    "config_diff",
    "derived_settings",
    "intended_vs_effective",
    "launch_layout",
    "model_layout",
    "perf_group",
]

# key → (group, meaning). The order is the order a reader wants: parallel sizes first.
PERF_KEYS: dict[str, tuple[str, str]] = {
    "tp_size": ("parallel", "tensor-parallel GPUs splitting every layer (2 all-reduces per layer)"),
    "pp_size": ("parallel", "pipeline stages, each holding a slice of the layers"),
    "dp_size": ("parallel", "data-parallel replicas (attention-DP ranks with dp attention)"),
    "ep_size": ("parallel", "expert-parallel size of the MoE layers"),
    "enable_dp_attention": ("parallel", "attention runs data-parallel across the TP ranks"),
    "attn_cp_size": ("parallel", "attention context-parallel size"),
    "moe_dp_size": ("parallel", "MoE data-parallel size"),
    "nnodes": ("parallel", "nodes the launch spans"),
    "pp_async_batch_depth": (
        "parallel",
        "extra PP micro-batch slots (loop = pp_size + depth); they help only when filled",
    ),
    "pp_max_micro_batch_size": (
        "parallel",
        "per-slot request cap under PP; None = max_running_requests // pp_size",
    ),
    "max_micro_batch_size": ("parallel", "per-slot request cap (its name before 0.5.5)"),
    "max_running_requests": ("scheduling", "running requests over all slots; None = from KV pool"),
    "max_total_tokens": ("scheduling", "KV pool size override in tokens; None = from memory"),
    "chunked_prefill_size": (
        "scheduling",
        "prompt tokens per prefill pass; under PP it also packs each slot (≈ chunk / ISL reqs)",
    ),
    "max_prefill_tokens": ("scheduling", "prompt tokens one prefill batch may hold"),
    "schedule_policy": ("scheduling", "waiting-queue order (fcfs, lpm, ...)"),
    "schedule_conservativeness": ("scheduling", "how much KV admission reserves (>1 = safer)"),
    "enable_mixed_chunk": ("scheduling", "decode steps ride along with prefill chunks"),
    "disable_overlap_schedule": (
        "scheduling",
        "CPU scheduling not overlapped with the GPU (forced on under PP)",
    ),
    "page_size": ("scheduling", "KV cache page size, tokens"),
    "decode_log_interval": ("scheduling", "decode steps between `Decode batch` lines"),
    "disable_cuda_graph": ("cuda graph", "no CUDA graphs: every decode step runs eagerly"),
    "cuda_graph_max_bs": ("cuda graph", "largest decode batch captured as a CUDA graph"),
    "cuda_graph_max_bs_decode": ("cuda graph", "largest decode batch captured (≥0.5.16 name)"),
    "cuda_graph_bs": ("cuda graph", "decode batch sizes captured"),
    "cuda_graph_bs_decode": ("cuda graph", "decode batch sizes captured (≥0.5.16 name)"),
    "disable_decode_cuda_graph": ("cuda graph", "no decode CUDA graphs (≥0.5.16)"),
    "disable_cuda_graph_padding": ("cuda graph", "no padding to the next captured size"),
    "mem_fraction_static": ("memory", "share of GPU memory for weights + KV pool"),
    "kv_cache_dtype": ("memory", "KV cache element type (fp8 doubles the pool)"),
    "attention_backend": ("backend", "attention kernels"),
    "decode_attention_backend": ("backend", "decode attention kernels"),
    "prefill_attention_backend": ("backend", "prefill attention kernels"),
    "moe_runner_backend": ("backend", "MoE expert kernels"),
    "moe_a2a_backend": ("backend", "MoE all-to-all communication"),
    "sampling_backend": ("backend", "sampling kernels"),
    "grammar_backend": ("backend", "structured-output grammar engine"),
    "quantization": ("backend", "weight quantization method"),
    "dtype": ("backend", "activation / weight dtype"),
    "speculative_algorithm": ("backend", "speculative decoding algorithm"),
    "enable_torch_compile": ("backend", "torch.compile for small batches"),
    "disable_custom_all_reduce": ("backend", "NCCL instead of the custom all-reduce"),
    "enable_nccl_nvls": ("backend", "NVLink SHARP all-reduce"),
    "context_length": ("model", "context length override"),
    "model_path": ("model", "model weights"),
}

DERIVED_KEYS: dict[str, str] = {
    "pp_loop_size": "micro-batch slots per PP round: pp_size + pp_async_batch_depth",
    "per_slot_cap": "requests one slot may hold: the flag, else max_running_requests // pp_size",
    "resolved_max_running_requests": "request limit the scheduler resolved (startup summary)",
    "kv_pool_tokens": "KV pool in tokens (max_total_num_tokens; the MIN over PP stages)",
    "resolved_chunked_prefill_size": "prefill chunk the scheduler uses (startup summary)",
    "captured_max_bs": "largest decode batch that runs as a CUDA graph",
    "overlap_schedule": "CPU scheduling overlapped with the GPU (never under PP)",
}

PARALLEL_FLAGS = frozenset(k for k, (g, _) in PERF_KEYS.items() if g == "parallel")
SCHEDULING_FLAGS = frozenset(k for k, (g, _) in PERF_KEYS.items() if g == "scheduling")

_S, _B, _I = pl.String(), pl.Boolean(), pl.Int64()

CONFIG_DIFF_COLUMNS: tuple[Column, ...] = (
    Column("order", _I, "display order: performance keys first, derived values last"),
    Column("key", _S, "ServerArgs field, or a derived value's name"),
    Column("group", _S, "parallel, scheduling, cuda graph, memory, backend, model, derived, other"),
    Column("meaning", _S, "one line on what the key does"),
    Column("run", _S, "run label"),
    Column("value", _S, "the value as JSON text; null when the run has no such key"),
    Column("changed", _B, "the runs disagree on this key"),
)
CONFIG_DIFF = schema_of(CONFIG_DIFF_COLUMNS)

INTENDED_COLUMNS: tuple[Column, ...] = (
    Column("flag", _S, "ServerArgs field the command-line flag sets"),
    Column("group", _S, "parallel, scheduling, cuda graph, memory, backend, model, env, other"),
    Column("intended", _S, "value on the command line, as JSON text"),
    Column("effective", _S, "value SGLang logged (ServerArgs or startup summary), JSON text"),
    Column("applied", _B, "the flag took effect; null = cannot tell from the log"),
    Column("note", _S, "why it differs, where the effective value came from"),
)
INTENDED = schema_of(INTENDED_COLUMNS)

# Settings the scheduler resolves at start-up and prints in its summary line: the summary
# holds the value the run actually used.
_RESOLVED = {
    "max_running_requests": "max_running_requests",
    "chunked_prefill_size": "chunked_prefill_size",
    "max_prefill_tokens": "max_prefill_tokens",
    "max_total_tokens": "max_total_num_tokens",
}
# A flag whose field was renamed between versions.
_RENAMED = {
    "cuda_graph_max_bs": ("cuda_graph_max_bs_decode",),
    "cuda_graph_bs": ("cuda_graph_bs_decode",),
    "pp_max_micro_batch_size": ("max_micro_batch_size",),
    "max_micro_batch_size": ("pp_max_micro_batch_size",),
}
# Launcher options that are not ServerArgs fields.
_NOT_FIELDS = frozenset({"config", "help", "version"})


def perf_group(key: str) -> str:
    """The group a ServerArgs key belongs to (``other`` when it is not performance-relevant)."""
    return PERF_KEYS.get(key, ("other", ""))[0]


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _norm(value: Any) -> Any:
    """Equality form: integral floats as ints, nested containers normalized."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _norm(v) for k, v in value.items()}
    return value


def _args_of(launch: Any) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """(server_args, startup facts) of a ``Launch``, or of a plain ServerArgs dict."""
    if isinstance(launch, Mapping):
        return launch, {}
    args = getattr(launch, "server_args", None)
    if not isinstance(args, Mapping):
        raise TypeError(f"config: expected a Launch or a ServerArgs dict, not {type(launch)}")
    facts = launch.facts() if hasattr(launch, "facts") else {}
    return args, facts


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict) and value:  # differs by rank: the smallest binds
        ints = [v for v in (_int(x) for x in value.values()) if v is not None]
        return min(ints) if ints else None
    return None


def captured_sizes(server_args: Mapping[str, Any], facts: Mapping[str, Any]) -> list[int] | None:
    """Decode batch sizes captured as CUDA graphs; ``[]`` when disabled, None when unknown.

    The startup log's capture line wins (it is what happened); else the ServerArgs lists
    (``cuda_graph_bs``, ``cuda_graph_bs_decode``, ``cuda_graph_config.decode.bs``).
    """
    if server_args.get("disable_cuda_graph") is True or server_args.get(
        "disable_decode_cuda_graph"
    ):
        return []
    logged = facts.get("cuda_graph_bs")
    if isinstance(logged, dict):  # per rank: a size runs as a graph only where all captured it
        lists = [set(v) for v in logged.values() if isinstance(v, list)]
        return sorted(set.intersection(*lists)) if lists else None
    if isinstance(logged, list) and logged:
        return sorted(int(x) for x in logged)
    for key in ("cuda_graph_bs_decode", "cuda_graph_bs"):
        value = server_args.get(key)
        if isinstance(value, list) and value:
            return sorted(int(x) for x in value if isinstance(x, int))
    nested = server_args.get("cuda_graph_config")
    if isinstance(nested, dict):
        decode = nested.get("decode")
        if isinstance(decode, dict) and isinstance(decode.get("bs"), list) and decode["bs"]:
            return sorted(int(x) for x in decode["bs"] if isinstance(x, int))
    top = _int(server_args.get("cuda_graph_max_bs_decode")) or _int(
        server_args.get("cuda_graph_max_bs")
    )
    return default_capture_sizes(top) if top else None


def default_capture_sizes(max_bs: int) -> list[int]:
    """SGLang's default capture list up to ``max_bs``: 1, 2, 4, 8, 12, 16…256 by 8, then by
    16 to 512, then by 32 (0.5.5 ``_generate_cuda_graph_batch_sizes``)."""
    sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 513, 16), *range(544, 4097, 32)]
    return [s for s in sizes if s <= max_bs]


def derived_settings(
    server_args: Mapping[str, Any], facts: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Values SGLang derives from a launch's flags (see ``DERIVED_KEYS``); None = unknown.

    ``facts`` is ``Launch.facts()``: the scheduler's startup summary holds the resolved request
    limit, the KV pool and the captured graph sizes.
    """
    layout = resolve_layout(server_args, facts)
    mrr = layout.max_running_requests
    if layout.pp_max_micro_batch_size is not None:
        cap: int | None = layout.pp_max_micro_batch_size
    elif mrr is not None:
        cap = max(mrr // layout.pp, 1) if layout.pp > 1 else mrr
    else:
        cap = None
    sizes = captured_sizes(server_args, facts or {})
    return {
        "pp_loop_size": layout.loop_size,
        "per_slot_cap": cap,
        "resolved_max_running_requests": mrr,
        "kv_pool_tokens": layout.max_total_num_tokens,
        "resolved_chunked_prefill_size": layout.chunked_prefill_size,
        "captured_max_bs": (max(sizes) if sizes else 0) if sizes is not None else None,
        "overlap_schedule": layout.pp == 1
        and not server_args.get("disable_overlap_schedule", False),
    }


def model_layout(layout: RunLayout) -> Layout:
    """The serving model's ``Layout`` of a resolved run layout (SGLang's defaults for what the
    inputs do not say)."""
    chunk = layout.chunked_prefill_size
    return Layout(
        tp=layout.tp,
        pp=layout.pp,
        dp=layout.dp,
        pp_async_batch_depth=layout.pp_async_batch_depth,
        pp_max_micro_batch_size=layout.pp_max_micro_batch_size,
        max_running_requests=layout.max_running_requests,
        chunked_prefill_size=chunk if chunk and chunk > 0 else DEFAULT_CHUNKED_PREFILL,
        max_total_num_tokens=layout.max_total_num_tokens,
    )


_PARTITION = re.compile(r"SGLANG_PP_LAYER_PARTITION=[\"']?(\d{1,4}(?:\s*,\s*\d{1,4}){0,255})")


def layer_partition_of(command: str) -> tuple[int, ...] | None:
    """Layers per stage that ``SGLANG_PP_LAYER_PARTITION=a,b,...`` sets in a launch command
    (an environment prefix or a ``-e`` of docker); None when it sets none.

    >>> layer_partition_of("SGLANG_PP_LAYER_PARTITION=16,16,16,32 python3 -m sglang.launch_server")
    (16, 16, 16, 32)
    """
    m = _PARTITION.search(command)
    return tuple(int(x) for x in m.group(1).split(",")) if m else None


def launch_layout(server_args: Mapping[str, Any], facts: Mapping[str, Any] | None = None) -> Layout:
    """The serving model's ``Layout`` of a launch, with resolved values where logged."""
    return model_layout(resolve_layout(server_args, facts))


def config_diff(
    *launches: Any,
    labels: Sequence[str] | None = None,
    only_changed: bool = True,
) -> pl.DataFrame:
    """Two or more launches side by side, long form (schema ``CONFIG_DIFF``).

    Parameters
    ----------
    launches
        ``Launch`` objects (their startup facts feed the derived values) or ServerArgs dicts.
    labels
        One name per launch; default ``a``, ``b``, ``c``...
    only_changed
        Keep only keys the launches disagree on (a launch diffed with itself is empty). False
        keeps every performance key and derived value too, for a side-by-side table.

    Returns
    -------
    pl.DataFrame
        One row per key and launch, performance keys first (parallel sizes leading), then
        other differing keys alphabetically, then derived values.
    """
    if not launches:
        raise ValueError("config_diff needs at least one launch")
    default = [chr(ord("a") + i) for i in range(len(launches))]
    names = list(labels) if labels is not None else default
    if len(names) != len(launches):
        raise ValueError(f"config_diff: {len(launches)} launches but {len(names)} labels")
    pairs = [_args_of(x) for x in launches]
    derived = [derived_settings(a, f) for a, f in pairs]
    keys = list(dict.fromkeys(k for a, _ in pairs for k in a))
    perf = [k for k in PERF_KEYS if k in keys]
    others = sorted(k for k in keys if k not in PERF_KEYS)
    rows: list[dict[str, Any]] = []
    order = 0

    def add(key: str, group: str, meaning: str, values: list[tuple[bool, Any]]) -> None:
        nonlocal order
        normal = [(present, _json(_norm(v))) for present, v in values]
        changed = len(set(normal)) > 1
        if only_changed and not changed:
            return
        if not only_changed and not changed and group == "other":
            return
        for name, (present, value) in zip(names, values, strict=True):
            rows.append(
                {
                    "order": order,
                    "key": key,
                    "group": group,
                    "meaning": meaning,
                    "run": name,
                    "value": _json(value) if present else None,
                    "changed": changed,
                }
            )
        order += 1

    for key in [*perf, *others]:
        group, meaning = PERF_KEYS.get(key, ("other", ""))
        add(key, group, meaning, [(key in a, a.get(key)) for a, _ in pairs])
    for key, meaning in DERIVED_KEYS.items():
        add(key, "derived", meaning, [(True, d[key]) for d in derived])
    return pl.DataFrame(rows, schema=CONFIG_DIFF, orient="row")


def intended_vs_effective(
    flags: Mapping[str, Any],
    server_args: Mapping[str, Any],
    facts: Mapping[str, Any] | None = None,
    *,
    complete: bool = True,
) -> pl.DataFrame:
    """Each flag of the launch command against what SGLang logged (schema ``INTENDED``).

    Parameters
    ----------
    flags
        ``parse_launch_command(command)``: field → value, ``__env__`` → environment.
    server_args, facts
        The launch's ServerArgs dump and ``Launch.facts()`` (the startup summary's resolved
        ``max_running_requests``, ``chunked_prefill_size``, ``max_total_num_tokens``).
    complete
        False when the dump was cut: a flag missing from it is then unknown, not ignored.

    Returns
    -------
    pl.DataFrame
        One row per flag; ``applied`` False where the run used another value.
    """
    facts = facts or {}
    rows = []
    for flag, intended in flags.items():
        if flag == "__env__":
            for name, value in dict(intended).items():
                rows.append(
                    _row(name, "env", value, None, None, "environment: not in the ServerArgs dump")
                )
            continue
        if flag in _NOT_FIELDS:
            continue
        group = perf_group(flag)
        field = flag
        if flag not in server_args:
            field = next((k for k in _RENAMED.get(flag, ()) if k in server_args), flag)
        if field not in server_args:
            if not complete:
                rows.append(_row(flag, group, intended, None, None, "the ServerArgs dump was cut"))
            else:
                note = "no such ServerArgs field in this SGLang version (typo or too old?)"
                rows.append(_row(flag, group, intended, None, False, note))
            continue
        effective = server_args[field]
        note = "as logged in ServerArgs" if field == flag else f"as logged in ServerArgs.{field}"
        resolved = _RESOLVED.get(flag)
        logged = _int(facts.get(resolved)) if resolved else None
        if logged is not None and not _same(intended, effective):
            pass  # the dump already disagrees; keep the dump's value as the evidence
        elif logged is not None and not _same(intended, logged):
            effective, note = logged, f"resolved by the scheduler (startup `{resolved}=`)"
        if effective is None and note.startswith("as logged"):
            note += ": None means SGLang's automatic value"
        rows.append(_row(flag, group, intended, effective, _same(intended, effective), note))
    return pl.DataFrame(rows, schema=INTENDED, orient="row")


def _row(
    flag: str, group: str, intended: Any, effective: Any, applied: bool | None, note: str
) -> dict[str, Any]:
    return {
        "flag": flag,
        "group": group,
        "intended": _json(intended),
        "effective": None if applied is None and effective is None else _json(effective),
        "applied": applied,
        "note": note,
    }


def _same(intended: Any, effective: Any) -> bool:
    """A command-line value against a logged one: numbers by value, flags as booleans."""
    a, b = _norm(intended), _norm(effective)
    if a is True and b is True:
        return True
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, list) and not isinstance(b, list):
        return False
    if isinstance(b, list) and not isinstance(a, list):
        return [a] == b
    if isinstance(a, str) and not isinstance(b, str):
        # A flag SGLang parses into a non-string (e.g. "None"), compared by its text.
        return a.lower() == str(b).lower()
    return a == b
