"""Long lines: the parse takes time linear in a line's length, for every family of line.

    python bench/line_bench.py

For each family (batch lines, startup facts, the scheduler summary followed by a run of word
characters, server_args, HTTP, tracebacks, progress bars, NUL bytes ...) a file of 8 such lines
between normal lines is loaded (no cache) with the lines at 128 KiB and at 1 MiB - 4 KiB (just
under the cap, so they are typed whole); the median time over 3 loads of each, minus a file of
normal lines only, gives the ratio. Linear time gives about 8×; a quadratic pattern gives
about 64×. Families that take under 0.25 s at 1 MiB are too fast to tell apart from noise.
``bench/out/line-last.json`` keeps the numbers.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # the repo's own toolkit

from toolkit import load_sglang_log  # noqa: E402
from toolkit.load.text import LINE_CAP  # noqa: E402

PREFIX = "[2026-05-25 21:40:21 PP3] "
DECODE = (
    "Decode batch, #running-req: 8, #token: 10, token usage: 0.10, cuda graph: True, "
    "gen throughput (token/s): 248.10, #queue-req: 0"
)
FAMILIES = {
    "decode": lambda n: PREFIX + DECODE + ", #x: 1" * (n // 7),
    "prefill": lambda n: PREFIX + "Prefill batch, #new-seq: 1, " + "#new-token: 1, " * (n // 15),
    "summary+word run": lambda n: PREFIX + "max_total_num_tokens=327680, " + "a" * n,
    "capture markers": lambda n: PREFIX + "Capture cuda graph begin." + " end." * (n // 5),
    "graph bs list": lambda n: PREFIX + "Capture cuda graph bs [" + "1, " * (n // 3),
    "kv sizes": lambda n: PREFIX + "KV Cache is allocated." + " K size: 1" * (n // 10),
    "server_args": lambda n: "[2026-05-25 21:40:21] server_args=ServerArgs(" + "a=1, " * (n // 5),
    "http": lambda n: '[2026-05-25 21:40:21] INFO:     1.2.3.4:5 - "GET /' + "x" * n + '" 200',
    "traceback": lambda n: "Traceback (most recent call last): " + '  File "x' * (n // 9),
    "progress": lambda n: "Loading: " + "#" * n + " 10/23 [00:01<00:02, 3.1it/s]",
    "journald": lambda n: "May 25 21:40:21 node python3[1]: " + "x: " * (n // 3),
    "nul bytes": lambda n: "\0" * n,
}
LINES = 8
SMALL, LARGE = 128 << 10, LINE_CAP - 4096


def _file(directory: Path, family: str | None, size: int) -> Path:
    normal = PREFIX + DECODE
    rows = [normal] * (LINES * 2)
    if family is not None:
        rows = [x for _ in range(LINES) for x in (normal, FAMILIES[family](size))]
    path = directory / f"{family or 'normal'}-{size}.log"
    path.write_text("\n".join(rows) + "\n")
    return path


def _seconds(path: Path) -> float:
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        log = load_sglang_log(path, cache=False)
        log.coverage()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> int:
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        base = _seconds(_file(d, None, 0))
        for family in FAMILIES:
            small = max(_seconds(_file(d, family, SMALL)) - base, 1e-4)
            large = max(_seconds(_file(d, family, LARGE)) - base, 1e-4)
            results[family] = {"small_s": small, "large_s": large, "ratio": large / small}
    expected = LARGE / SMALL
    print(f"\nlong lines: {LINES} lines of 128 KiB vs 1 MiB - 4 KiB ({expected:.0f}× the bytes)")
    print(f"{'family':18} {'128 KiB (s)':>11} {'1 MiB (s)':>10} {'ratio':>7}  linear?")
    for family, r in results.items():
        if r["large_s"] < 0.25:
            linear = "yes (too fast to tell the sizes apart)"
        else:
            linear = "yes" if r["ratio"] <= 2 * expected else "NO (super-linear)"
        print(f"{family:18} {r['small_s']:11.3f} {r['large_s']:10.3f} {r['ratio']:6.1f}×  {linear}")
    print(f"(median of 3 loads each, minus {base:.3f} s for a file of normal lines)")
    out = BENCH / "out"
    out.mkdir(exist_ok=True)
    (out / "line-last.json").write_text(json.dumps({"base_s": base, **results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
