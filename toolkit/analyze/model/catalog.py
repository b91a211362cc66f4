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
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from toolkit.analyze.model.spec import ModelSpec

__all__ = ["KNOWN_MODELS", "ModelIdentity", "model_spec"]

SUPPLY_CONFIG = (
    "place the model's Hugging Face config.json in the run directory (or set `model` in "
    "run.toml to a known id) so that impacts can use the architecture"
)
"""What a report says when the model is unknown."""

_TABLE: dict[str, dict[str, Any]] = tomllib.loads(
    (resources.files(__package__) / "known_models.toml").read_text(encoding="utf-8")
)

KNOWN_MODELS: dict[str, dict[str, Any]] = {
    key: {k: v for k, v in entry.items() if k != "aliases"} for key, entry in _TABLE.items()
}
"""Architectures of well-known public models (``known_models.toml``), by a short id."""

_ALIASES: tuple[tuple[str, str], ...] = tuple(
    sorted(
        ((fragment, key) for key, entry in _TABLE.items() for fragment in entry["aliases"]),
        key=lambda pair: -len(pair[0]),
    )
)
"""(id fragment, table key), longest fragment first: the first a normalized id contains wins."""

_ID_PRECISION: tuple[tuple[re.Pattern[str], dict[str, Any]], ...] = (
    (re.compile(r"nvfp4|mxfp4|fp4"), {"quant_method": "mxfp4"}),
    (re.compile(r"fp8|w8a8"), {"quant_method": "fp8"}),
    (re.compile(r"awq|gptq|int4|w4a16|4bit"), {"quant_method": "awq", "bits": 4}),
)
"""Precision a model id states (``...-FP8-dynamic``, ``...-AWQ``), for a table entry."""


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
    entry, precision = dict(KNOWN_MODELS[key]), ""
    for pattern, quant in _ID_PRECISION:
        if pattern.search(str(model_id).lower()):
            entry["quantization_config"], precision = quant, ", precision from the id"
            break
    spec = spec_from_config(entry, name=key)
    source = f"table: {key}{precision}"
    return ModelIdentity(model_id, id_from, _with_context(spec, context_len), source)


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
    """Bytes one decode step reads, from ``config.json`` keys (dense, GQA, MLA and MoE).

    A multimodal config's ``text_config`` is the language model's. MoE layers every
    ``interleave_moe_layer_step``-th layer (Llama 4) leave the others dense, with an FFN of
    ``intermediate_size_mlp``; they are counted with the leading dense layers.
    """
    text = config.get("text_config")
    if isinstance(text, Mapping):
        config = {**config, **text}
    layers = _int(config, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _int(config, "hidden_size", "d_model", "n_embd")
    heads = _int(config, "num_attention_heads", "n_head")
    kv_heads = _int(config, "num_key_value_heads", default=heads)
    head_dim = _int(config, "head_dim", default=hidden // max(heads, 1))
    vocab = _int(config, "vocab_size")
    experts = _int(config, "n_routed_experts", "num_experts", "num_local_experts", default=0)
    top_k = _int(config, "num_experts_per_tok", "moe_topk", default=0) if experts else 0
    llama4 = str(config.get("model_type", "")).startswith("llama4")
    shared = _int(config, "n_shared_experts", "num_shared_experts", default=int(llama4))
    dense_inter = _int(config, "intermediate_size_mlp", "intermediate_size", default=0)
    moe_inter = _int(config, "moe_intermediate_size", "intermediate_size", default=0)
    first_dense = layers
    if experts:
        leading = _int(config, "first_k_dense_replace", default=0)
        step = max(_int(config, "interleave_moe_layer_step", default=1), 1)
        first_dense = layers - (layers - leading) // step
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
