"""``make bench``: the commands users run, timed as whole processes on reference inputs.

    python bench/commands.py             # runs of 100 MB and 1 GB
    BENCH_BIG=1 python bench/commands.py # adds a 10 GB run (RSS growth checked 1 GB -> 10 GB)
    python bench/commands.py --quick     # the 100 MB run only

Reference inputs (``bench/make_log.py``, generated once into ``bench/out/commands/``): a run
directory per size holding one journald-wrapped PP8 server log, a quarter of its batch lines in
the 0.5.5 profile, with request lines (``Receive:``/``Finish:``); a 100 MB log of each other
wrapper (``docker logs --timestamps``, ``kubectl logs --timestamps``); the GPU trace of
``bench/gpu_bench.py`` (``capture``'s query: text columns ``name`` and ``uuid`` included).

Each command runs in a fresh process (``python -m toolkit.cli.main ...``, stdout to a pipe):
wall time, and the peak RSS the kernel reports for it (``os.wait4``: the largest resident size of
the process or of any child it waited for, e.g. the report's kernel). Ratios are against
``grep -c 'Decode batch'`` on the same log and ``pl.read_csv`` of the same trace, measured in
this run. Without ``BENCH_BIG`` the scaling check is the RSS growth 100 MB -> 1 GB (the issue's
target is 1 GB -> 10 GB: a stricter span, measured with ``BENCH_BIG=1``).
The table goes to stdout, the numbers to ``bench/out/commands-last.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
OUT = BENCH / "out" / "commands"
sys.path.insert(0, str(BENCH))

import make_log  # noqa: E402
from gpu_bench import ensure_trace  # noqa: E402

TIMEOUT_S = 3600
OLD_EVERY = 4  # a quarter of the batch lines in the 0.5.5 profile
TARGETS = {
    "parse_ratio": 12.0,  # parse --no-cache of 1 GB / grep -c
    "parse_rss_mb": 600.0,
    "diagnose_ratio": 15.0,  # diagnose, cache warm / grep -c of the log
    "diagnose_rss_mb": 800.0,
    "rss_growth": 1.5,
    "report_rss_mb": 1000.0,
    "report_html_mb": 5.0,
    "first_parse": 1.3,  # first parse after a fresh install / a warm one
}


def python_exe() -> str:
    """The project venv's interpreter (what ``make`` uses), else this one."""
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def run_process(argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run *argv* from the repository root; wall seconds, peak RSS (MiB), exit status."""
    t = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=err, env=env)
        _pid, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    return {
        "argv": argv,
        "wall_s": wall,
        "rss_mb": usage.ru_maxrss / 1024,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "status": p.returncode,
        "stdout_bytes": len(stdout),
        "stderr_tail": stderr.decode(errors="replace")[-1500:],
    }


def shown(argv: list[str]) -> str:
    """The command as a user would type it (``ppscope`` for the module, paths from the root)."""
    words = ["ppscope", *argv[3:]] if argv[1:3] == ["-m", "toolkit.cli.main"] else argv
    return shlex.join(os.path.relpath(w, ROOT) if w.startswith(str(ROOT)) else w for w in words)


def ppscope(*words: str | Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One ``ppscope`` command in a fresh process; a failure stops the bench with its stderr."""
    argv = [python_exe(), "-m", "toolkit.cli.main", *map(str, words)]
    r = run_process(argv, env)
    if r["status"] not in (0, 1):
        raise RuntimeError(f"{shown(argv)}: exit status {r['status']}\n{r['stderr_tail']}")
    return r


def grep_count(path: Path, runs: int = 3) -> dict[str, Any]:
    """``grep -c 'Decode batch' FILE`` (stdout a file, so grep reads it all): median of runs."""
    argv = [shutil.which("grep") or "grep", "-c", "Decode batch", str(path)]
    run_process(argv)  # warm the page cache
    got = [run_process(argv) for _ in range(runs)]
    return {**got[-1], "wall_s": statistics.median(r["wall_s"] for r in got)}


def read_csv(path: Path, runs: int = 3) -> dict[str, Any]:
    """``pl.read_csv(FILE)`` in a fresh process: median of runs."""
    argv = [python_exe(), "-c", f"import polars as pl; pl.read_csv({str(path)!r})"]
    got = [run_process(argv) for _ in range(runs)]
    return {**got[-1], "wall_s": statistics.median(r["wall_s"] for r in got)}


def ensure_log(name: str, size_mb: float, wrapper: str) -> Path:
    """The generated log ``name``, regenerated when its sidecar does not match."""
    path = OUT / name
    want = int(size_mb * 1_000_000)
    try:
        meta = json.loads(make_log.meta_path(path).read_text())
        if (
            meta.get("version") == make_log.GENERATOR_VERSION
            and meta.get("requested_bytes") == want
            and meta.get("wrapper") == wrapper
            and meta.get("old_every") == OLD_EVERY
            and path.stat().st_size == meta.get("bytes")
        ):
            return path
    except (OSError, ValueError):
        pass
    print(f"generating {path.relative_to(ROOT)} ({size_mb:g} MB, {wrapper}) ...", file=sys.stderr)
    make_log.write_log(path, want, wrapper, OLD_EVERY)
    return path


def size_name(size_mb: float) -> str:
    return f"{size_mb / 1000:g}g" if size_mb >= 1000 else f"{size_mb:g}m"


def measure_run(size_mb: float) -> dict[str, Any]:
    """grep, parse (cold and warm), diagnose and report of the run directory of one size."""
    run = OUT / f"run-{size_name(size_mb)}"
    log = ensure_log(f"run-{size_name(size_mb)}/server.log", size_mb, "journald")
    shutil.rmtree(run / ".ppscope-cache", ignore_errors=True)
    step = f"{run.name}:"
    print(f"{step} grep -c", file=sys.stderr, flush=True)
    res: dict[str, Any] = {"size_mb": log.stat().st_size / 1e6, "grep": grep_count(log)}
    print(f"{step} parse --no-cache (warm compiled passes)", file=sys.stderr, flush=True)
    res["parse_cold"] = ppscope("parse", "--no-cache", "--json", log)
    print(f"{step} parse (builds the cache, then a warm one)", file=sys.stderr, flush=True)
    ppscope("parse", "--json", log)
    res["parse_warm"] = ppscope("parse", "--json", log)
    print(f"{step} diagnose (cache warm)", file=sys.stderr, flush=True)
    res["diagnose"] = ppscope("diagnose", "--json", run)
    print(f"{step} report (cache warm)", file=sys.stderr, flush=True)
    html = OUT / f"report-{size_name(size_mb)}.html"
    res["report"] = ppscope("report", run, "-o", html)
    res["report"]["html_mb"] = html.stat().st_size / 1e6
    return res


def measure_first_parse(log: Path) -> dict[str, Any]:
    """``parse --no-cache`` with an empty compiled-pass cache (a fresh install) and again warm."""
    with tempfile.TemporaryDirectory(prefix="ppscope-numba-") as fresh:
        env = {**os.environ, "NUMBA_CACHE_DIR": fresh}
        first = ppscope("parse", "--no-cache", "--json", log, env=env)
        warm = ppscope("parse", "--no-cache", "--json", log, env=env)
    return {"first": first, "warm": warm}


def measure_wrappers() -> list[dict[str, Any]]:
    """``parse --no-cache`` of a 100 MB log of each container wrapper, against grep."""
    out = []
    for wrapper in ("docker", "kubectl"):
        log = ensure_log(f"{wrapper}-100m.log", 100.0, wrapper)
        print(f"{log.name}: grep -c, parse --no-cache", file=sys.stderr, flush=True)
        out.append({"wrapper": wrapper, "grep": grep_count(log), "parse": ppscope(
            "parse", "--no-cache", "--json", log)})  # fmt: skip
    return out


def measure_gpu() -> dict[str, Any]:
    """The GPU trace: ``pl.read_csv`` and ``ppscope parse --no-cache`` as processes."""
    path, _meta, _gen = ensure_trace()
    print(f"{path.name}: pl.read_csv, parse --no-cache", file=sys.stderr, flush=True)
    return {
        "bytes": path.stat().st_size,
        "read_csv": read_csv(path),
        "parse": ppscope("parse", "--no-cache", "--json", path),
    }


def measure_gpu_load() -> dict[str, Any]:
    """``bench/gpu_bench.py`` in a fresh process: the typed load against ``pl.read_csv``."""
    print("gpu_bench.py: typed load against pl.read_csv", file=sys.stderr, flush=True)
    r = run_process([python_exe(), str(BENCH / "gpu_bench.py")])
    if r["status"] != 0:
        raise RuntimeError(f"bench/gpu_bench.py failed:\n{r['stderr_tail']}")
    return json.loads((BENCH / "out" / "gpu-last.json").read_text())


Row = tuple[str, str, str, str]


def _verdict(value: float, limit: float, most: bool = True) -> str:
    ok = value <= limit if most else value >= limit
    return "met" if ok else "NOT MET"


def run_rows(res: dict[str, Any], targets: bool) -> list[Row]:
    """Figure, command, value, target and verdict of one run size."""
    g = res["grep"]["wall_s"]
    rows: list[Row] = [(f"{res['size_mb']:,.0f} MB log", shown(res["grep"]["argv"]),
                        f"{g:.3f} s", "")]  # fmt: skip
    for key in ("parse_cold", "parse_warm", "diagnose", "report"):
        r = res[key]
        value = (
            f"{r['wall_s']:.1f} s = {r['wall_s'] / g:.1f}× grep (CPU {r['cpu_s']:.1f} s), "
            f"peak {r['rss_mb']:,.0f} MiB"
        )
        checks = []
        if targets and key in ("parse_cold", "diagnose"):
            name = "parse" if key == "parse_cold" else "diagnose"
            ratio, rss = TARGETS[f"{name}_ratio"], TARGETS[f"{name}_rss_mb"]
            checks.append(f"≤ {ratio:g}× {_verdict(r['wall_s'] / g, ratio)}")
            checks.append(f"≤ {rss:g} MiB {_verdict(r['rss_mb'], rss)}")
        if key == "report":
            value += f", HTML {r['html_mb']:.2f} MB"
            if targets:
                checks.append(f"≤ {TARGETS['report_rss_mb']:g} MiB "
                              f"{_verdict(r['rss_mb'], TARGETS['report_rss_mb'])}")  # fmt: skip
                checks.append(f"HTML ≤ {TARGETS['report_html_mb']:g} MB "
                              f"{_verdict(r['html_mb'], TARGETS['report_html_mb'])}")  # fmt: skip
        rows.append(("", shown(r["argv"]), value, "; ".join(checks)))
    return rows


def growth_rows(base: dict[str, Any], big: dict[str, Any]) -> list[Row]:
    """Peak RSS of the big run over the base run's, per command."""
    span = f"RSS {size_name(big['size_mb'])} / {size_name(base['size_mb'])}"
    rows = []
    for key, name in (("parse_cold", "parse --no-cache"), ("diagnose", "diagnose")):
        ratio = big[key]["rss_mb"] / base[key]["rss_mb"]
        limit = TARGETS["rss_growth"]
        rows.append((span, f"ppscope {name}", f"{ratio:.2f}×", f"≤ {limit:g}× "
                     f"{_verdict(ratio, limit)}"))  # fmt: skip
    return rows


def print_table(record: dict[str, Any]) -> None:
    """Every figure with the command it ran, its ratio, and each target met or not."""
    rows: list[Row] = []
    runs = record["runs"]
    for res in runs:
        rows += run_rows(res, targets=res["size_mb"] >= 500)
    if len(runs) > 1:
        rows += growth_rows(runs[-2], runs[-1])
    first = record.get("first_parse")
    if first:
        ratio = first["first"]["wall_s"] / first["warm"]["wall_s"]
        rows.append(("fresh install", "NUMBA_CACHE_DIR=<empty> " + shown(first["first"]["argv"]),
                     f"{first['first']['wall_s']:.1f} s vs warm {first['warm']['wall_s']:.1f} s"
                     f" = {ratio:.2f}×", f"≤ {TARGETS['first_parse']:g}× "
                     f"{_verdict(ratio, TARGETS['first_parse'])}"))  # fmt: skip
    for w in record.get("wrappers", []):
        g, p = w["grep"]["wall_s"], w["parse"]
        rows.append((f"{w['wrapper']} 100 MB", shown(p["argv"]), f"{p['wall_s']:.1f} s = "
                     f"{p['wall_s'] / g:.1f}× grep, peak {p['rss_mb']:,.0f} MiB", ""))  # fmt: skip
    gpu = record.get("gpu")
    if gpu:
        plain, parse = gpu["read_csv"], gpu["parse"]
        rows.append((f"GPU trace {gpu['bytes'] / 1e6:,.0f} MB", "python -c 'pl.read_csv(F)'",
                     f"{plain['wall_s']:.1f} s, peak {plain['rss_mb']:,.0f} MiB", ""))  # fmt: skip
        rows.append(("", shown(parse["argv"]), f"{parse['wall_s']:.1f} s = "
                     f"{plain['wall_s'] / parse['wall_s']:.2f}× read_csv's speed, "
                     f"peak {parse['rss_mb']:,.0f} MiB", ""))  # fmt: skip
    load = record.get("gpu_load")
    if load:
        rows.append(("GPU typed load", "load_gpu_trace(F, cache=False) vs pl.read_csv(F), "
                     "in one process", f"{load['typed_s']:.2f} s vs {load['plain_s']:.2f} s = "
                     f"{load['ratio']:.2f}× read_csv's speed",
                     f"≥ 0.8× {_verdict(load['ratio'], 0.8, most=False)}"))  # fmt: skip
    widths = [max(len(r[k]) for r in rows) for k in range(3)]
    print(
        f"\nppscope commands bench ({record['cpus']} CPUs, load {record['loadavg']:.1f} at start)"
    )
    for r in rows:
        print("  ".join(f"{c:<{w}}" for c, w in zip(r[:3], widths, strict=True)), r[3])
    print("(whole processes, stdout to a file; peak RSS of the largest process in MiB)")


def main(argv: list[str] | None = None) -> int:
    """Measure each run size, the wrappers and the GPU trace; print the table; write JSON."""
    ap = argparse.ArgumentParser(description="ppscope commands benchmark (make bench)")
    ap.add_argument("--quick", action="store_true", help="the 100 MB run only")
    args = ap.parse_args(argv)
    sizes = [100.0] if args.quick else [100.0, 1000.0]
    if os.environ.get("BENCH_BIG") and not args.quick:
        sizes.append(10_000.0)
    record: dict[str, Any] = {
        "cpus": len(os.sched_getaffinity(0)),
        "loadavg": os.getloadavg()[0],
        "targets": TARGETS,
    }
    record["runs"] = [measure_run(size) for size in sizes]
    record["first_parse"] = measure_first_parse(OUT / f"run-{size_name(sizes[0])}/server.log")
    if not args.quick:
        record["wrappers"] = measure_wrappers()
        record["gpu"] = measure_gpu()
        record["gpu_load"] = measure_gpu_load()
    print_table(record)
    text = json.dumps(record, indent=2, default=lambda _: None)  # outputs are left out:
    (BENCH / "out" / "commands-last.json").write_text(text + "\n")
    return 0  # a missed target is reported in the table, not as a failure of `make bench`


if __name__ == "__main__":
    sys.exit(main())
