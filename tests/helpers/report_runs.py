"""A small two-run incident for the report tests, built in a temp directory from the fixtures.

``make_runs(root)`` writes

- ``tp8/``: the TP8 server log of ``tests/data/bench/runs/tp8`` grown to a few minutes of decode
  lines, with ``api_key='sk-…'`` in its ServerArgs, a warning that contains ``<script>`` and
  warnings and errors that hold secrets in free text (``FREE_TEXT``), plus its benchmark
  results;
- ``pp8/``: the v0.5.23 PP8 log of ``tests/data/sglang``, the PP8 benchmark results, a
  ``run.toml`` (synthetic, with a ``--api-key`` in its launch command) and a one-second
  nvidia-smi trace of 8 GPUs over the log's span.

"""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta
from pathlib import Path

from helpers import SAMPLE, TEST_DATA

DATA = TEST_DATA
API_KEY = "sk-ppscope-test-0123456789abcdef"
CMD_KEY = "cmdline-secret-4f9a2b"
SCRIPT = "<script>alert('ppscope')</script>"
FREE_TEXT = {
    "ERROR: password=free-text-pw-1111": "free-text-pw-1111",
    "WARNING: retrying with api_key=free-text-key-2222": "free-text-key-2222",
    "WARNING: upstream said x-api-key: free-text-hdr-3333": "free-text-hdr-3333",
    "ERROR: cannot reach redis://:free-text-url-4444@cache:6379/0": "free-text-url-4444",
    "WARNING: Authorization: Token free-text-tok-5555": "free-text-tok-5555",
    "ERROR: Cookie: session=free-text-cookie-6666; theme=dark": "free-text-cookie-6666",
}
"""Log lines (after the prefix) and the secret each holds, which no report output may show."""
INCIDENT = SAMPLE
NAMES = ["postmortem", "scaling_gap", "stage_timeline", "config_diff", "gpu_trace"]
"""Every notebook of ``notebooks/``; a test checks the list is complete."""


def _tp8_log() -> str:
    lines = (DATA / "bench" / "runs" / "tp8" / "server.log").read_text().splitlines()
    lines[0] = lines[0].replace("tp_size=8,", f"api_key='{API_KEY}', tp_size=8,")
    start = datetime(2025, 12, 17, 9, 6, 0)
    for i in range(1, 90):
        ts = start + timedelta(seconds=2 * i)
        lines.append(
            f"[{ts:%Y-%m-%d %H:%M:%S} TP0] Decode batch, #running-req: 32, "
            f"#token: {50112 + 64 * i}, token usage: {0.10 + i / 1000:.2f}, "
            f"cuda graph: {'False' if i % 30 == 0 else 'True'}, "
            f"gen throughput (token/s): {577 + (i % 7) - 3:.2f}, #queue-req: 0, "
        )
        if i == 45:
            lines.append(f"[{ts:%Y-%m-%d %H:%M:%S}] WARNING: rejected request body {SCRIPT}")
        if i == 50:
            lines += [f"[{ts:%Y-%m-%d %H:%M:%S}] {line}" for line in FREE_TEXT]
    return "\n".join(lines) + "\n"


def _gpu_csv(start: datetime, seconds: int) -> str:
    header = (
        "timestamp, index, utilization.gpu [%], utilization.memory [%], memory.used [MiB], "
        "power.draw [W], clocks.sm [MHz]"
    )
    rows = [header]
    for s in range(seconds):
        for gpu in range(8):
            ts = start + timedelta(seconds=s, milliseconds=3 * gpu)
            util = 35 + (s * 7 + gpu * 11) % 30 + (15 if gpu == 7 else 0)
            rows.append(
                f"{ts:%Y/%m/%d %H:%M:%S}.{ts.microsecond // 1000:03d}, {gpu}, {util} %, 12 %, "
                f"81234 MiB, {250 + 2 * util:.2f} W, 2400 MHz"
            )
    return "\n".join(rows) + "\n"


def make_runs(root: Path) -> list[Path]:
    """Write the two runs under ``root`` and return their directories (TP8 first)."""
    tp8, pp8 = root / "tp8", root / "pp8"
    (tp8 / "results").mkdir(parents=True)
    pp8.mkdir(parents=True)
    (tp8 / "server.log").write_text(_tp8_log())
    shutil.copy(DATA / "bench" / "runs" / "tp8" / "results" / "bench.jsonl", tp8 / "results")
    shutil.copy(DATA / "sglang" / "v0.5.23-pp8.log", pp8 / "server.log")
    shutil.copy(DATA / "bench" / "runs" / "pp8" / "bench.jsonl", pp8)
    (pp8 / "run.toml").write_text(
        'label = "PP8"\n'
        'command = "python -m sglang.launch_server --model-path /models/Kimi-K2.6 '
        f'--pp-size 8 --pp-async-batch-depth 8 --api-key {CMD_KEY}"\n'
        'hardware = "8x RTX PRO 6000 Blackwell"\n'
        'interconnect = "pcie"\n'
        "synthetic = true\n"
    )
    (pp8 / "gpu.csv").write_text(_gpu_csv(datetime(2026, 5, 1, 10, 13, 40), 150))
    return [tp8, pp8]
