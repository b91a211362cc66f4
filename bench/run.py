"""``make bench``: typed parse of SGLang logs of 100 MB and 1 GB, measured against ``grep -c``.

    python bench/run.py            # 100 MB and 1 GB (BENCH_MB=10000: 100 MB and 10 GB)
    python bench/run.py --quick    # 100 MB only

Each measurement runs in a fresh process: ``grep -c 'Decode batch'`` (median of 3), the full
parse ``bench/parse_once.py FILE`` (median of 3, 2 for files over 2 GB; peak RSS of the whole
process, reported by the child itself), and a cached load (``--cache``: built once, then timed).
The machine is shared: each row says the load average it started at, and the table shows
medians. Targets at 1 GB: parse ≤ 15 × grep (a 100 MB parse is bound by start-up), peak RSS
≤ 600 MB and ≤ 1.5 × the 100 MB run's.
The table goes to stdout, the numbers to ``bench/out/last.json``. 1 MB = 10**6 bytes; RSS in MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
OUT = BENCH / "out"
sys.path.insert(0, str(BENCH))

import make_log  # noqa: E402

TARGET_RATIO = 15.0  # parse wall time ≤ 15 × grep -c
TARGET_RSS_MB = 600.0  # peak RSS of the whole process at 1 GB
TARGET_RSS_GROWTH = 1.5  # RSS(big) / RSS(100 MB)
GREP_RUNS = 3
PARSE_RUNS = 3
TIMEOUT_S = 3600


def log_path(size_mb: float) -> Path:
    """``sglang-1g.log`` for 1000 MB, ``sglang-100m.log`` for 100 MB, ``sglang-<N>m.log`` else."""
    name = "1g" if size_mb == 1000 else f"{size_mb:g}m"
    return OUT / f"sglang-{name}.log"


def ensure_log(size_mb: float) -> tuple[Path, dict[str, Any], float | None]:
    """Reuse the generated log if its sidecar matches, else generate it.

    Returns (path, meta, generation seconds or None when reused).
    """
    path = log_path(size_mb)
    want = int(size_mb * 1_000_000)
    try:
        meta = json.loads(make_log.meta_path(path).read_text())
        if (
            meta.get("version") == make_log.GENERATOR_VERSION
            and meta.get("requested_bytes") == want
            and path.stat().st_size == meta.get("bytes")
        ):
            return path, meta, None
    except (OSError, ValueError):
        pass
    print(f"generating {path.relative_to(ROOT)} ({size_mb:g} MB) ...", file=sys.stderr, flush=True)
    t = time.perf_counter()
    meta = make_log.write_log(path, want)
    return path, meta, time.perf_counter() - t


def timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run *argv* with stdout/stderr to pipes; return (wall seconds, result)."""
    t = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    return time.perf_counter() - t, p


def bench_grep(path: Path) -> dict[str, Any]:
    """``grep -c 'Decode batch' FILE``: one warm-up, then best of GREP_RUNS.

    stdout is a pipe, so grep reads the whole file (with /dev/null it stops at the first match).
    """
    grep = shutil.which("grep") or "grep"
    timed([grep, "-c", "Decode batch", str(path)])  # warm-up: page cache
    runs: list[float] = []
    count = -1
    for _ in range(GREP_RUNS):
        dt, p = timed([grep, "-c", "Decode batch", str(path)])
        if p.returncode not in (0, 1):
            raise RuntimeError(f"grep failed: {p.stderr.strip()}")
        runs.append(dt)
        count = int(p.stdout.strip() or 0)
    return {"best_s": statistics.median(runs), "runs_s": runs, "count": count}


def python_exe() -> str:
    """The project venv's interpreter (what ``make`` uses), else this one."""
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


class ChildFailed(RuntimeError):
    """A parse subprocess exited non-zero or without its BENCH line."""

    def __init__(self, returncode: int, tail: str) -> None:
        super().__init__(f"exit status {returncode}:\n{tail}")
        self.returncode = returncode


def parse_child(script: Path, path: Path, cache: bool) -> dict[str, Any]:
    """One fresh ``python SCRIPT FILE [--cache]``: wall time, the child's BENCH stats, summary."""
    argv = [python_exe(), str(script), str(path)] + (["--cache"] if cache else [])
    dt, p = timed(argv)
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines or not lines[-1].startswith("BENCH "):
        msg = (p.stderr.strip() or p.stdout.strip() or "no output").splitlines()
        raise ChildFailed(p.returncode, "\n".join(msg[-15:]))
    stats = json.loads(lines[-1][len("BENCH ") :])
    summary: Any = None
    if len(lines) >= 2:
        try:
            summary = json.loads(lines[-2])
        except ValueError:
            summary = lines[-2][:2000]
    return {
        "wall_s": dt,
        "rss_mb": stats.get("maxrss_kib", 0) / 1024,
        "stats": stats,
        "summary": summary,
    }


def bench_parse(script: Path, path: Path) -> dict[str, Any]:
    """Full parse without cache, median of PARSE_RUNS; peak RSS is the max over the runs."""
    n = PARSE_RUNS if path.stat().st_size < 2e9 else 2
    runs = [parse_child(script, path, cache=False) for _ in range(n)]
    best = sorted(runs, key=lambda r: r["wall_s"])[(len(runs) - 1) // 2]
    return {
        "best_s": statistics.median(r["wall_s"] for r in runs),
        "runs_s": [r["wall_s"] for r in runs],
        "inner": best["stats"],
        "peak_rss_mb": max(r["rss_mb"] for r in runs),
        "summary": best["summary"],
    }


def bench_cached(script: Path, path: Path) -> dict[str, Any]:
    """Load with ``cache=True`` twice; the second run (a cache hit) is the one timed.

    The first builds the cache, unless a valid one is left from an earlier run.
    """
    first = parse_child(script, path, cache=True)
    second = parse_child(script, path, cache=True)
    return {
        "first_s": first["wall_s"],
        "best_s": second["wall_s"],
        "inner": second["stats"],
        "peak_rss_mb": second["rss_mb"],
    }


def _fmt(v: float | None, spec: str, unit: str = "") -> str:
    return "n/a" if v is None else f"{v:{spec}}{unit}"


def _verdict(ok: bool | None) -> str:
    return "" if ok is None else ("ok" if ok else "MISSED")


def print_table(results: list[dict[str, Any]]) -> None:
    """One column per file size: the metrics, their targets and a verdict."""
    small = next((r for r in results if r["size_mb"] < 200 and r.get("peak_rss_mb")), None)
    for r in results:
        rss = r.get("peak_rss_mb")
        if small is not None and r is not small and rss:
            r["rss_growth"] = rss / small["peak_rss_mb"]
    rows: list[tuple[str, list[str], str, list[str]]] = []

    def row(name: str, key: str, spec: str, unit: str = "", target: str = "", check=None) -> None:
        values = [_fmt(r.get(key), spec, unit) for r in results]
        verdicts = [_verdict(check(r)) if check and r.get(key) is not None else "" for r in results]
        rows.append((name, values, target, verdicts))

    row("file size (MB)", "size_mb", ",.0f")
    row("lines", "lines", ",.0f")
    row("load average at start", "loadavg_1m_before", ".1f")
    row("grep -c 'Decode batch' (s)", "grep_s", ".3f")
    row("parse, no cache (s)", "parse_s", ".2f")
    row("parse / grep", "parse_ratio", ".1f", "×", f"≤ {TARGET_RATIO:g}× at ≥ 1 GB",
        lambda r: r["parse_ratio"] <= TARGET_RATIO if r["size_mb"] >= 500 else None)  # fmt: skip
    row("parse throughput (MB/s)", "parse_mb_s", ".1f")
    row("parse CPU (user+sys, s)", "parse_cpu_s", ".1f")
    row("peak RSS (MB)", "peak_rss_mb", ",.0f", "", f"≤ {TARGET_RSS_MB:g} at ≥ 1 GB",
        lambda r: r["peak_rss_mb"] <= TARGET_RSS_MB or r["size_mb"] < 500)  # fmt: skip
    row("RSS / RSS(100 MB)", "rss_growth", ".2f", "×", f"≤ {TARGET_RSS_GROWTH:g}×",
        lambda r: r["rss_growth"] <= TARGET_RSS_GROWTH)  # fmt: skip
    row("cached load (s)", "cached_s", ".2f")
    row("cached load peak RSS (MB)", "cached_peak_rss_mb", ",.0f")
    w0 = max(len(a) for a, *_ in rows)
    w1 = max(len(v) for _, vs, *_ in rows for v in vs)
    w2 = max(len(t) for *_, t, _ in rows)
    print(f"\nppscope bench ({results[0]['cpus']} CPUs, polars {results[0]['polars']}): medians")
    for name, values, target, verdicts in rows:
        cells = "  ".join(f"{v:>{w1}}  {d:<6}" for v, d in zip(values, verdicts, strict=True))
        print(f"{name:<{w0}}  {cells}  {target:<{w2}}".rstrip())
    print("(whole-process wall times: interpreter start and imports included)")
    for r in results:
        if r.get("error"):
            print(f"\n{r['file']}: parse failed: {r['error']}")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "n/a"


def measure(size_mb: float, parser: Path) -> dict[str, Any]:
    """Generate or reuse the log of ``size_mb``, then grep, parse and cached-load it."""
    path, meta, gen_s = ensure_log(size_mb)
    if gen_s is not None:
        print(f"generated in {gen_s:.1f} s", file=sys.stderr)
    res: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpus": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "python": platform.python_version(),
        "polars": _version("polars"),
        "loadavg_1m_before": os.getloadavg()[0],
        "file": str(path.relative_to(ROOT)),
        "bytes": meta["bytes"],
        "size_mb": meta["bytes"] / 1e6,
        "lines": meta["lines"],
        "generated_s": gen_s,
        "parser": str(parser),
    }
    print(f"{path.name}: grep -c ...", file=sys.stderr, flush=True)
    g = bench_grep(path)
    res.update(grep_s=g["best_s"], grep_runs_s=g["runs_s"], grep_count=g["count"])
    try:
        print(f"{path.name}: parse (no cache) ...", file=sys.stderr, flush=True)
        p = bench_parse(parser, path)
        inner = p["inner"]
        res.update(
            parse_s=p["best_s"],
            parse_runs_s=p["runs_s"],
            parse_inner=inner,
            parse_cpu_s=inner.get("cpu_s"),
            parse_ratio=p["best_s"] / g["best_s"],
            parse_mb_s=res["size_mb"] / p["best_s"],
            peak_rss_mb=p["peak_rss_mb"],
            summary=p["summary"],
        )
        print(f"{path.name}: cached load ...", file=sys.stderr, flush=True)
        c = bench_cached(parser, path)
        res.update(
            cached_first_s=c["first_s"],
            cached_s=c["best_s"],
            cached_inner=c["inner"],
            cached_ratio=c["best_s"] / g["best_s"],
            cached_peak_rss_mb=c["peak_rss_mb"],
        )
    except (ChildFailed, subprocess.TimeoutExpired) as e:
        res["error"] = str(e)
    return res


def main(argv: list[str] | None = None) -> int:
    """Measure each size, print the table, write last.json."""
    ap = argparse.ArgumentParser(description="ppscope parse benchmark (make bench)")
    ap.add_argument("--quick", action="store_true", help="the 100 MB file only")
    ap.add_argument(
        "--parser",
        type=Path,
        default=BENCH / "parse_once.py",
        help="script with parse_once.py's protocol (default: bench/parse_once.py)",
    )
    args = ap.parse_args(argv)
    big = float(os.environ.get("BENCH_MB", "1000"))
    sizes = [100.0] if args.quick else sorted({100.0, big})
    results = [measure(size, args.parser) for size in sizes]
    print_table(results)
    OUT.mkdir(parents=True, exist_ok=True)
    record = {
        "targets": {
            "parse_ratio_max": TARGET_RATIO,
            "peak_rss_mb_max": TARGET_RSS_MB,
            "rss_growth_max": TARGET_RSS_GROWTH,
        },
        "results": results,
    }
    (OUT / "last.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    print(f"\nwrote {(OUT / 'last.json').relative_to(ROOT)}")
    return 1 if any(r.get("error") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
