"""What the draws pick from: models (with the bytes a decode step reads) and GPUs (with the
datasheet figures their costs are drawn around).

The models and GPUs themselves are ``helpers.scenarios.hardware``'s (layers, context, KV bytes,
memory); this table adds only what the calibration machine's costs are scaled from. Figures are
public datasheet and model-card numbers, rounded; the draws move every cost ±40 % or more away
from them, so no cost here is meant to be exact.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GPU_FIGURES", "MODEL_FIGURES", "GpuFigures", "ModelFigures"]


@dataclass(frozen=True)
class ModelFigures:
    """A model's size, the bytes one decode step of one request reads, and the parameters a
    prompt token passes through."""

    params_b: float  # all parameters, billions
    moe: bool
    step_gb: float  # weights read by a decode step at batch 1 (dense: all; MoE: the active ones)
    lm_head_gb: float  # the output projection, read once per step on the last stage
    active_params_b: float  # parameters a token passes through, billions (prefill FLOPs)


MODEL_FIGURES: dict[str, ModelFigures] = {
    "meta-llama/Llama-3.1-8B-Instruct": ModelFigures(8, False, 16.1, 1.05, 8.0),
    "Qwen/Qwen3-30B-A3B": ModelFigures(30.5, True, 6.7, 0.62, 3.3),
    "meta-llama/Llama-3.1-70B-Instruct": ModelFigures(70.6, False, 141.0, 2.1, 70.6),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": ModelFigures(46.7, True, 26.0, 0.26, 12.9),
    "Qwen/Qwen3-235B-A22B": ModelFigures(235, True, 44.0, 1.24, 22.0),
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": ModelFigures(235, True, 23.0, 1.24, 22.0),
    "meta-llama/Llama-3.1-405B-Instruct-FP8": ModelFigures(405, False, 410.0, 2.1, 405.0),
    "deepseek-ai/DeepSeek-V3.1": ModelFigures(671, True, 38.0, 1.85, 37.0),
    "moonshotai/Kimi-K2-Thinking": ModelFigures(1040, True, 21.0, 2.35, 32.0),
}
"""Model path (a key of ``hardware.MODELS``) → its figures: dense and MoE, 8B to 1T."""


@dataclass(frozen=True)
class GpuFigures:
    """Datasheet memory bandwidth and dense bf16 compute of one GPU."""

    hbm_tb_s: float
    tflops: float


GPU_FIGURES: dict[str, GpuFigures] = {
    "h100": GpuFigures(3.35, 989),
    "h200": GpuFigures(4.8, 989),
    "b200": GpuFigures(8.0, 2250),
    "a100": GpuFigures(2.04, 312),
    "a100pcie": GpuFigures(1.94, 312),
    "l40s": GpuFigures(0.86, 362),
    "rtxpro6000": GpuFigures(1.79, 500),
}
"""GPU key (of ``hardware.GPUS``) → figures: NVLink (H100, H200, B200, A100 SXM) and PCIe
(A100 PCIe, L40S, RTX PRO 6000) nodes."""
