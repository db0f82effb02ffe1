"""Medusa-2's typical acceptance: NOT distribution-preserving (Cai et al. 2024, arXiv 2401.10774).

Kept beside the exact kernels (calibrate.sampling, calibrate.sampling_tree) to model systems that
use it; tests/test_sampling_multitoken.py measures its bias.
"""
from __future__ import annotations

import torch

from .sampling import _check_verify_inputs, _emit, _inverse_cdf, _prefix_length, draw_uniforms


def verify_typical(target_probs: torch.Tensor, draft_tokens: torch.Tensor,
                   num_draft: torch.Tensor | None = None, posterior_threshold: float = 0.09,
                   posterior_alpha: float = 0.3, generator: torch.Generator | None = None,
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Medusa-2's typical acceptance (Cai et al. 2024, arXiv 2401.10774, section 2.3.1).

    WARNING: NOT distribution-preserving. The output is not distributed as the target's samples;
    it is biased towards the draft's choices and away from the target's low-probability tokens
    (tests/test_sampling_multitoken.py measures the bias). Use it only to model systems that use it.

    A draft token x_k is accepted while p_k(x_k) > min(posterior_threshold, posterior_alpha *
    exp(-H(p_k))), H the entropy (with Medusa's +1e-5 inside the log); the next token is drawn
    from p at the first rejection (or the bonus position) restricted to the tokens with p >=
    that threshold, as Medusa's get_typical_one_token does. The draft probabilities are not used.

    Args:
        target_probs: [B, K+1, V]; draft_tokens: [B, K] int64; num_draft: [B] or None;
        posterior_threshold, posterior_alpha: Medusa's defaults 0.09 and 0.3.
        generator: torch.Generator on the tensors' device.
    Returns:
        tokens [B, K+1] int64 (-1 padded), num_emitted [B] int64 in 1..num_draft+1.
    """
    num_draft = _check_verify_inputs("target_probs", target_probs, draft_tokens, num_draft, generator)  # [B]
    batch, k_plus_1 = target_probs.shape[:2]
    device = target_probs.device
    probs = target_probs.float()  # [B, K+1, V]
    entropy = -(probs * torch.log(probs + 1e-5)).sum(dim=-1)  # [B, K+1]
    threshold = torch.clamp(posterior_alpha * torch.exp(-entropy), max=posterior_threshold)  # [B, K+1]
    p_x = probs[:, :-1].gather(2, draft_tokens[:, :, None])[:, :, 0]  # [B, K]
    real = torch.arange(k_plus_1 - 1, device=device) < num_draft[:, None]  # [B, K]
    num_accepted = _prefix_length((p_x > threshold[:, :-1]) & real)  # [B]
    rows = torch.arange(batch, device=device)  # [B]
    p_row = probs[rows, num_accepted]  # [B, V]
    keep = p_row >= threshold[rows, num_accepted][:, None]  # [B, V]
    # NOTE: the argmax always survives (max p >= exp(-H) > alpha * exp(-H)); keep it explicitly
    # so that a rounding corner case cannot leave an empty row.
    keep.scatter_(1, p_row.argmax(dim=1, keepdim=True), True)
    u = draw_uniforms(batch, 1, generator, device)[:, 0]  # [B]
    sampled = _inverse_cdf(p_row * keep, u)  # [B]
    return _emit(draft_tokens, num_accepted, sampled)
