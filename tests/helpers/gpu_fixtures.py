"""The GPU fixtures of ``tests/data/gpu`` and what each holds: format, GPUs, samples."""

from __future__ import annotations

from helpers import TEST_DATA

GPU_DATA = TEST_DATA / "gpu"

# file → (format, gpus, samples)
EXPECTED: dict[str, tuple[str, int, int]] = {
    "smi-lms-single.csv": ("nvidia-smi-csv", 1, 5),
    "smi-8gpu-loop.csv": ("nvidia-smi-csv", 8, 24),
    "smi-nounits.csv": ("nvidia-smi-csv", 2, 4),
    "smi-noheader.csv": ("nvidia-smi-csv", 2, 4),
    "smi-noheader-nounits.csv": ("nvidia-smi-csv", 2, 4),
    "smi-old-driver-crlf.csv": ("nvidia-smi-csv", 2, 2),
    "smi-mixed-models.csv": ("nvidia-smi-csv", 2, 2),
    "smi-flags.csv": ("nvidia-smi-csv", 2, 2),
    "smi-mig.csv": ("nvidia-smi-csv", 2, 4),
    "dmon-mutc-td.txt": ("nvidia-smi-dmon", 1, 6),
    "dmon-legacy-pucvmet.txt": ("nvidia-smi-dmon", 4, 8),
    "dmon-u.txt": ("nvidia-smi-dmon", 2, 4),
    "dmon-m-8gpu.txt": ("nvidia-smi-dmon", 8, 16),
    "dmon-puc-t-repeated.txt": ("nvidia-smi-dmon", 2, 6),
    "dcgmi-prof-8gpu.txt": ("dcgmi-dmon", 8, 24),
    "dcgmi-nvlink-wide.txt": ("dcgmi-dmon", 2, 2),
    "dcgmi-device.txt": ("dcgmi-dmon", 2, 4),
    "dcgmi-dcgm17.txt": ("dcgmi-dmon", 2, 4),
    "dcgmi-mig.txt": ("dcgmi-dmon", 1, 8),
    "exporter-v1-labels.prom": ("dcgm-exporter", 2, 2),
    "exporter-2x-two-scrapes.prom": ("dcgm-exporter", 2, 4),
    "exporter-3x-prof-timed.prom": ("dcgm-exporter", 2, 4),
    "exporter-mig.prom": ("dcgm-exporter", 2, 4),  # 3 MIG instances of GPU 2, and GPU 1
    "exporter-old-lowercase.prom": ("dcgm-exporter", 2, 2),
    "aiperf-gpu-telemetry.jsonl": ("aiperf-gpu-telemetry", 4, 56),  # 2 hosts × 2 GPUs
    "smi-column-t-s.txt": ("nvidia-smi-csv-reprinted", 2, 4),
    "smi-column-t.txt": ("nvidia-smi-csv-reprinted", 2, 4),
    "smi-table-l1-2gpu.txt": ("nvidia-smi-table", 2, 6),  # 3 prints of 2 GPUs
    "smi-table-old-untimed.txt": ("nvidia-smi-table", 3, 3),
}
OTHERS: dict[str, tuple[str, int]] = {
    "topo-2x1080ti.txt": ("nvidia-smi-topo", 2),
    "topo-8xa100-nvlink.txt": ("nvidia-smi-topo", 8),
    "topo-4xa10-pcie.txt": ("nvidia-smi-topo", 4),
    "topo-tabs-2x5090.txt": ("nvidia-smi-topo", 2),
    "topo-dgx1-hybrid-oldnic.txt": ("nvidia-smi-topo", 8),
    "list-8gpu.txt": ("nvidia-smi-list", 8),
    "list-mig.txt": ("nvidia-smi-list", 2),
    "apps-8gpu.csv": ("nvidia-smi-apps", 8),
    "apps-loop-timestamp.csv": ("nvidia-smi-apps", 8),
    "apps-empty.csv": ("nvidia-smi-apps", 0),
    "apps-nounits-bus.csv": ("nvidia-smi-apps", 2),
}
