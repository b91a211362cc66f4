"""Declared tables of the GPU telemetry loaders: samples, skipped lines, topology, inventory.

``Column`` tuples, a ``pl.Schema`` and a one-line glossary per column. Column names carry their
units; metric columns are Float64 whatever the source printed, so one column means one quantity in
one unit.

A word on ``util_pct``: nvidia-smi's ``utilization.gpu`` (and dmon's ``sm``, DCGM's ``GPU_UTIL``)
is the share of time *a kernel was running*. A NCCL kernel that waits for its pipeline peer counts
as running, so a stage sitting in a bubble can still read ~100 %. Prefer ``sm_active`` (DCGM
profiling) when a trace has it, and read ``power_w`` and ``sm_clock_mhz`` next to ``util_pct``.
"""

from __future__ import annotations

import polars as pl

from toolkit.schema import Column, glossary, schema_of

_F = pl.Float64()
_S = pl.String()

SAMPLE_KEY_COLUMNS: tuple[Column, ...] = (
    Column("source", _S, "input file"),
    Column("lineno", pl.Int64(), "1-based line of the sample (exporter: first line of the GPU)"),
    Column("ts", pl.Datetime("ms"), "local time of the sample, shifted by the clock offset"),
    Column("elapsed_s", _F, "seconds since the first sample of the same source"),
    Column("sample", pl.Int64(), "polling round within the source (dcgmi block, scrape)"),
    Column("host", _S, "host name (dcgm-exporter `Hostname`/`hostname` label)"),
    Column(
        "node",
        pl.Int32(),
        "node rank of the launch the sample was taken on (0 on one node); set when a run places "
        "its trace (`Run.gpu_nodes`), null when read alone or when nothing says which node",
    ),
    Column("gpu", pl.Int32(), "GPU index as nvidia-smi numbers it (not CUDA_VISIBLE_DEVICES)"),
    Column("uuid", _S, "GPU UUID (`GPU-…`), when the source prints it"),
    Column("name", _S, "product name, e.g. `NVIDIA H100 80GB HBM3`"),
    Column("pci_bus_id", _S, "PCI bus id `00000000:2F:00.0`"),
    Column("mig_profile", _S, "MIG instance profile (`1g.10gb`); null for a whole GPU"),
    Column("mig_instance", pl.Int32(), "MIG GPU instance id; null for a whole GPU"),
    Column("entity", _S, "dcgmi entity of a row that is no whole GPU (`GPU-I 1`, `GPU-CI 0`)"),
)

METRIC_COLUMNS: tuple[Column, ...] = (
    Column(
        "util_pct",
        _F,
        "time a kernel was running, % (utilization.gpu, dmon sm); a waiting NCCL kernel "
        "counts as busy — prefer sm_active",
    ),
    Column("mem_util_pct", _F, "time device memory was read or written, % (not bandwidth)"),
    Column("enc_util_pct", _F, "video encoder busy, %"),
    Column("dec_util_pct", _F, "video decoder busy, %"),
    Column("jpg_util_pct", _F, "JPEG engine busy, %"),
    Column("ofa_util_pct", _F, "optical flow accelerator busy, %"),
    Column("mem_used_mib", _F, "device memory allocated, MiB (memory.used, dmon fb, FB_USED)"),
    Column("mem_free_mib", _F, "device memory free, MiB"),
    Column("mem_total_mib", _F, "device memory installed, MiB"),
    Column("mem_reserved_mib", _F, "device memory reserved by driver and firmware, MiB"),
    Column("power_w", _F, "board power draw, W (power.draw, dmon pwr, POWER_USAGE)"),
    Column("power_avg_w", _F, "board power averaged over ~1 s, W (power.draw.average)"),
    Column("power_instant_w", _F, "instantaneous board power, W (power.draw.instant)"),
    Column("power_limit_w", _F, "software power limit, W"),
    Column("power_limit_enforced_w", _F, "power ceiling actually enforced, W"),
    Column("energy_mj", _F, "energy since boot, mJ (DCGM counter)"),
    Column("sm_clock_mhz", _F, "SM clock, MHz (clocks.sm; dmon pclk, the graphics clock)"),
    Column("mem_clock_mhz", _F, "memory clock, MHz"),
    Column("gr_clock_mhz", _F, "graphics clock, MHz (clocks.gr)"),
    Column("sm_clock_max_mhz", _F, "maximum SM clock, MHz"),
    Column("mem_clock_max_mhz", _F, "maximum memory clock, MHz"),
    Column("temp_c", _F, "GPU core temperature, °C (temperature.gpu, dmon temp/gtemp)"),
    Column("mem_temp_c", _F, "HBM temperature, °C (temperature.memory, dmon mtemp)"),
    Column("fan_pct", _F, "intended fan speed, % of maximum"),
    Column("pstate", _S, "performance state, P0 (fastest) … P12"),
    Column("pcie_link_gen", _F, "current PCIe generation (drops at idle: not a fault)"),
    Column("pcie_link_width", _F, "current PCIe lanes (drops at idle: not a fault)"),
    Column("pcie_tx_bytes_s", _F, "PCIe transmit rate, bytes/s (dmon txpci MB/s × 1e6, DCGM 1009)"),
    Column("pcie_rx_bytes_s", _F, "PCIe receive rate, bytes/s (dmon rxpci MB/s × 1e6, DCGM 1010)"),
    Column("nvlink_tx_bytes_s", _F, "NVLink transmit rate, bytes/s (DCGM 1011)"),
    Column("nvlink_rx_bytes_s", _F, "NVLink receive rate, bytes/s (DCGM 1012)"),
    Column("gr_engine_active", _F, "share of time the graphics/compute engine was active, 0–1"),
    Column(
        "sm_active",
        _F,
        "share of cycles an SM had at least one warp, 0–1 (DCGM 1002): the better 'busy'",
    ),
    Column("sm_occupancy", _F, "warps resident on an SM over the maximum, 0–1"),
    Column("tensor_active", _F, "share of cycles the tensor pipe was active, 0–1"),
    Column("dram_active", _F, "share of cycles the memory interface was busy, 0–1"),
    Column("fp64_active", _F, "share of cycles the FP64 pipe was active, 0–1"),
    Column("fp32_active", _F, "share of cycles the FP32 pipe was active, 0–1"),
    Column("fp16_active", _F, "share of cycles the FP16 pipe was active, 0–1"),
    Column("clock_event_reasons", _S, "bitmask of active clock event (throttle) reasons, hex"),
)

SAMPLE_COLUMNS: tuple[Column, ...] = SAMPLE_KEY_COLUMNS + METRIC_COLUMNS
"""One row per GPU per polling time, in wide form. Fields a source does not print are null.

Fields ppscope does not know are appended after these, named from the source's header with
their unit (``fan.speed [%]`` would be ``fan_speed_pct``): Float64 when the source gives a
unit or the value is numeric by format, else String as printed.
"""

METRICS: tuple[str, ...] = tuple(c.name for c in METRIC_COLUMNS)

SKIPPED_COLUMNS: tuple[Column, ...] = (
    Column("source", _S, "input file"),
    Column("lineno", pl.Int64(), "1-based line number"),
    Column("reason", _S, "why the line is not a sample: repeated header, cut row, ..."),
    Column("line", _S, "the line as read"),
)

UNAVAILABLE_COLUMNS: tuple[Column, ...] = (
    Column("source", _S, "input file"),
    Column("field", _S, "the field as the source names it"),
    Column("value", _S, "what was printed instead of a number: [N/A], [Unknown Error], -, ..."),
    Column("kind", _S, "unsupported (the tool says so), error (a driver error) or unreadable"),
    Column("count", pl.Int64(), "cells with this value"),
    Column("first_lineno", pl.Int64(), "first line where it appears"),
)

TOPOLOGY_LINK_COLUMNS: tuple[Column, ...] = (
    Column("src", _S, "row device: GPU0…, NIC0… or an old-style NIC name (mlx5_0)"),
    Column("dst", _S, "column device"),
    Column("link", _S, "code as printed: X, PIX, PXB, PHB, NODE, SYS, SOC, NV#"),
    Column("nvlinks", pl.Int32(), "bonded NVLinks for NV#, else 0 (null for X)"),
    Column("rank", pl.Int32(), "distance: 0 X, 1 NV#, 2 PIX, 3 PXB, 4 PHB, 5 NODE, 6 SYS/SOC"),
)

TOPOLOGY_DEVICE_COLUMNS: tuple[Column, ...] = (
    Column("device", _S, "GPU0…, NIC0… as in the matrix"),
    Column("kind", _S, "gpu or nic"),
    Column("index", pl.Int32(), "number in the device name (GPU3 → 3)"),
    Column("nic_name", _S, "NIC Legend name (mlx5_0), or the column name of old drivers"),
    Column("cpu_affinity", _S, "CPU list, e.g. 0-63 or 0-9,20-29"),
    Column("numa_affinity", _S, "NUMA node(s) near the device"),
    Column("gpu_numa_id", _S, "the GPU's own NUMA id (newer drivers; N/A on most hosts)"),
)

APPS_COLUMNS: tuple[Column, ...] = (
    Column("source", _S, "input file"),
    Column("lineno", pl.Int64(), "1-based line number"),
    Column("ts", pl.Datetime("ms"), "query time, when printed"),
    Column("pid", pl.Int64(), "process id"),
    Column("process_name", _S, "process name (`name` prints as process_name)"),
    Column("uuid", _S, "GPU UUID of the process (compute apps are keyed by UUID)"),
    Column("pci_bus_id", _S, "GPU PCI bus id"),
    Column("gpu", pl.Int32(), "GPU index, when known from a `-L` listing or the query"),
    Column("used_memory_mib", _F, "device memory the process holds, MiB"),
)

APP_COUNT_COLUMNS: tuple[Column, ...] = (
    Column("source", _S, "input file"),
    Column("snapshot", pl.Int64(), "listing within the file (a new one where the time jumps)"),
    Column("ts", pl.Datetime("ms"), "query time of the listing's first row, when printed"),
    Column("gpu", pl.Int32(), "GPU index, when known from a `-L` listing or a GPU trace"),
    Column("uuid", _S, "GPU UUID the processes run on"),
    Column("pci_bus_id", _S, "GPU PCI bus id"),
    Column("processes", pl.Int64(), "compute processes listed on the GPU"),
    Column("used_memory_mib", _F, "device memory they hold together, MiB (null when unknown)"),
)

PROCESS_COLUMNS: tuple[Column, ...] = (
    Column("gpu", pl.Int32(), "GPU index, null when no inventory maps the GPU"),
    Column("uuid", _S, "GPU UUID"),
    Column("pci_bus_id", _S, "GPU PCI bus id"),
    Column("pid", pl.Int64(), "process id"),
    Column("process_name", _S, "process name as listed"),
    Column("used_memory_mib", _F, "the most device memory the process held in a listing, MiB"),
    Column("gpu_listed_mib", _F, "memory of every process on the GPU in that listing, MiB"),
    Column("memory_share", _F, "used_memory_mib / gpu_listed_mib, 0-1"),
    Column("listings", pl.Int64(), "listings that show the process"),
    Column("of_listings", pl.Int64(), "listings in the files"),
    Column("server", pl.Boolean(), "the SGLang server's process; null when unjudged"),
    Column("judged_by", _S, "the evidence the verdict rests on"),
)

GPU_LIST_COLUMNS: tuple[Column, ...] = (
    Column("source", _S, "input file"),
    Column("lineno", pl.Int64(), "1-based line number"),
    Column("gpu", pl.Int32(), "GPU index"),
    Column("name", _S, "product name"),
    Column("uuid", _S, "GPU UUID, or the MIG device UUID for MIG rows"),
    Column("mig_profile", _S, "MIG profile (3g.40gb); null for the GPU itself"),
    Column("mig_device", pl.Int32(), "MIG device number within the GPU"),
    Column("parent_uuid", _S, "the GPU's UUID for a MIG row"),
)

ROLE_COLUMNS: tuple[Column, ...] = (
    Column("node", pl.Int32(), "node rank (0 on a single host)"),
    Column("gpu", pl.Int32(), "GPU index on that node"),
    Column("pp", pl.Int32(), "pipeline stage"),
    Column("tp", pl.Int32(), "tensor-parallel rank"),
    Column("dp", pl.Int32(), "data-parallel rank (attention DP rank under --enable-dp-attention)"),
    Column("label", _S, "chart label, e.g. `PP3 (GPU 3)`"),
)

SAMPLES = schema_of(SAMPLE_COLUMNS)
SKIPPED = schema_of(SKIPPED_COLUMNS)
UNAVAILABLE = schema_of(UNAVAILABLE_COLUMNS)
TOPOLOGY_LINKS = schema_of(TOPOLOGY_LINK_COLUMNS)
TOPOLOGY_DEVICES = schema_of(TOPOLOGY_DEVICE_COLUMNS)
APPS = schema_of(APPS_COLUMNS)
APP_COUNTS = schema_of(APP_COUNT_COLUMNS)
GPU_LIST = schema_of(GPU_LIST_COLUMNS)
PROCESSES = schema_of(PROCESS_COLUMNS)
ROLES = schema_of(ROLE_COLUMNS)

GLOSSARY: dict[str, str] = {
    **glossary(SAMPLE_COLUMNS),
    **{f"skipped.{k}": v for k, v in glossary(SKIPPED_COLUMNS).items()},
}
