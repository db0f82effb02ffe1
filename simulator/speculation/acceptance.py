"""Acceptance models: how many of a round's K drafts the target accepts, per sequence.

Terms (Leviathan et al. 2022; the README's "Acceptance" section): alpha_k is the conditional acceptance of draft
position k given positions 1..k-1 were accepted; a round accepts the longest accepted prefix, so
P(>= k accepted) = prod_{j<=k} alpha_j and E[tokens per round] = 1 + sum_k prod_{j<=k} alpha_j
(the +1 is the recovered or bonus token).

Every model has the same interface (`AcceptanceModel`):
    bind(num_requests, rng)          once per run (e.g. per-request alphas for `beta`)
    sample(req_idx, k, rng)          accepted drafts (0..k) for each sequence of this round
    alphas(k)                        the population's conditional rates alpha_1..alpha_k
    mean_alpha                       one summary rate (reports, analytics)

Models (scenario `acceptance:` block, key `model`):
    iid           {alpha}
    per_position  {alphas: [a1, a2, ...]}          beyond the list the last value repeats
    beta          {alpha, concentration}           per request alpha ~ Beta(alpha c, (1-alpha) c)
    trace         {path, k?, counters?}            recorded accept lengths or vLLM counters
    kernel        {vocab_size, overlap | alpha, seed?, sharpness?}
    preset        {name}                           published figures (acceptance_presets.py)
Shorthands: a number is `iid`; a string is a preset name.
Tree drafters: the run (simulator/run/) wraps the model in `tree_acceptance(model, branches)`, so a depth is accepted
if any of its branches is (spec_math.tree_depth_acceptance, per request for beta); models whose figures are
already per depth (`per_depth`: tree presets) are used as they are.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..common.errors import SpecsightInputError, require_int
from .spec_math import expected_tokens, tree_depth_acceptance

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

MODELS = ("iid", "per_position", "beta", "trace", "kernel", "preset")


def sample_prefix_accepts(rates: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Accepted-prefix lengths for conditional rates.

    rates: [B, k] per-sequence conditional acceptance of positions 1..k -> [B] int64 in 0..k.
    One uniform per position; the count is the leading run of (u < rate).
    """
    if rates.ndim != 2:
        raise ValueError(f"rates must be [B, k]; got shape {rates.shape}")
    u = rng.random(rates.shape)                              # [B, k] float64 in [0, 1)
    return np.cumprod(u < rates, axis=1).sum(axis=1).astype(np.int64)   # [B]


class PrefixBlockSampler:
    """Draws, in blocks, exactly what consecutive sample_prefix_accepts calls draw for rates shared
    by every sequence (the engine's fast path: a slice per round instead of three numpy calls).

    take(b, k) returns the [b] tokens emitted (accepted + 1) that
    1 + sample_prefix_accepts(broadcast(alphas(k), (b, k)), rng) would return, and their sum. The
    rows of one block of uniforms ([rows, k]) are handed out in order; when K changes, or the block
    has too few rows left, the generator is rewound to just after the rows handed out
    (bit_generator.state, then advance(rows x k): one 64-bit draw per float64 uniform), so the
    stream is always where one draw per round would have left it. Blocks double while K holds
    (64 .. 16,384 rows). The histogram of accept lengths is tallied per block (`counts()`).
    """
    MIN_ROWS, MAX_ROWS = 64, 16384

    def __init__(self, alphas: Callable[[int], np.ndarray], rng: np.random.Generator, k_max: int):
        self.alphas, self.rng, self.bitgen = alphas, rng, rng.bit_generator   # alphas: k -> [k] rates
        self.hist = np.zeros((k_max + 1, k_max + 1), dtype=np.int64)          # [k, accepted] rounds
        self.em: np.ndarray | None = None       # [rows] tokens emitted per row of the current block
        self.cs: list[int] = [0]                # prefix sums of em
        self.k = self.rows = self.pos = self.tallied = 0
        self.next_rows = self.MIN_ROWS
        self.state0: dict | None = None         # the generator's state before the current block

    @staticmethod
    def supports(rng: np.random.Generator) -> bool:
        return hasattr(rng.bit_generator, "advance")

    def take(self, b: int, k: int) -> tuple[np.ndarray, int]:
        """([b] int64 tokens emitted, read-only view; their sum) for b sequences proposing k drafts."""
        pos = self.pos
        if k != self.k or pos + b > self.rows:
            self._refill(b, k)
            pos = 0
        end = self.pos = pos + b
        return self.em[pos:end], self.cs[end] - self.cs[pos]   # type: ignore[index]

    def counts(self) -> np.ndarray:
        """[k_max + 1, k_max + 1] int64 rounds by K and accepted drafts, for the rows handed out."""
        self._tally()
        return self.hist

    def _tally(self) -> None:
        if self.em is not None and self.tallied < self.pos:
            k = self.k
            self.hist[k, : k + 1] += np.bincount(self.em[self.tallied: self.pos] - 1, minlength=k + 1)
            self.tallied = self.pos

    def _refill(self, b: int, k: int) -> None:
        same_k = self.em is not None and k == self.k
        if self.em is not None:
            self._tally()
            if self.pos < self.rows:           # rewind to just after the rows handed out
                self.bitgen.state = self.state0
                self.bitgen.advance(self.pos * self.k)
        self.next_rows = min(2 * self.next_rows, self.MAX_ROWS) if same_k else self.MIN_ROWS
        rows = max(self.next_rows, b)
        rates = np.asarray(self.alphas(k), dtype=np.float64)                 # [k]
        self.state0 = self.bitgen.state
        u = self.rng.random((rows, k))                                        # [rows, k]
        ok = np.zeros((rows, k + 1), dtype=bool)          # last column False: ends an all-accepted row
        np.less(u, rates, out=ok[:, :k])
        em = ok.argmin(axis=1)                            # accepted = leading run of (u < rate)
        em += 1
        self.em, self.k, self.rows, self.pos, self.tallied = em, k, rows, 0, 0
        self.cs = [0] + np.cumsum(em).tolist()


def _extend(alphas: np.ndarray, k: int) -> np.ndarray:
    """alphas[:k], repeating the last value when k exceeds its length."""
    if k <= len(alphas):
        return alphas[:k].copy()
    return np.concatenate([alphas, np.full(k - len(alphas), alphas[-1])])


class AcceptanceModel:
    """Base: conditional per-position rates shared by all requests (subclasses override)."""
    name = "base"
    per_depth = False    # True when the rates already fold in a tree's branches (tree presets)
    per_request = False  # True when requests have their own rates (request_rates differs from alphas)

    @property
    def is_population(self) -> bool:
        """True when sample() draws from alphas(k) for every sequence (the engine's fast path)."""
        return not self.per_request and type(self).sample is AcceptanceModel.sample

    def bind(self, num_requests: int, rng: np.random.Generator) -> AcceptanceModel:
        return self

    def alphas(self, k: int) -> np.ndarray:
        raise NotImplementedError

    @property
    def mean_alpha(self) -> float:
        return float(self.alphas(1)[0])

    def sample(self, req_idx: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
        """[B] int64 accepted drafts (0..k) for the sequences req_idx ([B] int64) this round."""
        req_idx = np.asarray(req_idx, dtype=np.int64)
        if k <= 0 or req_idx.size == 0:
            return np.zeros(req_idx.size, dtype=np.int64)
        return sample_prefix_accepts(self.request_rates(req_idx, k), rng)

    def request_rates(self, req_idx: np.ndarray, k: int) -> np.ndarray:
        """[B, k] conditional rates of positions 1..k for the requests req_idx ([B] int64)."""
        return np.broadcast_to(self.alphas(k), (req_idx.size, k))

    def expected_tokens(self, k: int) -> float:
        return expected_tokens(self.alphas(k)) if k > 0 else 1.0


class IIDAcceptance(AcceptanceModel):
    """Every position accepted independently with probability alpha."""
    name = "iid"

    def __init__(self, alpha: float):
        self.alpha = float(alpha)

    def alphas(self, k: int) -> np.ndarray:
        return np.full(k, self.alpha)

    @property
    def mean_alpha(self) -> float:
        return self.alpha

    def __repr__(self) -> str:
        return f"IIDAcceptance(alpha={self.alpha})"


class PerPositionAcceptance(AcceptanceModel):
    """Conditional rates alpha_1..alpha_n; positions past n reuse alpha_n."""
    name = "per_position"

    def __init__(self, alphas: Sequence[float] | np.ndarray, source: str = ""):
        self.rates = np.asarray(alphas, dtype=float)
        self.source = source

    def alphas(self, k: int) -> np.ndarray:
        return _extend(self.rates, k)

    @property
    def mean_alpha(self) -> float:
        """Mean of the listed conditional rates (unweighted)."""
        return float(self.rates.mean())

    def __repr__(self) -> str:
        return f"PerPositionAcceptance(alphas={self.rates.tolist()})"


class BetaAcceptance(AcceptanceModel):
    """Per-request heterogeneity: request r draws alpha_r ~ Beta(a, b) with a = alpha c,
    b = (1 - alpha) c at bind(); its positions are then i.i.d. Bernoulli(alpha_r).

    Population conditional rate of position k: E[A^k] / E[A^(k-1)] = (a + k - 1) / (a + b + k - 1)
    (Beta moments), rising with k because requests that survive longer have higher alpha."""
    name = "beta"
    per_request = True

    def __init__(self, alpha: float, concentration: float):
        self.alpha, self.concentration = float(alpha), float(concentration)
        self.a = self.alpha * self.concentration
        self.b = (1.0 - self.alpha) * self.concentration
        self.request_alpha: np.ndarray | None = None   # [num_requests] after bind

    def bind(self, num_requests: int, rng: np.random.Generator) -> BetaAcceptance:
        self.request_alpha = rng.beta(self.a, self.b, size=int(num_requests))
        return self

    def alphas(self, k: int) -> np.ndarray:
        j = np.arange(k, dtype=float)
        return (self.a + j) / (self.a + self.b + j)

    @property
    def mean_alpha(self) -> float:
        return self.alpha

    def request_rates(self, req_idx: np.ndarray, k: int) -> np.ndarray:
        if self.request_alpha is None:
            raise RuntimeError("BetaAcceptance.bind(num_requests, rng) must be called before sample()")
        return np.broadcast_to(self.request_alpha[req_idx][:, None], (req_idx.size, k))   # [B, k]

    def __repr__(self) -> str:
        return f"BetaAcceptance(alpha={self.alpha}, concentration={self.concentration})"


# The kernel's Monte Carlo set-up (calibrate/acceptance_source.py uses these): the work estimate counts them.
ALPHA_SAMPLES = 50_000     # (p, q) draws behind expected_alpha: standard error ~1e-3
OVERLAP_SAMPLES = 20_000   # draws per bisection step of overlap_for_alpha
BISECTION_STEPS = 40       # its halvings at most (rho to 1e-12; it stops once alpha is within tol)

class KernelAcceptance(AcceptanceModel):
    """Accept lengths from the exact speculative-sampling kernel on synthetic target/draft
    distributions. Positions are i.i.d. there, so alphas(k) repeats expected_alpha().

    The kernel is calibrate's (calibrate.acceptance_source, torch), above the simulator in the
    layer order (docs/layout.md): the layer that runs scenarios hands its factory over with
    `use_kernel_source` (specsight does, in specsight/kernel_source.py), and a kernel scenario
    loaded without one is refused by name."""
    name = "kernel"
    # factory(vocab_size, k_max, seed, overlap=, alpha=, sharpness=) -> a source with expected_alpha()
    # and sample_accept_lengths(n, k, rng): calibrate.acceptance_source.kernel_source
    source_factory: Callable[..., Any] | None = None

    def __init__(self, vocab_size: int, k_max: int, overlap: float | None = None,
                 alpha: float | None = None, seed: int = 0, sharpness: float | None = None):
        self.vocab_size, self.k_max, self.seed = vocab_size, k_max, seed
        self.overlap, self.target_alpha, self.sharpness = overlap, alpha, sharpness
        self._source: Any = None

    @property
    def source(self) -> Any:
        if self._source is None:
            factory = KernelAcceptance.source_factory
            if factory is None:
                raise SpecsightInputError("acceptance.model", "kernel", "the exact sampling kernel is calibrate's "
                                          "(torch), which the simulator does not import: run it through specsight, "
                                          "or first call simulator.speculation.acceptance.use_kernel_source("
                                          "calibrate.acceptance_source.kernel_source)")
            self._source = factory(self.vocab_size, self.k_max, self.seed, overlap=self.overlap,
                                   alpha=self.target_alpha, sharpness=self.sharpness)
        return self._source

    def setup_elements(self) -> float:
        """Probabilities drawn before the first round (2 x vocab_size per (p, q) pair): the Monte
        Carlo alpha, and for a target alpha the bisection for its overlap (at most, every step)."""
        pairs = ALPHA_SAMPLES + (0 if self.overlap is not None else (BISECTION_STEPS + 1) * OVERLAP_SAMPLES)
        return 2.0 * pairs * self.vocab_size

    def alphas(self, k: int) -> np.ndarray:
        return np.full(k, self.source.expected_alpha())

    @property
    def mean_alpha(self) -> float:
        return float(self.source.expected_alpha())

    def sample(self, req_idx: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
        n = int(np.asarray(req_idx).size)
        if k > self.k_max:
            raise ValueError(f"k={k} exceeds the kernel source's k_max={self.k_max}")
        return np.asarray(self.source.sample_accept_lengths(n, int(k), rng), dtype=np.int64)


def use_kernel_source(factory: Callable[..., Any] | None) -> None:
    """Where `acceptance: {model: kernel}` gets its kernel: KernelAcceptance.source_factory (None: none)."""
    KernelAcceptance.source_factory = factory


class TreeAcceptance(AcceptanceModel):
    """Per-depth acceptance of a tree drafter with `branches` candidates per depth, built from a
    per-token model: a depth is accepted if any branch is, 1 - (1 - alpha)^b, applied to each
    request's own rates (beta) or to the population's (the others; kernel: its i.i.d. alpha).
    Use `tree_acceptance()`, which leaves per-depth figures (tree presets) alone."""
    name = "tree"
    per_depth = True

    def __init__(self, base: AcceptanceModel, branches: int):
        self.base, self.branches = base, require_int("drafter.tree_branches", branches, lo=1)
        self.per_request = base.per_request
        self.source = getattr(base, "source", "")

    def bind(self, num_requests: int, rng: np.random.Generator) -> TreeAcceptance:
        self.base = self.base.bind(num_requests, rng)
        return self

    def alphas(self, k: int) -> np.ndarray:
        """Population per-depth rates (for beta: of the population's per-token rates, an
        approximation used only for policy priors and reports; sampling uses each request's)."""
        return tree_depth_acceptance(self.base.alphas(k), self.branches)

    def request_rates(self, req_idx: np.ndarray, k: int) -> np.ndarray:
        return tree_depth_acceptance(self.base.request_rates(req_idx, k), self.branches)

    def __repr__(self) -> str:
        return f"TreeAcceptance({self.base!r}, branches={self.branches})"


def tree_acceptance(model: AcceptanceModel, branches: int) -> AcceptanceModel:
    """The acceptance a tree drafter with `branches` candidates per depth sees. Models whose rates
    are already per depth (tree presets: a published accept length of a tree already counts a
    depth as accepted when any branch is) are returned unchanged, as is everything at branches 1."""
    if branches <= 1 or model.per_depth:
        return model
    return TreeAcceptance(model, branches)
