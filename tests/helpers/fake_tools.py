"""Stand-ins for the programs a capture runs: ``nvidia-smi`` and a benchmark client.

``install_nvidia_smi(bin_dir, pid_dir)`` writes an executable ``nvidia-smi`` that answers
``-L``, ``topo -m``, ``--query-compute-apps=...`` (one scheduler per GPU) and
``--query-gpu=... --format=csv -lms N`` (a header, then one row per GPU
every N ms, in the real CSV shape, until stopped); each run leaves a file named by its pid in
``pid_dir``. ``BENCH`` is a tiny client: it sends requests to ``/v1/completions`` with a fixed
concurrency and appends one ``sglang.bench_serving``-shaped result line to ``--output``.
"""

from __future__ import annotations

import shlex
import stat
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE / "fake_bench.py"
GPUS = (
    ("NVIDIA H100 80GB HBM3", "GPU-1d7a3f0e-28c1-4b6e-9d3c-0a1b2c3d4e5f"),
    ("NVIDIA H100 80GB HBM3", "GPU-5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"),
)

_SMI = r"""
import os, sys, time
from datetime import datetime

pid_dir = os.environ.get("FAKE_SMI_PIDS")
if pid_dir:
    open(os.path.join(pid_dir, str(os.getpid())), "w").close()
GPUS = __GPUS__
args = sys.argv[1:]
if args == ["-L"]:
    for i, (name, uuid) in enumerate(GPUS):
        print(f"GPU {i}: {name} (UUID: {uuid})")
    sys.exit(0)
if args[:2] == ["topo", "-m"]:
    n = len(GPUS)
    head = "\t".join(f"GPU{i}" for i in range(n))
    print("\t" + head + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID")
    for i in range(n):
        cells = ["X" if i == j else "NV18" for j in range(n)]
        print(f"GPU{i}\t" + "\t".join(cells) + "\t0-63\t0\t\tN/A")
    print()
    print("Legend:")
    print()
    print("  X    = Self")
    print("  NV#  = Connection traversing a bonded set of # NVLinks")
    sys.exit(0)
apps = next((a.split("=", 1)[1] for a in args if a.startswith("--query-compute-apps=")), None)
if apps is not None:
    names = {"used_memory": "used_gpu_memory [MiB]"}
    print(", ".join(names.get(f, f) for f in apps.split(",")))
    for i, (name, uuid) in enumerate(GPUS):
        values = {"timestamp": datetime.now().strftime("%Y/%m/%d %H:%M:%S.000"),
                  "gpu_uuid": uuid, "gpu_bus_id": f"00000000:{0x18 + i:02X}:00.0",
                  "pid": str(4100 + i), "process_name": f"sglang::scheduler_TP{i}",
                  "used_memory": "71234 MiB"}
        print(", ".join(values.get(f, "[N/A]") for f in apps.split(",")))
    sys.exit(0)
query = next((a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")), None)
if query is None:
    print("fake nvidia-smi: unsupported arguments", args, file=sys.stderr)
    sys.exit(2)
period = int(args[args.index("-lms") + 1]) / 1000 if "-lms" in args else None
units = {"utilization.gpu": "%", "memory.used": "MiB", "memory.total": "MiB",
         "power.draw": "W", "clocks.sm": "MHz"}
names = {"clocks.sm": "clocks.current.sm"}
fields = query.split(",")
header = [names.get(f, f) + (f" [{units[f]}]" if f in units else "") for f in fields]
print(", ".join(header), flush=True)
k = 0
while True:
    for i, (name, uuid) in enumerate(GPUS):
        now = datetime.now()
        values = {
            "timestamp": now.strftime("%Y/%m/%d %H:%M:%S.") + f"{now.microsecond // 1000:03d}",
            "index": str(i), "name": name, "uuid": uuid,
            "utilization.gpu": f"{(37 * k + 11 * i) % 100} %",
            "memory.used": "71234 MiB", "memory.total": "81559 MiB",
            "power.draw": f"{300 + (k % 7) * 10:.2f} W", "clocks.sm": "1980 MHz",
        }
        print(", ".join(values.get(f, "[N/A]") for f in fields), flush=True)
    k += 1
    if period is None:
        break
    time.sleep(period)
"""


def install_nvidia_smi(bin_dir: Path, pid_dir: Path) -> Path:
    """Write the fake ``nvidia-smi`` into ``bin_dir``; put ``bin_dir`` first on PATH and set
    ``FAKE_SMI_PIDS`` to ``pid_dir`` to use it."""
    pid_dir.mkdir(parents=True, exist_ok=True)
    return _install(bin_dir, "nvidia-smi", _SMI.replace("__GPUS__", repr(GPUS)))


def bench_cmd(*, pid_dir: Path | None = None, hold_s: float = 0.0, output_len: int = 24) -> str:
    """A ``--bench-cmd`` template that runs the fake client."""
    words = [sys.executable, str(BENCH)]
    words += ["--url", "{url}", "--concurrency", "{concurrency}"]
    words += ["--num-prompts", "{num_prompts}", "--output", "{output}"]
    words += ["--output-len", str(output_len)]
    if pid_dir is not None:
        words += ["--pid-dir", str(pid_dir)]
    if hold_s:
        words += ["--hold", str(hold_s)]
    return shlex.join(words)


_DCGMI = r"""
import os, sys, time

pid_dir = os.environ.get("FAKE_SMI_PIDS")
if pid_dir:
    open(os.path.join(pid_dir, str(os.getpid())), "w").close()
args = sys.argv[1:]
if args[:1] != ["dmon"]:
    sys.exit(2)
period = int(args[args.index("-d") + 1]) / 1000 if "-d" in args else 1.0
names = {"1001": "GRACT", "1002": "SMACT", "1003": "SMOCC", "1004": "TENSO", "1005": "DRAMA",
         "203": "GPUTL", "252": "FBUSD", "155": "POWER", "100": "SMCLK"}
ids = args[args.index("-e") + 1].split(",")
print("#Entity   " + "".join(f"{names.get(i, 'F' + i):<13}" for i in ids), flush=True)
print("ID", flush=True)
k = 0
while True:
    for gpu in range(2):
        cells = ["N/A" if k == 0 else f"{0.1 * ((k + gpu) % 9):.3f}" for _ in ids]
        print(f"GPU {gpu}     " + "".join(f"{c:<13}" for c in cells), flush=True)
    k += 1
    time.sleep(period)
"""

_JOURNALCTL = r"""
import os, sys, time

with open(os.environ["FAKE_JOURNAL_ARGV"], "w") as f:
    f.write(" ".join(sys.argv[1:]))
source = os.environ["FAKE_JOURNAL_SOURCE"]
while not os.path.exists(source):
    time.sleep(0.05)
with open(source) as f:
    while True:
        line = f.readline()
        if not line:
            time.sleep(0.05)
            continue
        print(f"2025-05-25T21:40:21+0000 gpu-host python3[4242]: {line}", end="", flush=True)
"""


def _install(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def install_dcgmi(bin_dir: Path) -> Path:
    """A fake ``dcgmi`` whose ``dmon -e IDS -d MS`` prints a block of 2 GPUs per round, no
    time, the first round all ``N/A``, as DCGM does."""
    return _install(bin_dir, "dcgmi", _DCGMI)


def install_journalctl(bin_dir: Path) -> Path:
    """A fake ``journalctl``: writes its arguments to ``FAKE_JOURNAL_ARGV`` and follows the
    file ``FAKE_JOURNAL_SOURCE``, printing each line in the ``short-iso`` shape."""
    return _install(bin_dir, "journalctl", _JOURNALCTL)


def alive(pid: int) -> bool:
    """Whether a process still runs (a zombie no init has reaped counts as gone)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat_line.rsplit(")", 1)[1].split()[0] != "Z"
