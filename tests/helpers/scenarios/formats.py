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
    "NOISE",
    "WRAPPERS",
    "V",
    "access_line",
    "batch_line",
    "graph_sizes",
    "journald",
    "rank_tag",
    "retract_line",
    "server_args_line",
    "stamp",
    "wrap",
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


def _nanos(when: datetime, salt: int) -> str:
    """Nine fraction digits: the microseconds of ``when`` plus a few ns a wrapper adds."""
    return f"{when.microsecond:06d}{salt % 1000:03d}"


def _rfc3339(when: datetime, salt: int, zone: str, trim: bool) -> str:
    """``2026-05-12T09:31:32.123456789Z``; Go's RFC3339Nano (``trim``) drops trailing zeros."""
    frac = _nanos(when, salt)
    if trim:
        frac = frac.rstrip("0")
    return f"{when:%Y-%m-%dT%H:%M:%S}" + (f".{frac}" if frac else "") + zone


WRAPPERS: dict[str, str] = {
    "plain": "the line as SGLang wrote it (stderr redirected to a file)",
    "journald": "journalctl -o short: `May 12 09:31:32 host python3[pid]: line`",
    "journald-iso": "journalctl -o short-iso: `2026-05-12T09:31:32+0000 host python3[pid]: line`",
    "docker": "docker logs --timestamps: `2026-05-12T09:31:32.123456789Z line` (9 digits, UTC)",
    "kubectl": "kubectl logs --timestamps: RFC3339Nano, trailing zeros of the fraction dropped",
    "cri": "the node's CRI log file: `2026-05-12T11:31:32.1234567+02:00 stderr F line`, host "
    "clock on UTC+2 while SGLang inside the container logs UTC",
    "python-logger": "a parent Python logger: `2026-05-12 09:31:32,531 - __main__ - INFO - line`",
    "compose": "docker compose logs: `sglang-1  | line`",
}
"""Wrapper name → what it puts in front of every line (``sglang-log-formats.md`` §1.4)."""

CRI_ZONE_H = 2  # the CRI wrapper's host clock is this many hours ahead of the log's UTC


def wrap(
    wrapper: str, when: datetime, host: str, pid: int, line: str, stream: str = "stderr"
) -> str:
    """``line`` as ``wrapper`` writes it; ``when`` is the time the process wrote it (the log's
    clock), ``stream`` stdout (uvicorn access lines) or stderr (everything else)."""
    salt = pid * 7919 + len(line)
    if wrapper == "plain":
        return line
    if wrapper == "journald":
        return f"{when:%b} {when.day:>2} {when:%H:%M:%S} {host} python3[{pid}]: {line}"
    if wrapper == "journald-iso":
        return f"{when:%Y-%m-%dT%H:%M:%S}+0000 {host} python3[{pid}]: {line}"
    if wrapper == "docker":
        return f"{_rfc3339(when, salt, 'Z', trim=False)} {line}"
    if wrapper == "kubectl":
        return f"{_rfc3339(when, salt, 'Z', trim=True)} {line}"
    if wrapper == "cri":
        local = when + timedelta(hours=CRI_ZONE_H)
        return f"{_rfc3339(local, salt, f'+{CRI_ZONE_H:02d}:00', trim=True)} {stream} F {line}"
    if wrapper == "python-logger":
        return f"{when:%Y-%m-%d %H:%M:%S},{when.microsecond // 1000:03d} - __main__ - INFO - {line}"
    if wrapper == "compose":
        return f"sglang-1  | {line}"
    raise KeyError(f"no wrapper {wrapper!r}; known: {', '.join(WRAPPERS)}")


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


def access_line(
    port: int,
    path: str = "/v1/completions",
    method: str = "POST",
    status: str = "200 OK",
    client: str = "127.0.0.1",
) -> str:
    return f'INFO:     {client}:{port} - "{method} {path} HTTP/1.1" {status}'


# -- noise: lines a real server log holds that say nothing about the scheduler -----------------

NOISE: dict[str, str] = {
    "http": "a liveness probe (`GET /health`) every 5 s, `GET /v1/models` from a gateway, and "
    "a few `400 Bad Request` answers to malformed requests from another client",
    "traceback": "an unrelated request's `Exception in ASGI application` traceback (lines "
    "without a prefix), transformers and tokenizer warnings, a tqdm bar glued to a line",
    "interleave": "each process writes through its own pipe: lines of different ranks land a "
    "few ms out of order (each process's own lines stay in order)",
}
"""Noise name → what it adds to the log."""

TRACEBACK = (
    "ERROR:    Exception in ASGI application",
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/uvicorn/protocols/http/httptools_impl.py",'
    " line 409, in run_asgi",
    "    result = await app(  # type: ignore[func-returns-value]",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/entrypoints/http_server.py",'
    " line 1187, in openai_v1_chat_completions",
    "    request = ChatCompletionRequest(**(await raw_request.json()))",
    '  File "/usr/local/lib/python3.12/dist-packages/starlette/requests.py", line 252, in json',
    "    self._json = json.loads(body)",
    '  File "/usr/lib/python3.12/json/decoder.py", line 355, in raw_decode',
    '    raise JSONDecodeError("Expecting value", s, err.value) from None',
    "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
)
"""An unrelated request's traceback: only the first line carries SGLang's prefix."""

WARNINGS = (
    "Token indices sequence length is longer than the specified maximum sequence length for "
    "this model (140211 > 131072). Running this sequence through the model will result in "
    "indexing errors",
    "/usr/local/lib/python3.12/dist-packages/transformers/tokenization_utils_base.py:1601: "
    "FutureWarning: `clean_up_tokenization_spaces` was not set. It will be set to `True` by "
    "default.",
    "  warnings.warn(",
)
"""Warnings Python and transformers print on stderr, without a prefix."""


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
    decode_log_interval: int = 40,
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
        ("decode_log_interval", decode_log_interval),
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
