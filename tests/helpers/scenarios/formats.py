"""SGLang's line formats by version, written from the published format strings.

Versions used: 0.4.6 (``Decode batch. …``, ``TP`` before ``PP`` in the rank tag, no ``cuda
graph:`` in prefill lines, ``max_micro_batch_size``, ``Capture cuda graph …`` wording), 0.5.5
(``Decode batch, …`` with a trailing ``", "``, ``TP`` before ``PP``, no async depth), 0.5.10
(``PP`` before ``TP``, no trailing comma, ``cuda graph`` before ``input throughput`` in
prefill lines, optional milliseconds with ``SGLANG_LOG_MS``) and 0.5.23 (``server_args={…}``
dict dump, ``#pending-token``, ``Capture target decode CUDA graph … bs=[…]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

__all__ = [
    "V",
    "access_line",
    "batch_line",
    "graph_sizes",
    "journald",
    "rank_tag",
    "retract_line",
    "server_args_line",
    "stamp",
]

V = tuple[int, ...]


def stamp(epoch: datetime, t_ms: float, ms: bool) -> str:
    """``[YYYY-mm-dd HH:MM:SS(.mmm)`` part of a line prefix (without the bracket)."""
    when = epoch + timedelta(milliseconds=t_ms)
    text = when.strftime("%Y-%m-%d %H:%M:%S")
    return f"{text}.{when.microsecond // 1000:03d}" if ms else text


def rank_tag(v: V, pp_rank: int, tp_rank: int, pp: int, tp: int) -> str:
    """The rank suffix of a scheduler line: order and presence by version."""
    parts: list[str] = []
    if v >= (0, 5, 6):
        parts += [f"PP{pp_rank}"] if pp > 1 else []
        parts += [f"TP{tp_rank}"] if tp > 1 else []
    elif v >= (0, 4, 6):
        parts += [f"TP{tp_rank}"] if tp > 1 else []
        parts += [f"PP{pp_rank}"] if pp > 1 else []
    else:
        parts = [f"TP{tp_rank}"]
    return "".join(" " + p for p in parts)


def journald(epoch: datetime, t_ms: float, host: str, pid: int, line: str) -> str:
    """``journalctl -o short``: ``May  5 21:40:21 host python3[pid]: line``."""
    when = epoch + timedelta(milliseconds=t_ms)
    return f"{when:%b} {when.day:>2} {when:%H:%M:%S} {host} python3[{pid}]: {line}"


def graph_sizes(v: V, max_bs: int) -> list[int]:
    """Decode batch sizes SGLang captures up to ``max_bs``."""
    if v < (0, 5, 0):
        sizes = [1, 2, 4, *range(8, 161, 8)]
    else:
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 497, 16), *range(512, 4097, 32)]
    return [b for b in sizes if b <= max_bs]


# -- batch lines -------------------------------------------------------------------------------


def batch_line(v: V, kind: str, f: dict[str, Any]) -> str:
    """A ``Prefill batch`` or ``Decode batch`` message for version ``v``."""
    sep = ". " if v < (0, 5, 5) else ", "
    trailing = (0, 5, 5) <= v < (0, 5, 9)
    if kind == "decode":
        parts = [
            f"#running-req: {f['running']}",
            f"#token: {f['token']}",
            f"token usage: {f['usage']:.2f}",
            f"cuda graph: {f['graph']}",
            f"gen throughput (token/s): {f['gen_tput']:.2f}",
            f"#queue-req: {f['queue']}",
        ]
        head = "Decode batch"
    else:
        parts = [
            f"#new-seq: {f['new_seq']}",
            f"#new-token: {f['new_token']}",
            "#cached-token: 0",
            f"token usage: {f['usage']:.2f}",
            f"#running-req: {f['running']}",
            f"#queue-req: {f['queue']}",
        ]
        if v >= (0, 5, 16):
            parts.append(f"#pending-token: {f['pending']}")
        if v >= (0, 5, 10):
            parts += ["cuda graph: False", f"input throughput (token/s): {f['input_tput']:.2f}"]
        elif v >= (0, 5, 9):
            parts += [f"input throughput (token/s): {f['input_tput']:.2f}", "cuda graph: False"]
        head = "Prefill batch"
    text = head + sep + ", ".join(parts)
    return text + ", " if trailing else text


def retract_line(f: dict[str, Any]) -> str:
    return (
        "KV cache pool is full. Retract requests. "
        f"#retracted_reqs: {f['n']}, #new_token_ratio: {f['old']:.4f} -> {f['new']:.4f}"
    )


def access_line(port: int, path: str = "/v1/completions", method: str = "POST") -> str:
    return f'INFO:     127.0.0.1:{port} - "{method} {path} HTTP/1.1" 200 OK'


# -- server_args --------------------------------------------------------------------------------


def server_args_line(v: V, fields: Sequence[tuple[str, Any]]) -> str:
    """``server_args=ServerArgs(...)`` (dataclass repr, ≤ 0.5.18) or ``server_args={...}``."""
    if v >= (0, 5, 20):
        return f"server_args={dict(fields)!r}"
    inner = ", ".join(f"{k}={val!r}" for k, val in fields)
    return f"server_args=ServerArgs({inner})"


def server_args_fields(
    v: V,
    *,
    model_path: str,
    tp: int,
    pp: int,
    depth: int | None,
    cap: int | None,
    mrr: int | None,
    max_total_tokens: int | None,
    chunk: int,
    max_prefill_tokens: int,
    mem_fraction: float,
    graph_max: int,
    nnodes: int,
    node_rank: int,
    dist_init_addr: str | None,
    attention_backend: str,
    seed: int,
) -> list[tuple[str, Any]]:
    """The fields of a ServerArgs dump in class order, as resolved at start-up."""
    graphs = graph_sizes(v, graph_max) if graph_max else []
    out: list[tuple[str, Any]] = [
        ("model_path", model_path),
        ("tokenizer_path", model_path),
        ("tokenizer_mode", "auto"),
        ("skip_tokenizer_init", False),
        ("load_format", "auto"),
        ("trust_remote_code", True),
        ("dtype", "auto"),
        ("kv_cache_dtype", "auto"),
        ("quantization", None),
        ("context_length", None),
        ("device", "cuda"),
        ("served_model_name", model_path),
        ("chat_template", None),
        ("is_embedding", False),
        ("revision", None),
        ("host", "0.0.0.0"),
        ("port", 30000),
        ("mem_fraction_static", mem_fraction),
        ("max_running_requests", mrr),
        ("max_total_tokens", max_total_tokens),
        ("chunked_prefill_size", chunk),
        ("max_prefill_tokens", max_prefill_tokens),
        ("schedule_policy", "lpm" if v < (0, 5, 0) else "fcfs"),
        ("schedule_conservativeness", 1.0),
        ("cpu_offload_gb", 0),
        ("page_size", 1),
        ("tp_size", tp),
        ("pp_size", pp),
        ("max_micro_batch_size" if v < (0, 5, 5) else "pp_max_micro_batch_size", cap),
    ]
    if v >= (0, 5, 7):
        out.append(("pp_async_batch_depth", depth or 0))
    out += [
        ("stream_interval", 1),
        ("stream_output", False),
        ("random_seed", seed),
        ("watchdog_timeout", 300),
        ("dist_timeout", None),
        ("download_dir", None),
        ("base_gpu_id", 0),
        ("gpu_id_step", 1),
        ("log_level", "info"),
        ("log_level_http", None),
        ("log_requests", False),
        ("show_time_cost", False),
        ("enable_metrics", False),
        ("decode_log_interval", 40),
        ("api_key", None),
        ("file_storage_path", "sglang_storage"),
        ("enable_cache_report", False),
        ("dp_size", 1),
        ("load_balance_method", "round_robin"),
        ("ep_size", 1),
        ("dist_init_addr", dist_init_addr),
        ("nnodes", nnodes),
        ("node_rank", node_rank),
        ("json_model_override_args", "{}"),
        ("attention_backend", attention_backend),
        ("sampling_backend", "flashinfer"),
        ("grammar_backend", "xgrammar"),
        ("speculative_algorithm", None),
        ("enable_dp_attention", False),
        ("disable_radix_cache", False),
        ("disable_cuda_graph", graph_max == 0),
        ("disable_cuda_graph_padding", False),
        ("disable_overlap_schedule", pp > 1),
        ("enable_mixed_chunk", False),
        ("enable_torch_compile", False),
        ("torch_compile_max_bs", 32),
    ]
    if v >= (0, 5, 16):
        out += [
            ("cuda_graph_max_bs_decode", graph_max or None),
            ("cuda_graph_bs_decode", graphs or None),
            ("cuda_graph_backend_decode", "full"),
        ]
    else:
        out += [
            ("cuda_graph_max_bs", graph_max or None),
            ("cuda_graph_bs", graphs if v >= (0, 5, 0) and graphs else None),
        ]
    out += [
        ("enable_nccl_nvls", False),
        ("disable_custom_all_reduce", False),
    ]
    if v >= (0, 4, 10):
        out.append(("enable_metrics_for_all_schedulers", False))
    return out
