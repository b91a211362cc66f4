"""``sglang.bench_serving --output-file`` JSONL: one result object per concurrency.

Every number comes from the simulated requests of the phase: TTFT and end-to-end latency from
their arrival, first-token and finish times; ITLs from the rank-0 processing times of the
decode micro-batches of each request's slot (a request gets one token per batch of its slot).
Key sets follow the release.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.synth.phases import Bench, Phase
from toolkit.synth.profiles import Profile

__all__ = ["bench_result", "request_metrics", "write_bench"]


def _percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    if not values:
        return 0.0
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _std(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def request_metrics(phase: Phase) -> dict[str, list[float]]:
    """Per-request ``ttft``, ``e2e``, ``tpot`` (ms), all ``itl`` gaps (ms) and token times (s)."""
    batches = phase.batches().filter((pl.col("pp_rank") == 0) & (pl.col("kind") == "decode"))
    by_slot: dict[int, list[float]] = {}
    for slot, t in batches.select("slot", "processed_s").iter_rows():
        if t is not None:
            by_slot.setdefault(slot, []).append(t)
    for times in by_slot.values():
        times.sort()
    out: dict[str, list[float]] = {"ttft": [], "e2e": [], "tpot": [], "itl": [], "tokens": []}
    cols = ("slot", "output_len", "arrival_s", "first_token_s", "finished_s")
    for slot, olen, arrival, first, done in phase.requests().select(cols).iter_rows():
        times = by_slot.get(slot, [])
        lo, hi = bisect.bisect_right(times, first), bisect.bisect_right(times, done)
        stamps = [first, *times[lo:hi]]
        out["tokens"] += stamps
        out["itl"] += [(b - a) * 1e3 for a, b in itertools.pairwise(stamps)]
        out["ttft"].append((first - arrival) * 1e3)
        out["e2e"].append((done - arrival) * 1e3)
        if olen > 1:
            out["tpot"].append((done - first) / (olen - 1) * 1e3)
    return out


def _stats(name: str, values: Sequence[float], stats: Sequence[str]) -> dict[str, float]:
    fns = {
        "mean": _mean,
        "median": lambda v: _percentile(v, 50),
        "std": _std,
        "p90": lambda v: _percentile(v, 90),
        "p95": lambda v: _percentile(v, 95),
        "p99": lambda v: _percentile(v, 99),
    }
    return {f"{s}_{name}_ms": fns[s](values) for s in stats}


# Latency statistics per key set.
_LATENCY = {
    "0.5.5": {
        "e2e_latency": ("mean", "median", "std", "p99"),
        "ttft": ("mean", "median", "std", "p99"),
        "tpot": ("mean", "median", "std", "p99"),
        "itl": ("mean", "median", "std", "p95", "p99"),
    },
    "0.5.23": {
        "e2e_latency": ("mean", "median", "std", "p90", "p95", "p99"),
        "ttft": ("mean", "median", "std", "p90", "p95", "p99"),
        "tpot": ("mean", "median", "std", "p90", "p95", "p99"),
        "itl": ("mean", "median", "std", "p90", "p95", "p99"),
    },
}


def bench_result(
    phase: Phase, bench: Bench, profile: Profile, server_info: dict[str, Any]
) -> dict[str, Any]:
    """The result object ``bench_serving`` appends for one run (keys of the profile's release)."""
    m = request_metrics(phase)
    n = phase.num_prompts
    duration = phase.end_s - phase.start_s
    total_in, total_out = n * bench.input_len, n * bench.output_len
    result: dict[str, Any] = {
        "tag": None,
        "backend": "sglang",
        "dataset_name": "random",
        "request_rate": math.inf,  # written as Infinity, as json.dumps does for SGLang
        "max_concurrency": phase.concurrency,
        "sharegpt_output_len": None,
        "random_input_len": bench.input_len,
        "random_output_len": bench.output_len,
        "random_range_ratio": 1.0,
        "server_info": server_info,
        "duration": duration,
        "completed": n,
        "total_input_tokens": total_in,
        "total_input_text_tokens": total_in,
        "total_input_vision_tokens": 0,
        "total_output_tokens": total_out,
        "total_output_tokens_retokenized": total_out,
        "request_throughput": n / duration,
        "input_throughput": total_in / duration,
        "output_throughput": total_out / duration,
    }
    latency = _LATENCY[profile.bench_keys]
    result |= _stats("e2e_latency", m["e2e"], latency["e2e_latency"])
    result |= _stats("ttft", m["ttft"], latency["ttft"])
    result |= _stats("tpot", m["tpot"], latency["tpot"])
    result |= _stats("itl", m["itl"], latency["itl"])
    result["concurrency"] = sum(m["e2e"]) / 1e3 / duration
    result["accept_length"] = None
    if profile.bench_keys != "0.5.5":  # 0.5.10 added these
        result["total_throughput"] = (total_in + total_out) / duration
        per_second: dict[int, int] = {}
        for t in m["tokens"]:
            k = int(t - phase.start_s)
            per_second[k] = per_second.get(k, 0) + 1
        result["max_output_tokens_per_s"] = float(max(per_second.values(), default=0))
        result["max_concurrent_requests"] = phase.concurrency
    return result


def write_bench(path: Path, results: Sequence[dict[str, Any]]) -> None:
    """One JSON object per line; keys sorted and floats rounded so reruns are byte-identical."""
    lines = [json.dumps(_rounded(r), sort_keys=True) for r in results]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _rounded(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value
