"""Per-GPU memory of the synthetic launch, as the startup block prints it.

Stage weights follow per-stage figures (an INT4 MoE layer ≈ 9.8 GB; rank 0 adds the
embedding and the dense first layer, the last rank the lm_head); the KV pool holds
``max_total_num_tokens`` tokens of MLA latent (≈ 1152 B per token per layer) for the stage's
layers. Sizes are in GB as SGLang prints them.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.analyze.model import Layout, layer_partition
from toolkit.synth.truth import MAX_TOTAL_NUM_TOKENS

__all__ = ["GpuMemory", "gpu_memory", "pool_tokens"]

GPU_TOTAL_GB = 95.59  # 97887 MiB
AVAIL_AFTER_INIT_GB = 94.21
INIT_MEM_GB = 0.79
KV_BYTES_PER_TOKEN_LAYER = 1152
LAYERS = 61


@dataclass(frozen=True)
class GpuMemory:
    """One scheduler rank's GPU memory through the startup, GB."""

    layers: int
    weights: float
    kv: float
    graphs: float

    @property
    def after_load(self) -> float:
        return AVAIL_AFTER_INIT_GB - self.weights

    @property
    def after_pool(self) -> float:
        return self.after_load - self.kv - 0.06  # + req_to_token pool and allocator slack

    @property
    def before_capture(self) -> float:
        return self.after_pool - 0.11

    @property
    def after_capture(self) -> float:
        return self.before_capture - self.graphs

    @property
    def used_mib(self) -> int:
        """``memory.used`` while serving: everything but the free memory, + activations."""
        return round((GPU_TOTAL_GB - self.after_capture + 0.42) * 1024)


def pool_tokens(layout: Layout) -> int:
    """``max_total_num_tokens``: the layout's, else the incident's (one value on every PP rank,
    the MIN across stages)."""
    return layout.max_total_num_tokens or MAX_TOTAL_NUM_TOKENS["pp" if layout.pp > 1 else "tp"]


def gpu_memory(layout: Layout) -> list[GpuMemory]:
    """Memory per scheduler rank: one per PP stage (TP ranks of a stage print alike)."""
    tokens = pool_tokens(layout)
    if layout.pp == 1:
        # Every TP rank holds 1/tp of the weights and the whole MLA latent cache.
        kv = tokens * KV_BYTES_PER_TOKEN_LAYER * LAYERS / 1e9
        return [GpuMemory(LAYERS, 592.0 / layout.tp, kv, 1.46)]
    out = []
    parts = layer_partition(LAYERS, layout.pp, layout.layer_partition)
    for k, n in enumerate(parts):
        weights = n * 9.82 + (2.5 if k == 0 else 0.0) + (2.44 if k == layout.pp - 1 else 0.0)
        weights /= layout.tp  # TP splits a stage's weights; the MLA latent cache is replicated
        kv = tokens * KV_BYTES_PER_TOKEN_LAYER * n / 1e9
        out.append(GpuMemory(n, round(weights, 2), kv, 0.87 + 0.01 * k))
    return out
