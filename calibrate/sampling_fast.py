"""The GPU fast path of verify_chain: the same algorithm, organised so each sampled row is read once.

calibrate.sampling.verify_chain samples the recovered or bonus token by one inverse CDF over the
whole [B, V] row (a float64 cumulative sum: simple, and bit-for-bit equal to the scalar reference).
Here the inverse CDF has two levels: (1) the weights (p - q)+ or p of each sequence's one sampled
row are summed in blocks of SAMPLE_BLOCK tokens ([B, C] float64, C = ceil(V / block)); (2) a
uniform picks a block by its block sums, and only that block's weights are recomputed and searched
([B, block]). Under torch.compile, step (1) is one fused pass over the 2*B*V probabilities of the
sampled rows and nothing of size [B, V] is written.

make_chain_verifier(compile=True, cuda_graph=True) also replays the compiled kernels from a CUDA
graph, so a call costs a handful of launches instead of dozens (at B*K*V ~ 1e8 the host overhead
of eager launches costs more than the memory traffic).

Same uniforms, same distribution as verify_chain; the same tokens except where float64 sums taken
in another order straddle a boundary (probability about 1e-16 per draw).
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import torch

from calibrate.sampling import (
    _accepted_counts,
    _check_verify_inputs,
    _emit,
    _gather_rows,
    _sampling_weights,
    draw_uniforms,
    verify_chain,
)

SAMPLE_BLOCK = 1024  # tokens per block of the two-level inverse CDF
GRAPH_CACHE_SIZE = 8  # CUDA graphs kept per verifier (one per input buffers and shapes), LRU

Verifier = Callable[..., tuple[torch.Tensor, torch.Tensor]]


def _pick_block(block_sums: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """First level: block_sums [B, C] float64, u [B] float64 in [0, 1) -> the block holding
    u * total ([B] int64; its sum is > 0) and the threshold left inside it ([B] float64)."""
    blocks = block_sums.shape[1]
    cdf = torch.cumsum(block_sums, dim=-1)  # [B, C]
    total = cdf[:, -1]  # [B]
    # NOTE: cap below total: u * total rounds up to total when u is within 2^-53 of 1.
    threshold = torch.minimum(u * total, torch.nextafter(total, torch.zeros_like(total)))  # [B]
    # first block whose cdf exceeds the threshold = number of blocks whose cdf does not
    chosen = (cdf <= threshold[:, None]).sum(dim=1).clamp(max=blocks - 1)  # [B]
    previous = torch.arange(blocks, device=cdf.device) == (chosen - 1)[:, None]  # [B, C] one-hot or empty
    before = torch.where(previous, cdf, 0.0).sum(dim=1)  # [B] cdf of the blocks before, exactly
    # NOTE: threshold >= before (by the choice of block), so the rounded difference is >= 0.
    return chosen, threshold - before


def _search_block(weights: torch.Tensor, threshold: torch.Tensor) -> torch.Tensor:
    """Second level: the first index of weights [B, W] whose float64 running sum exceeds
    threshold [B] -> [B] int64, capped at the last positive weight (the running sum can round
    below the first level's block sum)."""
    cdf = torch.cumsum(weights, dim=-1, dtype=torch.float64)  # [B, W]
    index = (cdf <= threshold[:, None]).sum(dim=1)  # [B]
    positions = torch.arange(weights.shape[1], device=weights.device)  # [W]
    last_positive = torch.where(weights > 0, positions, -1).amax(dim=1)  # [B]
    return torch.minimum(index, last_positive)


def verify_chain_blocked(target_probs: torch.Tensor, draft_probs: torch.Tensor,
                         draft_tokens: torch.Tensor, num_draft: torch.Tensor, uniforms: torch.Tensor,
                         block: int = SAMPLE_BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """calibrate.sampling._verify_chain_core with the two-level inverse CDF.

    target_probs [B, K+1, V], draft_probs [B, K, V], draft_tokens [B, K] int64, num_draft [B]
    int64, uniforms [B, K+1] float64 (validated by the caller) -> tokens [B, K+1], num_emitted [B].
    """
    k = draft_tokens.shape[1]
    batch, _, vocab = target_probs.shape
    num_accepted = _accepted_counts(target_probs, draft_probs, draft_tokens, num_draft,
                                    uniforms[:, :k])  # [B]
    use_residual = (num_accepted < num_draft)[:, None]  # [B, 1]
    p_row, q_row = _gather_rows(target_probs, draft_probs, num_accepted)  # [B, V] each
    weights = _sampling_weights(p_row, q_row, use_residual)  # [B, V]
    padded = torch.nn.functional.pad(weights, (0, (-vocab) % block))  # [B, C*block]
    block_sums = padded.view(batch, -1, block).sum(dim=-1, dtype=torch.float64)  # [B, C]
    chosen, threshold = _pick_block(block_sums, uniforms[:, k])  # [B], [B]
    columns = chosen[:, None] * block + torch.arange(block, device=chosen.device)  # [B, block]
    p_blk, q_blk = _gather_rows(target_probs, draft_probs, num_accepted, columns.clamp(max=vocab - 1))
    in_vocab = columns < vocab  # [B, block] the last block is padded past V
    block_weights = torch.where(in_vocab, _sampling_weights(p_blk, q_blk, use_residual), 0.0)  # [B, block]
    sampled = chosen * block + _search_block(block_weights, threshold)  # [B]
    return _emit(draft_tokens, num_accepted, sampled)


class _GraphedCore:
    """Replays `core` from CUDA graphs captured per (input buffers, shapes), LRU-cached.

    NOTE: the graph reads the caller's tensors in place (keyed by data_ptr, shape, stride and
    dtype): a serving engine reuses its logits buffers, so one capture serves every step. Only the
    uniforms ([B, K+1], drawn from the caller's generator into a static buffer) and num_draft ([B])
    are copied per call; outputs are cloned out of the graph's memory.
    """

    def __init__(self, core: Callable, block: int, cache_size: int = GRAPH_CACHE_SIZE):
        self.core, self.block, self.cache_size = core, block, cache_size
        self.graphs: OrderedDict = OrderedDict()

    def __call__(self, target_probs: torch.Tensor, draft_probs: torch.Tensor, draft_tokens: torch.Tensor,
                 num_draft: torch.Tensor, generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
        key = tuple((t.device, t.data_ptr(), tuple(t.shape), t.stride(), t.dtype)
                    for t in (target_probs, draft_probs, draft_tokens))
        entry = self.graphs.get(key)
        if entry is None:
            entry = self._capture(key, target_probs, draft_probs, draft_tokens, num_draft)
        self.graphs.move_to_end(key)
        graph, static_uniforms, static_num_draft, outputs = entry
        static_uniforms.uniform_(generator=generator)  # same draws as draw_uniforms
        static_num_draft.copy_(num_draft)
        graph.replay()
        return outputs[0].clone(), outputs[1].clone()

    def _capture(self, key: tuple, target_probs: torch.Tensor, draft_probs: torch.Tensor,
                 draft_tokens: torch.Tensor, num_draft: torch.Tensor) -> tuple:
        device = draft_tokens.device
        batch, k = draft_tokens.shape
        static_uniforms = torch.zeros(batch, k + 1, dtype=torch.float64, device=device)  # [B, K+1]
        static_num_draft = num_draft.clone()  # [B]
        args = (target_probs, draft_probs, draft_tokens, static_num_draft, static_uniforms, self.block)
        # NOTE: warm up (compile, allocator) on a side stream before capture, as torch.cuda.graph requires.
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self.core(*args)
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = self.core(*args)
        entry = (graph, static_uniforms, static_num_draft, outputs)
        self.graphs[key] = entry
        while len(self.graphs) > self.cache_size:
            self.graphs.popitem(last=False)
        return entry


def make_chain_verifier(compile: bool = False, cuda_graph: bool = False, backend: str = "inductor",
                        block: int = SAMPLE_BLOCK) -> Verifier:
    """A function with verify_chain's signature and the same uniforms.

    compile=False, cuda_graph=False: verify_chain itself. Otherwise the blocked two-level path,
    under torch.compile(backend=backend, dynamic=True) when compile=True (the first call per shape
    class compiles: seconds), replayed from CUDA graphs when cuda_graph=True and the tensors are
    on CUDA (CPU tensors run it directly).
    """
    if not (compile or cuda_graph):
        return verify_chain
    core = verify_chain_blocked
    if compile:
        # NOTE: dynamic=True so that new B, K or V do not recompile (sizes 0 and 1 still specialise);
        # Triton configs are tuned at the first call, so warm up on the largest shape you will run.
        # The indirect indices (row <= K, clamped columns) are in range by construction, so
        # inductor's device-side bounds asserts are switched off (10-20 % of the kernel on an H200).
        options = {"assert_indirect_indexing": False} if backend == "inductor" else None
        core = torch.compile(verify_chain_blocked, dynamic=True, backend=backend, options=options)
    graphed = _GraphedCore(core, block) if cuda_graph else None

    def verify_chain_fast(target_probs: torch.Tensor, draft_probs: torch.Tensor, draft_tokens: torch.Tensor,
                          num_draft: torch.Tensor | None = None,
                          generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        num_draft = _check_verify_inputs("target_probs", target_probs, draft_tokens, num_draft, generator, draft_probs)
        batch, k = draft_tokens.shape
        if graphed is not None and draft_tokens.is_cuda and batch > 0:
            return graphed(target_probs, draft_probs, draft_tokens, num_draft, generator)
        uniforms = draw_uniforms(batch, k + 1, generator, draft_tokens.device)  # [B, K+1]
        return core(target_probs, draft_probs, draft_tokens, num_draft, uniforms, block)

    verify_chain_fast.__doc__ = verify_chain.__doc__
    return verify_chain_fast
