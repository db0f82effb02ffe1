"""Speculation policies: how many drafts K to propose this iteration (0 = plain decode).

The engine calls, each iteration,
    k = policy.choose_k(batch_size, state)        # state: PolicyState
and after each speculative round (k > 0)
    policy.observe(k, accepted)                   # accepted: [B] int64 drafts accepted per sequence
`policy.k_max` bounds every K (the engine reserves KV lookahead for it); `reset()` starts a run.

Kinds (scenario `policy:` block, key `kind`; a bare string is the kind):
  static          K = the drafter's num_speculative_tokens (or `k`)
  off             K = 0
  batch_schedule  {schedule: [[max_batch, k], ...]}: K of the first row with max_batch >= batch,
                  0 past the last row (vLLM dynamic speculative decoding; TensorRT-LLM
                  draft_len_schedule)
  adaptive        {up = 0.8, down = 0.4, ema_decay = 0.8, k_min = 1, k_init = k_max}: an EMA of the
                  per-round acceptance ratio mean(accepted)/K with hysteresis (SGLang-style)
  goodput         {prior_strength = 10}: the K maximising expected emitted tokens per second
                  (SmartSpec-style), from online per-position acceptance and the engine's price
                  of this iteration at each K (prefill chunks in the pass, drafter catch-up)
  vllm_dynamic, sglang_adaptive, trtllm_schedule
                  the engines' own rules, each under its own engine.kind (simulator/speculation/engine_policies.py)
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .spec_math import expected_tokens_by_k

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

# kind -> engine.kind
ENGINE_RULES = {"vllm_dynamic": "vllm", "sglang_adaptive": "sglang", "trtllm_schedule": "trtllm"}
KINDS = ("static", "off", "batch_schedule", "adaptive", "goodput") + tuple(ENGINE_RULES)


@dataclass(frozen=True)
class PolicyState:
    """What the engine tells a policy each iteration."""
    round_time_s: Callable[[int, int], float] | None = None   # (batch, k) -> seconds of one decode round
    mean_context: float = 0.0                                  # tokens cached per running sequence
    num_waiting: int = 0                                       # requests queued, not yet admitted
    now_s: float = 0.0                                         # simulated time
    # expected tokens per sequence per round [k_max + 1] -> three [k_max + 1] arrays of seconds at
    # each K: this iteration (prefill chunks sharing the pass included), a decode round on its own,
    # the drafter's one-off catch-up (k_choice.py: Replica._iteration_s)
    iteration_s: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
    remaining_tokens: float = math.inf                         # tokens a running sequence still has to emit (estimate)
    # request counts (policies that declare reads_request_counts): requests scheduled in the
    # previous iteration (decode and prefill chunks), and requests the replica holds (decoding,
    # in prefill, waiting; at most max_num_seqs)
    scheduled_requests: int = 0
    active_requests: int = 0


class Policy:
    """Base policy: fixed K, ignores observations.

    A policy declares what it needs from the replica (the replica reads these, never the type):
      speculates       False: K is 0 whatever the state (the replica never asks; the deployment
                       loads no drafter: simulator/scenario/deployment.py, drafter_loaded)
      k_by_batch       choose_k reads the batch size and nothing else, so the replica asks once per
                       batch size at start-up and may run decode rounds in compiled code
      observes_rounds  observe() wants every speculative round's accepted drafts
      prices_rounds    choose_k reads the full PolicyState, with the replica's price of this
                       iteration at each K (iteration_s); without it, state carries round_time_s only
      reads_request_counts  choose_k reads state.scheduled_requests and state.active_requests
      observes_plain_rounds observe_plain() wants every plain (K = 0) decode round's batch size
      observes_finishes     observe_finish() wants every finished request's output tokens and rounds
      reserves_k_max   KV lookahead is reserved for k_max drafts whatever K a round proposes
    A subclass that changes what choose_k or observe read must declare it again."""
    kind = "base"
    speculates = True
    k_by_batch = False
    observes_rounds = False
    prices_rounds = False
    reads_request_counts = False
    observes_plain_rounds = False
    observes_finishes = False
    reserves_k_max = False

    def __init__(self, k_max: int):
        self.k_max = int(k_max)

    def choose_k(self, batch_size: int, state: PolicyState) -> int:
        raise NotImplementedError

    def observe(self, k: int, accepted: np.ndarray) -> None:
        """Per-sequence accepted drafts ([B] int64, 0..k) of a round that proposed k."""

    def observe_plain(self, batch_size: int) -> None:
        """A plain (K = 0) decode round of batch_size sequences."""

    def observe_finish(self, output_tokens: int, decode_rounds: int) -> None:
        """A request finished: its output tokens and the decode rounds it took part in."""

    def reset(self) -> None:
        """Forget online state before a new run."""


class StaticPolicy(Policy):
    kind = "static"
    k_by_batch = True

    def __init__(self, k_max: int, k: int | None = None):
        super().__init__(k_max)
        self.k = self.k_max if k is None else int(k)
        self.speculates = self.k > 0       # k 0: plain decoding, no drafter loaded (scenario.deployment.drafter_loaded)

    def choose_k(self, batch_size: int, state: PolicyState) -> int:
        return self.k


class OffPolicy(Policy):
    kind = "off"
    speculates = False
    k_by_batch = True

    def choose_k(self, batch_size: int, state: PolicyState) -> int:
        return 0


class BatchSchedulePolicy(Policy):
    """rows: ((max_batch, k), ...) with max_batch strictly increasing."""
    kind = "batch_schedule"
    k_by_batch = True

    def __init__(self, k_max: int, rows: Iterable[tuple[int, int]]):
        super().__init__(k_max)
        self.rows = tuple((int(b), int(k)) for b, k in rows)
        self._limits = np.array([b for b, _ in self.rows])
        self.speculates = any(k > 0 for _, k in self.rows)

    def choose_k(self, batch_size: int, state: PolicyState) -> int:
        i = int(np.searchsorted(self._limits, batch_size, side="left"))   # first limit >= batch
        return self.rows[i][1] if i < len(self.rows) else 0


class AdaptivePolicy(Policy):
    """Acceptance-adaptive K with hysteresis (in the spirit of SGLang's adaptive speculation).

    After each round: r = mean(accepted) / k; ema = r on the first round, else
    ema = ema_decay * ema + (1 - ema_decay) * r. Then K += 1 if ema > up, K -= 1 if ema < down,
    clamped to [k_min, k_max]; between down and up K holds (the hysteresis band). k_min >= 1:
    at K = 0 there would be no observations to climb back from (use batch_schedule to switch off).
    """
    kind = "adaptive"
    observes_rounds = True

    def __init__(self, k_max: int, up: float = 0.8, down: float = 0.4, ema_decay: float = 0.8,
                 k_min: int = 1, k_init: int | None = None):
        super().__init__(k_max)
        self.up, self.down, self.ema_decay, self.k_min = up, down, ema_decay, k_min
        self.k_init = self.k_max if k_init is None else int(k_init)
        self.reset()

    def reset(self) -> None:
        self.k, self.ema = self.k_init, None   # type: ignore[assignment]

    def choose_k(self, batch_size: int, state: PolicyState) -> int:
        return self.k

    def observe(self, k: int, accepted: np.ndarray) -> None:
        if k <= 0 or len(accepted) == 0:
            return
        r = float(np.mean(accepted)) / k
        self.ema = r if self.ema is None else self.ema_decay * self.ema + (1.0 - self.ema_decay) * r
        if self.ema > self.up:
            self.k = min(self.k + 1, self.k_max)
        elif self.ema < self.down:
            self.k = max(self.k - 1, self.k_min)


class GoodputPolicy(Policy):
    """Pick K in 0..k_max by expected tokens per second of target and drafter time (SmartSpec-style).

    alpha_hat_j = (prior_strength * prior_j + accepted_j) / (prior_strength + attempts_j), where
    attempts_j counts sequences whose round reached position j (k >= j and accepted >= j - 1) and
    accepted_j those that accepted it (accepted >= j). prior_j comes from the acceptance model's
    alphas(k_max) (0.5 each when none is given). E_K = 1 + sum_{i<=K} prod_{j<=i} alpha_hat_j tokens
    per sequence per round; B = batch_size.

    With only `state.round_time_s` (unit tests, other callers): K = argmax B E_K / round_time_s(B, K);
    ties go to the smaller K.

    With `state.iteration_s` (the engine), K is priced by what it adds to the iteration the replica
    will actually run (same cost-model calls as `Replica._schedule`):

        K = argmax_K  v B E_K - cost_K,     cost_K = pass_K + once_K min(1, E_K / R)
        v = min_K decode_K / (B E_K)        (seconds per token of the decode batch on its own)

      * pass_K: drafter + ONE fused target pass over B x (K + 1) verify positions AND this
        iteration's prefill chunks. The prefill makes the pass dearer at every K alike, and pushes
        it to the compute roof, where each extra verify position costs its FLOPs instead of riding
        on the one weight read that makes a decode-only round memory-bound: the marginal cost of K
        is LARGER than a decode-only estimate says (Llama-3.1-8B on H100, batch 64 at 1k context:
        23-24 us per extra verify position with 1k-8k prefill tokens in the pass, 11.5 us in a
        decode-only round). Maximising B E_K / pass_K instead would let the prefill's time
        subsidise K: a large fixed cost in the denominator favours any K that adds tokens. So the
        prefill's time, the same for every K, drops out of argmax(v B E_K - pass_K), and v, the
        price of a token, is what the decode batch pays per token without prefill at its best K
        (for an iteration without prefill, pass_K = decode_K and the rule reduces to
        argmax B E_K / decode_K). Chunks a larger K pushes out of the token budget are priced as
        if they stayed in the pass: they cost about that much in the next (compute-bound) pass.
      * once_K: the drafter's catch-up beyond the recurring part. A draft model ingests every
        token emitted while it did not run (rounds at K = 0) and every prompt new to it. A round at
        K leaves about B E_K tokens for the next round's drafter: that part is in pass_K and
        decode_K. The rest is paid once and buys speculation for the R tokens each sequence still
        has to emit (`state.remaining_tokens`), so a round emitting E_K of them carries E_K / R of
        it. This is the horizon comparison "switch on now and speculate for the rest of the
        output" (once + (R / E_K) t_K) against "stay at K = 0" (R t_0). Charging the whole
        catch-up to the switching round instead locks speculation off: the longer K stays 0, the
        larger the catch-up, the dearer switching on looks, even where speculation pays
        (tests/test_phenomena.py).
    """
    kind = "goodput"
    observes_rounds = True
    prices_rounds = True

    def __init__(self, k_max: int, prior_alphas: Sequence[float] | np.ndarray | None = None,
                 prior_strength: float = 10.0):
        super().__init__(k_max)
        prior = np.full(self.k_max, 0.5) if prior_alphas is None else np.asarray(prior_alphas, dtype=float)
        if len(prior) < self.k_max:
            raise ValueError(f"prior_alphas has {len(prior)} rates; need k_max = {self.k_max}")
        self.prior = prior[: self.k_max]
        self.prior_strength = float(prior_strength)
        self.reset()

    def reset(self) -> None:
        self.attempts = np.zeros(self.k_max)     # [k_max] per position
        self.successes = np.zeros(self.k_max)    # [k_max] per position
        self._tokens: np.ndarray | None = None   # expected_tokens(), until the next observation

    def alpha_hat(self) -> np.ndarray:
        """[k_max] current conditional acceptance estimates."""
        return (self.prior_strength * self.prior + self.successes) / (self.prior_strength + self.attempts)

    def observe(self, k: int, accepted: np.ndarray) -> None:
        if k <= 0 or len(accepted) == 0:
            return
        acc = np.asarray(accepted, dtype=np.int64)                            # [B] in 0..k
        at_least = np.cumsum(np.bincount(acc, minlength=k + 1)[::-1])[::-1]   # [k+1]: #(acc >= i)
        self.attempts[:k] += at_least[:k]          # position j reached iff acc >= j - 1
        self.successes[:k] += at_least[1: k + 1]   # position j accepted iff acc >= j
        self._tokens = None

    def expected_tokens(self) -> np.ndarray:
        """[k_max + 1] E_K: expected tokens a round at K emits per sequence (1 at K = 0)."""
        if self._tokens is None:
            self._tokens = expected_tokens_by_k(self.alpha_hat())
        return self._tokens

    def expected_rates(self, batch_size: int, state: PolicyState) -> np.ndarray:
        """[k_max + 1] expected tokens per second of a decode round on its own, K = 0..k_max."""
        tokens = self.expected_tokens()
        if state.iteration_s is not None:
            return batch_size * tokens / state.iteration_s(tokens)[1]
        if state.round_time_s is None:
            raise ValueError("goodput policy needs state.iteration_s or state.round_time_s(batch, k) from the engine")
        return batch_size * tokens / np.array([state.round_time_s(batch_size, k) for k in range(self.k_max + 1)])

    def net_saving_s(self, batch_size: int, state: PolicyState) -> np.ndarray:
        """[k_max + 1] seconds: value x batch x E_K - cost_K for K = 0..k_max (needs state.iteration_s)."""
        tokens = self.expected_tokens()
        pass_s, decode_s, once_s = state.iteration_s(tokens)     # type: ignore[misc]
        cost = pass_s + once_s * np.minimum(1.0, tokens / max(state.remaining_tokens, 1.0))
        value = float(np.min(decode_s / (batch_size * tokens)))   # s per token, decode batch alone at its best K
        return batch_size * tokens * value - cost

    def choose_k(self, batch_size: int, state: PolicyState) -> int:
        if state.iteration_s is not None:
            return int(np.argmax(self.net_saving_s(batch_size, state)))
        return int(np.argmax(self.expected_rates(batch_size, state)))   # first max = smallest K
