"""The exact speculative sampling kernel: verify drafted tokens against the target model.

One verify round (Leviathan et al. 2022, "Fast Inference from Transformers via Speculative
Decoding", arXiv 2211.17192, Algorithm 1 and Theorem 1; Chen et al. 2023, "Accelerating Large
Language Model Decoding with Speculative Sampling", arXiv 2302.01318, Algorithm 2):

    for k = 0 .. K-1:   accept draft token x_k with probability min(1, p_k(x_k) / q_k(x_k))
    at the first rejection k:  emit one token drawn from norm((p_k - q_k)+), then stop
    if all K are accepted:     emit one token drawn from p_K

Terms (as in vLLM's rejection sampler):
- accepted: a draft token that passed the test above; the accepted tokens form a prefix.
- recovered: the token drawn from the normalised residual norm((p_k - q_k)+) at the first rejection.
- bonus: the extra token drawn from p_K (the target's distribution after the last draft) when
  every draft token was accepted.
A round therefore emits num_accepted + 1 tokens (1 .. K+1).

"Exact" means distribution equality: whatever q is, every emitted token is distributed as the
target's p given the tokens before it (Theorem 1). It does not mean bitwise equality with plain
sampling, or across batch shapes: the uniforms are drawn as one [B, K+1] block, so the same
generator state gives other tokens when B or K changes.

Conventions. target_probs[:, k] is p_k, the target's next-token distribution given the prefix and
draft tokens x_0..x_{k-1}; draft_probs[:, k] is q_k, the distribution x_k was drawn from.
Probabilities may be float32, float16, bfloat16 (or float64); arithmetic is float32 on the
[B, V] rows and float64 for the acceptance test and the cumulative sums. Randomness comes only
from the `generator` argument: one float64 uniform per draft position (the acceptance test) and
one per sequence (the inverse-CDF draw of the recovered or bonus token).

Data flow of `verify_chain` (no [B, K, V] temporary, no Python loop over batch or positions):
gather p_k(x_k), q_k(x_k) ([B, K]) -> accept mask -> num_accepted ([B]) -> the ONE row per sequence
that is sampled (residual at the first rejection, or p at the bonus position; [B, V]) -> inverse
CDF with one uniform per sequence. Only B*(2V + 2K) probabilities are read, not B*(2K+1)*V.
calibrate/sampling_fast.py runs the same algorithm with a two-level inverse CDF (block sums,
then one block) under torch.compile and optionally a CUDA graph, so the sampled rows are read
once and no [B, V] tensor is written: the GPU path (benchmarks/bench_sampling.py).

The slow scalar reference in sampling_reference.py consumes the same uniforms as
`_verify_chain_core` and gives identical tokens (tests/test_sampling.py).

The other verifiers share this module's input checks and pieces: `verify_greedy` (temperature 0)
below, exact tree verification in calibrate/sampling_tree.py, and Medusa-2's typical acceptance
(not distribution-preserving) in calibrate/sampling_typical.py.
"""
from __future__ import annotations

import torch

# NOTE: the sampled row is mixed with 2^-64 * p so that a numerically empty residual (p <= q
# everywhere, e.g. p == q up to rounding) falls back to p without a data-dependent branch or a
# host sync. For a non-empty residual the mixture moves about 2^-64 (5e-20) of probability
# mass, far below the float32 rounding of the inputs; 2^-64 is a power of two, so the product is
# exact (no rounding difference between fused and unfused code) for p >= 2^-62.
FALLBACK_WEIGHT = 2.0 ** -64

_PROB_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
_INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


# ---------------------------------------------------------------------------------------------
# Input checks (shapes and dtypes up front; values only on CPU, where checking needs no sync)
# ---------------------------------------------------------------------------------------------

def _shape(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def _check_probs(name: str, t: torch.Tensor, layout: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape {layout}; got {type(t).__name__}")
    if t.ndim != 3:
        raise ValueError(f"{name} must be 3-D {layout}; got shape {_shape(t)}")
    if t.dtype not in _PROB_DTYPES:
        raise ValueError(f"{name} must be float32, float16, bfloat16 or float64; got {t.dtype}")


def _check_tokens(name: str, t: torch.Tensor, batch: int, width: int, vocab: int, layout: str) -> None:
    if not isinstance(t, torch.Tensor) or t.ndim != 2 or _shape(t) != (batch, width):
        got = _shape(t) if isinstance(t, torch.Tensor) else type(t).__name__
        raise ValueError(f"{name} must have shape {layout} = ({batch}, {width}); got {got}")
    if t.dtype != torch.int64:
        raise ValueError(f"{name} must be int64 (token ids); got {t.dtype}")
    if t.device.type == "cpu" and t.numel() and (int(t.min()) < 0 or int(t.max()) >= vocab):
        raise ValueError(f"{name} holds token ids outside 0..{vocab - 1} (V = {vocab})")


def _normalise_num_draft(num_draft: torch.Tensor | None, batch: int, k: int,
                         device: torch.device) -> torch.Tensor:
    """num_draft as int64 [B] on `device` (None -> all K drafts are real)."""
    if num_draft is None:
        return torch.full((batch,), k, dtype=torch.int64, device=device)  # [B]
    if not isinstance(num_draft, torch.Tensor) or num_draft.ndim != 1 or num_draft.shape[0] != batch:
        got = _shape(num_draft) if isinstance(num_draft, torch.Tensor) else type(num_draft).__name__
        raise ValueError(f"num_draft must have shape [B] = ({batch},); got {got}")
    if num_draft.dtype not in _INT_DTYPES:
        raise ValueError(f"num_draft must be an integer tensor; got {num_draft.dtype}")
    if num_draft.device.type == "cpu" and batch and (int(num_draft.min()) < 0 or int(num_draft.max()) > k):
        raise ValueError(f"num_draft values must lie in 0..K = 0..{k}; got min {int(num_draft.min())}, "
                         f"max {int(num_draft.max())}")
    return num_draft.to(device=device, dtype=torch.int64)  # [B]


def _check_same_device(generator: torch.Generator | None, *tensors: torch.Tensor) -> torch.device:
    device = tensors[0].device
    for t in tensors[1:]:
        if t.device != device:
            raise ValueError(f"all tensors must be on one device; got {device} and {t.device}")
    if generator is not None and generator.device.type != device.type:
        raise ValueError(f"generator is on {generator.device}, the tensors on {device}")
    return device


def _check_verify_inputs(target_name: str, target: torch.Tensor, draft_tokens: torch.Tensor,
                         num_draft: torch.Tensor | None, generator: torch.Generator | None,
                         draft_probs: torch.Tensor | None = None) -> torch.Tensor:
    """Validate a verifier's inputs: target [B, K+1, V] (named target_name in errors), draft_probs
    [B, K, V] where the verifier reads them, draft_tokens [B, K], all on one device (and the
    generator's); returns num_draft as int64 [B]."""
    _check_probs(target_name, target, "[B, K+1, V]")
    if draft_probs is not None:
        _check_probs("draft_probs", draft_probs, "[B, K, V]")
    batch, k_plus_1, vocab = _shape(target)
    if k_plus_1 < 1:
        raise ValueError(f"{target_name} must have K+1 >= 1 positions; got shape {_shape(target)}")
    if draft_probs is not None and _shape(draft_probs) != (batch, k_plus_1 - 1, vocab):
        raise ValueError(f"draft_probs must have shape [B, K, V] = ({batch}, {k_plus_1 - 1}, {vocab}) "
                         f"to match {target_name} {_shape(target)}; got {_shape(draft_probs)}")
    _check_tokens("draft_tokens", draft_tokens, batch, k_plus_1 - 1, vocab, "[B, K]")
    tensors = (target, draft_tokens) if draft_probs is None else (target, draft_probs, draft_tokens)
    device = _check_same_device(generator, *tensors)
    return _normalise_num_draft(num_draft, batch, k_plus_1 - 1, device)


# ---------------------------------------------------------------------------------------------
# Small pure pieces shared by every verifier
# ---------------------------------------------------------------------------------------------

def draw_uniforms(batch: int, width: int, generator: torch.Generator | None,
                  device: torch.device | str) -> torch.Tensor:
    """[batch, width] float64 uniforms in [0, 1) from `generator`.

    NOTE: float64, because float32 uniforms have only 24 bits and come out exactly 0 with
    probability 2^-24; the kernel is exact for u = 0 anyway (see _inverse_cdf), but coarse
    uniforms would quantise acceptance probabilities to multiples of 2^-24.
    """
    return torch.rand(batch, width, dtype=torch.float64, generator=generator, device=device)


def _prefix_length(accept: torch.Tensor) -> torch.Tensor:
    """Length of the leading run of True per row: accept [B, K] bool -> [B] int64 (the first
    False position, or K). A min-reduction rather than a cumulative product, so it fuses."""
    batch, k = accept.shape
    if k == 0:
        return torch.zeros(batch, dtype=torch.int64, device=accept.device)
    positions = torch.arange(k, device=accept.device)  # [K]
    return torch.where(accept, k, positions).amin(dim=1)  # [B]


def _inverse_cdf(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Draw one index per row with probability weights / weights.sum(): weights [B, V] >= 0
    (any float dtype), u [B] float64 in [0, 1) -> [B] int64.

    Picks the first v with cdf[v] > u * total, so a zero-weight token is never drawn (its cdf
    equals its predecessor's), u = 0 included. Sums run in float64.
    """
    cdf = torch.cumsum(weights, dim=-1, dtype=torch.float64)  # [B, V]
    total = cdf[:, -1]  # [B]
    # NOTE: u * total can round up to total when u is within 2^-53 of 1; cap it just below
    # total so the search never runs past the last token with positive weight.
    threshold = torch.minimum(u * total, torch.nextafter(total, torch.zeros_like(total)))  # [B]
    index = torch.searchsorted(cdf, threshold[:, None], right=True)[:, 0]  # [B]
    # NOTE: only an all-zero row (invalid input) reaches V; keep the id in range.
    return index.clamp_(max=weights.shape[-1] - 1)  # [B]


def _emit(draft_tokens: torch.Tensor, num_accepted: torch.Tensor,
          sampled: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Accepted prefix, then the sampled token, then -1 padding.

    draft_tokens [B, K] int64, num_accepted [B] int64 (0..K), sampled [B] int64
    -> tokens [B, K+1] int64, num_emitted [B] int64 (num_accepted + 1).
    """
    batch, k = draft_tokens.shape
    positions = torch.arange(k + 1, device=draft_tokens.device)  # [K+1]
    padded = torch.nn.functional.pad(draft_tokens, (0, 1), value=-1)  # [B, K+1]
    tokens = torch.where(positions < num_accepted[:, None], padded, -1)  # [B, K+1]
    tokens.scatter_(1, num_accepted[:, None], sampled[:, None])
    return tokens, num_accepted + 1


# ---------------------------------------------------------------------------------------------
# Chain verification (Leviathan et al. 2022, Algorithm 1)
# ---------------------------------------------------------------------------------------------

def _accepted_counts(target_probs: torch.Tensor, draft_probs: torch.Tensor,
                     draft_tokens: torch.Tensor, num_draft: torch.Tensor,
                     u_accept: torch.Tensor) -> torch.Tensor:
    """Accepted drafts per sequence: [B] int64 in 0..num_draft.

    target_probs [B, K+1, V], draft_probs [B, K, V], draft_tokens [B, K] int64, num_draft [B]
    int64, u_accept [B, K] float64. Only the 2*B*K probabilities of the draft tokens are read.
    """
    k = draft_tokens.shape[1]
    index = draft_tokens[:, :, None]  # [B, K, 1]
    p_x = target_probs[:, :k].gather(2, index)[:, :, 0].double()  # [B, K] p_k(x_k)
    q_x = draft_probs.gather(2, index)[:, :, 0].double()  # [B, K] q_k(x_k)
    # Accept with probability min(1, p/q): u < p/q, written u*q < p so that q = 0 needs no
    # division (q = 0 < p: always accept; p = 0: never) and p >= q always accepts (u < 1).
    real = torch.arange(k, device=draft_tokens.device) < num_draft[:, None]  # [B, K]
    accept = (u_accept * q_x < p_x) & real  # [B, K]
    return _prefix_length(accept)  # [B]


def _gather_rows(target_probs: torch.Tensor, draft_probs: torch.Tensor, row: torch.Tensor,
                 columns: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """p_row and q_row at position `row` of each sequence, as float32.

    target_probs [B, K+1, V], draft_probs [B, K, V], row [B] int64 in 0..K, columns [B, W] int64
    token ids or None (all V) -> p, q: [B, W] (or [B, V]). With K = 0 there is no q: q = p.
    """
    batch = torch.arange(row.shape[0], device=row.device)  # [B]
    k = draft_probs.shape[1]
    row_q = row.clamp(max=max(k - 1, 0))  # [B] position K has no q (bonus rows do not use it)
    if columns is None:
        p = target_probs[batch, row]  # [B, V]
        q = draft_probs[batch, row_q] if k else p  # [B, V]
    else:
        p = target_probs[batch[:, None], row[:, None], columns]  # [B, W]
        q = draft_probs[batch[:, None], row_q[:, None], columns] if k else p  # [B, W]
    return p.float(), q.float()


def _sampling_weights(p: torch.Tensor, q: torch.Tensor, use_residual: torch.Tensor) -> torch.Tensor:
    """Unnormalised weights of the distribution a sequence samples from: [B, W] float32.

    p, q: [B, W] float32 (a row or part of one); use_residual [B, 1] bool (True: the recovered
    token, from (p - q)+; False: the bonus token, from p). Elementwise, so a row's weights are
    the same bits whether computed whole or in blocks.
    """
    chosen = torch.where(use_residual, (p - q).clamp_min(0.0), p)  # [B, W]
    return chosen + FALLBACK_WEIGHT * p  # [B, W]


def _verify_chain_core(target_probs: torch.Tensor, draft_probs: torch.Tensor,
                       draft_tokens: torch.Tensor, num_draft: torch.Tensor,
                       uniforms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """verify_chain on pre-drawn uniforms [B, K+1] float64: columns 0..K-1 are the acceptance
    tests of positions 0..K-1, column K the inverse-CDF draw. Inputs already validated;
    num_draft is int64 [B]. This is the seam where tests inject uniforms (sampling_reference.py
    consumes the same ones)."""
    k = draft_tokens.shape[1]
    num_accepted = _accepted_counts(target_probs, draft_probs, draft_tokens, num_draft,
                                    uniforms[:, :k])  # [B]
    use_residual = (num_accepted < num_draft)[:, None]  # [B, 1] rejected somewhere -> recovered
    p_row, q_row = _gather_rows(target_probs, draft_probs, num_accepted)  # [B, V] each
    weights = _sampling_weights(p_row, q_row, use_residual)  # [B, V]
    sampled = _inverse_cdf(weights, uniforms[:, k])  # [B]
    return _emit(draft_tokens, num_accepted, sampled)


def verify_chain(target_probs: torch.Tensor, draft_probs: torch.Tensor, draft_tokens: torch.Tensor,
                 num_draft: torch.Tensor | None = None,
                 generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact speculative sampling of one verify round for a batch of draft chains.

    Args:
        target_probs: [B, K+1, V] target probabilities; [:, k] is p_k, given x_0..x_{k-1}
            (position K is the bonus position after the last draft).
        draft_probs: [B, K, V] draft probabilities; [:, k] is q_k, the distribution x_k was
            drawn from.
        draft_tokens: [B, K] int64 draft tokens x_k.
        num_draft: [B] integer, drafts per sequence in 0..K (ragged batches: positions >= num_draft
            are ignored and the bonus comes from target_probs[b, num_draft[b]]); None = all K.
        generator: torch.Generator on the tensors' device (None: torch's default generator).
    Returns:
        tokens: [B, K+1] int64: the accepted drafts, then the recovered or bonus token, then -1.
        num_emitted: [B] int64 in 1..num_draft+1 (accepted + 1).
    Raises:
        ValueError: wrong ndim, shape, dtype or device (values are checked for CPU tensors only;
            on CUDA a check would force a host sync).
    """
    num_draft = _check_verify_inputs("target_probs", target_probs, draft_tokens, num_draft, generator, draft_probs)
    batch, k = draft_tokens.shape
    uniforms = draw_uniforms(batch, k + 1, generator, draft_tokens.device)  # [B, K+1]
    return _verify_chain_core(target_probs, draft_probs, draft_tokens, num_draft, uniforms)


# ---------------------------------------------------------------------------------------------
# Greedy verification (temperature 0)
# ---------------------------------------------------------------------------------------------

def verify_greedy(target_logits: torch.Tensor, draft_tokens: torch.Tensor,
                  num_draft: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Temperature-0 verification: accept while the draft equals the target's argmax; then emit
    the target's argmax at the first mismatch (or at the bonus position). The output equals
    greedy decoding of the target (ties: the lowest token id, torch.argmax's rule).

    Args:
        target_logits: [B, K+1, V] target logits (or probabilities: only the argmax is used).
        draft_tokens: [B, K] int64.
        num_draft: [B] integer in 0..K, or None for all K.
    Returns:
        tokens [B, K+1] int64 (-1 padded), num_emitted [B] int64 in 1..num_draft+1.
    """
    num_draft = _check_verify_inputs("target_logits", target_logits, draft_tokens, num_draft, None)  # [B]
    k_plus_1, device = target_logits.shape[1], target_logits.device
    greedy = target_logits.argmax(dim=-1)  # [B, K+1]
    real = torch.arange(k_plus_1 - 1, device=device) < num_draft[:, None]  # [B, K]
    num_accepted = _prefix_length((draft_tokens == greedy[:, :-1]) & real)  # [B]
    sampled = greedy.gather(1, num_accepted[:, None])[:, 0]  # [B]
    return _emit(draft_tokens, num_accepted, sampled)
