"""Acceptance presets from published figures (the table in docs/reference/acceptance.md).

Each preset names its source and conditions. Figures come in three kinds, converted as stated:
  alpha   a per-token acceptance rate: used as i.i.d. alpha directly.
  tau     mean tokens emitted per verify round (accepted + 1) at K drafts (or tree depth K):
          converted to the i.i.d. alpha solving (1 - alpha^(K+1)) / (1 - alpha) = tau, so a chain
          of K drafts with that alpha reproduces tau. For trees this alpha is per depth (the tree's
          branches already folded in): do not apply the tree rule (spec_math.tree_depth_acceptance) on top of it.
  cumulative  P(position k accepted), k = 1..n: converted to conditional rates c_k / c_{k-1}.
Acceptance depends on task, temperature and context; a preset is a starting point, not a
measurement of your deployment.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .acceptance import IIDAcceptance, PerPositionAcceptance
from .errors import SpecsightInputError, closest_names

LEVIATHAN = "Leviathan et al. 2022, Fast Inference from Transformers via Speculative Decoding (arXiv 2211.17192)"
EAGLE3 = "Li et al. 2025, EAGLE-3 (arXiv 2503.01840), Table 1"
SPEC_BENCH = "Spec-Bench leaderboard (hemingkx/Spec-Bench, Leaderboard.md), Vicuna-7B-v1.3, greedy, A100"


@dataclass(frozen=True)
class Preset:
    name: str
    kind: str                      # alpha | tau | cumulative
    figure: tuple[float, ...]      # the published number(s)
    k: int                         # drafts / tree depth the figure was measured at (1 for alpha)
    conditions: str
    source: str
    conversion: str

    @property
    def alphas(self) -> np.ndarray:
        """Conditional per-position rates (one value for i.i.d. presets)."""
        if self.kind == "alpha":
            return np.array(self.figure[:1])
        if self.kind == "tau":
            return np.array([alpha_for_tau(self.figure[0], self.k)])
        c = np.asarray(self.figure)
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


def _tau(name, tau, k, conditions, source, k_note):
    return Preset(name, "tau", (tau,), k, conditions, source,
                  f"tau {tau} -> i.i.d. alpha solving (1-a^(K+1))/(1-a) = tau at K = {k} ({k_note})")


def _alpha(name, alpha, conditions, source):
    return Preset(name, "alpha", (alpha,), 1, conditions, source, "per-token alpha as published, used i.i.d.")


PRESETS: dict[str, Preset] = {p.name: p for p in [
    _alpha("t5-small-ende", 0.75, "T5-small draft, T5-XXL target, WMT EnDe, T=0", LEVIATHAN + ", Tables 2 and 4"),
    _alpha("t5-small-ende-t1", 0.62, "T5-small draft, T5-XXL target, WMT EnDe, T=1", LEVIATHAN + ", Tables 2 and 4"),
    _alpha("t5-base-ende", 0.80, "T5-base draft, T5-XXL target, WMT EnDe, T=0", LEVIATHAN + ", Tables 2 and 4"),
    _alpha("t5-large-ende", 0.82, "T5-large draft, T5-XXL target, WMT EnDe, T=0", LEVIATHAN + ", Tables 2 and 4"),
    _alpha("t5-small-cnndm", 0.65, "T5-small draft, T5-XXL target, CNN/DM, T=0", LEVIATHAN + ", Tables 2 and 4"),
    _alpha("bigram-t5xxl-ende", 0.2, "bigram draft (cost ~0), T5-XXL target, WMT EnDe", LEVIATHAN + ", Table 3"),
    _alpha("lamda-8b-137b", 0.75, "LaMDA 8B draft, LaMDA 137B target, T=0", LEVIATHAN + ", Table 3"),
    _tau("sps-vicuna-68m", 2.27, 4, "Vicuna-68M draft, Vicuna-13B target, MT-bench, T=0, batch 1", EAGLE3,
         "K = 4 assumed; the table does not state SpS's K"),
    _tau("medusa-vicuna-13b", 2.59, 4, "Medusa heads, Vicuna-13B, MT-bench, T=0, tree", EAGLE3,
         "depth 4 of Medusa's default mc_sim_7b_63 tree; per-depth alpha"),
    _tau("eagle-vicuna-13b", 3.98, 5, "EAGLE, Vicuna-13B, MT-bench, T=0, static tree", EAGLE3,
         "depth 5 of EAGLE's default tree; per-depth alpha"),
    _tau("eagle2-vicuna-13b", 4.83, 5, "EAGLE-2, Vicuna-13B, MT-bench, T=0, dynamic tree", EAGLE3,
         "depth 5, EAGLE-2's default; per-depth alpha"),
    _tau("eagle2-llama-3.1-8b-mtbench", 4.05, 5, "EAGLE-2, Llama-3.1-8B-Instruct, MT-bench, T=0, dynamic tree", EAGLE3,
         "depth 5, EAGLE-2's default; per-depth alpha"),
    _tau("eagle3-vicuna-13b", 6.65, 7, "EAGLE-3, Vicuna-13B, MT-bench, T=0, dynamic tree", EAGLE3,
         "depth 7, the EAGLE-3 code's default; per-depth alpha"),
    _tau("eagle3-vicuna-13b-t1", 5.42, 7, "EAGLE-3, Vicuna-13B, MT-bench, T=1, dynamic tree", EAGLE3,
         "depth 7, the EAGLE-3 code's default; per-depth alpha"),
    _tau("eagle3-llama-3.1-8b-mtbench", 6.13, 7, "EAGLE-3, Llama-3.1-8B-Instruct, MT-bench, T=0, dynamic tree", EAGLE3,
         "depth 7, the EAGLE-3 code's default; per-depth alpha"),
    _tau("eagle3-llama-3.3-70b-mtbench", 5.63, 7, "EAGLE-3, Llama-3.3-70B-Instruct, MT-bench, T=0, dynamic tree", EAGLE3,
         "depth 7, the EAGLE-3 code's default; per-depth alpha"),
    _tau("pld-vicuna-7b-specbench", 1.73, 10, "prompt lookup decoding, Vicuna-7B, Spec-Bench overall, greedy, A100",
         SPEC_BENCH, "K = 10, PLD's default num_pred_tokens; rounds without a match are folded into alpha"),
    _tau("medusa-vicuna-7b-specbench", 2.32, 4, "Medusa, Vicuna-7B, Spec-Bench overall, greedy, A100", SPEC_BENCH,
         "depth 4 of the mc_sim_7b_63 tree; per-depth alpha"),
    _tau("eagle-vicuna-7b-specbench", 3.61, 5, "EAGLE, Vicuna-7B, Spec-Bench overall, greedy, A100", SPEC_BENCH,
         "depth 5 of EAGLE's default tree; per-depth alpha"),
    _tau("sps-vicuna-7b-specbench", 2.28, 4, "SpS (Vicuna-68M draft), Vicuna-7B, Spec-Bench overall, greedy, A100",
         SPEC_BENCH, "K = 4 assumed"),
    Preset("deepseek-v3-mtp", "alpha", (0.875,), 1, "DeepSeek-V3, 1 MTP module (K=1), second-token acceptance 85-90 %",
           "DeepSeek-AI 2024, DeepSeek-V3 Technical Report (arXiv 2412.19437), section 5.4.3",
           "alpha = 0.875, the midpoint of 85-90 %; measured at K = 1 only (deeper positions repeat it, "
           "optimistic: see deepseek-v3-mtp-sglang-k3)"),
    _tau("deepseek-v3-mtp-sglang-k3", 2.18, 3, "DeepSeek-V3 MTP reused for 3 draft tokens, SGLang, 16xH200",
         "LMSYS blog 2025-07-17 (MTP in SGLang)", "K = 3 draft tokens"),
    _tau("deepseek-v3-mtp-sglang-k4", 2.44, 4, "DeepSeek-V3 MTP reused for 4 draft tokens, SGLang, 16xH200",
         "LMSYS blog 2025-07-17 (MTP in SGLang)", "K = 4 draft tokens"),
    _tau("glm-5-mtp", 2.76, 4, "GLM-5 MTP, 4 steps, private prompt set",
         "GLM-5 report (arXiv 2602.15763), Table 2", "K = 4 steps; 'accept length' read as tau (incl. the bonus token)"),
    _tau("qwen3-next-mtp-k3", 2.81, 3, "Qwen3-Next MTP, K=3, SPEED-Bench, batch 32, T=0 (coding 3.34, roleplay 2.09)",
         "SPEED-Bench (arXiv 2604.09557), Table 1", "K = 3; mean accept length read as tau"),
    Preset("minimax-m3-eagle3", "cumulative", (0.76, 0.56, 0.43), 3, "EAGLE-3 on MiniMax-M3, 1k-32k context, K=3",
           "vLLM blog 2026-07-13 (EAGLE-3 on AMD Instinct)",
           "cumulative acceptance 76/56/43 % at positions 1/2/3 -> conditional 0.76, 0.737, 0.768 "
           "(tau 2.75 vs the reported accept length 2.80)"),
    _alpha("magicdec-streamingllm", 0.84, "StreamingLLM-512 self-draft, Llama-2-7B-32K, PG-19, context 4k",
           "MagicDec blog (Infini-AI-Lab)"),
    _alpha("magicdec-streamingllm-100k", 0.79, "StreamingLLM-512 self-draft, Llama-2-7B-32K, PG-19, context 100k",
           "MagicDec blog (Infini-AI-Lab)"),
]}


def preset_model(name: object, field: str = "acceptance.name"):
    """The acceptance model of a named preset (i.i.d. or per position), with .source set."""
    if name not in PRESETS:
        raise SpecsightInputError(field, name, closest_names(str(name), PRESETS))
    p = PRESETS[str(name)]
    a = p.alphas
    cite = f"{p.source}; {p.conditions}; {p.conversion}"
    if len(a) == 1:
        model = IIDAcceptance(float(a[0]))
    else:
        model = PerPositionAcceptance(a)
    model.source = cite          # type: ignore[attr-defined]
    model.preset = p             # type: ignore[attr-defined]
    model.per_depth = "per-depth" in p.conversion   # a tree's figure: do not apply the tree rule again
    return model
