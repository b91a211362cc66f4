"""GPU trace benchmark: typed load of a 24 h × 8 GPU × 100 ms nvidia-smi CSV (6.9 M rows) with
the columns ``ppscope capture`` queries, text columns (``name``, ``uuid``) included.

    python bench/gpu_bench.py            # generate (once) into bench/out/, then measure

Measures, median of ``RUNS`` interleaved runs in this process (warm page cache):

- ``toolkit.load.gpu.trace.load_gpu_trace(FILE, cache=False)`` — the typed load (units
  stripped, timestamp parsed, every line accounted for);
- ``pl.read_csv(FILE)`` — a plain read of the same file (strings, nothing typed);
- ``load_gpu_trace(FILE)`` a second time with the cache: the typed tables read back from Parquet;
- ``toolkit.analyze.gpu.downsample(samples, "10s")`` — the chart-sized series.

Targets: typed load at least 0.8× the plain read's speed, downsampling in at most 1 s.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out"
sys.path.insert(0, str(BENCH.parent))  # the repo's own toolkit

from toolkit.analyze.gpu import downsample  # noqa: E402
from toolkit.load.gpu.trace import load_gpu_trace  # noqa: E402

GENERATOR_VERSION = 2
GPUS = 8
PERIOD_MS = 100
HOURS = 24
RUNS = 3
TARGET_RATIO = 0.8
TARGET_DOWNSAMPLE_S = 1.0
HEADER = (
    "timestamp, index, name, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], "
    "power.draw [W], clocks.current.sm [MHz]"
)
"""What ``nvidia-smi --format=csv`` heads ``ppscope capture``'s query with (``QUERY_FIELDS``:
text columns ``name`` and ``uuid`` included)."""
NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
UUIDS = [
    f"GPU-{0x5C8D0E2A + 977 * g:08x}-41b7-9c2e-6f0d-{0x1E2A3B4C5D6E + g:012x}" for g in range(8)
]


def trace_path() -> Path:
    """Where the generated trace lives (git-ignored)."""
    return OUT / "nvidia-smi-24h-8gpu-100ms.csv"


def _meta_path(path: Path) -> Path:
    return path.with_name(path.name + ".meta.json")


def generate(path: Path) -> dict[str, Any]:
    """Write the trace deterministically: the same bytes on every machine.

    Values come from integer hashing of the row number (no random state), in the shape of
    ``nvidia-smi --query-gpu=… --format=csv -lms 100``: one row per GPU per sample, the GPUs
    of one sample a few milliseconds apart.
    """
    rows = GPUS * HOURS * 3600 * 1000 // PERIOD_MS
    i = pl.int_range(0, rows, dtype=pl.UInt64)

    def mix(k: int) -> pl.Expr:
        return (i * 2654435761 + k * 40503) * 2246822519 % 4294967291

    text = pl.Expr.cast
    step, gpu = i // GPUS, i % GPUS
    start = pl.datetime(2026, 5, 25, 21, 40, 21, time_unit="ms")
    ts = start + pl.duration(milliseconds=step * PERIOD_MS + gpu * 3 + 7)
    centiwatts = 8000 + mix(4) % 52000
    line = pl.concat_str(
        [
            ts.dt.strftime("%Y/%m/%d %H:%M:%S%.3f"),
            text(gpu, pl.String),
            pl.lit(NAME),
            pl.lit(pl.Series(UUIDS)).gather(gpu),
            text(mix(1) % 101, pl.String) + " %",
            text(81000 + mix(3) % 500, pl.String) + " MiB",
            pl.lit("97887 MiB"),
            text(centiwatts // 100, pl.String)
            + "."
            + text(centiwatts % 100, pl.String).str.zfill(2)
            + " W",
            text(1980 - mix(5) % 500, pl.String) + " MHz",
        ],
        separator=", ",
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        f.write((HEADER + "\n").encode())
        pl.select(line.alias("line")).write_csv(f, include_header=False, quote_style="never")
    tmp.replace(path)
    meta = {"version": GENERATOR_VERSION, "rows": rows, "bytes": path.stat().st_size}
    _meta_path(path).write_text(json.dumps(meta) + "\n")
    return meta


def ensure_trace() -> tuple[Path, dict[str, Any], float | None]:
    """Reuse the generated trace if its sidecar matches, else generate it."""
    path = trace_path()
    try:
        meta = json.loads(_meta_path(path).read_text())
        if meta.get("version") == GENERATOR_VERSION and path.stat().st_size == meta["bytes"]:
            return path, meta, None
    except (OSError, ValueError, KeyError):
        pass
    print(f"generating {path.name} ...", file=sys.stderr, flush=True)
    t = time.perf_counter()
    meta = generate(path)
    return path, meta, time.perf_counter() - t


def _timed(fn: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    result = fn()
    return time.perf_counter() - t, result


def measure(path: Path) -> dict[str, Any]:
    """Interleaved runs of the plain read and the typed load, then the downsampling."""
    plain, typed, cached = [], [], []
    trace = None
    load_gpu_trace(path)  # builds the cache entry (timed below as a reload)
    for _ in range(RUNS):
        dt, _df = _timed(lambda: pl.read_csv(path))
        plain.append(dt)
        del _df
        dt, trace = _timed(lambda: load_gpu_trace(path, cache=False))
        typed.append(dt)
        dt, _trace = _timed(lambda: load_gpu_trace(path))
        cached.append(dt)
        del _trace
    assert trace is not None
    samples = trace.samples
    down = []
    frame = None
    for _ in range(RUNS):
        dt, frame = _timed(lambda: downsample(samples, "10s"))
        down.append(dt)
    return {
        "rows": samples.height,
        "skipped": trace.skipped.height,
        "plain_s": statistics.median(plain),
        "typed_s": statistics.median(typed),
        "ratio": statistics.median(plain) / statistics.median(typed),
        "cached_s": statistics.median(cached),
        "downsample_s": statistics.median(down),
        "downsampled_rows": frame.height if frame is not None else 0,
        "runs": {"plain_s": plain, "typed_s": typed, "cached_s": cached, "downsample_s": down},
    }


def print_table(r: dict[str, Any]) -> None:
    """One aligned table: value, target, verdict."""
    ok_ratio = "ok" if r["ratio"] >= TARGET_RATIO else "MISSED"
    ok_down = "ok" if r["downsample_s"] <= TARGET_DOWNSAMPLE_S else "MISSED"
    rows = [
        ("rows (GPU samples)", f"{r['rows']:,}", "", ""),
        ("file size (MB)", f"{r['bytes'] / 1e6:,.1f}", "", ""),
        ("plain pl.read_csv (s)", f"{r['plain_s']:.2f}", "", ""),
        ("typed load_gpu_trace (s)", f"{r['typed_s']:.2f}", "", ""),
        ("typed speed / plain", f"{r['ratio']:.2f}×", f"≥ {TARGET_RATIO}×", ok_ratio),
        ("cached reload (s)", f"{r['cached_s']:.2f}", "", ""),
        (
            f"downsample to 10 s ({r['downsampled_rows']:,} rows)",
            f"{r['downsample_s']:.2f}",
            f"≤ {TARGET_DOWNSAMPLE_S:g} s",
            ok_down,
        ),
    ]
    w = [max(len(row[k]) for row in rows) for k in range(3)]
    print(f"\nppscope gpu bench: {r['file']}  ({r['cpus']} CPUs, polars {pl.__version__})")
    if r["loadavg"] > 0.5:
        print(f"note: load average {r['loadavg']:.2f} at start: timings are skewed")
    print(f"{'metric':<{w[0]}}  {'value':>{w[1]}}  {'target':<{w[2]}}")
    print(f"{'-' * w[0]}  {'-' * w[1]}  {'-' * w[2]}")
    for a, b, c, d in rows:
        print(f"{a:<{w[0]}}  {b:>{w[1]}}  {c:<{w[2]}}  {d}".rstrip())
    print(f"(median of {RUNS} interleaved in-process runs, warm page cache)")


def main(argv: list[str] | None = None) -> int:
    """Generate or reuse the trace, measure, print the table, write ``gpu-last.json``."""
    path, meta, gen_s = ensure_trace()
    if gen_s is not None:
        print(f"generated in {gen_s:.1f} s", file=sys.stderr)
    result = {
        "file": str(path.relative_to(BENCH.parent)),
        "bytes": meta["bytes"],
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "loadavg": os.getloadavg()[0],
        "generated_s": gen_s,
        **measure(path),
    }
    print_table(result)
    (OUT / "gpu-last.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    return 0  # a missed target is reported in the table, not as a failure of `make bench`


if __name__ == "__main__":
    sys.exit(main())
