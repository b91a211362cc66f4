"""Which column each monitoring tool's field goes to, and in what unit.

One quantity gets one column whatever prints it: nvidia-smi's ``utilization.gpu``, dmon's
``sm``, DCGM's ``DCGM_FI_DEV_GPU_UTIL`` / ``GPUTL`` / field 203 and the old exporter's
``dcgm_gpu_utilization`` all land in ``util_pct``. A field not listed here keeps a column
named from the source (``unknown_column``), so nothing is dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# nvidia-smi --query-gpu: aliases a user may type → the canonical name the header prints.
SMI_ALIASES: dict[str, str] = {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "gpu_serial": "serial",
    "clocks.gr": "clocks.current.graphics",
    "clocks.sm": "clocks.current.sm",
    "clocks.mem": "clocks.current.memory",
    "clocks.video": "clocks.current.video",
    "clocks.max.gr": "clocks.max.graphics",
    "clocks.max.mem": "clocks.max.memory",
    "clocks.applications.gr": "clocks.applications.graphics",
    "clocks.applications.mem": "clocks.applications.memory",
    "pcie.link.gen.current": "pcie.link.gen.gpucurrent",
    "gpu_operation_mode.current": "gom.current",
    "gpu_operation_mode.pending": "gom.pending",
}

# canonical nvidia-smi name → (column, kind). kind: ts, gpu, float, str.
SMI_FIELDS: dict[str, tuple[str, str]] = {
    "timestamp": ("ts", "ts"),
    "index": ("gpu", "gpu"),
    "name": ("name", "str"),
    "uuid": ("uuid", "str"),
    "pci.bus_id": ("pci_bus_id", "str"),
    "utilization.gpu": ("util_pct", "float"),
    "utilization.memory": ("mem_util_pct", "float"),
    "utilization.encoder": ("enc_util_pct", "float"),
    "utilization.decoder": ("dec_util_pct", "float"),
    "utilization.jpeg": ("jpg_util_pct", "float"),
    "utilization.ofa": ("ofa_util_pct", "float"),
    "memory.used": ("mem_used_mib", "float"),
    "memory.free": ("mem_free_mib", "float"),
    "memory.total": ("mem_total_mib", "float"),
    "memory.reserved": ("mem_reserved_mib", "float"),
    "power.draw": ("power_w", "float"),
    "power.draw.average": ("power_avg_w", "float"),
    "power.draw.instant": ("power_instant_w", "float"),
    "power.limit": ("power_limit_w", "float"),
    "enforced.power.limit": ("power_limit_enforced_w", "float"),
    "clocks.current.sm": ("sm_clock_mhz", "float"),
    "clocks.current.memory": ("mem_clock_mhz", "float"),
    "clocks.current.graphics": ("gr_clock_mhz", "float"),
    "clocks.max.sm": ("sm_clock_max_mhz", "float"),
    "clocks.max.memory": ("mem_clock_max_mhz", "float"),
    "temperature.gpu": ("temp_c", "float"),
    "temperature.memory": ("mem_temp_c", "float"),
    "fan.speed": ("fan_pct", "float"),
    "pstate": ("pstate", "str"),
    "pcie.link.gen.gpucurrent": ("pcie_link_gen", "float"),
    "pcie.link.width.current": ("pcie_link_width", "float"),
    "clocks_event_reasons.active": ("clock_event_reasons", "str"),
}

# nvidia-smi dmon names line → (column, multiplier). Units follow the units line.
DMON_FIELDS: dict[str, tuple[str, float]] = {
    "pwr": ("power_w", 1.0),
    "gtemp": ("temp_c", 1.0),
    "temp": ("temp_c", 1.0),
    "mtemp": ("mem_temp_c", 1.0),
    "sm": ("util_pct", 1.0),
    "mem": ("mem_util_pct", 1.0),
    "enc": ("enc_util_pct", 1.0),
    "dec": ("dec_util_pct", 1.0),
    "jpg": ("jpg_util_pct", 1.0),
    "ofa": ("ofa_util_pct", 1.0),
    "mclk": ("mem_clock_mhz", 1.0),
    "pclk": ("sm_clock_mhz", 1.0),  # dmon's processor clock: the graphics/SM clock domain
    "fb": ("mem_used_mib", 1.0),  # dmon prints MB but means the MiB of memory.used
    "rxpci": ("pcie_rx_bytes_s", 1e6),
    "txpci": ("pcie_tx_bytes_s", 1e6),
}


@dataclass(frozen=True)
class DcgmField:
    """One DCGM field: how DCGM names it in each output, and where it goes."""

    field_id: int
    name: str  # DCGM_FI_... (dcgm-exporter metric name)
    short: str  # dcgmi dmon column
    tag: str  # DCGM's long tag; the pre-2020 exporter printed dcgm_<tag>
    column: str
    scale: float = 1.0


DCGM_FIELDS: tuple[DcgmField, ...] = (
    DcgmField(100, "DCGM_FI_DEV_SM_CLOCK", "SMCLK", "sm_clock", "sm_clock_mhz"),
    DcgmField(101, "DCGM_FI_DEV_MEM_CLOCK", "MMCLK", "memory_clock", "mem_clock_mhz"),
    DcgmField(140, "DCGM_FI_DEV_MEMORY_TEMP", "MMTMP", "memory_temp", "mem_temp_c"),
    DcgmField(150, "DCGM_FI_DEV_GPU_TEMP", "TMPTR", "gpu_temp", "temp_c"),
    DcgmField(155, "DCGM_FI_DEV_POWER_USAGE", "POWER", "power_usage", "power_w"),
    DcgmField(
        156, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "TOTEC", "total_energy_consumption",
        "energy_mj",
    ),
    DcgmField(
        160, "DCGM_FI_DEV_POWER_MGMT_LIMIT", "PMLMT", "power_management_limit", "power_limit_w"
    ),
    DcgmField(
        164, "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "EPLMT", "enforced_power_limit",
        "power_limit_enforced_w",
    ),
    DcgmField(190, "DCGM_FI_DEV_PSTATE", "PSTAT", "pstate", "pstate"),
    DcgmField(191, "DCGM_FI_DEV_FAN_SPEED", "FANSP", "fan_speed", "fan_pct"),
    # NVML throughput in KB/s; KB taken as 1000 bytes, like dmon's MB/s.
    DcgmField(
        200, "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "TXTPT", "pcie_tx_throughput", "pcie_tx_bytes_s",
        1e3,
    ),
    DcgmField(
        201, "DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "RXTPT", "pcie_rx_throughput", "pcie_rx_bytes_s",
        1e3,
    ),
    DcgmField(203, "DCGM_FI_DEV_GPU_UTIL", "GPUTL", "gpu_utilization", "util_pct"),
    DcgmField(204, "DCGM_FI_DEV_MEM_COPY_UTIL", "MCUTL", "mem_copy_utilization", "mem_util_pct"),
    DcgmField(206, "DCGM_FI_DEV_ENC_UTIL", "ECUTL", "enc_utilization", "enc_util_pct"),
    DcgmField(207, "DCGM_FI_DEV_DEC_UTIL", "DCUTL", "dec_utilization", "dec_util_pct"),
    DcgmField(250, "DCGM_FI_DEV_FB_TOTAL", "FBTTL", "fb_total", "mem_total_mib"),
    DcgmField(251, "DCGM_FI_DEV_FB_FREE", "FBFRE", "fb_free", "mem_free_mib"),
    DcgmField(252, "DCGM_FI_DEV_FB_USED", "FBUSD", "fb_used", "mem_used_mib"),
    DcgmField(253, "DCGM_FI_DEV_FB_RESERVED", "FBRSV", "fb_resv", "mem_reserved_mib"),
    DcgmField(1001, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "GRACT", "gr_engine_active",
              "gr_engine_active"),
    DcgmField(1002, "DCGM_FI_PROF_SM_ACTIVE", "SMACT", "sm_active", "sm_active"),
    DcgmField(1003, "DCGM_FI_PROF_SM_OCCUPANCY", "SMOCC", "sm_occupancy", "sm_occupancy"),
    DcgmField(1004, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "TENSO", "tensor_active", "tensor_active"),
    DcgmField(1005, "DCGM_FI_PROF_DRAM_ACTIVE", "DRAMA", "dram_active", "dram_active"),
    DcgmField(1006, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "FP64A", "fp64_active", "fp64_active"),
    DcgmField(1007, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "FP32A", "fp32_active", "fp32_active"),
    DcgmField(1008, "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "FP16A", "fp16_active", "fp16_active"),
    DcgmField(1009, "DCGM_FI_PROF_PCIE_TX_BYTES", "PCITX", "pcie_tx_bytes", "pcie_tx_bytes_s"),
    DcgmField(1010, "DCGM_FI_PROF_PCIE_RX_BYTES", "PCIRX", "pcie_rx_bytes", "pcie_rx_bytes_s"),
    DcgmField(1011, "DCGM_FI_PROF_NVLINK_TX_BYTES", "NVLTX", "nvlink_tx_bytes",
              "nvlink_tx_bytes_s"),
    DcgmField(1012, "DCGM_FI_PROF_NVLINK_RX_BYTES", "NVLRX", "nvlink_rx_bytes",
              "nvlink_rx_bytes_s"),
)  # fmt: skip

DCGM_BY_NAME = {f.name: f for f in DCGM_FIELDS}
DCGM_BY_SHORT = {f.short: f for f in DCGM_FIELDS}
DCGM_BY_OLD_NAME = {f"dcgm_{f.tag}": f for f in DCGM_FIELDS}
# The pre-2020 exporter's own spellings that differ from DCGM's tags.
DCGM_BY_OLD_NAME.update(
    {
        "dcgm_power_usage": DCGM_BY_NAME["DCGM_FI_DEV_POWER_USAGE"],
        "dcgm_memory_clock": DCGM_BY_NAME["DCGM_FI_DEV_MEM_CLOCK"],
        "dcgm_mem_clock": DCGM_BY_NAME["DCGM_FI_DEV_MEM_CLOCK"],
        "dcgm_fb_used": DCGM_BY_NAME["DCGM_FI_DEV_FB_USED"],
        "dcgm_fb_free": DCGM_BY_NAME["DCGM_FI_DEV_FB_FREE"],
        "dcgm_mem_copy_utilization": DCGM_BY_NAME["DCGM_FI_DEV_MEM_COPY_UTIL"],
        "dcgm_enc_utilization": DCGM_BY_NAME["DCGM_FI_DEV_ENC_UTIL"],
        "dcgm_dec_utilization": DCGM_BY_NAME["DCGM_FI_DEV_DEC_UTIL"],
    }
)

_UNIT_SUFFIX = {
    "%": "pct",
    "mib": "mib",
    "mb": "mb",
    "w": "w",
    "mhz": "mhz",
    "c": "c",
    "mb/s": "mb_s",
    "kb/s": "kb_s",
    "us": "us",
    "j": "j",
    "mj": "mj",
    "errs": "errs",
    "bool": "bool",
}


def smi_canonical(name: str) -> str:
    """The canonical nvidia-smi field name of a header cell or query name (alias mapped)."""
    name = name.strip()
    if name.startswith("clocks_throttle_reasons."):
        name = "clocks_event_reasons." + name.removeprefix("clocks_throttle_reasons.")
    return SMI_ALIASES.get(name, name)


def column_name(name: str, unit: str | None = None) -> str:
    """A snake_case column name for a field ppscope does not know, with its unit."""
    base = re.sub(r"[^0-9a-z]+", "_", name.strip().lower()).strip("_") or "field"
    if unit:
        suffix = _UNIT_SUFFIX.get(unit.strip().lower())
        if suffix is None:
            suffix = re.sub(r"[^0-9a-z]+", "_", unit.strip().lower()).strip("_")
        if suffix and not base.endswith("_" + suffix):
            base = f"{base}_{suffix}"
    return base


def unique_column(column: str, taken: set[str]) -> str:
    """``column``, or ``column_2``, ``column_3``... when a field of the same file (or a column
    the reader adds itself: ``lineno``, ``source``...) already has it; the result is taken.

    >>> taken = {"lineno"}
    >>> [unique_column(c, taken) for c in ("lineno", "power_w", "power_w")]
    ['lineno_2', 'power_w', 'power_w_2']
    """
    out, n = column, 1
    while out in taken:
        n += 1
        out = f"{column}_{n}"
    taken.add(out)
    return out


def dcgm_unknown_column(name: str) -> str:
    """Column for a DCGM metric ppscope does not map: the name without its ``DCGM_FI_`` prefix."""
    for prefix in ("DCGM_FI_DEV_", "DCGM_FI_PROF_", "DCGM_FI_", "dcgm_"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    return column_name(name)
