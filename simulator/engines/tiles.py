"""Linear layers priced with GEMM tile and wave quantization (real engines only; `ideal` keeps the
cost model's smooth roofline, bit for bit).

NVIDIA's *Matrix Multiplication Background User's Guide* (Feb 2023; ../shared/reference/engines.md
§5): a GEMM of M x N output runs in tiles; an M or N that is not a multiple of the tile wastes the
rest of the tile (tile quantization), and a tile count that is not a multiple of the SM count
leaves the last wave partly idle (wave quantization). A verify pass has M = B (1 + K) rows (B N for
a tree), right where these steps sit.

The model, per weight matrix of a layer (N outputs per tensor-parallel shard, R reduction):
    tiles(M) = ceil(M / TILE_M) ceil(N / TILE_N)
    compute FLOPs(M) = 2 R TILE_M TILE_N x (ceil(tiles / S) S   if tiles > S   (whole waves)
                                            tiles               otherwise)
(S = sm_count). Below one wave the library splits the reduction (split-K / stream-K) so every SM
streams weights [I]; from the first full wave on, a partial wave costs a whole one. One token
(M = 1) runs a matrix-vector kernel with no tiles (the cost model's GEMV branch) and is unchanged.
The linear op's compute time is the cost model's times FLOPs(M) / (2 R N M) summed over the
layer's matrices (`linear_quantization`); its weight-memory time is unchanged, so below one tile
the cost stays set by weight reads, and it rises in steps as M crosses tile and wave boundaries.
A profile without sm_count gets tile quantization only (no waves).

Tile: 64 x 128. Hopper's warpgroup MMA instruction has M = 64 rows, and cuBLAS/CUTLASS tiles of
128 columns are the guide's examples (256x128, 128x128) [D]; which tile a library picks at a given
M is heuristic and not modelled [I]. Unvalidated: no public GEMM timings by M at these shapes here.
"""
from __future__ import annotations

import math

from ..costs.cost_model import CostModel
from ..costs.pass_time import timing_constants
from ..models.model_spec import ModelSpec
from .collectives import SIZE_BYTES_PER_UNIT, allreduce_s, has_curve
from .kernel_floors import MOE_LAYER_FIXED_S

TILE_M = 64      # rows of a GEMM tile (Hopper wgmma M = 64; NVIDIA Matrix Multiplication Background guide)
TILE_N = 128     # columns of a GEMM tile (the guide's cuBLAS examples: 128x128, 256x128)


def layer_matrices(m: ModelSpec, tp: int) -> tuple[tuple[float, float], ...]:
    """(N per shard, reduction) of each weight matrix one layer multiplies every token by. Standard
    attention + a dense MLP: qkv (q twice as wide with Qwen3-Next's output gate), o_proj, gate_up,
    down (column- then row-parallel); a dense hybrid's linear-attention layers add in_proj_qkvz,
    in_proj_ba and out_proj. A matrix that only some layers hold has its reduction scaled by their
    share of the layers (tiled and exact FLOPs are both linear in it, so the ratio weighs it as
    those layers do); the matrices' parameters sum to one layer's average. Other layers (MLA, MoE
    shared parts, heads' extra projections): one matrix with the same parameters. Norms, biases
    and the linear layers' convolution and per-head scalars are not matrices and are left out."""
    d = m.hidden_size
    L = max(m.num_layers, 1)
    dense = not (m.is_mla or m.is_moe)
    if dense:
        q_in = 2 * d if m.head_kind == "eagle3" else d
        q_heads = 2 * m.num_heads if m.attn_output_gate else m.num_heads
        qkv = (q_heads + 2 * m.num_kv_heads) * m.head_dim
        up = (2 if m.gated_mlp else 1) * m.intermediate_size
        soft = m.num_softmax_layers / L
        mats = [(qkv / tp, q_in * soft), (d, m.num_heads * m.head_dim / tp * soft),
                (up / tp, d), (d, m.intermediate_size / tp)]
        lin = m.linear
        if lin is not None and m.num_linear_layers:
            share = m.num_linear_layers / L
            mats += [((2 * lin.key_dim + 2 * lin.value_dim) / tp, d * share),   # in_proj_qkvz
                     (2 * lin.num_v_heads / tp, d * share),                      # in_proj_ba
                     (d, lin.value_dim / tp * share)]                            # out_proj
        extra = m.extra_linear_params / L
        if extra:
            mats.append((d, extra / d))
        return tuple(mats)
    per_layer = (m.layer_params_dense_part + m.extra_linear_params) / L
    return ((per_layer / d / tp, d),)


def quantized_flops_ratio(M: int, mats: tuple[tuple[float, float], ...], sm_count: int | None) -> float:
    """Sum of the matrices' tiled FLOPs over their exact FLOPs at M rows (>= 1; 1.0 at M <= 1)."""
    if M <= 1:
        return 1.0
    eff = exact = 0.0
    rows = math.ceil(M / TILE_M)
    for n, r in mats:
        tiles = rows * math.ceil(n / TILE_N)
        if sm_count and tiles > sm_count:
            tiles = math.ceil(tiles / sm_count) * sm_count
        eff += 2.0 * r * TILE_M * TILE_N * tiles
        exact += 2.0 * r * n * M
    return eff / exact


class TiledCostModel(CostModel):
    """A CostModel whose linear op's compute time carries tile and wave quantization, and whose
    tensor-parallel all-reduces follow the measured latency-against-size curve (collectives.py)
    where one exists for the TP degree inside one NVLink domain (scalars: the engines' step cost
    calls it with Python numbers)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._mats = layer_matrices(self.model, self.tp)
        atp = self.layout.attention_tp
        self._ar_curve = bool(self.allreduce_count) and has_curve(atp) and atp <= self.hw.interconnect.gpus_per_node
        if self._ar_curve:      # the curve replaces the all-reduce's latency and its per-token bytes
            self._ar_per_token_s -= (self.allreduce_count * self.ring_factor * self.allreduce_bytes_per_token
                                     / self.link_bytes_s)
            self._ar_fixed_s -= self.allreduce_count * self.ring_latency_s
            self._ar_beyond_bytes_s = self.link_bytes_s / self.ring_factor
            self.constants = self.constants._replace(allreduce_fixed_s=self._ar_fixed_s)
            self._constants = timing_constants(self.constants)
            self._terms.clear()
        # each MoE layer's fused experts take a fixed time beyond their weight reads (kernel_floors.py)
        self._moe_fixed_s = self.n_moe_layers * MOE_LAYER_FIXED_S

    def allreduce_pass_s(self, T: float, bytes_per_unit: float = SIZE_BYTES_PER_UNIT) -> float:
        """The all-reduces of a pass of T tokens on the measured curve (0 without the curve);
        bytes_per_unit: the reading of the curve's sizes (collectives.SIZE_READINGS)."""
        if not self._ar_curve:
            return 0.0
        return self.allreduce_count * allreduce_s(T * self.allreduce_bytes_per_token, self.layout.attention_tp,
                                                  self._ar_beyond_bytes_s, bytes_per_unit)

    def linear_quantization(self, M: float) -> float:
        return quantized_flops_ratio(int(math.ceil(M)), self._mats, self.sm_count)

    def _pass_terms(self, T: float, num_logits: float) -> tuple:
        weights, head, rest, ar = super()._pass_terms(T, num_logits)
        weights = weights + self._moe_fixed_s
        if self._ar_curve and not hasattr(T, "__len__"):
            ar = ar + self.allreduce_pass_s(T)
        q = self.linear_quantization(T) if not hasattr(T, "__len__") else 1.0
        if q == 1.0:
            return weights, head, rest, ar
        p, F = self.p, self.peak_flops_s
        lin = self._lin_term_gemv if (self._gemv and T == 1) else self._lin_term
        c = self.linear_flops_per_token * T / F
        if self._sharp:
            old, new = max(c, lin), max(c * q, lin)
        else:
            old, new = (c ** p + lin) ** self._inv_p, ((c * q) ** p + lin) ** self._inv_p
        return weights - old + new, head, rest, ar
