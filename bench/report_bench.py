"""Report benchmark: render time and HTML size of the offline postmortem.

    python bench/report_bench.py            # both cases
    python bench/report_bench.py --demo     # only the demo (data/incident/)

Cases, each rendered in a fresh process the way ``ppscope report`` runs (imports, kernel
start, papermill, nbconvert, hashing the inputs):

- ``demo``: ``notebooks/postmortem.ipynb`` on ``data/incident/{tp8,pp8,pp8-fixed}``.
  Targets: ≤ 20 s, ≤ 3 MB.
- ``24h``: the postmortem and ``gpu_trace.ipynb`` on one run holding a 24 h × 8 GPU × 100 ms
  nvidia-smi trace (6.9 M rows, 0.48 GB, ``bench/gpu_bench.py``'s generator) and a 100 MB
  PP8 server log (``bench/make_log.py``), linked into ``bench/out/report-24h/``.
  Targets: ≤ 30 s, ≤ 5 MB.

The first render of a log parses it and caches the typed tables (Parquet); the bench renders
each case once untimed to warm that cache, then times one render. Start-up is measured too: the
median of 3 fresh ``import`` s of what the rendering process loads (``toolkit.report.render``
and papermill) and of what the notebook's kernel loads (``toolkit.report.sections``, altair).
The table goes to stdout, the numbers to ``bench/out/report-last.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
OUT = BENCH / "out"
sys.path.insert(0, str(BENCH))

import gpu_bench  # noqa: E402
import make_log  # noqa: E402

LOG_BYTES = 100_000_000
TARGETS = {"demo": (20.0, 3_000_000), "24h": (30.0, 5_000_000)}
RENDER = (
    "import sys; from toolkit.report.render import render; "
    "render(sys.argv[1], {'runs': sys.argv[2]}, sys.argv[3])"
)


def run_24h() -> Path:
    """``bench/out/report-24h/``: links to the generated trace and log, and a run.toml."""
    trace, _, _ = gpu_bench.ensure_trace()
    log = OUT / "sglang-100m.log"
    meta = make_log.meta_path(log)
    if not (log.is_file() and meta.is_file()):
        print(f"generating {log.name} ...", file=sys.stderr, flush=True)
        make_log.write_log(log, LOG_BYTES)
    run = OUT / "report-24h"
    run.mkdir(parents=True, exist_ok=True)
    for name, target in (("gpu.csv", trace), ("server.log", log)):
        link = run / name
        if not link.is_symlink():
            link.unlink(missing_ok=True)
            link.symlink_to(os.path.relpath(target, run))
    (run / "run.toml").write_text(
        'label = "PP8 24h"\n'
        'hardware = "8x RTX PRO 6000 Blackwell"\n'
        'interconnect = "pcie"\n'
        "synthetic = true\n"
        'notes = "bench/report_bench.py: generated trace and log, not measured"\n'
    )
    return run


def render(notebook: str, runs: str, out: Path) -> float:
    """Wall seconds of one render in a fresh interpreter."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", RENDER, notebook, runs, str(out)], cwd=ROOT, check=True)
    return time.perf_counter() - start


def measure(case: str, notebook: str, runs: str) -> dict[str, Any]:
    out = OUT / f"report-{case}-{notebook}.html"
    render(notebook, runs, out)  # warm the Parquet cache and the vega bundle cache
    seconds = render(notebook, runs, out)
    size = out.stat().st_size
    max_s, max_bytes = TARGETS[case]
    return {
        "case": case,
        "notebook": notebook,
        "runs": runs,
        "seconds": round(seconds, 2),
        "bytes": size,
        "target_seconds": max_s,
        "target_bytes": max_bytes,
        "ok": seconds <= max_s and size <= max_bytes,
    }


IMPORTS = {
    "render process": "import toolkit.report.render, papermill, nbconvert",
    "notebook kernel": "import toolkit.report.sections",
}


def import_seconds(code: str) -> float:
    """Median wall time of 3 fresh interpreters running ``code`` (start-up included)."""
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
        runs.append(time.perf_counter() - start)
    return sorted(runs)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo", action="store_true", help="only the demo case")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    starts = {name: round(import_seconds(code), 2) for name, code in IMPORTS.items()}
    for name, seconds in starts.items():
        print(f"start-up, {name}: {seconds:.2f} s ({IMPORTS[name]})")
    rows = []
    incident = ROOT / "data" / "incident"
    if incident.is_dir():
        dirs = ",".join(f"data/incident/{n}" for n in ("tp8", "pp8", "pp8-fixed"))
        rows.append(measure("demo", "postmortem", dirs))
    else:
        print("demo: skipped, data/incident/ is missing", file=sys.stderr)
    if not args.demo:
        run = run_24h().relative_to(ROOT).as_posix()
        rows += [measure("24h", nb, run) for nb in ("postmortem", "gpu_trace")]
    print(f"{'case':6} {'notebook':12} {'seconds':>8} {'target':>7} {'MB':>6} {'target':>7}  ok")
    for r in rows:
        print(
            f"{r['case']:6} {r['notebook']:12} {r['seconds']:8.1f} {r['target_seconds']:7.0f} "
            f"{r['bytes'] / 1e6:6.2f} {r['target_bytes'] / 1e6:7.0f}  {'yes' if r['ok'] else 'NO'}"
        )
    summary = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "loadavg_1m_before": load_before,
        "startup_s": starts,
        "results": rows,
    }
    (OUT / "report-last.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
