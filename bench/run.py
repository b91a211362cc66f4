"""``make bench``: typed parse of a 1 GB SGLang log, measured against ``grep -c``.

    python bench/run.py            # 1 GB (BENCH_MB, default 1000) -> bench/out/sglang-1g.log
    python bench/run.py --quick    # 100 MB -> bench/out/sglang-100m.log

Each measurement runs in a fresh process: ``grep -c 'Decode batch'`` (best of 3), the full parse
``bench/parse_once.py FILE`` (best of 2; peak RSS reported by the child itself), and a cached load
(``--cache``, run twice, the second timed). The table goes to stdout, the numbers to
``bench/out/last.json``. 1 MB = 10**6 bytes; RSS in MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
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
TARGET_RSS_MB = 1024.0
GREP_RUNS = 3
PARSE_RUNS = 2
TIMEOUT_S = 1800


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
    return {"best_s": min(runs), "runs_s": runs, "count": count}


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
    """Full parse without cache, best of PARSE_RUNS; peak RSS is the max over the runs."""
    runs = [parse_child(script, path, cache=False) for _ in range(PARSE_RUNS)]
    best = min(runs, key=lambda r: r["wall_s"])
    return {
        "best_s": best["wall_s"],
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


def print_table(r: dict[str, Any]) -> None:
    """The human-readable result: one metric per row, with targets and a verdict."""
    ratio, rss = r.get("parse_ratio"), r.get("peak_rss_mb")
    verdict_ratio = "" if ratio is None else ("ok" if ratio <= TARGET_RATIO else "MISSED")
    verdict_rss = "" if rss is None else ("ok" if rss <= TARGET_RSS_MB else "MISSED")
    rows = [
        ("file size (MB)", _fmt(r["size_mb"], ",.1f"), "", ""),
        ("lines", f"{r['lines']:,}", "", ""),
        ("grep -c 'Decode batch' (s)", _fmt(r["grep_s"], ".3f"), "", ""),
        ("parse, no cache (s)", _fmt(r.get("parse_s"), ".2f"), "", ""),
        ("parse / grep", _fmt(ratio, ".1f", "×"), f"≤ {TARGET_RATIO:g}×", verdict_ratio),
        ("parse throughput (MB/s)", _fmt(r.get("parse_mb_s"), ".1f"), "", ""),
        ("peak RSS (MB)", _fmt(rss, ",.0f"), f"≤ {TARGET_RSS_MB:g}", verdict_rss),
        ("cached load (s)", _fmt(r.get("cached_s"), ".2f"), "", ""),
        ("cached / grep", _fmt(r.get("cached_ratio"), ".1f", "×"), "", ""),
    ]
    w0 = max(len(a) for a, *_ in rows)
    w1 = max(len(b) for _, b, *_ in rows)
    w2 = max(len(c) for *_, c, _ in rows)
    print(f"\nppscope bench: {r['file']}  ({r['cpus']} CPUs, polars {r['polars']})")
    if r["loadavg_1m_before"] > 0.5:
        print(f"note: load average {r['loadavg_1m_before']:.2f} at start: timings are skewed")
    print(f"{'metric':<{w0}}  {'value':>{w1}}  {'target':<{w2}}")
    print(f"{'-' * w0}  {'-' * w1}  {'-' * w2}")
    for a, b, c, d in rows:
        print(f"{a:<{w0}}  {b:>{w1}}  {c:<{w2}}  {d}".rstrip())
    print("(whole-process wall times: interpreter start and imports included)")
    if r.get("error"):
        print(f"\nparse failed: {r['error']}")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "n/a"


def main(argv: list[str] | None = None) -> int:
    """Generate or reuse the log, run the measurements, print the table, write last.json."""
    ap = argparse.ArgumentParser(description="ppscope parse benchmark (make bench)")
    ap.add_argument("--quick", action="store_true", help="100 MB file instead of BENCH_MB")
    ap.add_argument(
        "--parser",
        type=Path,
        default=BENCH / "parse_once.py",
        help="script with parse_once.py's protocol (default: bench/parse_once.py)",
    )
    args = ap.parse_args(argv)
    size_mb = 100.0 if args.quick else float(os.environ.get("BENCH_MB", "1000"))

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
        "parser": str(args.parser),
        "targets": {"parse_ratio_max": TARGET_RATIO, "peak_rss_mb_max": TARGET_RSS_MB},
    }

    print("grep -c ...", file=sys.stderr, flush=True)
    g = bench_grep(path)
    res.update(grep_s=g["best_s"], grep_runs_s=g["runs_s"], grep_count=g["count"])

    status = 0
    try:
        print(f"parse x{PARSE_RUNS} (no cache) ...", file=sys.stderr, flush=True)
        p = bench_parse(args.parser, path)
        res.update(
            parse_s=p["best_s"],
            parse_runs_s=p["runs_s"],
            parse_inner=p["inner"],
            parse_ratio=p["best_s"] / g["best_s"],
            parse_mb_s=res["size_mb"] / p["best_s"],
            peak_rss_mb=p["peak_rss_mb"],
            summary=p["summary"],
        )
        print("cached load x2 ...", file=sys.stderr, flush=True)
        c = bench_cached(args.parser, path)
        res.update(
            cached_first_s=c["first_s"],
            cached_s=c["best_s"],
            cached_inner=c["inner"],
            cached_ratio=c["best_s"] / g["best_s"],
            cached_peak_rss_mb=c["peak_rss_mb"],
        )
    except (ChildFailed, subprocess.TimeoutExpired) as e:
        res["error"] = str(e)
        status = 1

    print_table(res)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "last.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
    print(f"\nwrote {(OUT / 'last.json').relative_to(ROOT)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
