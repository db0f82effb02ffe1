"""Acceptance presets from published figures (the table in docs/reference/acceptance.md).

Each preset names its source and conditions. Figures come in four kinds, converted as stated:
  alpha   a per-token acceptance rate: used as i.i.d. alpha directly.
  tau     mean tokens emitted per verify round (accepted + 1) at K drafts (or tree depth K):
          converted to the i.i.d. alpha solving (1 - alpha^(K+1)) / (1 - alpha) = tau, so a chain
          of K drafts with that alpha reproduces tau. For trees this alpha is per depth (the tree's
          branches already folded in): do not apply the tree rule (spec_math.tree_depth_acceptance) on top of it.
  cumulative  P(position k accepted), k = 1..n: converted to conditional rates c_k / c_{k-1}.
  al_by_k     a chain's accept length AL(K) at K = K0..k (one run per K): position j's cumulative
          acceptance is c_j = AL(j) - AL(j-1) for j > K0 (position j's draft does not depend on
          how many follow it in a chain); positions 1..K0 share the i.i.d. alpha that reproduces
          AL(K0) (the tau rule). Conditional rates c_j / c_{j-1}; every AL(K) is reproduced exactly.

Every preset also says the shape it was measured on (`shape`: chain or tree) and why (`shape_basis`,
from the source's stated setup). A tree's figure counts a depth as accepted when any branch is, so it
overstates what a chain drafter accepts: `shape_mismatch` names the nearest chain preset instead.
Acceptance depends on task, temperature and context; a preset is a starting point, not a
measurement of your deployment.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..common.errors import SpecsightInputError, closest_names
from .acceptance import IIDAcceptance, PerPositionAcceptance
from .drafters import LOOKUP_METHODS

LEVIATHAN = "Leviathan et al. 2022, Fast Inference from Transformers via Speculative Decoding (arXiv 2211.17192)"
EAGLE3 = "Li et al. 2025, EAGLE-3 (arXiv 2503.01840), Table 1"
SPEC_BENCH = "Spec-Bench leaderboard (hemingkx/Spec-Bench, Leaderboard.md), Vicuna-7B-v1.3, greedy, A100"
VLLM_EAGLE3 = "vLLM PR #16937 (EAGLE-3 in V1) and issue #20780: accept length by num_speculative_tokens"

SHAPES = ("chain", "tree")

LEVIATHAN_CHAIN = ("Leviathan et al., Algorithm 1 (SpeculativeDecodingStep): 'Sample gamma guesses x1..x_gamma "
                   "from Mp autoregressively', one sequence of drafts verified in one pass")
EAGLE_TREES = {
    "medusa": "Medusa (Cai et al. 2024, arXiv 2401.10774) verifies its heads' candidates with tree attention; "
              "EAGLE-3's Table 1 and Spec-Bench run it with its default tree (mc_sim_7b_63)",
    "eagle": "EAGLE (Li et al. 2024, arXiv 2401.15077) drafts a static token tree verified with tree attention "
             "(docs/reference/acceptance.md: 'MT-bench, T=0, tree'); the tables run its default tree",
    "eagle2": "EAGLE-2 (arXiv 2406.16858) drafts a context-aware dynamic tree; docs/reference/acceptance.md, "
              "EAGLE-3 Table 1 row: 'MT-bench, T=0, dynamic tree'",
    "eagle3": "EAGLE-3 keeps EAGLE-2's dynamic draft tree; docs/reference/acceptance.md, EAGLE-3 Table 1 row: "
              "'MT-bench, T=0, dynamic tree'",
}


@dataclass(frozen=True)
class Preset:
    name: str
    kind: str                      # alpha | tau | cumulative | al_by_k
    figure: tuple[float, ...]      # the published number(s)
    k: int                         # drafts / tree depth the figure was measured at (al_by_k: the largest K)
    conditions: str
    source: str
    conversion: str
    shape: str                     # chain | tree: what the figure was measured on
    shape_basis: str               # the source's sentence or table that says so
    method: str                    # the drafter family, as drafter.method spells it
    target: str                    # the target model

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"preset {self.name}: shape {self.shape!r} is not one of {SHAPES}")
        if not self.shape_basis:
            raise ValueError(f"preset {self.name}: shape_basis must cite the source's setup")

    @property
    def alphas(self) -> np.ndarray:
        """Conditional per-position rates (one value for i.i.d. presets)."""
        if self.kind == "alpha":
            return np.array(self.figure[:1])
        if self.kind == "tau":
            return np.array([alpha_for_tau(self.figure[0], self.k)])
        c = cumulative_from_accept_lengths(self.figure, self.k) if self.kind == "al_by_k" else np.asarray(self.figure)
        return c / np.concatenate(([1.0], c[:-1]))


def alpha_for_tau(tau: float, k: int) -> float:
    """The i.i.d. alpha with (1 - alpha^(k+1)) / (1 - alpha) = tau, 1 <= tau <= k + 1 (bisection)."""
    if not 1.0 <= tau <= k + 1:
        raise ValueError(f"tau={tau} is impossible with k={k} drafts (needs 1 <= tau <= k + 1)")
    lo, hi = 0.0, 1.0
    for _ in range(60):                              # 2^-60: far below any figure's precision
        mid = 0.5 * (lo + hi)
        if np.sum(mid ** np.arange(k + 1)) < tau:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def cumulative_from_accept_lengths(accept_lengths: tuple[float, ...], k_max: int) -> np.ndarray:
    """P(position j accepted), j = 1..k_max, from a chain's accept length at K = K0..k_max
    (K0 = k_max - len + 1): positions 1..K0 from the i.i.d. alpha that reproduces AL(K0), then
    c_j = AL(j) - AL(j - 1). Raises ValueError when the differences do not fall."""
    al = np.asarray(accept_lengths, dtype=float)
    k0 = k_max - len(al) + 1
    a = alpha_for_tau(float(al[0]), k0)
    c = np.concatenate((a ** np.arange(1, k0 + 1), np.diff(al)))
    if np.any(c <= 0) or np.any(np.diff(c) > 0):
        raise ValueError(f"accept lengths {accept_lengths} do not give falling cumulative acceptance {c}")
    return c


def _preset(name: str, kind: str, figure: tuple[float, ...], k: int, conditions: str, source: str, conversion: str,
            shape: str, basis: str, method: str, target: str) -> Preset:
    return Preset(name, kind, tuple(figure), k, conditions, source, conversion, shape, basis, method, target)


def _tau(name: str, tau: float, k: int, conditions: str, source: str, k_note: str, shape: str, basis: str,
         method: str, target: str) -> Preset:
    return _preset(name, "tau", (tau,), k, conditions, source,
                   f"tau {tau} -> i.i.d. alpha solving (1-a^(K+1))/(1-a) = tau at K = {k} ({k_note})",
                   shape, basis, method, target)


def _alpha(name: str, alpha: float, conditions: str, source: str, basis: str, method: str, target: str) -> Preset:
    return _preset(name, "alpha", (alpha,), 1, conditions, source, "per-token alpha as published, used i.i.d.",
                   "chain", basis, method, target)


def _leviathan(name: str, alpha: float, conditions: str, table: str, target: str) -> Preset:
    return _alpha(name, alpha, conditions, f"{LEVIATHAN}, {table}", LEVIATHAN_CHAIN, "draft_model", target)


def _tree(name: str, tau: float, k: int, conditions: str, source: str, k_note: str, family: str, target: str) -> Preset:
    return _tau(name, tau, k, conditions, source, f"{k_note}; per-depth alpha", "tree", EAGLE_TREES[family],
                "eagle" if family == "eagle2" else family, target)


SPS_CHAIN = ("standard speculative sampling (SpS, Leviathan et al.; Chen et al.) with a Vicuna-68M draft: "
             "one draft sequence")
SGLANG_CHAIN = ("SGLang's EAGLE worker with speculative-eagle-topk 1 and num-draft-tokens = steps + 1 drafts one token "
                "per step, a chain of `steps` drafts verified in one pass")
VLLM_CHAIN = ("vLLM V1's EAGLE proposer (vllm/v1/spec_decode/eagle.py) drafts K tokens one per pass by argmax, "
              "and the runs vary num_speculative_tokens only (tree drafting needs speculative_token_tree)")

PRESETS: dict[str, Preset] = {p.name: p for p in [
    _leviathan("t5-small-ende", 0.75, "T5-small draft, T5-XXL target, WMT EnDe, T=0", "Tables 2 and 4", "t5-xxl"),
    _leviathan("t5-small-ende-t1", 0.62, "T5-small draft, T5-XXL target, WMT EnDe, T=1", "Tables 2 and 4", "t5-xxl"),
    _leviathan("t5-base-ende", 0.80, "T5-base draft, T5-XXL target, WMT EnDe, T=0", "Tables 2 and 4", "t5-xxl"),
    _leviathan("t5-large-ende", 0.82, "T5-large draft, T5-XXL target, WMT EnDe, T=0", "Tables 2 and 4", "t5-xxl"),
    _leviathan("t5-small-cnndm", 0.65, "T5-small draft, T5-XXL target, CNN/DM, T=0", "Tables 2 and 4", "t5-xxl"),
    _leviathan("bigram-t5xxl-ende", 0.2, "bigram draft (cost ~0), T5-XXL target, WMT EnDe", "Table 3", "t5-xxl"),
    _leviathan("lamda-8b-137b", 0.75, "LaMDA 8B draft, LaMDA 137B target, T=0", "Table 3", "lamda-137b"),
    _tau("sps-vicuna-68m", 2.27, 4, "Vicuna-68M draft, Vicuna-13B target, MT-bench, T=0, batch 1", EAGLE3,
         "K = 4 assumed; the table does not state SpS's K", "chain", f"EAGLE-3 paper, Table 1 row SpS: {SPS_CHAIN}",
         "draft_model", "vicuna-13b"),
    _tree("medusa-vicuna-13b", 2.59, 4, "Medusa heads, Vicuna-13B, MT-bench, T=0, tree", EAGLE3,
          "depth 4 of Medusa's default mc_sim_7b_63 tree", "medusa", "vicuna-13b"),
    _tree("eagle-vicuna-13b", 3.98, 5, "EAGLE, Vicuna-13B, MT-bench, T=0, static tree", EAGLE3,
          "depth 5 of EAGLE's default tree", "eagle", "vicuna-13b"),
    _tree("eagle2-vicuna-13b", 4.83, 5, "EAGLE-2, Vicuna-13B, MT-bench, T=0, dynamic tree", EAGLE3,
          "depth 5, EAGLE-2's default", "eagle2", "vicuna-13b"),
    _tree("eagle2-llama-3.1-8b-mtbench", 4.05, 5, "EAGLE-2, Llama-3.1-8B-Instruct, MT-bench, T=0, dynamic tree",
          EAGLE3, "depth 5, EAGLE-2's default", "eagle2", "llama-3.1-8b"),
    _tree("eagle3-vicuna-13b", 6.65, 7, "EAGLE-3, Vicuna-13B, MT-bench, T=0, dynamic tree", EAGLE3,
          "depth 7, the EAGLE-3 code's default", "eagle3", "vicuna-13b"),
    _tree("eagle3-vicuna-13b-t1", 5.42, 7, "EAGLE-3, Vicuna-13B, MT-bench, T=1, dynamic tree", EAGLE3,
          "depth 7, the EAGLE-3 code's default", "eagle3", "vicuna-13b"),
    _tree("eagle3-llama-3.1-8b-mtbench", 6.13, 7, "EAGLE-3, Llama-3.1-8B-Instruct, MT-bench, T=0, dynamic tree",
          EAGLE3, "depth 7, the EAGLE-3 code's default", "eagle3", "llama-3.1-8b"),
    _tree("eagle3-llama-3.3-70b-mtbench", 5.63, 7, "EAGLE-3, Llama-3.3-70B-Instruct, MT-bench, T=0, dynamic tree",
          EAGLE3, "depth 7, the EAGLE-3 code's default", "eagle3", "llama-3.3-70b"),
    _preset("eagle3-llama-3.1-8b-mtbench-chain-vllm", "al_by_k", (2.36, 2.79, 3.08, 3.32, 3.46, 3.54), 7,
            "EAGLE-3, Llama-3.1-8B-Instruct, MT-Bench, vLLM V1, H100, batch 1, "
            "chain K = 2..7 (accept length 2.36/2.79/3.08/3.32/3.46/3.54)", VLLM_EAGLE3,
            "AL(K) for K = 2..7 -> positions 1-2 share the i.i.d. alpha with 1 + a + a^2 = 2.36 (a = 0.769), "
            "c_j = AL(j) - AL(j-1) for j = 3..7, conditional c_j / c_{j-1}; positions past 7 reuse position 7's",
            "chain", VLLM_CHAIN, "eagle3", "llama-3.1-8b"),
    _tau("pld-vicuna-7b-specbench", 1.73, 10, "prompt lookup decoding, Vicuna-7B, Spec-Bench overall, greedy, A100",
         SPEC_BENCH, "K = 10, PLD's default num_pred_tokens; rounds without a match are folded into alpha", "chain",
         "Spec-Bench runs PLD with its defaults: it copies the num_pred_tokens tokens that followed a matched "
         "n-gram, one contiguous span", "ngram", "vicuna-7b"),
    _tree("medusa-vicuna-7b-specbench", 2.32, 4, "Medusa, Vicuna-7B, Spec-Bench overall, greedy, A100", SPEC_BENCH,
          "depth 4 of the mc_sim_7b_63 tree", "medusa", "vicuna-7b"),
    _tree("eagle-vicuna-7b-specbench", 3.61, 5, "EAGLE, Vicuna-7B, Spec-Bench overall, greedy, A100", SPEC_BENCH,
          "depth 5 of EAGLE's default tree", "eagle", "vicuna-7b"),
    _tau("sps-vicuna-7b-specbench", 2.28, 4, "SpS (Vicuna-68M draft), Vicuna-7B, Spec-Bench overall, greedy, A100",
         SPEC_BENCH, "K = 4 assumed", "chain", f"Spec-Bench leaderboard row SpS: {SPS_CHAIN}", "draft_model",
         "vicuna-7b"),
    _preset("deepseek-v3-mtp", "alpha", (0.875,), 1,
            "DeepSeek-V3, 1 MTP module (K=1), second-token acceptance 85-90 %",
            "DeepSeek-AI 2024, DeepSeek-V3 Technical Report (arXiv 2412.19437), section 5.4.3",
            "alpha = 0.875, the midpoint of 85-90 %; measured at K = 1 only (deeper positions repeat it, "
            "optimistic: see deepseek-v3-mtp-sglang-k3)", "chain",
            "section 5.4.3: the one MTP module predicts the next 2 tokens, one draft token per step (a chain of 1)",
            "mtp", "deepseek-v3"),
    _tau("deepseek-v3-mtp-sglang-k3", 2.18, 3, "DeepSeek-V3 MTP reused for 3 draft tokens, SGLang, 16xH200",
         "LMSYS blog 2025-07-17 (MTP in SGLang)", "K = 3 draft tokens", "chain",
         "the blog reuses the one MTP module for 3 sequential draft tokens (speculative-eagle-topk 1)",
         "mtp", "deepseek-v3"),
    _tau("deepseek-v3-mtp-sglang-k4", 2.44, 4, "DeepSeek-V3 MTP reused for 4 draft tokens, SGLang, 16xH200",
         "LMSYS blog 2025-07-17 (MTP in SGLang)", "K = 4 draft tokens", "chain",
         "the blog reuses the one MTP module for 4 sequential draft tokens (speculative-eagle-topk 1)",
         "mtp", "deepseek-v3"),
    _tau("glm-5-mtp", 2.76, 4, "GLM-5 MTP, 4 steps, private prompt set",
         "GLM-5 report (arXiv 2602.15763), Table 2", "K = 4 steps; 'accept length' read as tau (incl. the bonus token)",
         "chain", "Table 2 reports accept length at 4 speculative steps of the MTP layer, one draft token per step",
         "mtp", "glm-5"),
    _tau("qwen3-next-mtp-k3", 2.81, 3, "Qwen3-Next MTP, K=3, SPEED-Bench, batch 32, T=0 (coding 3.34, roleplay 2.09)",
         "SPEED-Bench (arXiv 2604.09557), Table 1", "K = 3; mean accept length read as tau", "chain",
         "Table 1 states a draft length of K = 3 for MTP, one draft token per step", "mtp", "qwen3-next"),
    _tau("glm-5.2-mtp-coding-k7", 5.47, 7, "GLM-5.2 MTP (shared module, first step's index and KV reused), "
         "coding ablation on the GLM-5.1 backbone, 7 steps in training and inference (baseline MTP 4.56)",
         "Z.ai, GLM-5.2 release blog (z.ai/blog/glm-5.2), as quoted in ../shared/seeds/000 and 001",
         "K = 7 steps; 'accept length' read as tau (incl. the bonus token), as glm-5-mtp reads GLM-5's; an "
         "ablation figure, not an end-to-end speed", "chain",
         "the blog runs the one shared MTP module for 7 sequential steps, one draft token per step", "mtp", "glm-5.2"),
    _tau("gemma-4-assistant-gsm8k-k5", 5.0, 5, "Gemma 4 MTP assistant drafter, GSM8K, N = 5 draft tokens "
         "(acceptance 80.0 %; 94.8 % at N = 1)",
         "vLLM AMD blog, Gemma 4 MTP drafters (secondary; docs/reference/acceptance.md)",
         "K = 5; AMBIGUOUS: the source does not define its rate; read as vLLM's draft acceptance rate "
         "(accepted / drafted tokens), so 80.0 % of 5 drafts is 4.0 accepted, tau 5.0; the N = 1 figure "
         "(94.8 %) read the same way gives alpha 0.948, above this preset's 0.927", "chain",
         "vLLM's mtp method drafts the assistant's N tokens in sequence, one per step (vllm gemma4_mtp path)",
         "mtp", "gemma-4-31b"),
    _preset("minimax-m3-eagle3", "cumulative", (0.76, 0.56, 0.43), 3, "EAGLE-3 on MiniMax-M3, 1k-32k context, K=3",
            "vLLM blog 2026-07-13 (EAGLE-3 on AMD Instinct)",
            "cumulative acceptance 76/56/43 % at positions 1/2/3 -> conditional 0.76, 0.737, 0.768 "
            "(tau 2.75 vs the reported accept length 2.80)", "chain",
            "the blog reports acceptance at draft positions 1/2/3 of vLLM's EAGLE-3 at K = 3 (vLLM's per-position "
            "counters, a chain's statistic)", "eagle3", "minimax-m3"),
    _alpha("magicdec-streamingllm", 0.84, "StreamingLLM-512 self-draft, Llama-2-7B-32K, PG-19, context 4k",
           "MagicDec blog (Infini-AI-Lab)", "MagicDec's self-speculation drafts gamma tokens in sequence with the "
           "StreamingLLM-KV draft, then verifies them in one pass", "self_spec", "llama-2-7b-32k"),
    _alpha("magicdec-streamingllm-100k", 0.79, "StreamingLLM-512 self-draft, Llama-2-7B-32K, PG-19, context 100k",
           "MagicDec blog (Infini-AI-Lab)", "MagicDec's self-speculation drafts gamma tokens in sequence with the "
           "StreamingLLM-KV draft, then verifies them in one pass", "self_spec", "llama-2-7b-32k"),
    _tau("eagle3-qwen3-30b-a3b-sglang-k3", 1.86, 3,
         "EAGLE-3 (zhuyksir/EAGLE3-Qwen3-30B-A3B-DenseHead), Qwen3-30B-A3B, SGLang, 2xH100 TP2, MT-bench (20 prompts), "
         "batch 1 and 4 (both 1.86), temperature not stated", "sgl-project/SpecForge issue #339 (2025-12-01)",
         "K = 3: speculative-num-steps 3, topk 1, num-draft-tokens 4; 'acc len' read as tau", "chain",
         SGLANG_CHAIN, "eagle3", "qwen3-30b-a3b"),
    _tau("eagle3-qwen3-30b-a3b-sglang-tree", 2.542, 4,
         "EAGLE-3 (AngelSlim's Qwen3-30B-A3B head), Qwen3-30B-A3B, SGLang, 4xH100 TP4, T=0, batch 1, "
         "tree steps 4 / topk 4 / 16 draft tokens (2.556-2.578 at batch 4-64), prompt set not stated",
         "Tencent/AngelSlim issue #163 (2025-12-08)", "depth 4 (speculative-num-steps 4); per-depth alpha", "tree",
         "SGLang's EAGLE worker with speculative-eagle-topk 4 > 1 drafts a tree of 16 candidates verified with tree "
         "attention (the issue's config columns steps / topk / num_draft_tokens)", "eagle3", "qwen3-30b-a3b"),
    _tau("eagle3-gpt-oss-120b-sglang-k3", 2.41, 3,
         "EAGLE-3 (Dogacel/specdrift-gpt-oss-120b-eagle3, SpecForge-trained), gpt-oss-120b, SGLang (spec v2), 1xH100, "
         "MT-Bench 80 prompts, max 2048 tokens, temperature 0.7, batch 1 (2.41 at batch 8, 2.43 at 64)",
         "Dogacel/specdrift-gpt-oss-120b-eagle3 model card, 'gpt-oss-120b EAGLE3 (1-3-1-4) on H100' table "
         "(Attention Drift, arXiv 2605.09992)",
         "K = 3: speculative-num-steps 3, topk 1, num-draft-tokens 4; AL read as tau (SGLang's accept length counts "
         "the bonus token)", "chain", SGLANG_CHAIN, "eagle3", "gpt-oss-120b"),
]}


def _closeness(tree: Preset, chain: Preset) -> tuple[bool, bool, bool, bool]:
    return (chain.method == tree.method and chain.target == tree.target, chain.method == tree.method,
            chain.target == tree.target, (chain.method in LOOKUP_METHODS) == (tree.method in LOOKUP_METHODS))


def nearest_chain_preset(name: str) -> Preset:
    """The chain preset closest to preset `name`: the same drafter family and target if there is one,
    else the same family, else the same target (a model-based drafter before a lookup), else any;
    ties go to the first in the table."""
    p = PRESETS[name]
    return max((c for c in PRESETS.values() if c.shape == "chain" and c.name != name), key=lambda c: _closeness(p, c))


def shape_mismatch(preset_name: str, drafter_method: str, tree_branches: int) -> str | None:
    """The warning text when a chain drafter (tree_branches <= 1) gets a tree-measured preset, else None."""
    p = PRESETS.get(preset_name)
    if p is None or p.shape != "tree" or tree_branches > 1:
        return None
    c = nearest_chain_preset(preset_name)
    both, family, target, _ = _closeness(p, c)
    why = ("same drafter and target" if both else "same drafter family" if family else
           "same target" if target else "no chain preset shares its drafter or target")
    return (f"acceptance preset {p.name} was measured on a tree ({p.conditions}) but drafter {drafter_method} "
            f"drafts a chain, so its per-depth rates overstate the chain's acceptance; use the chain preset "
            f"{c.name} ({why}, measured on a chain)")


def k_extrapolation(preset_name: str, k_max: int) -> str | None:
    """The warning text when a preset measured at K = k drafts (a tau, per-position or AL(K)
    figure) is used at a larger K, else None. A per-token alpha (kind alpha) holds at any K."""
    p = PRESETS.get(preset_name)
    if p is None or p.kind == "alpha" or k_max <= p.k:
        return None
    return (f"acceptance preset {p.name} was measured at K={p.k} ({p.conditions}); at a larger K the positions "
            f"past {p.k} reuse position {p.k}'s rate, an extrapolation, not a measurement (a preset measured at the "
            f"K you run, or acceptance: {{model: trace, ...}} from your own engine, avoids it)")


def preset_model(name: object, field: str = "acceptance.name") -> IIDAcceptance | PerPositionAcceptance:
    """The acceptance model of a named preset (i.i.d. or per position), with .source set."""
    if name not in PRESETS:
        raise SpecsightInputError(field, name, closest_names(str(name), PRESETS))
    p = PRESETS[str(name)]
    a = p.alphas
    cite = f"{p.source}; {p.conditions}; {p.conversion}"
    model: IIDAcceptance | PerPositionAcceptance
    if len(a) == 1:
        model = IIDAcceptance(float(a[0]))
    else:
        model = PerPositionAcceptance(a)
    model.source = cite          # type: ignore[attr-defined]
    model.preset = p             # type: ignore[attr-defined]
    model.per_depth = p.shape == "tree"   # a tree's figure: do not apply the tree rule again
    return model
