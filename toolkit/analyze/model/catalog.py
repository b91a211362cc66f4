"""The model a run served, from its own inputs: a Hugging Face ``config.json``, else a table of
well-known public models keyed by id; never another model's numbers in silence.

``model_spec`` turns an architecture (``config.json`` keys) into the bytes one decode step
reads: attention (GQA or MLA) per layer, dense FFNs, routed and shared experts, the lm_head.
Weight precision comes from ``quantization_config`` (FP8: one byte for every linear layer;
4-bit schemes: experts and FFNs at 4 bits plus a 16-bit scale per group, attention kept at the
model's dtype) else ``torch_dtype``. Routing skew is unknown from a config, so the effective
expert count is the routed count (uniform routing), which the spec says.

>>> spec = model_spec("meta-llama/Llama-3.1-70B-Instruct")
>>> (spec.source, spec.spec.layers, round(spec.spec.step_bytes(1) / 1e9))
('table: Llama-3.1-70B', 80, 139)
>>> model_spec("acme/secret-model").spec is None
True
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from toolkit.analyze.model.spec import ModelSpec

__all__ = ["KNOWN_MODELS", "ModelIdentity", "model_spec"]

SUPPLY_CONFIG = (
    "place the model's Hugging Face config.json in the run directory (or set `model` in "
    "run.toml to a known id) so that impacts can use the architecture"
)
"""What a report says when the model is unknown."""

_LLAMA3 = {"vocab_size": 128256, "num_key_value_heads": 8, "max_position_embeddings": 131072}
_QWEN3 = {"vocab_size": 151936, "max_position_embeddings": 40960, "head_dim": 128}
_DEEPSEEK_V3 = {
    "num_hidden_layers": 61,
    "hidden_size": 7168,
    "num_attention_heads": 128,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "vocab_size": 129280,
    "max_position_embeddings": 163840,
    "quantization_config": {"quant_method": "fp8"},
}
_GLM45 = {
    "hidden_size": 5120,
    "num_attention_heads": 96,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 12288,
    "moe_intermediate_size": 1536,
    "n_routed_experts": 160,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "num_hidden_layers": 92,
    "vocab_size": 151552,
    "max_position_embeddings": 131072,
}

KNOWN_MODELS: dict[str, dict[str, Any]] = {
    "Llama-3.1-8B": {
        **_LLAMA3,
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "intermediate_size": 14336,
    },
    "Llama-3.1-70B": {
        **_LLAMA3,
        "num_hidden_layers": 80,
        "hidden_size": 8192,
        "num_attention_heads": 64,
        "intermediate_size": 28672,
    },
    "Llama-3.1-405B": {
        **_LLAMA3,
        "num_hidden_layers": 126,
        "hidden_size": 16384,
        "num_attention_heads": 128,
        "intermediate_size": 53248,
    },
    "Qwen3-8B": {
        **_QWEN3,
        "num_hidden_layers": 36,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 12288,
    },
    "Qwen3-14B": {
        **_QWEN3,
        "num_hidden_layers": 40,
        "hidden_size": 5120,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "intermediate_size": 17408,
    },
    "Qwen3-32B": {
        **_QWEN3,
        "num_hidden_layers": 64,
        "hidden_size": 5120,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "intermediate_size": 25600,
    },
    "Qwen3-30B-A3B": {
        **_QWEN3,
        "num_hidden_layers": 48,
        "hidden_size": 2048,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "moe_intermediate_size": 768,
        "num_experts": 128,
        "num_experts_per_tok": 8,
    },
    "Qwen3-235B-A22B": {
        **_QWEN3,
        "num_hidden_layers": 94,
        "hidden_size": 4096,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "moe_intermediate_size": 1536,
        "num_experts": 128,
        "num_experts_per_tok": 8,
    },
    "DeepSeek-V3": _DEEPSEEK_V3,
    "DeepSeek-R1": _DEEPSEEK_V3,
    "Kimi-K2": {
        **_DEEPSEEK_V3,
        "num_attention_heads": 64,
        "n_routed_experts": 384,
        "first_k_dense_replace": 1,
        "vocab_size": 163840,
        "max_position_embeddings": 262144,
        # K2-Thinking and K2.x ship INT4 (group 32) experts; the first release FP8 weights
        "quantization_config": {"quant_method": "compressed-tensors", "bits": 4, "group_size": 32},
    },
    "GLM-4.5": _GLM45,
    "GLM-4.6": _GLM45,
    "GLM-4.5-Air": {
        **_GLM45,
        "hidden_size": 4096,
        "intermediate_size": 10944,
        "moe_intermediate_size": 1408,
        "n_routed_experts": 128,
        "first_k_dense_replace": 1,
        "num_hidden_layers": 46,
    },
    "gpt-oss-120b": {
        "num_hidden_layers": 36,
        "hidden_size": 2880,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "moe_intermediate_size": 2880,
        "num_local_experts": 128,
        "num_experts_per_tok": 4,
        "vocab_size": 201088,
        "max_position_embeddings": 131072,
        "quantization_config": {"quant_method": "mxfp4"},
    },
    "gpt-oss-20b": {
        "num_hidden_layers": 24,
        "hidden_size": 2880,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "moe_intermediate_size": 2880,
        "num_local_experts": 32,
        "num_experts_per_tok": 4,
        "vocab_size": 201088,
        "max_position_embeddings": 131072,
        "quantization_config": {"quant_method": "mxfp4"},
    },
    "Mixtral-8x7B": {
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "moe_intermediate_size": 14336,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "vocab_size": 32000,
        "max_position_embeddings": 32768,
    },
    "Mixtral-8x22B": {
        "num_hidden_layers": 56,
        "hidden_size": 6144,
        "num_attention_heads": 48,
        "num_key_value_heads": 8,
        "moe_intermediate_size": 16384,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "vocab_size": 32768,
        "max_position_embeddings": 65536,
    },
}
"""Architectures of well-known public models, in ``config.json`` keys, by a short id."""

# Id fragments → table key; the first that a normalized model id contains wins (longest first).
_ALIASES: tuple[tuple[str, str], ...] = (
    ("llama-3.1-405b", "Llama-3.1-405B"),
    ("llama-3.1-70b", "Llama-3.1-70B"),
    ("llama-3.3-70b", "Llama-3.1-70B"),
    ("llama-3-70b", "Llama-3.1-70B"),
    ("llama-3.1-8b", "Llama-3.1-8B"),
    ("llama-3-8b", "Llama-3.1-8B"),
    ("qwen3-235b-a22b", "Qwen3-235B-A22B"),
    ("qwen3-30b-a3b", "Qwen3-30B-A3B"),
    ("qwen3-32b", "Qwen3-32B"),
    ("qwen3-14b", "Qwen3-14B"),
    ("qwen3-8b", "Qwen3-8B"),
    ("deepseek-v3", "DeepSeek-V3"),
    ("deepseek-r1", "DeepSeek-R1"),
    ("kimi-k2", "Kimi-K2"),
    ("glm-4.5-air", "GLM-4.5-Air"),
    ("glm-4.6", "GLM-4.6"),
    ("glm-4.5", "GLM-4.5"),
    ("gpt-oss-120b", "gpt-oss-120b"),
    ("gpt-oss-20b", "gpt-oss-20b"),
    ("mixtral-8x22b", "Mixtral-8x22B"),
    ("mixtral-8x7b", "Mixtral-8x7B"),
)


@dataclass(frozen=True)
class ModelIdentity:
    """The model of a run: its id as the inputs name it, its spec (None when unknown) and
    where each came from."""

    id: str | None
    id_from: str | None
    spec: ModelSpec | None
    source: str  # "config.json", "table: <key>" or "unknown"

    @property
    def known(self) -> bool:
        return self.spec is not None

    def describe(self) -> str:
        """One line for a report header."""
        name = self.id or "an unnamed model"
        if self.spec is None:
            return f"{name}: architecture unknown ({SUPPLY_CONFIG})"
        return f"{self.spec.name} ({self.source})"

    def to_dict(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "id": self.id,
            "id_from": self.id_from,
            "spec_from": self.source,
            "name": spec.name if spec else None,
            "layers": spec.layers if spec else None,
            "experts": spec.experts if spec else None,
        }


def table_key(model_id: str | None) -> str | None:
    """The ``KNOWN_MODELS`` key a model id names, else None (``/models/Kimi-K2.6`` → Kimi-K2)."""
    if not model_id:
        return None
    norm = re.sub(r"[\s_]+", "-", str(model_id).lower())
    for fragment, key in _ALIASES:
        if fragment in norm:
            return key
    return None


def model_spec(
    model_id: str | None,
    config: Mapping[str, Any] | None = None,
    *,
    id_from: str | None = None,
    context_len: int | None = None,
) -> ModelIdentity:
    """The model's identity and spec: ``config`` (a ``config.json``) first, else the table entry
    the id names, else unknown (``spec`` None)."""
    if config:
        try:
            spec = spec_from_config(config, name=model_id or "model of config.json")
        except (KeyError, TypeError, ValueError):
            spec = None
        if spec is not None:
            return ModelIdentity(model_id, id_from, _with_context(spec, context_len), "config.json")
    key = table_key(model_id)
    if key is None:
        return ModelIdentity(model_id, id_from, None, "unknown")
    spec = spec_from_config(KNOWN_MODELS[key], name=key)
    return ModelIdentity(model_id, id_from, _with_context(spec, context_len), f"table: {key}")


def _with_context(spec: ModelSpec, context_len: int | None) -> ModelSpec:
    if not context_len or context_len < 1:
        return spec
    return replace(spec, context_len=int(context_len))


def _int(config: Mapping[str, Any], *keys: str, default: int | None = None) -> int:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    if default is None:
        raise KeyError(keys[0])
    return default


def _bits(config: Mapping[str, Any]) -> tuple[float, float, str]:
    """(bytes per expert/FFN weight, bytes per attention weight, the precision in words)."""
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    base = 4.0 if "32" in dtype else 2.0
    quant = config.get("quantization_config")
    if not isinstance(quant, Mapping):
        return base, base, dtype
    method = str(quant.get("quant_method") or "").lower()
    if "fp8" in method or quant.get("fmt") == "e4m3":
        return 1.0, 1.0, "fp8"
    if "mxfp4" in method:
        return 4.25 / 8, base, "mxfp4 experts"
    bits = quant.get("bits") or quant.get("w_bit") or quant.get("num_bits")
    groups = quant.get("config_groups")
    if bits is None and isinstance(groups, Mapping):
        for group in groups.values():
            weights = group.get("weights") if isinstance(group, Mapping) else None
            if isinstance(weights, Mapping) and weights.get("num_bits"):
                bits = weights["num_bits"]
                quant = {**quant, "group_size": weights.get("group_size")}
                break
    if isinstance(bits, int | float) and 1 <= bits < 16:
        group = quant.get("group_size") or 128
        per = bits / 8 + (2.0 / group if isinstance(group, int) and group > 0 else 0.0)
        return per, base, f"{bits:g}-bit experts"
    return base, base, dtype


def spec_from_config(config: Mapping[str, Any], *, name: str) -> ModelSpec:
    """Bytes one decode step reads, from ``config.json`` keys (dense, GQA, MLA and MoE)."""
    layers = _int(config, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _int(config, "hidden_size", "d_model", "n_embd")
    heads = _int(config, "num_attention_heads", "n_head")
    kv_heads = _int(config, "num_key_value_heads", default=heads)
    head_dim = _int(config, "head_dim", default=hidden // max(heads, 1))
    vocab = _int(config, "vocab_size")
    experts = _int(config, "n_routed_experts", "num_experts", "num_local_experts", default=0)
    top_k = _int(config, "num_experts_per_tok", "moe_topk", default=0) if experts else 0
    shared = _int(config, "n_shared_experts", "num_shared_experts", default=0)
    dense_inter = _int(config, "intermediate_size", default=0)
    moe_inter = _int(config, "moe_intermediate_size", default=dense_inter)
    first_dense = _int(config, "first_k_dense_replace", default=0) if experts else layers
    if config.get("kv_lora_rank"):  # multi-head latent attention (DeepSeek-V3 family)
        q_lora = _int(config, "q_lora_rank", default=0)
        kv_lora = _int(config, "kv_lora_rank")
        nope, rope = _int(config, "qk_nope_head_dim"), _int(config, "qk_rope_head_dim")
        v_dim = _int(config, "v_head_dim", default=nope)
        q = (
            hidden * q_lora + q_lora * heads * (nope + rope)
            if q_lora
            else hidden * heads * (nope + rope)
        )
        attention = q + hidden * (kv_lora + rope) + kv_lora * heads * (nope + v_dim)
        attention += heads * v_dim * hidden
    else:
        attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    ffn_bytes, attn_bytes, precision = _bits(config)
    expert_params = 3 * hidden * moe_inter
    dense_ffn_params = 3 * hidden * dense_inter
    if not experts and not dense_ffn_params:
        raise ValueError("config has neither experts nor an intermediate size")
    lm_head = vocab * hidden
    active = layers * attention + lm_head
    active += first_dense * dense_ffn_params
    active += (layers - first_dense) * (top_k + shared) * expert_params
    kind = f"{experts} experts top-{top_k}" if experts else "dense"
    return ModelSpec(
        name=f"{name} ({layers} layers, {kind}, {precision})",
        layers=layers,
        first_dense_layers=first_dense,
        experts=experts,
        top_k=top_k,
        expert_bytes=expert_params * ffn_bytes,
        dense_bytes_per_layer=attention * attn_bytes + shared * expert_params * ffn_bytes,
        dense_ffn_bytes=dense_ffn_params * ffn_bytes,
        lm_head_bytes=lm_head * 2.0,
        hidden_size=hidden,
        e_eff=float(experts) if experts else 1.0,
        active_params=float(active),
        context_len=_int(config, "max_position_embeddings", default=131072),
    )
