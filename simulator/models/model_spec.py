"""Model shapes from HF-style config.json files: dense (Llama/Qwen/Mistral), MoE (Mixtral,
DeepSeek), MLA attention (DeepSeek), and speculative draft heads (EAGLE, EAGLE-3, MTP, Medusa).

Only shapes matter here: parameter counts by role (what a forward pass reads and multiplies),
KV bytes per token, attention FLOPs per query-key pair. A head shipped in models/ carries
`"specsight": {"kind": ..., "target": ...}` so the loader knows which weights it shares.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..common.errors import SpecsightInputError
from .layer_types import FullAttentionShape, LinearAttentionDims, SparseAttentionDims, window_binds

HEAD_KINDS = ("eagle", "eagle3", "mtp", "medusa")


@dataclass(frozen=True)
class ModelSpec:
    """Shapes of one transformer (or draft head). Counts are parameters, not bytes."""
    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    gated_mlp: bool = True
    attention_bias: bool = False
    # MoE (num_experts == 0 means dense)
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    first_k_dense: int = 0
    shared_expert_intermediate_size: int = 0   # a shared expert's MLP width (0: moe_intermediate_size)
    # MLA (kv_lora_rank == 0 means standard multi-head / grouped-query attention)
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    # Draft heads
    head_kind: str | None = None      # None for a full model, else one of HEAD_KINDS
    target: str | None = None         # catalog name of the target a head attaches to
    draft_vocab_size: int = 0         # EAGLE-3's reduced vocabulary (0: the full vocabulary)
    medusa_num_heads: int = 0
    medusa_num_layers: int = 0
    max_position_embeddings: int = 0  # the context window (prompt + output tokens) a request may fill; 0: not given
    # Tokenizer identity, as the config states it (None / empty: not given); drafters.vocab_mismatch reads them
    model_type: str | None = None
    tokenizer_class: str | None = None
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    # Sliding-window attention as the config declares it (0: none) and its switch (Qwen2: false;
    # None: not given, on when a window is); which layers slide: layer_kinds
    sliding_window: int = 0
    use_sliding_window: bool | None = None
    # Attention by layer (simulator/models/layer_types.py): one of LAYER_KINDS per layer (empty: every layer
    # full), the sliding layers' window in tokens (0: none slides), the linear layers' shape
    layer_kinds: tuple[str, ...] = ()
    window: int = 0
    linear: LinearAttentionDims | None = None
    full_attention: FullAttentionShape | None = None   # the full layers' own KV heads/head size (None: the model's)
    num_kv_shared_layers: int = 0      # the last layers reuse an earlier layer's KV: no k/v projections (Gemma 4)
    attn_output_gate: bool = False     # q_proj also projects a sigmoid output gate (Qwen3-Next)
    sparse: SparseAttentionDims | None = None   # DeepSeek Sparse Attention in every layer (its index_* keys)
    # Per-part weight formats ((part, format) pairs, simulator/models/weight_formats.py); absent parts: the dtype
    weight_formats: tuple[tuple[str, str], ...] = ()
    path: str | None = None

    def __post_init__(self) -> None:
        for f in ("hidden_size", "num_heads", "num_kv_heads", "head_dim", "vocab_size"):
            if getattr(self, f) <= 0:
                raise SpecsightInputError(f"{self.name}.{f}", getattr(self, f), "must be a positive integer")
        if self.num_layers < 0:
            raise SpecsightInputError(f"{self.name}.num_layers", self.num_layers, "must be >= 0")
        if self.num_heads % self.num_kv_heads:
            raise SpecsightInputError(f"{self.name}.num_key_value_heads", self.num_kv_heads,
                                      f"must divide num_attention_heads={self.num_heads}")
        if self.num_experts and not (0 < self.experts_per_token <= self.num_experts):
            raise SpecsightInputError(f"{self.name}.num_experts_per_tok", self.experts_per_token,
                                      f"must lie in [1, {self.num_experts}]")
        if self.head_kind is not None and self.head_kind not in HEAD_KINDS:
            raise SpecsightInputError(f"{self.name}.specsight.kind", self.head_kind, f"one of {HEAD_KINDS}")
        if self.layer_kinds and len(self.layer_kinds) != self.num_layers:
            raise SpecsightInputError(f"{self.name}.layer_types", len(self.layer_kinds),
                                      f"one per layer ({self.num_layers})")
        if self.num_sliding_layers and self.window < 1:
            raise SpecsightInputError(f"{self.name}.sliding_window", self.window, "a window >= 1 for sliding layers")
        if self.num_linear_layers and self.linear is None:
            raise SpecsightInputError(f"{self.name}.linear_num_value_heads", None, "required by linear layers")
        if self.is_mla and self.num_sliding_layers + self.num_linear_layers:
            raise SpecsightInputError(f"{self.name}.layer_types", self.layer_kinds,
                                      "full attention only with MLA (kv_lora_rank > 0)")
        if self.sparse is not None and not (self.is_mla and self.q_lora_rank):
            raise SpecsightInputError(f"{self.name}.index_topk", self.sparse.index_topk,
                                      "DeepSeek Sparse Attention only with MLA and a query rank (q_lora_rank > 0)")

    # ---- structure -------------------------------------------------------------------
    @property
    def sliding_window_in_use(self) -> bool:
        """The config declares a window that binds: set, not switched off (`use_sliding_window:
        false`), and narrower than the context window (a window as wide as it changes nothing)."""
        return window_binds(self.sliding_window, self.use_sliding_window, self.max_position_embeddings)

    def _count(self, kind: str) -> int:
        return self.layer_kinds.count(kind) if self.layer_kinds else (self.num_layers if kind == "full" else 0)

    @property
    def num_full_layers(self) -> int:
        return self._count("full")

    @property
    def num_sliding_layers(self) -> int:
        return self._count("sliding")

    @property
    def num_linear_layers(self) -> int:
        return self._count("linear")

    @property
    def num_softmax_layers(self) -> int:
        """Layers that keep a KV cache (full and sliding)."""
        return self.num_layers - self.num_linear_layers

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def num_moe_layers(self) -> int:
        return max(0, self.num_layers - self.first_k_dense) if self.is_moe else 0

    @property
    def num_dense_layers(self) -> int:
        return self.num_layers - self.num_moe_layers

    # ---- parameters by role (per layer unless said otherwise) ------------------------
    @property
    def attn_params(self) -> int:
        d, h = self.hidden_size, self.num_heads
        if self.is_mla:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = ((d * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * h * qk) if self.q_lora_rank
                 else d * h * qk)
            kv_a = d * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
            kv_b = self.kv_lora_rank * h * (self.qk_nope_head_dim + self.v_head_dim)
            o = h * self.v_head_dim * d
            return q + kv_a + kv_b + o + self.indexer_params
        q_in = 2 * d if self.head_kind == "eagle3" else d   # EAGLE-3 attends over [embedding; hidden]
        q_heads = 2 * h if self.attn_output_gate else h      # the gate: a second query-sized projection
        qkv_out = (q_heads + 2 * self.num_kv_heads) * self.head_dim
        bias = qkv_out if self.attention_bias else 0
        return q_in * qkv_out + bias + h * self.head_dim * d

    @property
    def indexer_params(self) -> int:
        """One layer's DSA lightning-indexer weights (0 without DSA), counted in attn_params."""
        return self.sparse.params(self.hidden_size, self.q_lora_rank) if self.sparse is not None else 0

    @property
    def full_attn_params(self) -> int:
        """One full-attention layer's weights: attn_params, or with the full layers' own shape q and o
        of h x head_dim' and k (and v unless V = K) of kv_heads' x head_dim'."""
        fs = self.full_attention
        if fs is None:
            return self.attn_params
        d, h = self.hidden_size, self.num_heads
        qkv_out = (h + fs.kv_tensors * fs.num_kv_heads) * fs.head_dim
        bias = qkv_out if self.attention_bias else 0
        return d * qkv_out + bias + h * fs.head_dim * d

    @property
    def kv_shared_proj_params(self) -> int:
        """The k and v projections the last num_kv_shared_layers layers do not have (Gemma 3n/4
        `num_kv_shared_layers`: those layers read the KV of an earlier layer of their kind)."""
        n = self.num_kv_shared_layers
        if not n:
            return 0
        kinds = self.layer_kinds or ("full",) * self.num_layers
        fs, total = self.full_attention, 0
        for kind in kinds[self.num_layers - n:]:
            if kind == "linear":
                continue
            out = (fs.kv_tensors * fs.num_kv_heads * fs.head_dim if kind == "full" and fs is not None
                   else 2 * self.num_kv_heads * self.head_dim)
            total += self.hidden_size * out + (out if self.attention_bias else 0)
        return total

    @property
    def linear_attn_params(self) -> int:
        """One linear (Gated DeltaNet) layer's weights (0 without linear layers)."""
        return self.linear.params(self.hidden_size) if self.linear is not None else 0

    @property
    def mixer_params_total(self) -> int:
        """The token mixers' weights over all layers: softmax attention and linear attention."""
        return (self.num_sliding_layers * self.attn_params + self.num_full_layers * self.full_attn_params
                + self.num_linear_layers * self.linear_attn_params - self.kv_shared_proj_params)

    def _mlp_params(self, inter: int) -> int:
        return (3 if self.gated_mlp else 2) * self.hidden_size * inter

    @property
    def dense_mlp_params(self) -> int:
        return self._mlp_params(self.intermediate_size)

    @property
    def expert_params(self) -> int:
        """One routed expert's weights."""
        return self._mlp_params(self.moe_intermediate_size) if self.is_moe else 0

    @property
    def shared_expert_params(self) -> int:
        if self.shared_expert_intermediate_size and self.is_moe:
            return self.num_shared_experts * self._mlp_params(self.shared_expert_intermediate_size)
        return self.num_shared_experts * self.expert_params

    @property
    def router_params(self) -> int:
        return self.hidden_size * self.num_experts

    @property
    def norm_params(self) -> int:
        return 2 * self.hidden_size

    @property
    def extra_linear_params(self) -> int:
        """Projections a head adds on top of its layers (EAGLE fc, EAGLE-3 fc, MTP eh_proj, Medusa ResBlocks)."""
        d = self.hidden_size
        if self.head_kind == "eagle":
            return 2 * d * d          # fc: [embedding; feature] 2d -> d
        if self.head_kind == "eagle3":
            return 3 * d * d          # fc: three fused target features 3d -> d
        if self.head_kind == "mtp":
            return 2 * d * d + 2 * d  # eh_proj 2d -> d, enorm + hnorm
        if self.head_kind == "medusa":
            return self.medusa_num_heads * self.medusa_num_layers * (d * d + d)
        return 0

    @property
    def lm_head_vocab(self) -> int:
        return self.draft_vocab_size or self.vocab_size

    @property
    def num_lm_heads(self) -> int:
        return self.medusa_num_heads if self.head_kind == "medusa" else 1

    @property
    def lm_head_params(self) -> int:
        """Weights read to produce logits (all Medusa heads' own LM heads together)."""
        return self.num_lm_heads * self.lm_head_vocab * self.hidden_size

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def shares_embedding_with_target(self) -> bool:
        return self.head_kind in HEAD_KINDS

    @property
    def shares_lm_head_with_target(self) -> bool:
        return self.head_kind in ("eagle", "mtp")

    # ---- totals ------------------------------------------------------------------------
    @property
    def layer_params_dense_part(self) -> int:
        """Per-layer weights every token multiplies: attention, norms, and the dense MLP or the
        shared experts and router of a MoE layer (summed over all layers)."""
        return (self.mixer_params_total + self.num_layers * self.norm_params
                + self.num_dense_layers * self.dense_mlp_params
                + self.num_moe_layers * (self.shared_expert_params + self.router_params))

    def params_by_part(self) -> dict[str, int]:
        """params_total split into WEIGHT_PARTS and "norm" (norms keep the model dtype); sums to params_total."""
        own_embed = 0 if self.shares_embedding_with_target else self.embedding_params
        own_head = 0 if (self.tie_word_embeddings and self.head_kind is None) or self.shares_lm_head_with_target \
            else self.lm_head_params
        norm = self.num_layers * self.norm_params + (self.hidden_size if self.num_layers else 0)
        mixers = self.mixer_params_total
        mlp = self.layer_params_dense_part - mixers - self.num_layers * self.norm_params + self.extra_linear_params
        experts = self.num_moe_layers * self.num_experts * self.expert_params
        return {"attention": mixers, "mlp": mlp, "experts": experts, "embedding": own_embed, "lm_head": own_head,
                "norm": norm}

    def weight_format(self, part: str, default: str) -> str:
        """The format of `part` (WEIGHT_PARTS): the config's, else `default` (the scenario's dtype)."""
        return dict(self.weight_formats).get(part, default)

    @property
    def params_total(self) -> int:
        """All weights this checkpoint owns (a head excludes what it shares with its target)."""
        own_embed = 0 if self.shares_embedding_with_target else self.embedding_params
        own_head = 0 if (self.tie_word_embeddings and self.head_kind is None) or self.shares_lm_head_with_target \
            else self.lm_head_params
        experts = self.num_moe_layers * self.num_experts * self.expert_params
        final_norm = self.hidden_size if self.num_layers else 0
        return self.layer_params_dense_part + experts + self.extra_linear_params + own_embed + own_head + final_norm

    @property
    def params_active(self) -> int:
        """Weights one token touches (routed experts: only experts_per_token of them)."""
        inactive = self.num_moe_layers * (self.num_experts - self.experts_per_token) * self.expert_params
        return self.params_total - inactive

    # ---- per-token physics -------------------------------------------------------------
    def kv_elems_per_token(self) -> int:
        """KV-cache elements one token adds per softmax layer (MLA caches the compressed latent)."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    def full_kv_elems_per_token(self) -> int:
        """KV-cache elements one token adds per full layer: kv_elems_per_token, or the full layers'
        own kv_tensors x kv_heads' x head_dim'."""
        fs = self.full_attention
        return self.kv_elems_per_token() if fs is None else fs.kv_tensors * fs.num_kv_heads * fs.head_dim

    def full_attn_flops_per_pair(self) -> int:
        """FLOPs per (query, key) pair per full layer: attn_flops_per_pair, or QK^T and PV over the
        full layers' head_dim' (V as wide as K)."""
        fs = self.full_attention
        return self.attn_flops_per_pair() if fs is None else 4 * self.num_heads * fs.head_dim

    def attn_flops_per_pair(self) -> int:
        """FLOPs per (query, key) pair per layer: QK^T and PV over all heads (MLA: absorbed form)."""
        if self.is_mla:
            return 2 * self.num_heads * (2 * self.kv_lora_rank + self.qk_rope_head_dim)
        return 4 * self.num_heads * self.head_dim

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict
        d = asdict(self)
        d.update(params_total=self.params_total, params_active=self.params_active,
                 kv_elems_per_token_per_layer=self.kv_elems_per_token())
        return d
