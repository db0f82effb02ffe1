"""Latency floors of a forward pass that its roofline does not see (real engines only; `ideal`
keeps the cost model's roofline, bit for bit).

A routed-expert layer's fused MoE (token alignment, the two grouped GEMMs, activation, the
weighted sum) takes a fixed time on top of its weight reads. vLLM PR #24700 (Sep 2025) timed
vLLM's fused MoE (benchmarks/kernels/benchmark_moe.py) on an H100 for Qwen3-30B-A3B's experts
(E = 128, N = 768, top-8, TP 1, fp8_w8a8) [M]: 40.44 us at batch 1 (44.54 us before the PR's
configs), 56.15 / 78.10 / 118.64 / 164.64 us at 2 / 4 / 8 / 16 tokens. At batch 1 its 8 experts'
weights are 8 x 3 x 2048 x 768 x 1 byte = 37.7 MB, 14.1 us at the H100 profile's achieved rate
(3.35 TB/s x 0.8): the rest, 26.4 us, is the fused MoE's fixed time per MoE layer and pass
(MOE_LAYER_FIXED_S). Range: the same PR's Mixtral bf16 TP 2 (E = 8, N = 7168, 144.03 us at
batch 1 against 131 us of weight reads: 13 us) to the pre-PR configs' 44.54 - 14.1 = 30.5 us.
Carried to every MoE layer of every model and GPU [I: one kernel family's fixed part].
"""
from __future__ import annotations

US = 1e-6
QWEN3_MOE_KERNEL_US = {1: 40.44, 2: 56.15, 4: 78.10, 8: 118.64, 16: 164.64}   # PR #24700, H100, fp8
QWEN3_MOE_BATCH1_BYTES = 8 * 3 * 2048 * 768 * 1.0
H100_ACHIEVED_BYTES_S = 3.35e12 * 0.8
MOE_LAYER_FIXED_S = QWEN3_MOE_KERNEL_US[1] * US - QWEN3_MOE_BATCH1_BYTES / H100_ACHIEVED_BYTES_S
MOE_LAYER_FIXED_RANGE_S = (144.03 * US - 131.0 * US, 44.54 * US - QWEN3_MOE_BATCH1_BYTES / H100_ACHIEVED_BYTES_S)
