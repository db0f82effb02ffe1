"""Drafters by structure: what a checkpoint holds (physical modules) apart from what a round runs
(runtime steps), what each step reads and multiplies, whose KV cache the drafter attends to, and the
verify shape its proposals imply.

| structure                  | methods                          | forwards for K drafts       | verify shape   |
|----------------------------|----------------------------------|-----------------------------|----------------|
| sequential model / head    | draft_model, eagle(3), self_spec | K, each the block + LM head | chain or tree  |
| MTP, M physical modules    | mtp                              | K, step j runs module j % M | chain          |
| MTP assistant (Gemma 4)    | mtp                              | K, over the target's KV     | chain          |
| parallel block             | parallel (PARD), dflash          | 1: catch-up + K masks       | block          |
| independent parallel heads | medusa, parallel_heads           | 1: all heads, one state     | tree, block    |
| MLP speculator (IBM)       | mlp_speculator                   | K stages, no attention/KV   | chain          |
| n-gram lookup              | ngram, suffix                    | 0 (host)                    | chain          |
| Lookahead decoding         | lookahead                        | 0: a branch of the target's | tree (G paths) |

Physical modules come from the draft config, under the names the checkpoints use (vLLM reads them the
same way, vllm/config/speculative.py@002e77c1 `hf_config_override`): `num_mtp_modules` (MiniMax-M3),
else `num_nextn_predict_layers` (DeepSeek-V3, GLM, Qwen3-Next), else `mtp_num_hidden_layers`
(Qwen3.5); absent or 0: one module (a head file that is the module itself). K steps over M modules
run module j mod M at step j (one module reused K times, DeepSeek-V3 / Qwen3-Next / GLM-5: TensorRT-LLM's
"MTP-Eagle"; K modules: "MTP-Vanilla", ../shared/reference/engines.md §1). Modules of one shape cost
the same per step; the checkpoint holds M of them and each keeps its own KV layer.

`index_share_for_mtp_iteration: true` (GLM-5.2; vLLM's key, the same file): steps after the first reuse
the first step's sparse-attention index, so each later step reads at most `index_topk` cached tokens
per sequence (the index's width; 2048 where the config does not say, DeepSeek-V3.2's value) instead of
the whole context. Sparse attention itself (the lightning indexer over every cached token, then
the top-k) is priced in the cost model (docs/cost_model.md); the later steps' skipped indexer is still
priced as reading `index_topk` index keys.

An assistant (`model_type` gemma4_assistant or gemma4_unified_assistant, the types vLLM maps to its
gemma4_mtp path, same file) is a separate small model run once per draft step, built as
transformers builds Gemma 4's (src/transformers/models/gemma4_assistant/modeling_gemma4_assistant.py
@694f6f0f): `pre_projection` fuses the target's embedding of the last token with the target's final
hidden state (2 backbone_hidden_size -> hidden_size), its layers run with no cache of their own
(`shared_kv_states`: the target's K and V), `post_projection` maps back (hidden_size ->
backbone_hidden_size), and its own LM head (tied to its own embedding table, hidden_size wide) scores
the vocabulary; with `use_ordered_embeddings` (the edge assistants) it scores `num_centroids`
centroids and only the `centroid_intermediate_top_k` best clusters' vocab_size // num_centroids
tokens each. Its config is read flattened (the text_config's keys at the top level, as the catalog's
head files are). It keeps no KV: the memory it saves per cached token is what its own layers would
have held (`Drafter.kv_bytes_saved_per_token_per_gpu`); its attention is priced as its own layers'
reads over the context (the target layers it reads, the last sliding and the last full one, are not
told apart).

`round_shapes` lists the passes a drafter runs to propose K tokens (the one writing that
`Drafter.propose_time_s` prices and `round_work` sums); `round_work` adds their FLOPs and bytes as
CostModel.breakdown reports them (linear, experts, attention, LM head, sampling, elementwise).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..common.errors import SpecsightInputError, closest_names
from ..common.input_files import read_json, usable_file
from ..costs.cost_model import CostModel, PassCost, soft_roofline
from ..costs.pass_shape import PassShape, causal_pairs
from ..hardware.hardware import DTYPE_BYTES
from ..models.catalog import available_models, config_path
from ..models.model_spec import ModelSpec

VERIFY_SHAPES = ("chain", "tree", "block")
KV_SOURCES = ("own", "target", "none")
MODULE_KEYS = ("num_mtp_modules", "num_nextn_predict_layers", "mtp_num_hidden_layers")
ASSISTANT_MODEL_TYPES = ("gemma4_assistant", "gemma4_unified_assistant")
INDEX_SHARE_KEY = "index_share_for_mtp_iteration"
DEFAULT_INDEX_TOPK = 2048     # DeepSeek-V3.2's index_topk (deepseek-ai/DeepSeek-V3.2-Exp config.json)
BLOCK_METHODS = ("parallel", "dflash")
HEAD_STACK_METHODS = ("medusa", "parallel_heads")
MLP_KERNELS_PER_STAGE = 4     # embedding lookup, projection, layer norm + activation, head


@dataclass(frozen=True)
class DrafterStructure:
    """What a drafter is made of and how a round runs it."""
    method: str
    physical_modules: int = 1         # weight sets in the checkpoint (MTP modules, heads, MLP stages)
    sequential: bool = True           # K drafts take K forwards (else one forward, or none)
    verify_shape: str = "chain"       # VERIFY_SHAPES
    kv_source: str = "own"            # KV_SOURCES: its own cache, the target's, or none
    index_share: bool = False         # later steps reuse the first step's sparse index (GLM-5.2)
    index_topk: int = 0               # cached tokens per sequence a later step reads under index_share
    draft_vocab: int = 0              # rows of the LM head a draft logit is scored over (0: none)

    def forwards(self, k: int) -> int:
        """Draft forwards for k drafts: k sequential steps, one parallel forward, or none."""
        if k <= 0 or self.method in ("ngram", "suffix", "lookahead"):
            return 0
        return k if self.sequential else 1

    @property
    def module_copies(self) -> int:
        """Copies of the draft config's weights (and KV layers) the checkpoint holds: an MTP head
        config describes one module, the checkpoint M; every other config describes it all."""
        return self.physical_modules if self.method == "mtp" else 1

    def module_of_step(self, j: int) -> int:
        """The physical module step j (0-based) runs: j mod M (one module reused, or K modules)."""
        return j % self.physical_modules


def is_assistant(cfg: Mapping[str, Any]) -> bool:
    return cfg.get("model_type") in ASSISTANT_MODEL_TYPES


@dataclass(frozen=True)
class AssistantSpec(ModelSpec):
    """A Gemma-4-style assistant's shapes: a model whose linear layers include its fusion
    projections (pre and post, and the centroid scorer), whose LM head covers the rows it scores."""
    fusion_params: int = 0

    @property
    def extra_linear_params(self) -> int:
        return self.fusion_params


def assistant_spec(dm: ModelSpec, cfg: Mapping[str, Any]) -> AssistantSpec:
    """The assistant `dm` (loaded from its flattened config `cfg`) with its pre_projection
    (2 T d), post_projection (d T) and, with use_ordered_embeddings, its centroid scorer (d C)
    as linear layers, and its LM head over C top_k clusters of V // C tokens (T:
    backbone_hidden_size, d: hidden_size, C: num_centroids)."""
    d = dm.hidden_size
    backbone = _positive(cfg, "backbone_hidden_size", d)
    fusion = 2 * backbone * d + d * backbone
    rows = 0
    if cfg.get("use_ordered_embeddings") is True:
        c = _positive(cfg, "num_centroids", 0)
        top = _positive(cfg, "centroid_intermediate_top_k", 0)
        if not c or not top or c > dm.vocab_size:
            raise SpecsightInputError("drafter.model: num_centroids", c,
                                      "use_ordered_embeddings needs num_centroids (1..vocab_size) and "
                                      "centroid_intermediate_top_k")
        fusion += d * c
        rows = min(top, c) * (dm.vocab_size // c)
    fields = {f: getattr(dm, f) for f in dm.__dataclass_fields__}
    fields.update(head_kind=None, draft_vocab_size=rows)
    return AssistantSpec(**fields, fusion_params=fusion)


def _positive(cfg: Mapping[str, Any], key: str, default: int) -> int:
    v = cfg.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise SpecsightInputError(f"drafter.model: {key}", v, "an integer >= 0")
    return v


def physical_modules(cfg: Mapping[str, Any] | None) -> int:
    """MTP modules a draft config declares (MODULE_KEYS, first present and positive), else 1."""
    for key in MODULE_KEYS:
        v = (cfg or {}).get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return 1


def raw_config(name_or_path: str | None, field: str = "drafter.model", required: bool = False) -> dict:
    """The draft config's JSON object (catalog name or config.json path, as load_model takes them), for
    the keys ModelSpec does not keep. A catalog name that names no file: {} (load_model then says so),
    or, required, an input error naming the catalog's closest names."""
    if not name_or_path or not isinstance(name_or_path, (str, Path)):
        return {}
    p, _, catalog = config_path(name_or_path)
    if Path(str(name_or_path)).suffix != ".json":        # a catalog name or a folder: it may name no file
        if usable_file(p) is None:
            if required:
                raise SpecsightInputError(field, name_or_path, closest_names(str(name_or_path), available_models()))
            return {}
    cfg = read_json(p, field, "config")
    return dict(cfg) if isinstance(cfg, Mapping) else {}     # (load_model refuses anything else by name)


def structure_of(method: str, tree: bool, cfg: Mapping[str, Any], draft_vocab: int = 0) -> DrafterStructure:
    """The structure of a drafter of `method` whose draft config is `cfg` ({} for none)."""
    if method in ("ngram", "suffix"):
        return DrafterStructure(method, 0, False, "chain", "none")
    if method == "lookahead":
        return DrafterStructure(method, 0, False, "tree", "none")
    if method == "mlp_speculator":
        return DrafterStructure(method, MLPSpeculator.from_config(cfg).n_predict, True, "chain", "none",
                                draft_vocab=draft_vocab)
    if method in BLOCK_METHODS:
        return DrafterStructure(method, 1, False, "block", "own", draft_vocab=draft_vocab)
    if method == "medusa":
        return DrafterStructure(method, int(cfg.get("medusa_num_heads") or 1), False, "tree", "none",
                                draft_vocab=draft_vocab)
    if method == "parallel_heads":
        return DrafterStructure(method, parallel_heads_count(cfg), False, "block", "own", draft_vocab=draft_vocab)
    shape = "tree" if tree else "chain"
    if method == "mtp":
        assistant = is_assistant(cfg)
        share = cfg.get(INDEX_SHARE_KEY) is True
        topk = int(cfg.get("index_topk") or DEFAULT_INDEX_TOPK) if share else 0
        return DrafterStructure(method, physical_modules(cfg), True, shape, "target" if assistant else "own",
                                share, topk, draft_vocab)
    return DrafterStructure(method, 1, True, shape, "target" if method == "self_spec" else "own",
                            draft_vocab=draft_vocab)


def parallel_heads_count(cfg: Mapping[str, Any]) -> int:
    """Heads of a parallel_heads config (`specsight.heads`; Gloeckle et al. 2024's n)."""
    meta = cfg.get("specsight") or {}
    n = meta.get("heads") if isinstance(meta, Mapping) else None
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise SpecsightInputError("drafter.model: specsight.heads", n,
                                  "parallel_heads needs the number of heads (offsets 1..n) as an integer >= 1")
    layers = cfg.get("num_hidden_layers")
    if isinstance(layers, int) and layers % n:
        raise SpecsightInputError("drafter.model: num_hidden_layers", layers,
                                  f"the layers of all {n} heads together: a multiple of specsight.heads")
    return n


SHARES_TARGET_VOCAB_MATRICES = ("dflash", "parallel_heads")   # their configs describe them, the target owns them


def fusion_layers(cfg: Mapping[str, Any]) -> int:
    """Target layers a DFlash draft fuses (`dflash_config.target_layer_ids`, else top-level)."""
    nested = cfg.get("dflash_config")
    ids = (nested.get("target_layer_ids") if isinstance(nested, Mapping) else None) or cfg.get("target_layer_ids")
    return len(ids) if isinstance(ids, list) else 0


def own_params(structure: DrafterStructure, dm: ModelSpec, cfg: Mapping[str, Any]) -> int:
    """Parameters of one copy of the draft config the drafter holds itself: a head config's own
    (ModelSpec.params_total leaves out what a head shares); a DFlash draft or parallel heads without
    the embedding and unembedding they borrow from the target (DFlash: "embeddings/lm_head borrowed
    from the target"; Gloeckle et al. 2024: a shared unembedding), with DFlash's fusion projection
    of its target layers' hidden states (fc: layers x d -> d)."""
    params = dm.params_total
    if structure.method in SHARES_TARGET_VOCAB_MATRICES:     # what params_total counted as the config's own
        if not dm.shares_embedding_with_target:
            params -= dm.embedding_params
        if not ((dm.tie_word_embeddings and dm.head_kind is None) or dm.shares_lm_head_with_target):
            params -= dm.lm_head_params
    if structure.method == "dflash":
        params += fusion_layers(cfg) * dm.hidden_size * dm.hidden_size
    return params


# ---- the passes of one round ----------------------------------------------------------------
def round_shapes(structure: DrafterStructure, num_seqs: float, k: int, sum_context: float,
                 first_tokens: float | None = None, branches: int = 1,
                 kv_budget_context: float | None = None) -> list[PassShape]:
    """The draft passes (PassShape) that propose k tokens for num_seqs = B sequences over
    sum_context cached tokens: first_tokens the first pass ingests (default B), branches the tree's
    candidates per depth. Sequential: step 0 ingests first_tokens and scores B logits, step j >= 1
    takes B branches tokens and as many logits over sum_context + B j cached tokens (index_share:
    at most B index_topk). Parallel block: one pass over first_tokens + B k tokens (DFlash: B + B k,
    one bonus and k mask queries a sequence), B k logits.
    Heads: one pass over the B last positions, B k logits. Lookups, lookahead, MLP: none (MLP
    stages have no attention: `MLPSpeculator`)."""
    B = num_seqs
    first = B if first_tokens is None else first_tokens
    ctx = sum_context if kv_budget_context is None else kv_budget_context
    s = structure
    if k <= 0 or s.method in ("ngram", "suffix", "lookahead", "mlp_speculator"):
        return []
    if s.method in BLOCK_METHODS:
        n = (B if s.method == "dflash" else first) + k * B
        return [PassShape(B, n, ctx, causal_pairs(n, ctx, B), k * B)]
    if s.method == "medusa":
        return [PassShape(B, B, 0.0 * B, 0.0 * B, B)]
    if s.method == "parallel_heads":
        return [PassShape(B, B, ctx, causal_pairs(B, ctx, B), k * B)]
    shapes = [PassShape(B, first, ctx, causal_pairs(first, ctx, B), B)]
    n = B * branches
    for j in range(1, k):
        c = ctx + B * j
        if s.index_share:
            c = np.minimum(c, B * s.index_topk)
        shapes.append(PassShape(B, n, c, causal_pairs(n, c, B), n))
    return shapes


@dataclass(frozen=True)
class Work:
    """FLOPs and bytes (weights, KV, activations, logits) of a drafter's round, and its forwards."""
    flops: float
    bytes: float
    forwards: int


def round_costs(structure: DrafterStructure, draft_cost: CostModel, num_seqs: float, k: int, sum_context: float,
                branches: int = 1) -> list[PassCost]:
    """CostModel.breakdown of each of round_shapes (decode steady state: one catch-up token a sequence)."""
    return [draft_cost.breakdown(s) for s in round_shapes(structure, num_seqs, k, sum_context, branches=branches)]


def round_work(structure: DrafterStructure, cost: CostModel | None, num_seqs: float, k: int,
               sum_context: float, mlp: MLPSpeculator | None = None, branches: int = 1) -> Work:
    """What proposing k tokens reads and multiplies: round_costs summed (cost: the draft's
    CostModel), or an MLP speculator's stages in closed form (cost: the target's, for its dtype);
    lookups and lookahead run nothing on the GPU."""
    if mlp is not None and cost is not None:
        bpw = DTYPE_BYTES[cost.dtype]
        stages = range(max(k, 0))
        return Work(sum(mlp.stage_flops(j, num_seqs) for j in stages),
                    sum(mlp.stage_bytes(j, num_seqs, bpw) for j in stages), max(k, 0))
    if cost is None:
        return Work(0.0, 0.0, 0)
    costs = round_costs(structure, cost, num_seqs, k, sum_context, branches)
    return Work(sum(c.flops for c in costs), sum(c.bytes for c in costs), len(costs))


# ---- the MLP speculator ----------------------------------------------------------------------
@dataclass(frozen=True)
class MLPSpeculator:
    """IBM's MLP speculator (Wertheimer et al. 2024, arXiv 2404.19124), its modules as
    foundation-model-stack/fms-extras builds them (fms_extras/models/speculator.py@38b1db74: per stage
    emb, proj, ln with weight and bias, head, all without bias) and its config keys as vLLM reads them
    (vllm/transformers_utils/configs/mlp_speculator.py@0531c222; inner_dim 0 means emb_dim):
    n_predict stages; stage j embeds the token stage j - 1 proposed (emb: vocab x inner_dim), projects
    the running state (stage 0 from the target's emb_dim-wide hidden state, later stages from inner_dim),
    layer-normalises and scores the vocabulary (head: inner_dim x vocab). No attention and no KV:
    a stage multiplies one vector per sequence. tie_weights: "a single set of weights for every
    model head/stage after the first" (the config's docstring); stage 0's projection stays separate."""
    emb_dim: int
    inner_dim: int
    n_predict: int
    vocab_size: int
    tie_weights: bool = False

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> MLPSpeculator:
        vals = {}
        for key in ("emb_dim", "inner_dim", "n_predict", "vocab_size"):
            v = cfg.get(key, 0) if key == "inner_dim" else cfg.get(key)
            if not isinstance(v, int) or isinstance(v, bool) or v < (0 if key == "inner_dim" else 1):
                raise SpecsightInputError(f"drafter.model: {key}", v,
                                          "an MLP speculator config needs emb_dim, n_predict and vocab_size as "
                                          "integers >= 1 (inner_dim >= 0; 0: emb_dim)")
            vals[key] = v
        vals["inner_dim"] = vals["inner_dim"] or vals["emb_dim"]
        tie = cfg.get("tie_weights", False)
        if not isinstance(tie, bool):
            raise SpecsightInputError("drafter.model: tie_weights", tie, "true or false")
        return cls(vals["emb_dim"], vals["inner_dim"], vals["n_predict"], vals["vocab_size"], tie)

    def proj_params(self, j: int) -> int:
        return (self.emb_dim if j == 0 else self.inner_dim) * self.inner_dim

    def stage_params(self, j: int) -> int:
        """Weights stage j multiplies: projection, layer norm (weight and bias), head (the
        embedding is a lookup of one row per sequence, counted in stage_bytes)."""
        return self.proj_params(j) + 2 * self.inner_dim + self.inner_dim * self.vocab_size

    @property
    def params_total(self) -> int:
        """Weights the checkpoint holds: per stage an embedding, a projection, a norm and a head
        (tied: one set, plus stage 0's own projection)."""
        emb = self.vocab_size * self.inner_dim
        if self.tie_weights:
            later_proj = self.proj_params(1) if self.n_predict > 1 else 0
            return self.proj_params(0) + later_proj + emb + 2 * self.inner_dim + self.inner_dim * self.vocab_size
        return sum(emb + self.stage_params(j) for j in range(self.n_predict))

    def stage_flops(self, j: int, num_seqs: float) -> float:
        """2 FLOPs per weight per sequence (projection and head)."""
        return 2.0 * num_seqs * (self.proj_params(j) + self.inner_dim * self.vocab_size)

    def stage_bytes(self, j: int, num_seqs: float, bytes_per_weight: float) -> float:
        """Weights read once per stage, plus one embedding row per sequence."""
        return (self.stage_params(j) + num_seqs * self.inner_dim) * bytes_per_weight

    def step_time_s(self, cm: CostModel, j: int, num_seqs: float) -> float:
        """Stage j's soft roofline on cm's GPU (its achieved compute and memory rates), plus its
        kernels' launches."""
        bpw = DTYPE_BYTES[cm.dtype]
        t = soft_roofline(self.stage_flops(j, num_seqs) / cm.peak_flops_s,
                          self.stage_bytes(j, num_seqs, bpw) / cm.bw_bytes_s, cm.p)
        return t + MLP_KERNELS_PER_STAGE * cm.hw.overheads.kernel_launch_us * 1e-6
