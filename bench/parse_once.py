"""One full typed parse of an SGLang log, run in a fresh process by ``bench/run.py``.

    python bench/parse_once.py FILE [--cache]

Prints the log summary as one JSON line, then a last line ``BENCH {...}`` with this process's
peak RSS (``ru_maxrss``, KiB) and the in-process load/summary times. Exit status 2 means the
loader API is missing.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo's own toolkit


def main(argv: list[str] | None = None) -> int:
    """Load *FILE* with ``toolkit.load_sglang_log``, summarise it, report timings and RSS."""
    ap = argparse.ArgumentParser(description="one typed parse for the benchmark")
    ap.add_argument("file")
    ap.add_argument("--cache", action="store_true", help="load with cache=True (Parquet cache)")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    import toolkit

    load = getattr(toolkit, "load_sglang_log", None)
    if load is None:
        print(
            "bench/parse_once.py: toolkit.load_sglang_log does not exist yet - "
            "the benchmark needs the SGLang log loader (toolkit.load_sglang_log(path, cache=...)).",
            file=sys.stderr,
        )
        return 2
    t1 = time.perf_counter()
    log = load(args.file, cache=args.cache)
    t2 = time.perf_counter()
    s = log.summary()
    t3 = time.perf_counter()
    print(json.dumps(s, default=str))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    stats = {
        "maxrss_kib": usage.ru_maxrss,  # KiB on Linux
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "import_s": t1 - t0,
        "load_s": t2 - t1,
        "summary_s": t3 - t2,
    }
    print("BENCH " + json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
