"""CUDA-graph capture sizes of each engine, and the padding a pass pays to replay one.

A captured graph replays a pass at a fixed size: a pass smaller than a captured size pads up to the
next one (its padding rows cost what real rows cost in the linear layers); a pass larger than the
largest captured size runs eagerly (or, with padding off, any size not captured runs eagerly).
Sizes are what ../shared/reference/engines.md §1 reads in the engines' code:

vLLM V1 (token counts)  [1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16), max = min(max_num_seqs
                        (1 + K) 2, 512, max_num_batched_tokens), each rounded UP to a multiple of 1 + K
                        (vllm/config/vllm.py@09f030ea; vllm/config/compilation.py
                        adjust_cudagraph_sizes_for_spec_decode)
SGLang (batch sizes)    1..8, 10..32 step 2, 40..64 step 4, 72..256 step 8, 272.. step 16 up to
                        cuda_graph_max_bs (v0.5.x on H100/H200: 256 at TP < 4, 512 at TP >= 4;
                        sglang server_args.py); a verify graph holds N tokens per sequence
SGLang v0.4.5           with speculation 1..8, 10..32 step 2, 40..160 step 16; plain decoding 1, 2, 4, 8,
                        16..160 step 8; up to cuda_graph_max_bs 160 (GPUs of 25 GB and more)
                        (sglang 0.4.5 wheel, srt/model_executor/cuda_graph_runner.py
                        get_batch_sizes_to_capture, srt/server_args.py)
TRT-LLM (batch sizes)   CudaGraphConfig without padding (the default): 1..31, 32, 64, 128 and powers of
                        two up to max_batch_size; sizes not captured run eagerly (llm_args.py)
vLLM V0 (batch sizes)   [1, 2, 4] + multiples of 8 up to 256 (V0 worker/model_runner.py
                        _BATCH_SIZES_TO_CAPTURE; engines.md does not list V0's sizes: [I], from the
                        V0 code)
"""
from __future__ import annotations

import bisect
from functools import lru_cache


@lru_cache(maxsize=256)      # asked for at every iteration: a pure function of three integers
def vllm_v1_sizes(max_num_seqs: int, max_num_batched_tokens: int, k: int) -> tuple[int, ...]:
    """vLLM V1's captured token counts for K drafts (K = 0: plain decoding), ascending."""
    w = 1 + k
    top = min(max_num_seqs * w * 2, 512, max_num_batched_tokens)
    base = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, top + 1, 16))
    return tuple(sorted({-(-s // w) * w for s in base if s <= top}))


def sglang_sizes(cuda_graph_max_bs: int) -> tuple[int, ...]:
    """SGLang's captured batch sizes with speculation, up to cuda_graph_max_bs."""
    s = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
         + list(range(272, max(cuda_graph_max_bs, 272) + 1, 16)))
    return tuple(x for x in s if x <= cuda_graph_max_bs)


def sglang_max_bs(tp: int) -> int:
    """SGLang v0.5.x's default cuda_graph_max_bs on H100/H200: 256 at TP < 4, 512 at TP >= 4."""
    return 512 if tp >= 4 else 256


SGLANG_V04_MAX_BS = 160


def sglang_v04_sizes(speculating: bool, max_running_requests: int) -> tuple[int, ...]:
    """SGLang v0.4.5's captured batch sizes (cuda_graph_max_bs 160), with and without speculation:
    its request pool holds max_running_requests + 1 slots (model_runner.py, ReqToTokenPool size), a
    list reaching past the pool gains the pool's size and one less, and no size exceeds the pool
    (cuda_graph_runner.py, get_batch_sizes_to_capture)."""
    if speculating:
        sizes = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, SGLANG_V04_MAX_BS + 1, 16))
    else:
        sizes = [1, 2, 4, 8] + list(range(16, SGLANG_V04_MAX_BS + 1, 8))
    pool = max_running_requests + 1
    if max(sizes) > pool:
        sizes += [pool - 1, pool]
    return tuple(sorted(x for x in set(sizes) if x <= min(pool, SGLANG_V04_MAX_BS)))


def trtllm_sizes(max_batch_size: int) -> tuple[int, ...]:
    """TensorRT-LLM's captured batch sizes with padding off (its default), up to max_batch_size."""
    s = set(range(1, 32)) | {32, 64, 128}
    p = 1
    while p <= max_batch_size:
        s.add(p)
        p *= 2
    return tuple(sorted(x for x in s if x <= max_batch_size))


def vllm_v0_sizes(max_num_seqs: int) -> tuple[int, ...]:
    """vLLM V0's captured batch sizes, up to max_num_seqs (and 256)."""
    return tuple(x for x in [1, 2, 4] + list(range(8, 257, 8)) if x <= max(max_num_seqs, 1))


def padded_size(n: int, sizes: tuple[int, ...], pad: bool = True) -> int | None:
    """The captured size a pass of n replays (n itself or the next larger size with pad; n only
    if captured without), or None: the pass runs eagerly."""
    i = bisect.bisect_left(sizes, n)
    if i == len(sizes):
        return None
    if sizes[i] == n or pad:
        return sizes[i]
    return None
