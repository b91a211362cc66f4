"""Result dicts of the ``bench_serving`` family: SGLang's JSONL objects and vLLM's JSON.

vLLM's ``benchmark_serving.py`` and SGLang's ``bench_serving`` share an ancestor, so their keys
mostly agree; where they differ (SGLang 0.2.7's ``total_input``, vLLM's ``e2el``, vLLM's
``request_goodput:`` typo) the tables below name both. ``flavour`` tells the two apart by the
keys only one of them writes.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from toolkit.load.bench.common import Parsed, layout_of, num, to_ms, whole
from toolkit.load.bench.format import NOT_JSON, Peek

# A result dict has one of these; keys only SGLang's or only vLLM's client writes.
THROUGHPUT_KEYS = frozenset(
    {"output_throughput", "output_token_throughput", "request_throughput", "total_throughput"}
)
SGLANG_KEYS = frozenset(
    {
        "total_output_tokens_retokenized",
        "total_output_retokenized",
        "mean_e2e_latency_ms",
        "median_e2e_latency_ms",
        "mean_e2e_latency",
        "median_e2e_latency",
        "server_info",
        "accept_length",
        "dataset_name",
    }
)
VLLM_KEYS = frozenset(
    {
        "model_id",
        "tokenizer_id",
        "burstiness",
        "total_token_throughput",
        "mean_e2el_ms",
        "median_e2el_ms",
        "endpoint_type",
        "date",
    }
)
# For a first JSONL line too long for the sniffing window: each client's own key spellings.
_SGLANG_HINT = re.compile(r'"(?:mean|median)_(?:ttft|itl|e2e_latency)(?:_ms)?"\s*:')
_VLLM_HINT = re.compile(r'"(?:model_id|tokenizer_id|mean_e2el_ms|burstiness)"\s*:')

# Result key → run column; values are numbers unless the column is text.
SCALARS: dict[str, str] = {
    "backend": "backend",
    "model_id": "model",
    "model": "model",
    "max_concurrency": "max_concurrency",
    "num_prompts": "num_prompts",
    "completed": "completed",
    "failed": "failed",
    "duration": "duration_s",
    "benchmark_duration": "duration_s",  # SGLang 0.2.7
    "total_input_tokens": "total_input_tokens",
    "total_input": "total_input_tokens",  # SGLang 0.2.7
    "total_output_tokens": "total_output_tokens",
    "total_output": "total_output_tokens",  # SGLang 0.2.7
    "request_throughput": "request_per_s",
    "input_throughput": "input_tok_s",
    "output_throughput": "output_tok_s",
    "output_token_throughput": "output_tok_s",  # SGLang 0.2.7
    "total_throughput": "total_tok_s",
    "total_token_throughput": "total_tok_s",  # vLLM
    "max_output_tokens_per_s": "peak_output_tok_s",
    "max_concurrent_requests": "peak_concurrency",
    "concurrency": "concurrency_observed",  # SGLang: mean requests in flight, not the cap
    "accept_length": "accept_length",
    "request_goodput": "goodput_per_s",
    "request_goodput:": "goodput_per_s",  # vLLM benchmark_serving.py's typo
    "goodput": "goodput_per_s",
    "max_itl_ms": "itl_max_ms",
}
TEXT_COLUMNS = frozenset({"backend", "model"})
# mean_ttft_ms, p99_e2el_ms, median_e2e_latency_ms, and 0.2.7's median_ttft / mean_e2e_latency.
LATENCY_KEY = re.compile(
    r"(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2e_latency|e2el)(?:_ms)?"
)
_METRIC = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e_latency": "e2e", "e2el": "e2e"}
_STATS = {"mean", "median", "std", "p90", "p95", "p99"}
# Per-request arrays (--output-details / --save-detailed); they become the requests table.
REQUEST_ARRAYS = frozenset(
    {
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "latencies",
        "start_times",
        "errors",
        "generated_texts",
        "queue_times",
    }
)
# Large or private values that have no place in `extra`.
_DROPPED = frozenset({"server_info", "generated_texts"})


def latency_column(key: str) -> str | None:
    """The run column of a latency key (``p99_e2el_ms`` → ``e2e_p99_ms``), else None."""
    m = LATENCY_KEY.fullmatch(key)
    if m is None:
        return None
    stat, metric = m.group(1), _METRIC[m.group(2)]
    stat = "median" if stat == "p50" else stat
    return f"{metric}_{stat}_ms" if stat in _STATS else None


def read_result(obj: dict[str, Any]) -> Parsed:
    """One result dict → ``Parsed`` (values, extra, per-request rows, layout, hints)."""
    out = Parsed()
    values, extra = out.values, out.extra
    for key, value in obj.items():
        column = SCALARS.get(key)
        if column is None and key not in SCALARS:
            column = latency_column(key)
        if column is not None:
            if column in TEXT_COLUMNS:
                values[column] = None if value is None else str(value)
            elif values.get(column) is None:
                values[column] = num(value)
            continue
        if key == "request_rate":
            rate = num(value)
            values["request_rate"] = rate
            if rate is None and value is not None:
                values["request_rate_text"] = str(value)
        elif key == "date":
            values["ts"] = _vllm_date(value)
            extra[key] = value
        elif key in ("tag", "label"):
            out.hint = None if value is None else str(value)
            extra[key] = value
        elif key not in REQUEST_ARRAYS and key not in _DROPPED:
            extra[key] = value
    info = obj.get("server_info")
    if isinstance(info, dict):
        nested = info.get("server_args")
        out.layout = layout_of(nested if isinstance(nested, dict) else info)
        if info.get("version") is not None:
            extra["server_version"] = info["version"]
        if values.get("model") is None and isinstance(info.get("model_path"), str):
            values["model"] = info["model_path"]
    else:
        # vLLM --metadata tp=8 pp=1 lands as top-level text keys.
        out.layout = layout_of(obj)
    out.requests = _requests(obj)
    return out


def _vllm_date(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    for fmt in ("%Y%m%d-%H%M%S", "%Y-%m-%dT%H:%M:%S"):
        try:
            return datetime.strptime(value, fmt)
        except ValueError:
            continue
    return None


def _requests(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-request rows from the detail arrays (seconds in the file, ms in the table)."""
    arrays = {k: obj[k] for k in REQUEST_ARRAYS if isinstance(obj.get(k), list)}
    n = max((len(v) for v in arrays.values()), default=0)
    if not n:
        return []

    def at(key: str, i: int) -> Any:
        column = arrays.get(key)
        return column[i] if column is not None and i < len(column) else None

    starts = [num(s) for s in arrays.get("start_times", [])]
    first = min((s for s in starts if s is not None), default=None)
    rows = []
    for i in range(n):
        error = at("errors", i)
        itl = at("itls", i)
        gaps = [x for x in (num(g) for g in itl) if x is not None] if isinstance(itl, list) else []
        start = starts[i] if i < len(starts) else None
        rows.append(
            {
                "request": i,
                "start_s": None if start is None or first is None else start - first,
                "ttft_ms": to_ms(at("ttfts", i), "s"),
                "e2e_ms": to_ms(at("latencies", i), "s"),
                "itl_mean_ms": sum(gaps) / len(gaps) * 1e3 if gaps else None,
                "input_len": whole(at("input_lens", i)),
                "output_len": whole(at("output_lens", i)),
                "ok": not error,
                "error": str(error) if error else None,
            }
        )
    return rows


def flavour(peek: Peek) -> str | None:
    """Which client wrote a file of result dicts: ``sglang``, ``vllm``, or None for neither.

    From the parsed first object when it parses; else, for a first line too long to parse
    from the sniffing window, from the key spellings in it. A dict with a ``backend`` and
    none of either client's own keys is SGLang's (its oldest JSONL).
    """
    obj = peek.json
    if obj is NOT_JSON:
        if not peek.first.startswith("{") or '"backend"' not in peek.text:
            return None
        if _VLLM_HINT.search(peek.text):
            return "vllm"
        return "sglang" if _SGLANG_HINT.search(peek.text) else None
    if not isinstance(obj, dict) or not THROUGHPUT_KEYS & obj.keys():
        return None
    if SGLANG_KEYS & obj.keys():
        return "sglang"
    if VLLM_KEYS & obj.keys():
        return "vllm"
    return "sglang" if "backend" in obj else None
