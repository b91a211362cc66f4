"""The machine a run served on, from its own inputs, and the priors the serving model starts from.

The GPU's name comes from the trace (nvidia-smi ``name``, dcgm-exporter ``modelName``), the
``nvidia-smi -L`` listing, else ``run.toml``'s ``hardware``; the interconnect from ``run.toml``
or ``nvidia-smi topo -m``. ``GPUS`` holds public datasheet figures; the effective HBM bandwidth
prior is ``HBM_EFFICIENCY`` of the datasheet's (decode kernels reach 80–85 % of it). Costs no
datasheet gives (a PP hop, an all-reduce's latency, the per-step overhead) start from
interconnect-class priors, labelled ``assumed``; ``fit`` then replaces what the run's own
single-stream points pin down, and ``Fit.sources`` says which constant came from where.

>>> gpu_figures("NVIDIA H100 80GB HBM3").name
'H100 SXM'
>>> gpu_figures("Tesla T4") is None
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from toolkit.analyze.model.spec import Hardware

__all__ = [
    "GPUS",
    "HBM_EFFICIENCY",
    "GpuFigures",
    "MachineIdentity",
    "gpu_figures",
    "hardware_gpus",
    "prior",
]

HBM_EFFICIENCY = 0.84
"""Share of the datasheet HBM bandwidth a decode step's weight reads reach (assumed)."""


@dataclass(frozen=True)
class GpuFigures:
    """Datasheet figures of one GPU model."""

    name: str
    hbm_tb_s: float
    memory_gb: float
    link: str  # "nvlink" or "pcie": how its multi-GPU servers usually connect
    bf16_tflops: float


GPUS: tuple[tuple[str, GpuFigures], ...] = (
    (r"gb200", GpuFigures("GB200", 8.0, 186, "nvlink", 2500)),
    (r"b200", GpuFigures("B200", 8.0, 180, "nvlink", 2250)),
    (r"h200", GpuFigures("H200", 4.8, 141, "nvlink", 989)),
    (r"h100.*nvl", GpuFigures("H100 NVL", 3.9, 94, "nvlink", 835)),
    (r"h100.*pcie", GpuFigures("H100 PCIe", 2.0, 80, "pcie", 756)),
    (r"h100|h800", GpuFigures("H100 SXM", 3.35, 80, "nvlink", 989)),
    (r"h20\b", GpuFigures("H20", 4.0, 96, "nvlink", 148)),
    (r"a100.*(pcie).*80|a100.*80.*pcie", GpuFigures("A100 PCIe 80GB", 1.94, 80, "pcie", 312)),
    (r"a100.*80", GpuFigures("A100 SXM 80GB", 2.04, 80, "nvlink", 312)),
    (r"a100|a800", GpuFigures("A100 40GB", 1.56, 40, "nvlink", 312)),
    (r"rtx pro 6000", GpuFigures("RTX PRO 6000 Blackwell", 1.79, 96, "pcie", 500)),
    (r"rtx 6000 ada", GpuFigures("RTX 6000 Ada", 0.96, 48, "pcie", 364)),
    (r"rtx a6000|a6000", GpuFigures("RTX A6000", 0.77, 48, "pcie", 155)),
    (r"l40s", GpuFigures("L40S", 0.86, 48, "pcie", 362)),
    (r"l40\b", GpuFigures("L40", 0.86, 48, "pcie", 181)),
    (r"l4\b", GpuFigures("L4", 0.30, 24, "pcie", 121)),
    (r"a10\b|a10g", GpuFigures("A10", 0.60, 24, "pcie", 125)),
    (r"5090", GpuFigures("RTX 5090", 1.79, 32, "pcie", 209)),
    (r"4090", GpuFigures("RTX 4090", 1.01, 24, "pcie", 165)),
    (r"3090", GpuFigures("RTX 3090", 0.94, 24, "pcie", 71)),
    (r"v100", GpuFigures("V100", 0.90, 32, "nvlink", 125)),
    (r"mi355", GpuFigures("MI355X", 8.0, 288, "nvlink", 2500)),
    (r"mi325", GpuFigures("MI325X", 6.0, 256, "nvlink", 1300)),
    (r"mi300", GpuFigures("MI300X", 5.3, 192, "nvlink", 1300)),
)
"""(name pattern, figures), most specific first; patterns match the lower-cased name."""

# Interconnect-class priors for what no datasheet says (assumed until fitted).
_LINK_PRIORS: dict[str, dict[str, float]] = {
    "pcie": {"hop_s": 0.67e-3, "allreduce_s": 270e-6, "p2p_bytes_s": 25e9},
    "nvlink": {"hop_s": 0.25e-3, "allreduce_s": 30e-6, "p2p_bytes_s": 300e9},
}
_OVERHEAD_S = 2.0e-3  # launch, sampling and result processing per micro-batch step (assumed)
_FALLBACK_HBM_TB_S = 2.0  # an unknown GPU: a mid-range datacenter part (assumed)


def gpu_figures(name: str | None) -> GpuFigures | None:
    """The datasheet figures of a GPU by its product name, else None."""
    if not name:
        return None
    low = " ".join(str(name).lower().split())
    for pattern, figures in GPUS:
        if re.search(pattern, low):
            return figures
    return None


_COUNT = re.compile(r"^\s*(\d{1,4})\s*(?:[x×*]|gpus?\b)\s*(?:of\s+)?", re.IGNORECASE)


def hardware_gpus(text: str | None) -> tuple[int | None, str | None]:
    """(GPU count, GPU name) of a hardware description such as ``run.toml``'s ``hardware``:
    a leading count (``8x``, ``8 ×``, ``8*``, ``8 GPUs of``) is the count, never part of the
    name, so a machine is never described as ``8× 8x RTX PRO 6000``.

    >>> hardware_gpus("8x NVIDIA RTX PRO 6000 Blackwell")
    (8, 'NVIDIA RTX PRO 6000 Blackwell')
    >>> hardware_gpus("H200")
    (None, 'H200')
    """
    if text is None or not str(text).strip():
        return None, None
    name = " ".join(str(text).split())
    match = _COUNT.match(name)
    if match is None or not name[match.end() :].strip():
        return None, name
    return int(match.group(1)), name[match.end() :].strip()


@dataclass(frozen=True)
class MachineIdentity:
    """The machine of a run: GPU model, count and interconnect, each with where it came from."""

    gpu: str | None
    gpu_from: str | None
    gpus: int | None
    interconnect: str | None
    interconnect_from: str | None

    @property
    def figures(self) -> GpuFigures | None:
        return gpu_figures(self.gpu)

    @property
    def key(self) -> tuple[str | None, str | None]:
        """Runs with equal keys ran on the same kind of machine (and may share fitted costs)."""
        figures = self.figures
        return (figures.name if figures else self.gpu, self.interconnect)

    def describe(self) -> str:
        parts = [f"{self.gpus}× " if self.gpus else "", self.gpu or "unknown GPU"]
        text = "".join(parts)
        if self.interconnect:
            text += f" ({self.interconnect})"
        return text

    def to_dict(self) -> dict[str, Any]:
        figures = self.figures
        return {
            "gpu": self.gpu,
            "gpu_from": self.gpu_from,
            "gpus": self.gpus,
            "interconnect": self.interconnect,
            "interconnect_from": self.interconnect_from,
            "datasheet": figures.name if figures else None,
        }


def prior(machine: MachineIdentity) -> tuple[Hardware, dict[str, str]]:
    """The serving model's starting costs for ``machine`` and where each came from
    (``table: <GPU>``, ``assumed``)."""
    figures = machine.figures
    link = machine.interconnect or (figures.link if figures else "pcie")
    link_priors = _LINK_PRIORS.get(link, _LINK_PRIORS["pcie"])
    link_source = f"assumed for {link}"
    if not machine.interconnect:
        link_source += " (interconnect unknown)"
    if figures is not None:
        hbm = figures.hbm_tb_s * 1e12 * HBM_EFFICIENCY
        hbm_source = f"table: {figures.name} {figures.hbm_tb_s} TB/s × {HBM_EFFICIENCY} (assumed)"
        flops = figures.bf16_tflops * 1e12 * 0.5
    else:
        hbm = _FALLBACK_HBM_TB_S * 1e12 * HBM_EFFICIENCY
        hbm_source = f"assumed: {machine.gpu or 'GPU'} not in the table"
        flops = 2.0e14
    hardware = Hardware(
        name=machine.describe(),
        gpus=machine.gpus or 1,
        hbm_bytes_s=hbm,
        hop_s=link_priors["hop_s"],
        allreduce_s=link_priors["allreduce_s"],
        overhead_s=_OVERHEAD_S,
        flops_s=flops,
        p2p_bytes_s=link_priors["p2p_bytes_s"],
    )
    sources = {
        "hbm_bytes_s": hbm_source,
        "hop_s": link_source,
        "allreduce_s": link_source,
        "overhead_s": "assumed",
    }
    return hardware, sources
