"""Models and machines the scenarios run, with the defaults SGLang derives from them."""

from __future__ import annotations

from helpers.scenarios.machine import Layout
from helpers.scenarios.spec import Hardware, Model

__all__ = [
    "GPUS",
    "MODELS",
    "default_chunk",
    "default_graph_max",
    "default_running",
    "pool_tokens",
]

# KV bytes per token per layer for the whole model: 2 (K, V) × kv heads × head dim × 2 bytes,
# or the MLA latent (512 + 64) × 2 bytes.
MODELS: dict[str, Model] = {
    m.path: m
    for m in (
        Model("Qwen/Qwen3-235B-A22B", 94, "Qwen3MoeForCausalLM", 470, 40960, 2048),
        Model(
            "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
            48,
            "Llama4ForConditionalGeneration",
            801,
            1048576,
            4096,
        ),
        Model("Qwen/Qwen2.5-72B-Instruct", 80, "Qwen2ForCausalLM", 145, 32768, 4096),
        Model("meta-llama/Llama-3.1-70B-Instruct", 80, "LlamaForCausalLM", 141, 131072, 4096),
        Model(
            "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", 80, "LlamaForCausalLM", 72, 131072, 4096
        ),
        Model("mistralai/Mistral-Large-Instruct-2411", 88, "MistralForCausalLM", 245, 131072, 4096),
        Model("zai-org/GLM-4.5-Air", 46, "Glm4MoeForCausalLM", 221, 131072, 4096),
        Model("deepseek-ai/DeepSeek-R1-0528", 61, "DeepseekV3ForCausalLM", 688, 163840, 1152, True),
        Model("deepseek-ai/DeepSeek-V3.1", 61, "DeepseekV3ForCausalLM", 688, 163840, 1152, True),
        Model("meta-llama/Llama-3.1-405B-Instruct-FP8", 126, "LlamaForCausalLM", 410, 131072, 4096),
        Model(
            "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", 94, "Qwen3MoeForCausalLM", 240, 262144, 2048
        ),
        Model("meta-llama/Llama-2-70b-chat-hf", 80, "LlamaForCausalLM", 138, 4096, 4096),
        Model("mistralai/Mixtral-8x22B-Instruct-v0.1", 56, "MixtralForCausalLM", 281, 65536, 4096),
        Model("Qwen/Qwen3-30B-A3B", 48, "Qwen3MoeForCausalLM", 61, 40960, 2048),
        Model("meta-llama/Meta-Llama-3-70B-Instruct", 80, "LlamaForCausalLM", 141, 8192, 4096),
        Model("mistralai/Mixtral-8x7B-Instruct-v0.1", 32, "MixtralForCausalLM", 93, 32768, 4096),
        Model("meta-llama/Llama-3.1-8B-Instruct", 32, "LlamaForCausalLM", 16, 131072, 4096),
        # INT4 experts (compressed-tensors, group 32), MLA attention kept in bf16
        Model("moonshotai/Kimi-K2-Thinking", 61, "DeepseekV3ForCausalLM", 594, 262144, 1152, True),
    )
}

GPUS: dict[str, Hardware] = {
    "h100": Hardware(
        "NVIDIA H100 80GB HBM3", "8x H100 80GB SXM (NVLink)", "nvlink", 81559, 700, 72
    ),
    "h200": Hardware("NVIDIA H200", "8x H200 141GB SXM (NVLink)", "nvlink", 143771, 700, 76),
    "b200": Hardware("NVIDIA B200", "8x B200 180GB (NVLink)", "nvlink", 183359, 1000, 140),
    "l40s": Hardware("NVIDIA L40S", "8x L40S 48GB PCIe", "pcie", 46068, 350, 36),
    "a100": Hardware(
        "NVIDIA A100-SXM4-80GB", "8x A100 80GB SXM4 (NVLink)", "nvlink", 81920, 400, 60
    ),
    "a100pcie": Hardware("NVIDIA A100 80GB PCIe", "8x A100 80GB PCIe", "pcie", 81920, 300, 45),
    "rtx6000ada": Hardware(
        "NVIDIA RTX 6000 Ada Generation",
        "4x RTX 6000 Ada 48GB PCIe",
        "pcie",
        49140,
        300,
        25,
        gpus=4,
    ),
    "rtxpro6000": Hardware(
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "8x RTX PRO 6000 Blackwell Server Edition 96GB PCIe",
        "pcie",
        97887,
        600,
        80,
    ),
    "a10g": Hardware("NVIDIA A10G", "8x A10G 24GB PCIe (g5.48xlarge)", "pcie", 23028, 300, 18),
    "rtx4090": Hardware(
        "NVIDIA GeForce RTX 4090", "8x GeForce RTX 4090 24GB PCIe", "pcie", 24564, 450, 22
    ),
}


def default_chunk(hw: Hardware) -> int:
    """``chunked_prefill_size`` SGLang picks from the GPU memory."""
    gb = hw.mem_mib / 1024
    return 2048 if gb < 35 else 4096 if gb < 60 else 8192 if gb < 160 else 16384


def default_graph_max(hw: Hardware, tp: int) -> int:
    """``cuda_graph_max_bs``: by GPU memory and TP size (not PP)."""
    gb = hw.mem_mib / 1024
    if gb < 30:
        return 24 if tp < 4 else 80
    if gb < 60:
        return 32 if tp < 4 else 160
    return 256 if tp < 4 else 512


def default_running(pool: int, context_len: int) -> int:
    """``max_running_requests`` from the KV capacity."""
    return min(max(min(pool * 512 // context_len, 4096), 2048), pool // 2)


def pool_tokens(model: Model, hw: Hardware, lay: Layout, mem_fraction: float) -> int:
    """``max_total_num_tokens``: KV room of the fullest stage (SGLang takes the minimum over
    PP ranks), in tokens, a multiple of 64."""
    total = hw.mem_mib / 1024
    room = []
    for s, n in enumerate(lay.split):
        weights = model.weights_gb * n / lay.layers / lay.tp * 1e9 / 1024**3
        if s in (0, lay.pp - 1):
            weights *= 1.03  # embedding, lm_head
        per_token = model.kv_bytes * n / (1 if model.mla else lay.tp)
        room.append((mem_fraction * total - weights) * 1024**3 / per_token)
    return int(min(room)) // 64 * 64
