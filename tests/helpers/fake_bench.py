"""A tiny benchmark client: ``--concurrency`` requests in flight until ``--num-prompts`` are
done, then one ``sglang.bench_serving``-shaped JSON line appended to ``--output``.

Run as a script by the capture tests (``fake_tools.bench_cmd``); ``--hold S`` waits S seconds
before sending (a phase that is still running when the test stops the capture). A request that
fails (the server died) is not completed; like ``sglang.bench_serving`` the client still writes
its result line, with ``completed`` 0 when none did.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--num-prompts", type=int, required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--input-len", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=24)
    parser.add_argument("--pid-dir", type=Path)
    parser.add_argument("--hold", type=float, default=0.0)
    args = parser.parse_args()
    if args.pid_dir is not None:
        (args.pid_dir / str(os.getpid())).touch()
    if args.hold:
        time.sleep(args.hold)
    prompt = " ".join(["word"] * args.input_len)

    def one(_: int) -> tuple[float, int] | None:
        body = json.dumps(
            {"model": "default", "prompt": prompt, "max_tokens": args.output_len}
        ).encode()
        request = urllib.request.Request(
            args.url + "/v1/completions", body, {"Content-Type": "application/json"}
        )
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                made = json.loads(answer.read())["usage"]["completion_tokens"]
        except OSError:
            return None
        return (time.monotonic() - started) * 1000.0, made

    started = time.monotonic()
    with ThreadPoolExecutor(args.concurrency) as pool:
        done = [r for r in pool.map(one, range(args.num_prompts)) if r is not None]
    duration = max(time.monotonic() - started, 1e-6)
    e2e = [ms for ms, _ in done] or [0.0]
    out_tokens = sum(n for _, n in done)
    in_tokens = args.input_len * len(done)
    tpot = [ms / max(n - 1, 1) for ms, n in done] or [0.0]
    result = {
        "backend": "sglang",
        "dataset_name": "random",
        "request_rate": float("inf"),
        "max_concurrency": args.concurrency,
        "random_input_len": args.input_len,
        "random_output_len": args.output_len,
        "random_range_ratio": 1.0,
        "duration": duration,
        "completed": len(done),
        "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
        "total_output_tokens_retokenized": out_tokens,
        "request_throughput": len(done) / duration,
        "input_throughput": in_tokens / duration,
        "output_throughput": out_tokens / duration,
        "mean_e2e_latency_ms": statistics.fmean(e2e),
        "median_e2e_latency_ms": statistics.median(e2e),
        "mean_ttft_ms": 5.0,
        "median_ttft_ms": 5.0,
        "mean_tpot_ms": statistics.fmean(tpot),
        "median_tpot_ms": statistics.median(tpot),
        "mean_itl_ms": statistics.fmean(tpot),
        "median_itl_ms": statistics.median(tpot),
        "concurrency": sum(e2e) / 1000.0 / duration,
    }
    with args.output.open("a", encoding="utf-8") as f:
        f.write(json.dumps(result) + "\n")
    print(f"Successful requests: {len(done)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
