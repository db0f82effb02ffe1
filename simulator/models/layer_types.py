"""Which attention each layer runs, read from an HF-style config.json as published, and the
closed forms of what a layer of each kind reads and computes.

Three kinds (`LAYER_KINDS`):
- "full": softmax attention over the whole cache (every model before hybrids).
- "sliding": softmax attention over the last W tokens, the query's own included (Mistral's and
  Gemma's `sliding_window`; HF masks: a query at position p sees keys p - W + 1 .. p).
- "linear": a recurrent layer with a constant-size state per sequence (Qwen3-Next's Gated
  DeltaNet, `linear_attention` in its `layer_types`).

How the config says it (each rule as transformers' config classes apply it):
- `layer_types`: a list, one entry per layer: full_attention, sliding_attention, linear_attention,
  chunked_attention (Llama 4: keys of the query's own chunk of `attention_chunk_size` tokens,
  priced as a window of that size, an upper bound: a chunk's queries see C / 2 keys on average).
- else Qwen3-Next: `full_attention_interval` n (with `linear_num_value_heads`): layer i is full
  when (i + 1) % n == 0, else linear (transformers Qwen3NextConfig).
- else a window in use (`sliding_window` set, `use_sliding_window` not false, narrower than
  `max_position_embeddings`): Gemma 3's `sliding_window_pattern` n: layer i is full when
  (i + 1) % n == 0, else sliding; Gemma 2 (`model_type: gemma2`): the same with n = 2; Qwen2
  (`max_window_layers` m): layers i >= m slide (Qwen2Config); otherwise every layer slides
  (Mistral 7B v0.1).
- else every layer is full (the shipped Qwen2.5 configs carry `sliding_window: 131072` with
  `use_sliding_window: false`: full attention, as Qwen2Config sets it).

DeepSeek Sparse Attention (DSA: DeepSeek-V3.2, GLM-5; `index_n_heads`, `index_head_dim` and
`index_topk`) runs in every layer: a lightning indexer scores every cached token for each
query and the MLA attention then attends to the top `index_topk` of them (`SparseAttentionDims`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..common.errors import SpecsightInputError, require_int
from .config_keys import config_flag, config_int

LAYER_KINDS = ("full", "sliding", "linear")
HF_LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding", "linear_attention": "linear",
                  "chunked_attention": "sliding"}
# Gated DeltaNet recurrence, FLOPs per token per value head per (key dim x value dim) element of
# the state: decay h *= exp(g) (1), v -= h^T k (2), h += k v^T (2), o = h^T q (2) = 7 (vLLM's
# vllm/model_executor/layers/fla/ops/fused_recurrent.py, fused_recurrent_gated_delta_rule_fwd_kernel,
# copied from flash-linear-attention).
GDN_FLOPS_PER_STATE_ELEM = 7
GDN_STATE_FP32_BYTES = 4      # `mamba_ssm_dtype: float32` (Qwen3.5 configs): the recurrent state in fp32


@dataclass(frozen=True)
class LinearAttentionDims:
    """A Gated DeltaNet layer's shape (Qwen3-Next config keys linear_*)."""
    num_k_heads: int
    num_v_heads: int
    head_k_dim: int
    head_v_dim: int
    conv_kernel: int
    state_fp32: bool = False      # the recurrent state kept in fp32 (mamba_ssm_dtype: float32)

    @property
    def key_dim(self) -> int:
        return self.num_k_heads * self.head_k_dim

    @property
    def value_dim(self) -> int:
        return self.num_v_heads * self.head_v_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the short causal convolution over q, k, v."""
        return 2 * self.key_dim + self.value_dim

    def params(self, hidden: int) -> int:
        """One layer's weights (transformers Qwen3NextGatedDeltaNet): in_proj_qkvz d (2 key_dim +
        2 value_dim), in_proj_ba d 2 H_v, depthwise conv1d conv_dim x kernel, dt_bias and A_log H_v
        each, the gated RMSNorm head_v_dim, out_proj value_dim d."""
        return (hidden * (2 * self.key_dim + 2 * self.value_dim) + hidden * 2 * self.num_v_heads
                + self.conv_dim * self.conv_kernel + 2 * self.num_v_heads + self.head_v_dim
                + self.value_dim * hidden)

    @property
    def state_elems(self) -> int:
        """Recurrent state per sequence per layer: H_v x head_v_dim x head_k_dim (vLLM
        MambaStateShapeCalculator.gated_delta_net_state_shape, temporal state)."""
        return self.num_v_heads * self.head_v_dim * self.head_k_dim

    @property
    def conv_state_elems(self) -> int:
        """Convolution state per sequence per layer: conv_dim x (kernel - 1) (same source)."""
        return self.conv_dim * (self.conv_kernel - 1)

    def state_bytes(self, kv_dtype_bytes: float) -> float:
        """Bytes of one sequence's state in one layer (recurrent + convolution)."""
        rec = GDN_STATE_FP32_BYTES if self.state_fp32 else kv_dtype_bytes
        return self.state_elems * rec + self.conv_state_elems * kv_dtype_bytes

    @property
    def flops_per_token(self) -> int:
        """One token through the recurrence and the depthwise convolution (2 FLOPs per tap)."""
        return GDN_FLOPS_PER_STATE_ELEM * self.state_elems + 2 * self.conv_kernel * self.conv_dim


# DSA's lightning indexer (deepseek-ai/DeepSeek-V3.2-Exp inference/model.py
# @6d8cb70dfdd6f37c83c5208105a3e2c8da117485, class Indexer): its key cache holds per token one
# float8_e4m3fn key of index_head_dim and one float32 scale per block of 128 elements
# (k_cache, k_scale_cache; block_size = 128 in the same file).
INDEX_KEY_ELEM_BYTES = 1
INDEX_SCALE_BYTES = 4
INDEX_SCALE_BLOCK = 128


@dataclass(frozen=True)
class SparseAttentionDims:
    """DeepSeek Sparse Attention's shape (config keys index_n_heads, index_head_dim, index_topk)."""
    index_n_heads: int
    index_head_dim: int
    index_topk: int

    def params(self, hidden: int, q_lora_rank: int) -> int:
        """One layer's indexer weights (class Indexer, source above): wq_b q_lora_rank -> H d,
        wk hidden -> d, k_norm (a LayerNorm: weight and bias, 2 d), weights_proj hidden -> H."""
        h, d = self.index_n_heads, self.index_head_dim
        return q_lora_rank * h * d + hidden * d + 2 * d + hidden * h

    @property
    def key_bytes(self) -> int:
        """Index key cache bytes per token per layer: fp8 key + its fp32 scales (128 + 4 = 132)."""
        d = self.index_head_dim
        return d * INDEX_KEY_ELEM_BYTES + -(-d // INDEX_SCALE_BLOCK) * INDEX_SCALE_BYTES

    @property
    def flops_per_pair(self) -> int:
        """Indexer FLOPs per (query, cached key) pair per layer: H dot products of d (fp8_index);
        the ReLU and the weighted sum over heads (3 H) and the top-k selection are left out."""
        return 2 * self.index_n_heads * self.index_head_dim


def sparse_dims_from_config(cfg: Mapping[str, Any], where: str) -> SparseAttentionDims | None:
    """DSA's shape when the config names the indexer (index_n_heads or index_head_dim; the three keys
    are then required); None otherwise (index_topk alone: only the width an MTP head's index sharing
    reads, simulator/speculation/drafter_structure.py)."""
    if cfg.get("index_n_heads") is None and cfg.get("index_head_dim") is None:
        return None
    hi = 2 ** 24        # an index width or a top-k beyond any published context
    n_heads, head_dim, topk = (require_int(f"{where}: {k}", cfg.get(k), lo=1, hi=hi)
                               for k in ("index_n_heads", "index_head_dim", "index_topk"))
    return SparseAttentionDims(index_n_heads=n_heads, index_head_dim=head_dim, index_topk=topk)


@dataclass(frozen=True)
class FullAttentionShape:
    """The full-attention layers' own KV heads and head size where a config gives them apart from
    the other layers' (Gemma 4: `num_global_key_value_heads`, `global_head_dim`, and
    `attention_k_eq_v`: the full layers' values are their keys, no v_proj and one cached tensor;
    transformers' Gemma4 text config names them for its global, i.e. full-attention, layers)."""
    num_kv_heads: int
    head_dim: int
    k_eq_v: bool = False

    @property
    def kv_tensors(self) -> int:
        """Tensors cached per KV head: K and V, or K alone when V = K."""
        return 1 if self.k_eq_v else 2


def full_shape_from_config(cfg: Mapping[str, Any], where: str, kinds: tuple[str, ...], num_kv_heads: int,
                           head_dim: int) -> FullAttentionShape | None:
    """The full layers' own shape when the config gives one (any of the three Gemma 4 keys) and the
    model has full layers beside other kinds; None otherwise (every layer has the model's shape)."""
    keys = ("num_global_key_value_heads", "global_head_dim", "attention_k_eq_v")
    if "full" not in kinds or set(kinds) == {"full"} or all(cfg.get(k) is None for k in keys):
        return None

    def count(key: str, default: int) -> int:       # the bounds of num_key_value_heads and head_dim
        v = cfg.get(key)
        return default if v is None else require_int(f"{where}: {key}", v, lo=1, hi=2 ** 16)
    return FullAttentionShape(num_kv_heads=count("num_global_key_value_heads", num_kv_heads),
                              head_dim=count("global_head_dim", head_dim),
                              k_eq_v=config_flag(cfg, where, "attention_k_eq_v", False))


def window_binds(window: int, use_sliding_window: bool | None, context: int) -> bool:
    """A declared window binds: set, not switched off (`use_sliding_window: false`), and narrower
    than the context window (0: not given; a window as wide as it changes nothing)."""
    return window > 0 and use_sliding_window is not False and not (context and window >= context)


def _window_in_use(cfg: Mapping[str, Any], window: int) -> bool:
    ctx = cfg.get("max_position_embeddings")
    return window_binds(window, cfg.get("use_sliding_window"),
                        ctx if isinstance(ctx, int) and not isinstance(ctx, bool) else 0)


def _interval(cfg: Mapping[str, Any], where: str, key: str, num_layers: int, other: str) -> tuple[str, ...]:
    n = config_int(cfg, where, key)     # MODEL_CONFIG[key]: >= 1
    return tuple("full" if (i + 1) % n == 0 else other for i in range(num_layers))


def layer_kinds_from_config(cfg: Mapping[str, Any], where: str, num_layers: int, window: int) -> tuple[str, ...]:
    """One kind per layer (LAYER_KINDS), by the rules of the module docstring; window: the
    config's sliding_window (0: none)."""
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != num_layers:
            raise SpecsightInputError(f"{where}: layer_types", types,
                                      f"a list of {num_layers} layer types (one per num_hidden_layers)")
        bad = [t for t in types if t not in HF_LAYER_TYPES]
        if bad:
            raise SpecsightInputError(f"{where}: layer_types", bad[0], f"one of {', '.join(HF_LAYER_TYPES)}")
        return tuple(HF_LAYER_TYPES[t] for t in types)
    if cfg.get("full_attention_interval") is not None and cfg.get("linear_num_value_heads") is not None:
        return _interval(cfg, where, "full_attention_interval", num_layers, "linear")
    if not _window_in_use(cfg, window):
        return ("full",) * num_layers
    if cfg.get("sliding_window_pattern") is not None:
        return _interval(cfg, where, "sliding_window_pattern", num_layers, "sliding")
    if cfg.get("model_type") == "gemma2":
        return tuple("full" if (i + 1) % 2 == 0 else "sliding" for i in range(num_layers))
    if cfg.get("max_window_layers") is not None:
        m = config_int(cfg, where, "max_window_layers")
        return tuple("sliding" if i >= m else "full" for i in range(num_layers))
    return ("sliding",) * num_layers


def window_of(cfg: Mapping[str, Any], kinds: tuple[str, ...], window: int, where: str) -> int:
    """The window of the sliding layers (0 when none slides): sliding_window, or Llama 4's
    attention_chunk_size when its layer_types name chunked_attention."""
    if "sliding" not in kinds:
        return 0
    if "chunked_attention" in (cfg.get("layer_types") or ()):
        return config_int(cfg, where, "attention_chunk_size")
    if window <= 0:
        raise SpecsightInputError(f"{where}: sliding_window", cfg.get("sliding_window"),
                                  "a window in tokens >= 1: layer_types name sliding layers")
    return window


def linear_dims_from_config(cfg: Mapping[str, Any], where: str, kinds: tuple[str, ...]) -> LinearAttentionDims | None:
    """The Gated DeltaNet shape when some layer is linear (its linear_* keys are then required)."""
    if "linear" not in kinds:
        return None
    dtype = cfg.get("mamba_ssm_dtype")
    if dtype not in (None, "float32", "bfloat16", "float16", "auto"):
        raise SpecsightInputError(f"{where}: mamba_ssm_dtype", dtype, "float32, bfloat16, float16 or auto")
    return LinearAttentionDims(
        num_k_heads=config_int(cfg, where, "linear_num_key_heads", required=True),
        num_v_heads=config_int(cfg, where, "linear_num_value_heads", required=True),
        head_k_dim=config_int(cfg, where, "linear_key_head_dim", required=True),
        head_v_dim=config_int(cfg, where, "linear_value_head_dim", required=True),
        conv_kernel=config_int(cfg, where, "linear_conv_kernel_dim", default=4),
        state_fp32=dtype == "float32")


# ---- closed forms of one group of layers (all FLOPs and bytes per layer of the group) -----------
def window_pairs(new_tokens: float, context: float, window: float) -> float:
    """Query-key pairs of one sequence's n new tokens after c cached ones under a window of W keys
    (the query's own included): sum_{j=0}^{n-1} min(c + j + 1, W). Exact; the cost model prices a
    batch from its sums with min(pairs, T W), equal to this when every query sees the whole window
    or none does (c + 1 >= W, or c + n <= W)."""
    m = max(0.0, min(new_tokens, window - context))        # queries that see fewer than W keys
    return m * context + m * (m + 1) / 2 + (new_tokens - m) * window


def window_keys_read(context: float, window: float) -> float:
    """Cached keys one sequence's queries read under a window of W: min(c, W - 1) (the first new
    query reaches back W - 1 tokens; later ones less)."""
    return min(context, window - 1)
