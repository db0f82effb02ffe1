"""Drafters: what proposing K tokens costs, how wide the verify pass is, what HBM they hold.

Every family the README's "What it models" lists; names follow vLLM's `method` values where vLLM has one.

| method      | proposing K tokens costs                                          | verify positions / seq |
|-------------|-------------------------------------------------------------------|------------------------|
| draft_model | K sequential forwards of a small model (the first catches up)     | K + 1                  |
| eagle/eagle3| K sequential steps of one decoder layer + LM head (eagle3: small V)| K + 1, or tree nodes+1 |
| mtp         | K sequential steps of one full block + the shared LM head         | K + 1                  |
| medusa      | one pass of the heads, in parallel                                | tree nodes + 1         |
| ngram/suffix| host time only; proposes only when a match exists                 | K + 1 (if matched)     |
| parallel    | one draft forward over the catch-up and K mask tokens (PARD)      | K + 1                  |
| self_spec   | the target with a fraction of its layers and/or a bounded KV      | K + 1                  |
| dflash      | one forward over one bonus and K mask tokens (DFlash)             | K + 1                  |
| parallel_heads | one forward: n independent heads on one hidden state (Meta)    | K + 1                  |
| mlp_speculator | K stages of an MLP over the target's hidden state (IBM)        | K + 1                  |
| lookahead   | none: a lookahead branch rides in the target pass (Fu et al.)     | 1 + (W + G) K          |

How each is built (physical modules apart from runtime steps, whose KV it reads, the verify shape)
is simulator/speculation/drafter_structure.py's.

A draft model (draft_model, parallel) must share the target's tokenizer. Its vocabulary may differ from
the target's only by padding (checkpoints round the embedding table up to a multiple of 64, 128 or 256:
Qwen2.5-0.5B has 151,936 rows, Qwen2.5-7B 152,064, one tokenizer of 151,665 tokens), which engines accept.
`vocab_mismatch` decides it from the two configs: equal vocab_size, or all of
  - the same bos_token_id and the same eos_token_id(s), both stated in both configs;
  - the same model_type and the same tokenizer_class, where both configs state them;
  - the larger vocab_size at most the smaller rounded up to a multiple of VOCAB_PAD_MULTIPLE (256), so
    both can pad one token count.
Anything else is refused, naming the way out: a draft with the target's tokenizer, or a method that
needs none (ngram, suffix; eagle/eagle3/mtp heads trained for the target).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..common.errors import SpecsightInputError, closest_names, require_int, require_range
from ..common.limits import MAX_K, MAX_LIST, MAX_TP, path_field, rate_field, tokens_field
from ..common.schema import REQUIRED, Bool, Float, Int, Section, Str
from ..costs.cost_model import CostModel
from ..costs.pass_shape import causal_pairs
from ..hardware.hardware import DTYPE_BYTES
from ..models.catalog import load_model
from ..models.model_spec import HEAD_KINDS, ModelSpec
from .drafter_structure import (
    MLPSpeculator,
    assistant_spec,
    is_assistant,
    own_params,
    raw_config,
    round_shapes,
    structure_of,
)

METHODS = ("draft_model", "eagle", "eagle3", "mtp", "medusa", "ngram", "suffix", "parallel", "self_spec",
           "dflash", "parallel_heads", "mlp_speculator", "lookahead")
NEEDS_MODEL = ("draft_model", "eagle", "eagle3", "mtp", "medusa", "parallel", "dflash", "parallel_heads",
               "mlp_speculator")
ONE_FORWARD_METHODS = ("medusa", "parallel", "dflash", "parallel_heads")   # K drafts from one draft forward
HEAD_METHODS = HEAD_KINDS         # methods whose model is a head config (models/*{method}*.json)
LOOKUP_METHODS = ("ngram", "suffix")
EAGLE_METHODS = ("eagle", "eagle3")   # EAGLE heads: a chain, or a tree with tree: true
# the method names, for code outside this file that names one (engines map methods to rounds)
(DRAFT_MODEL, EAGLE, EAGLE3, MTP, MEDUSA, NGRAM, SUFFIX, PARALLEL, SELF_SPEC, DFLASH, PARALLEL_HEADS,
 MLP_SPECULATOR, LOOKAHEAD) = METHODS
VOCAB_PAD_MULTIPLE = 256          # the widest padding of an embedding table (Megatron, vLLM pad to 64..256)


def vocab_mismatch(draft: ModelSpec, target: ModelSpec) -> str | None:
    """Why `draft` cannot draft for `target` (a different tokenizer), or None when its vocabulary is
    the target's or differs only by padding (the rule in the module docstring)."""
    dv, tv = draft.vocab_size, target.vocab_size
    if dv == tv:
        return None
    why = f"vocabulary {dv} differs from the target's {tv}"
    lo, hi = min(dv, tv), max(dv, tv)
    padded = -(-lo // VOCAB_PAD_MULTIPLE) * VOCAB_PAD_MULTIPLE
    if hi > padded:
        return f"{why} by more than padding ({lo} rounded up to a multiple of {VOCAB_PAD_MULTIPLE} is {padded})"
    for key in ("bos_token_id", "eos_token_ids"):
        a, b = getattr(draft, key), getattr(target, key)
        if a in (None, ()) or b in (None, ()):
            name = key.replace("_ids", "_id")
            return f"{why}, and the configs do not both state {name} (needed to tell padding from another tokenizer)"
        if a != b:
            return f"{why}, and {key.replace('_ids', '_id')} differs ({a} against {b}): another tokenizer"
    for key in ("model_type", "tokenizer_class"):
        a, b = getattr(draft, key), getattr(target, key)
        if a is not None and b is not None and a != b:
            return f"{why}, and {key} differs ({a} against {b}): another tokenizer"
    return None


@dataclass(frozen=True)
class DrafterSpec:
    """A drafter as a scenario names it."""
    method: str
    num_speculative_tokens: int = 3          # K (the maximum K for dynamic policies)
    model: str | None = None                 # catalog name or config.json path (draft model or head)
    tree: bool = False                       # eagle/eagle3: verify a token tree instead of a chain
    tree_nodes: int = 0                      # candidate tokens in the tree (medusa default 63, eagle 59)
    tree_branches: int = 1                   # candidates per depth (a depth is accepted if any branch is)
    match_probability: float = 1.0           # ngram/suffix: chance a sequence finds a match this round
    host_base_us: float = 50.0               # ngram/suffix: host lookup cost per round
    host_us_per_seq: float = 5.0             # ngram/suffix: host lookup cost per sequence
    layer_fraction: float = 1.0              # self_spec: fraction of the target's layers the draft runs
    kv_budget_tokens: int = 0                # self_spec: bounded draft KV (StreamingLLM/MagicDec); 0 = full
    draft_tp: int | None = None              # draft_model/parallel TP degree (default: the target's)
    lookahead_window: int = 0                # lookahead: W, the lookahead branch's window (G = tree_branches)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise SpecsightInputError("drafter.method", self.method, f"one of {', '.join(METHODS)}")
        require_int("drafter.num_speculative_tokens", self.num_speculative_tokens, lo=0, hi=64)
        if self.method in NEEDS_MODEL and not self.model:
            raise SpecsightInputError("drafter.model", self.model,
                                      f"method {self.method} needs a draft model or head config")
        require_int("drafter.tree_nodes", self.tree_nodes, lo=0)
        require_int("drafter.tree_branches", self.tree_branches, lo=1)
        require_range("drafter.match_probability", self.match_probability, 0.0, 1.0)
        require_range("drafter.host_base_us", self.host_base_us, 0.0)
        require_range("drafter.host_us_per_seq", self.host_us_per_seq, 0.0)
        require_range("drafter.layer_fraction", self.layer_fraction, 0.0, 1.0, lo_open=True)
        require_int("drafter.kv_budget_tokens", self.kv_budget_tokens, lo=0)
        require_int("drafter.lookahead_window", self.lookahead_window, lo=0)
        if self.method == LOOKAHEAD and self.lookahead_window < 1:
            raise SpecsightInputError("drafter.lookahead_window", self.lookahead_window,
                                      "lookahead needs its window W >= 1 (Fu et al. 2024 run W = 5..15)")

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], where: str = "drafter") -> DrafterSpec:
        if not isinstance(raw, Mapping):
            raise SpecsightInputError(where, raw, "must be a mapping with at least `method`")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - names)
        if unknown:
            raise SpecsightInputError(f"{where}.{unknown[0]}", raw[unknown[0]],
                                      f"unknown key; {closest_names(unknown[0], names)}")
        if "method" not in raw:
            raise SpecsightInputError(f"{where}.method", None, f"required; one of {', '.join(METHODS)}")
        return cls(**dict(raw))

    @property
    def is_lookup(self) -> bool:
        """A host-side lookup (ngram, suffix): no GPU pass, proposes only when a match exists (a
        sequence without one verifies a single position)."""
        return self.method in LOOKUP_METHODS

    @property
    def first_step_one_token(self) -> bool:
        """The first draft step ingests one token per sequence whatever was emitted (self_spec
        drafts over the target's own KV cache, which the target's passes already wrote; DFlash's
        block is one bonus query and K mask queries, the accepted tokens' target features entering
        its cache as keys and values, vllm/config/speculative.py@002e77c1)."""
        return self.method in (SELF_SPEC, DFLASH)

    @property
    def proposes_in_steps(self) -> bool:
        """Proposing K tokens is K sequential passes of the draft model over its full cache
        (CostModel.steps_time_s): draft_model, eagle, eagle3, mtp, and self_spec without a KV budget."""
        return (self.method not in ONE_FORWARD_METHODS + (MLP_SPECULATOR, LOOKAHEAD) and not self.is_lookup
                and not (self.method == "self_spec" and self.kv_budget_tokens))

    @property
    def is_tree(self) -> bool:
        """Candidates verified as a tree: Medusa, EAGLE trees, and Lookahead's G n-gram candidates."""
        return self.method in (MEDUSA, LOOKAHEAD) or (self.method in EAGLE_METHODS and self.tree)

    @property
    def branches(self) -> int:
        """Candidates per depth: tree_branches for a tree, 1 for a chain."""
        return self.tree_branches if self.is_tree else 1


class Drafter:
    """A drafter bound to a target, a GPU and a TP degree: its costs and its memory."""

    def __init__(self, spec: DrafterSpec, target: ModelSpec, target_cost: CostModel):
        self.spec, self.target, self.target_cost = spec, target, target_cost
        hw, tp, dtype = target_cost.hw, target_cost.tp, target_cost.dtype
        self.draft_cost: CostModel | None = None
        self.mlp: MLPSpeculator | None = None
        m = spec.method
        cfg = raw_config(spec.model, required=m == MLP_SPECULATOR) if m in NEEDS_MODEL else {}
        if m == MLP_SPECULATOR:
            self.mlp = MLPSpeculator.from_config(cfg)
            if self.mlp.vocab_size != target.vocab_size or self.mlp.emb_dim != target.hidden_size:
                raise SpecsightInputError("drafter.model", spec.model,
                                          f"an MLP speculator for a target of hidden size {target.hidden_size} and "
                                          f"vocabulary {target.vocab_size} (this one: emb_dim {self.mlp.emb_dim}, "
                                          f"vocab_size {self.mlp.vocab_size})")
            if spec.num_speculative_tokens > self.mlp.n_predict:
                raise SpecsightInputError("drafter.num_speculative_tokens", spec.num_speculative_tokens,
                                          f"at most the speculator's n_predict ({self.mlp.n_predict} stages)")
        elif m in NEEDS_MODEL:
            dm = load_model(spec.model, field="drafter.model")
            if m == MTP and is_assistant(cfg):      # a separate model with its own fusion projections
                dm = assistant_spec(dm, cfg)
            elif m in HEAD_METHODS and dm.head_kind is None:
                raise SpecsightInputError("drafter.model", spec.model,
                                          f"method {m} needs a {m} head config (models/*{m}*.json)")
            why = vocab_mismatch(dm, target) if m in ("draft_model", "parallel") else None
            if why:
                raise SpecsightInputError("drafter.model", spec.model,
                                          f"{why}; use a draft with the target's tokenizer, or drafter.method "
                                          "ngram/suffix (no draft model) or eagle/eagle3 (a head trained for the "
                                          "target)")
            dtp = spec.draft_tp or (tp if dm.num_heads % tp == 0 else 1)
            self.draft_cost = CostModel(dm, hw, tp=dtp, dtype=dtype)
        elif m == "self_spec":
            layers = max(1, round(spec.layer_fraction * target.num_layers))
            self.draft_cost = CostModel(dataclasses.replace(target, num_layers=layers), hw, tp=tp, dtype=dtype)
        vocab = self.mlp.vocab_size if self.mlp else (self.draft_cost.model.lm_head_vocab if self.draft_cost else 0)
        self.structure = structure_of(m, spec.tree, cfg, vocab)
        self.config = cfg
        self.branches = spec.branches    # read at every proposal: an attribute, not the spec's property chain
        self._first_one = spec.first_step_one_token
        if self.chained_steps:           # the common drafter, priced every round: no method dispatch
            self.propose_time_s = self._chained_propose_time_s

    # ---- shapes -------------------------------------------------------------------------
    def verify_tokens_per_seq(self, k: int) -> int:
        """Positions the target scores per sequence: the last emitted token plus the drafts."""
        if k <= 0:
            return 1
        if self.spec.method == LOOKAHEAD:     # the lookahead branch (W x K) and G candidates of K tokens
            return 1 + (self.spec.lookahead_window + self.spec.tree_branches) * k
        if self.spec.is_tree:
            nodes = self.spec.tree_nodes or (63 if self.spec.method == "medusa" else 59)
            return nodes + 1
        return k + 1

    @property
    def uses_gpu(self) -> bool:
        return not self.spec.is_lookup

    @property
    def chained_steps(self) -> bool:
        """Proposing is K sequential draft passes priced by draft_cost.steps_time_s, nothing else
        (what the compiled decode rounds reproduce)."""
        return self.draft_cost is not None and self.spec.proposes_in_steps and not self.structure.index_share

    # ---- cost of proposing ---------------------------------------------------------------
    def propose_time_s(self, num_seqs: float | np.ndarray, k: int, sum_context: float | np.ndarray,
                       catchup_tokens: float | np.ndarray | None = None) -> float | np.ndarray:
        """Seconds to propose k tokens for num_seqs sequences holding sum_context cached tokens.

        catchup_tokens: tokens the drafter must first ingest (those emitted last round; default
        one per sequence). Floats or numpy arrays."""
        if k <= 0:
            return 0.0 * num_seqs
        s, m, B = self.spec, self.spec.method, num_seqs
        if s.is_lookup:
            return (s.host_base_us + s.host_us_per_seq * B) * 1e-6
        if m == LOOKAHEAD:      # no draft pass: the lookahead branch is in the verify width
            return 0.0 * B
        if self.mlp is not None:
            return sum(self.mlp.step_time_s(self.target_cost, j, B) for j in range(k))
        dc = self.draft_cost
        assert dc is not None
        # NOTE: self_spec drafts with the target's own weights over (a window of) the target's KV
        # cache, which the target's prefill and verify passes already wrote (MagicDec, LayerSkip):
        # only the last emitted token of each sequence is new to it, never a whole prompt.
        first = B if catchup_tokens is None or s.first_step_one_token else catchup_tokens
        ctx = sum_context
        if m == "self_spec" and s.kv_budget_tokens:
            ctx = np.minimum(sum_context, B * s.kv_budget_tokens)
        if m == "medusa":       # one pass of all heads over the last position of each sequence
            return dc.time_s(B, 0.0 * B, 0.0 * B, B, B)
        if m in (PARALLEL, DFLASH):     # ingest the accepted tokens and K mask tokens in one forward
            n = first + k * B
            return dc.time_s(n, ctx, causal_pairs(n, ctx, B), k * B, B)
        if m == PARALLEL_HEADS:         # every head over the last position of each sequence; K heads' logits
            return dc.time_s(B, ctx, causal_pairs(B, ctx, B), k * B, B)
        if self.structure.index_share:  # later steps read at most index_topk cached tokens per sequence
            return sum(dc.shape_time_s(p) for p in round_shapes(self.structure, B, k, ctx, first, self.branches))
        return self._chained_propose_time_s(B, k, ctx, catchup_tokens)

    def _chained_propose_time_s(self, num_seqs: float | np.ndarray, k: int, sum_context: float | np.ndarray,
                                catchup_tokens: float | np.ndarray | None = None) -> float | np.ndarray:
        """propose_time_s of K chained draft passes (`chained_steps`, and self_spec over a bounded
        window): each new token attends to its sequence's cache (pairs = n * c / B + causal part);
        logits only where a token is proposed from: the last position of each sequence (step 0
        ingests the catch-up tokens but proposes from one position), each branch after."""
        if k <= 0:
            return 0.0 * num_seqs
        first = num_seqs if catchup_tokens is None or self._first_one else catchup_tokens
        return self.draft_cost.steps_time_s(first, sum_context, num_seqs, k, num_seqs * self.branches)

    # ---- memory ---------------------------------------------------------------------------
    def weight_bytes_per_gpu(self) -> float:
        """HBM the drafter's own weights take on each GPU (shared embeddings/heads not counted): an
        MTP checkpoint's M physical modules, an MLP speculator's stages (at draft TP 1, as vLLM runs
        it), parallel heads without the unembedding they share with the target; under dp_attention
        the non-expert part replicated on every GPU, as the target's."""
        if self.mlp is not None:
            return self.mlp.params_total * DTYPE_BYTES[self.target_cost.dtype]
        if self.spec.is_lookup or self.spec.method == "self_spec" or self.draft_cost is None:
            return 0.0
        dc = self.draft_cost
        params = own_params(self.structure, dc.model, self.config)
        bpw = DTYPE_BYTES[dc.dtype] * self.structure.module_copies
        if dc.layout.attention_dp > 1:   # replicated but for the routed experts (CostModel.weight_bytes_per_gpu)
            routed = dc.model.num_moe_layers * dc.model.num_experts * dc.model.expert_params
            return ((params - routed) + routed / dc.tp) * bpw
        return params * self.structure.module_copies * DTYPE_BYTES[dc.dtype] / dc.tp

    def kv_bytes_per_token_per_gpu(self) -> float:
        """Extra KV bytes per cached token the drafter keeps (its own layers' cache, one per
        physical MTP module; none for a drafter that reads the target's cache or has no attention)."""
        if self.structure.kv_source != "own" or self.draft_cost is None:
            return 0.0
        return float(self.draft_cost.kv_bytes_per_token) * self.structure.module_copies

    def kv_bytes_saved_per_token_per_gpu(self) -> float:
        """KV bytes per cached token an assistant saves by reading the target's cache: what its own
        layers would have held (0 for every other drafter)."""
        if self.structure.kv_source != "target" or self.spec.method == SELF_SPEC or self.draft_cost is None:
            return 0.0
        return float(self.draft_cost.kv_bytes_per_token)


# ---- the scenario's `drafter:` block (composed into the scenario schema: simulator/scenario/schema_table.py)
DRAFTER = Section(doc="the drafter (none: no speculation)", nullable=True, keys={
    "method": Str(doc="drafting method", choices=METHODS, default=REQUIRED),
    "num_speculative_tokens": Int(doc="K, and the largest K a dynamic policy may pick", unit="tokens", lo=0,
                                  hi=MAX_K, default=3),
    "model": path_field("draft model or head config: catalog name or config.json path (model-based methods)",
                   nullable=True),
    "tree": Bool(doc="eagle/eagle3: verify a token tree instead of a chain", default=False),
    "tree_nodes": Int(doc="tree candidates (0: 63 medusa, 59 eagle)", unit="tokens", lo=0, hi=MAX_LIST, default=0),
    "tree_branches": Int(doc="candidates per depth", lo=1, hi=MAX_LIST, default=1),
    "match_probability": rate_field("ngram/suffix: chance a sequence finds a match in a round", default=1.0),
    "host_base_us": Float(doc="ngram/suffix host lookup cost per round", unit="µs", lo=0.0, hi=1e9, default=50.0),
    "host_us_per_seq": Float(doc="ngram/suffix host lookup cost per sequence", unit="µs", lo=0.0, hi=1e9,
                             default=5.0),
    "layer_fraction": Float(doc="self_spec: fraction of the target's layers the draft runs", lo=0.0, hi=1.0,
                            lo_open=True, default=1.0),
    "kv_budget_tokens": tokens_field("self_spec: bounded draft KV (0: full)", lo=0, default=0),
    "draft_tp": Int(doc="draft_model/parallel TP degree (default: the target's)", unit="GPUs", lo=1, hi=MAX_TP,
                    nullable=True),
    "lookahead_window": Int(doc="lookahead: W, the lookahead branch's window (candidates G: tree_branches)",
                            unit="tokens", lo=0, hi=MAX_LIST, default=0),
})
