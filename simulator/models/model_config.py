"""An HF-style config.json parsed into a ModelSpec (`spec_from_config`): the keys each family
spells its dimensions with, a head's missing dimensions taken from its target, a multimodal
wrapper read as its language model."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..common.errors import SpecsightInputError, require_int
from .config_keys import config_flag, config_int, config_sliding_window, config_text, config_token_ids
from .layer_types import (
    full_shape_from_config,
    layer_kinds_from_config,
    linear_dims_from_config,
    sparse_dims_from_config,
    window_of,
)
from .model_spec import HEAD_KINDS, ModelSpec
from .weight_formats import formats_from_config


def spec_from_config(cfg: Mapping[str, Any], name: str, where: str, target: ModelSpec | None = None) -> ModelSpec:
    """Parse HF config keys. A head's missing dimensions are taken from its target. A multimodal
    wrapper (Gemma 3, Qwen3.5, Llama 4: the language model's keys under `text_config`) is read as
    its language model: text_config's keys over the top level's (the vision tower is not counted)."""
    if not isinstance(cfg, Mapping):
        raise SpecsightInputError(where, type(cfg).__name__, "a config.json must hold a JSON object")
    text = cfg.get("text_config")
    if isinstance(text, Mapping) and "hidden_size" not in cfg:
        cfg = {**{k: v for k, v in cfg.items() if k != "text_config"}, **text}
    meta = cfg.get("specsight") or {}
    if not isinstance(meta, Mapping):
        raise SpecsightInputError(f"{where}: specsight", meta, 'must be a mapping {"kind": ..., "target": ...}')
    head_kind = meta.get("kind")
    if head_kind is not None and head_kind not in HEAD_KINDS:
        raise SpecsightInputError(f"{where}: specsight.kind", head_kind, f"one of {', '.join(HEAD_KINDS)}")
    archs = cfg.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise SpecsightInputError(f"{where}: architectures", archs, "must be a list of strings")
    if "medusa_num_heads" in cfg and head_kind is None:
        head_kind = "medusa"
    base: dict[str, Any] = {}
    if target is not None:
        base = dict(hidden_size=target.hidden_size, num_attention_heads=target.num_heads,
                    num_key_value_heads=target.num_kv_heads, head_dim=target.head_dim,
                    intermediate_size=target.intermediate_size, vocab_size=target.vocab_size)
    merged = {**base, **cfg}
    d = config_int(merged, where, "hidden_size", "d_model", required=True)
    h = config_int(merged, where, "num_attention_heads", "n_head", required=head_kind != "medusa", default=1)
    kvh = config_int(merged, where, "num_key_value_heads", default=h)
    hd_default = d // h if h else d
    hd = config_int(merged, where, "head_dim", default=hd_default)
    n_layers_default = 0 if head_kind == "medusa" else None
    n_layers = config_int(merged, where, "num_hidden_layers", "n_layer", default=n_layers_default,
                          required=n_layers_default is None)
    if n_layers < 1 and head_kind != "medusa":          # every pass, KV byte and per-layer share divides by it
        raise SpecsightInputError(f"{where}: num_hidden_layers", n_layers,
                                  "an integer >= 1 (0 only for a Medusa head)")
    n_experts = config_int(merged, where, "num_local_experts", "n_routed_experts", "num_experts", default=0)
    moe_inter = config_int(merged, where, "moe_intermediate_size", default=0)
    inter = config_int(merged, where, "intermediate_size", default=4 * d if head_kind != "medusa" else 0)
    if n_experts and not moe_inter:
        moe_inter = inter   # Mixtral: each expert is a full-size MLP
    arch = " ".join(archs)
    window, use_window = config_sliding_window(cfg, where)
    kinds = layer_kinds_from_config(cfg, where, n_layers, window)
    shared_inter = config_int(merged, where, "shared_expert_intermediate_size", default=0)   # Qwen2-MoE, Qwen3-Next
    lin = linear_dims_from_config(cfg, where, kinds)
    return ModelSpec(
        name=name,
        hidden_size=d, num_layers=n_layers, num_heads=h, num_kv_heads=kvh, head_dim=hd,
        intermediate_size=inter,
        vocab_size=config_int(merged, where, "vocab_size", required=True),
        tie_word_embeddings=config_flag(merged, where, "tie_word_embeddings", False),
        gated_mlp=not ("GPT2" in arch or merged.get("hidden_act") == "gelu_new"),
        attention_bias=config_flag(merged, where, "attention_bias", "Qwen2" in arch),
        num_experts=n_experts,
        experts_per_token=config_int(merged, where, "num_experts_per_tok", default=0) if n_experts else 0,
        moe_intermediate_size=moe_inter,
        num_shared_experts=config_int(merged, where, "n_shared_experts", "num_shared_experts",
                                      default=1 if shared_inter else 0),
        shared_expert_intermediate_size=shared_inter,
        first_k_dense=config_int(merged, where, "first_k_dense_replace", default=0),
        q_lora_rank=config_int(merged, where, "q_lora_rank", default=0),
        kv_lora_rank=config_int(merged, where, "kv_lora_rank", default=0),
        qk_rope_head_dim=config_int(merged, where, "qk_rope_head_dim", default=0),
        qk_nope_head_dim=config_int(merged, where, "qk_nope_head_dim", default=0),
        v_head_dim=config_int(merged, where, "v_head_dim", default=0),
        head_kind=head_kind,
        target=None if meta.get("target") is None else str(meta.get("target")),
        draft_vocab_size=config_int(merged, where, "draft_vocab_size", default=0),
        medusa_num_heads=config_int(merged, where, "medusa_num_heads", default=0),
        medusa_num_layers=config_int(merged, where, "medusa_num_layers", default=0),
        max_position_embeddings=config_int(cfg, where, "max_position_embeddings", "n_positions", "seq_length",
                                           "max_sequence_length", default=0),
        model_type=config_text(cfg, where, "model_type"),
        tokenizer_class=config_text(cfg, where, "tokenizer_class"),
        bos_token_id=(config_token_ids(cfg, where, "bos_token_id") or (None,))[0],
        eos_token_ids=config_token_ids(cfg, where, "eos_token_id"),
        sliding_window=window,
        use_sliding_window=use_window,
        layer_kinds=() if set(kinds) <= {"full"} else kinds,
        window=window_of(cfg, kinds, window, where),
        linear=lin,
        sparse=sparse_dims_from_config(cfg, where),
        full_attention=full_shape_from_config(cfg, where, kinds, kvh, hd),
        num_kv_shared_layers=require_int(f"{where}: num_kv_shared_layers", cfg.get("num_kv_shared_layers") or 0,
                                         lo=0, hi=n_layers),
        attn_output_gate=config_flag(cfg, where, "attn_output_gate", cfg.get("model_type") == "qwen3_next"),
        weight_formats=formats_from_config(cfg, where),
        path=where,
    )
