"""Reading one key of an HF-style config.json, checked: every reader names the file and the key in
its input error (simulator/models/model_config.py, simulator/models/layer_types.py)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..common.errors import SpecsightInputError, require_int
from ..common.limits import MAX_LAYERS, MAX_LIST
from ..common.schema import Int, check


def config_value(cfg: Mapping[str, Any], where: str, *keys: str, default: Any = None, required: bool = False) -> Any:
    """The first of `keys` the config sets (not null); else `default`, or an input error when required."""
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    if required:
        raise SpecsightInputError(f"{where}: {keys[0]}", None, "required key is missing")
    return default


def config_int(cfg: Mapping[str, Any], where: str, *keys: str, default: Any = None, required: bool = False) -> int:
    """An integer key (under any of its names), range-checked by MODEL_CONFIG: NaN,
    infinities, strings, booleans and absurd sizes are refused by name."""
    key = next((k for k in keys if k in cfg and cfg[k] is not None), keys[0])
    v = config_value(cfg, where, *keys, default=default, required=required)
    return int(check(MODEL_CONFIG[keys[0]], v, f"{where}: {key}"))


def config_flag(cfg: Mapping[str, Any], where: str, key: str, default: bool) -> bool:
    """A true/false key (absent: `default`); anything else is refused by name."""
    v = cfg.get(key, default)
    if not isinstance(v, bool):
        raise SpecsightInputError(f"{where}: {key}", v, "must be true or false")
    return v


def config_token_ids(cfg: Mapping[str, Any], where: str, key: str) -> tuple[int, ...]:
    """A special-token id (or a list of them: Llama 3.1's eos_token_id) as a tuple; absent or null: ()."""
    v = cfg.get(key)
    if v is None:
        return ()
    items = v if isinstance(v, list) else [v]
    if not items or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in items):
        raise SpecsightInputError(f"{where}: {key}", v, "a token id (an integer >= 0) or a list of them")
    return tuple(items)


def config_text(cfg: Mapping[str, Any], where: str, key: str) -> str | None:
    """A string key, or None when absent."""
    v = cfg.get(key)
    if v is not None and not isinstance(v, str):
        raise SpecsightInputError(f"{where}: {key}", v, "must be a string")
    return v


def config_sliding_window(cfg: Mapping[str, Any], where: str) -> tuple[int, bool | None]:
    """(sliding_window, use_sliding_window): the window in tokens (0 when absent or null) and the switch."""
    use = cfg.get("use_sliding_window")
    if use is not None and not isinstance(use, bool):
        raise SpecsightInputError(f"{where}: use_sliding_window", use, "must be true or false")
    window = cfg.get("sliding_window")
    if window is None:
        return 0, use
    if isinstance(window, bool) or not isinstance(window, int):
        raise SpecsightInputError(f"{where}: sliding_window", window, "a number of tokens >= 0 (or null: none)")
    return require_int(f"{where}: sliding_window", window, lo=0, hi=10 ** 12), use


# ---- the config.json keys the loader reads (simulator/models/model_spec.py), listed in docs/schema.md
_DIM = 2 ** 20
MODEL_CONFIG: dict[str, Int] = {k: Int(doc=doc, lo=lo, hi=hi) for k, lo, hi, doc in (
    ("hidden_size", 1, _DIM, "model width"),
    ("num_attention_heads", 1, 2 ** 16, "query heads"),
    ("num_key_value_heads", 1, 2 ** 16, "KV heads"),
    ("head_dim", 1, 2 ** 16, "per-head width"),
    ("num_hidden_layers", 0, MAX_LAYERS, "layers"),
    ("num_local_experts", 0, 2 ** 16, "routed experts (0: dense)"),
    ("moe_intermediate_size", 0, 2 ** 24, "expert MLP width"),
    ("intermediate_size", 0, 2 ** 24, "MLP width"),
    ("vocab_size", 1, 2 ** 24, "vocabulary"),
    ("num_experts_per_tok", 0, 2 ** 16, "experts per token"),
    ("n_shared_experts", 0, 2 ** 16, "shared experts"),
    ("shared_expert_intermediate_size", 0, 2 ** 24, "a shared expert's MLP width (one shared expert when set)"),
    ("first_k_dense_replace", 0, 2 ** 16, "leading dense layers"),
    ("q_lora_rank", 0, _DIM, "MLA query rank"),
    ("kv_lora_rank", 0, _DIM, "MLA KV rank"),
    ("qk_rope_head_dim", 0, _DIM, "MLA rope width"),
    ("qk_nope_head_dim", 0, _DIM, "MLA non-rope width"),
    ("v_head_dim", 0, _DIM, "MLA value width"),
    ("draft_vocab_size", 0, 2 ** 24, "EAGLE-3 draft vocabulary (0: full)"),
    ("medusa_num_heads", 0, MAX_LIST, "Medusa heads"),
    ("medusa_num_layers", 0, MAX_LIST, "Medusa layers per head"),
    ("max_position_embeddings", 0, 10 ** 12, "context window (0: not given)"),
    ("sliding_window_pattern", 1, MAX_LAYERS, "every n-th layer full, the others sliding (Gemma 3)"),
    ("full_attention_interval", 1, MAX_LAYERS, "every n-th layer full, the others linear (Qwen3-Next)"),
    ("max_window_layers", 0, MAX_LAYERS, "layers from this index on slide (Qwen2, when the window is in use)"),
    ("attention_chunk_size", 1, 10 ** 12, "chunked-attention chunk, priced as a window (Llama 4)"),
    ("linear_num_key_heads", 1, 2 ** 16, "linear-attention key heads (Gated DeltaNet)"),
    ("linear_num_value_heads", 1, 2 ** 16, "linear-attention value heads"),
    ("linear_key_head_dim", 1, 2 ** 16, "linear-attention key head width"),
    ("linear_value_head_dim", 1, 2 ** 16, "linear-attention value head width"),
    ("linear_conv_kernel_dim", 1, 2 ** 8, "linear-attention short convolution taps"),
)}
