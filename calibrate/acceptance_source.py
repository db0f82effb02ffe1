"""Kernel-backed acceptance: draw target and draft distributions, run the exact kernel, count.

The simulator usually draws accept lengths from a closed-form model (i.i.d. alpha, per position,
traces). This source instead draws (p, q) pairs from a parametrised family and runs
calibrate.sampling.verify_chain on them, so accept lengths come from the real rejection rule.

The family (one independent draw per position and per sequence):

    g, h ~ N(0, I_V)                                  (float32, from the torch.Generator)
    target logits  z_p = s * g
    draft logits   z_q = s * (rho * g + sqrt(1 - rho^2) * h)
    p = softmax(z_p),  q = softmax(z_q),  draft token x ~ q

- overlap rho in [0, 1] is the correlation of the two logit vectors: rho = 1 gives q = p (every
  draft accepted), rho = 0 independent distributions of the same shape.
- sharpness s is the inverse temperature shared by both: s = 0 makes both uniform (alpha = 1
  whatever rho), larger s makes them peakier and disagreement costlier.

Because positions are i.i.d. draws, the per-position acceptance events are i.i.d. Bernoulli(alpha)
with alpha = E[sum_x min(p(x), q(x))] (Leviathan et al. 2022, section 3.1), so the number of
accepted drafts is min(Geometric, k) and E[tokens per round] = (1 - alpha^(k+1)) / (1 - alpha)
holds exactly (tests/test_sampling_acceptance.py checks it). Real models are not i.i.d. across
positions (acceptance decays with depth and varies per request); this source is a controlled
stand-in, not a model of any particular drafter.

torch is imported here at module level: import this module lazily (specsight/kernel_source.py does).
Outputs are numpy arrays.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from calibrate.sampling import verify_chain
from simulator.speculation.acceptance import ALPHA_SAMPLES, BISECTION_STEPS, OVERLAP_SAMPLES
from simulator.speculation.spec_math import expected_tokens_per_round

# inverse temperature s; at s = 3, alpha(rho = 0) is about 0.08 at V = 64 and 0.035 at V = 32000
# (Monte Carlo, 2000 draws), and alpha(rho = 1) = 1: most published alphas are reachable.
DEFAULT_SHARPNESS = 3.0
_CHUNK_ELEMENTS = 1 << 22  # float32 values per chunk of draws (16 MiB), bounds memory


def family_probs(g: torch.Tensor, h: torch.Tensor, overlap: float,
                 sharpness: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Target and draft probabilities from standard-normal draws.

    g: [..., V] shared component, h: [..., V] draft-only component -> p, q: [..., V] float32.
    """
    p = torch.softmax(sharpness * g, dim=-1)  # [..., V]
    draft_logits = sharpness * (overlap * g + math.sqrt(max(0.0, 1.0 - overlap * overlap)) * h)
    q = torch.softmax(draft_logits, dim=-1)  # [..., V]
    return p, q


def _alpha_draws(vocab_size: int, overlap: float, sharpness: float, num_samples: int,
                 seed: int) -> torch.Tensor:
    """sum_x min(p, q) for num_samples independent (p, q) pairs: [num_samples] float64.

    The same seed gives the same (g, h) draws for every overlap (common random numbers), so
    alpha(overlap) is a smooth deterministic function for bisection.
    """
    generator = torch.Generator().manual_seed(seed)
    rows = max(1, _CHUNK_ELEMENTS // (2 * vocab_size))
    out = []
    for start in range(0, num_samples, rows):
        n = min(rows, num_samples - start)
        g = torch.randn(n, vocab_size, generator=generator)  # [n, V]
        h = torch.randn(n, vocab_size, generator=generator)  # [n, V]
        p, q = family_probs(g, h, overlap, sharpness)
        out.append(torch.minimum(p, q).double().sum(dim=-1))  # [n]
    return torch.cat(out)  # [num_samples]


def _torch_generator(rng_or_generator: np.random.Generator | torch.Generator) -> torch.Generator:
    if isinstance(rng_or_generator, torch.Generator):
        return rng_or_generator
    if isinstance(rng_or_generator, np.random.Generator):
        # NOTE: one draw from the numpy stream seeds a CPU torch generator, so a simulator that
        # owns a numpy Generator keeps a single reproducible random source.
        return torch.Generator().manual_seed(int(rng_or_generator.integers(0, 2 ** 63 - 1)))
    raise ValueError(f"rng_or_generator must be a numpy.random.Generator or torch.Generator; "
                     f"got {type(rng_or_generator).__name__}")


@dataclass(frozen=True)
class KernelAcceptanceSource:
    """Accept lengths per verify round from the exact kernel on the family in the module docstring.

    vocab_size: V (tokens); overlap: rho in [0, 1]; k_max: the largest k that will be asked for;
    seed: seeds expected_alpha's Monte Carlo draws; sharpness: s, inverse temperature.
    """
    vocab_size: int
    overlap: float
    k_max: int
    seed: int = 0
    sharpness: float = DEFAULT_SHARPNESS

    def __post_init__(self) -> None:
        if not isinstance(self.vocab_size, int) or self.vocab_size < 2:
            raise ValueError(f"vocab_size={self.vocab_size!r}: must be an int >= 2")
        if not 0.0 <= float(self.overlap) <= 1.0:
            raise ValueError(f"overlap={self.overlap!r}: must lie in [0, 1]")
        if not isinstance(self.k_max, int) or self.k_max < 0:
            raise ValueError(f"k_max={self.k_max!r}: must be an int >= 0")
        if not math.isfinite(self.sharpness) or self.sharpness < 0:
            raise ValueError(f"sharpness={self.sharpness!r}: must be a finite number >= 0")

    @classmethod
    def for_alpha(cls, alpha: float, vocab_size: int, k_max: int, seed: int = 0,
                  sharpness: float = DEFAULT_SHARPNESS) -> KernelAcceptanceSource:
        """The source whose overlap gives expected_alpha() ~= alpha (see overlap_for_alpha)."""
        overlap = overlap_for_alpha(alpha, vocab_size, sharpness=sharpness, seed=seed)
        return cls(vocab_size=vocab_size, overlap=overlap, k_max=k_max, seed=seed, sharpness=sharpness)

    def sample_distributions(self, batch: int, positions: int, generator: torch.Generator,
                             ) -> tuple[torch.Tensor, torch.Tensor]:
        """(p, q) for `positions` i.i.d. positions: each [batch, positions, V] float32."""
        g = torch.randn(batch, positions, self.vocab_size, generator=generator)  # [B, P, V]
        h = torch.randn(batch, positions, self.vocab_size, generator=generator)  # [B, P, V]
        return family_probs(g, h, float(self.overlap), self.sharpness)

    def sample_accept_lengths(self, batch_size: int, k: int,
                              rng_or_generator: np.random.Generator | torch.Generator) -> np.ndarray:
        """Accepted draft counts (0..k) of batch_size independent verify rounds of k drafts.

        Each round draws k+1 i.i.d. (p, q) positions, x_k ~ q_k, and runs verify_chain; the count
        is num_emitted - 1. Returns numpy int64 [batch_size].
        """
        if not isinstance(k, (int, np.integer)) or not 0 <= k <= self.k_max:
            raise ValueError(f"k={k!r}: must be an int in 0..k_max = 0..{self.k_max}")
        if not isinstance(batch_size, (int, np.integer)) or batch_size < 0:
            raise ValueError(f"batch_size={batch_size!r}: must be an int >= 0")
        k, batch_size = int(k), int(batch_size)
        if k == 0 or batch_size == 0:
            return np.zeros(batch_size, dtype=np.int64)
        generator = _torch_generator(rng_or_generator)
        rows = max(1, _CHUNK_ELEMENTS // (2 * (k + 1) * self.vocab_size))
        counts = []
        for start in range(0, batch_size, rows):
            n = min(rows, batch_size - start)
            p, q = self.sample_distributions(n, k + 1, generator)  # [n, k+1, V] each
            draft_q = q[:, :k]  # [n, k, V] (position k is the bonus position: no draft)
            tokens = torch.multinomial(draft_q.reshape(n * k, -1), 1, generator=generator)  # [n*k, 1]
            _, num_emitted = verify_chain(p, draft_q, tokens.view(n, k), generator=generator)
            counts.append(num_emitted - 1)  # [n]
        return torch.cat(counts).numpy().astype(np.int64)

    @cached_property
    def _alpha_estimate(self) -> tuple[float, float]:
        draws = _alpha_draws(self.vocab_size, float(self.overlap), self.sharpness, ALPHA_SAMPLES, self.seed)
        return float(draws.mean()), float(draws.std() / math.sqrt(draws.numel()))

    def expected_alpha(self) -> float:
        """alpha = E[sum_x min(p(x), q(x))] by Monte Carlo (ALPHA_SAMPLES draws, seeded by seed)."""
        return self._alpha_estimate[0]

    def expected_alpha_stderr(self) -> float:
        """Standard error of expected_alpha()'s Monte Carlo estimate."""
        return self._alpha_estimate[1]

    def expected_tokens_per_round(self, k: int) -> float:
        """Accepted drafts + 1, in expectation: spec_math.expected_tokens_per_round at
        expected_alpha() (k + 1 at alpha = 1, where the closed form is 0 / 0)."""
        alpha = self.expected_alpha()
        return float(k + 1) if alpha >= 1.0 else expected_tokens_per_round(alpha, k)


def kernel_source(vocab_size: int, k_max: int, seed: int = 0, *, overlap: float | None = None,
                  alpha: float | None = None, sharpness: float | None = None) -> KernelAcceptanceSource:
    """The source of the simulator's `acceptance: {model: kernel}`, by overlap or by target alpha
    (exactly one); what simulator.speculation.acceptance.use_kernel_source takes."""
    s = DEFAULT_SHARPNESS if sharpness is None else sharpness
    if overlap is not None:
        return KernelAcceptanceSource(vocab_size, float(overlap), k_max, seed, s)
    return KernelAcceptanceSource.for_alpha(float(alpha), vocab_size, k_max, seed, s)  # type: ignore[arg-type]


def overlap_for_alpha(alpha: float, vocab_size: int, sharpness: float = DEFAULT_SHARPNESS,
                      seed: int = 0, num_samples: int = OVERLAP_SAMPLES, tol: float = 1e-4) -> float:
    """The overlap rho whose Monte Carlo alpha (num_samples draws, common random numbers)
    equals `alpha` within tol, by bisection on [0, 1].

    Raises ValueError when alpha is below what rho = 0 reaches at this sharpness and vocabulary
    (raise the sharpness) or outside [0, 1].
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha={alpha!r}: must lie in [0, 1]")

    def alpha_at(rho: float) -> float:
        return float(_alpha_draws(vocab_size, rho, sharpness, num_samples, seed).mean())

    low, high = 0.0, 1.0
    alpha_low = alpha_at(low)
    if alpha <= alpha_low:
        if alpha_low - alpha <= tol:
            return low
        raise ValueError(f"alpha={alpha!r}: below {alpha_low:.4f}, the alpha of independent draft and "
                         f"target (overlap 0) at sharpness {sharpness} and V = {vocab_size}; "
                         f"raise the sharpness")
    # NOTE: 40 halvings pin rho to 1e-12; the loop stops earlier once alpha is within tol.
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (low + high)
        value = alpha_at(mid)
        if abs(value - alpha) <= tol:
            return mid
        low, high = (mid, high) if value < alpha else (low, mid)
    return 0.5 * (low + high)
