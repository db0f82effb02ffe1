"""The tile model's weight matrices (simulator/engines/tiles.py `layer_matrices`) against the
model's own linear parameters: every matrix a token multiplies, the gated q_proj of Qwen3-Next and
the Gated DeltaNet projections of a hybrid included, computed by hand from the configs' numbers."""
import dataclasses

import pytest

from simulator.engines.tiles import layer_matrices, quantized_flops_ratio
from simulator.models.catalog import load_model

QNEXT = load_model("tests/data/layer_types/qwen3-next-80b-a3b.json")   # hybrid MoE: 36 linear + 12 full layers
LLAMA8B = load_model("llama-3.1-8b")
# The same hybrid as a dense model (its MoE keys dropped, the dense MLP of intermediate_size 5120): the
# tile model's per-matrix branch, where the gate and the linear layers are matrices of their own.
QNEXT_DENSE = dataclasses.replace(QNEXT, num_experts=0, experts_per_token=0, num_shared_experts=0)


def _params(mats, tp: int) -> float:
    """Weights one GPU multiplies per token, per layer on average: N x R summed, times tp (all shards)."""
    return sum(n * r for n, r in mats) * tp


@pytest.mark.parametrize("tp", [1, 2])
def test_tile_matrices_hold_the_models_linear_parameters(tp):
    d = 2048
    # Qwen3-Next softmax layer: q_proj 16 heads x 256 doubled by the output gate, k and v 2 heads x 256, o_proj
    gated_attn = d * (2 * 16 + 2 * 2) * 256 + 16 * 256 * d
    # Gated DeltaNet: in_proj_qkvz d x (2 x 16 x 128 + 2 x 32 x 128), in_proj_ba d x 2 x 32, out_proj 32 x 128 x d
    gdn = d * (2 * 2048 + 2 * 4096) + d * 2 * 32 + 4096 * d
    mlp = 3 * d * 5120
    per_layer = (12 * gated_attn + 36 * gdn) / 48 + mlp
    assert QNEXT_DENSE.is_moe is False and QNEXT_DENSE.attn_output_gate
    assert _params(layer_matrices(QNEXT_DENSE, tp), tp) == pytest.approx(per_layer, rel=1e-12)
    # the model's own count: the mixers and the dense MLP, less what is not a matrix (biases: none here;
    # each GDN layer's conv1d, dt_bias, A_log and gated norm)
    not_matrices = 36 * (8192 * 4 + 2 * 32 + 128)
    own = (QNEXT_DENSE.mixer_params_total - not_matrices) / 48 + QNEXT_DENSE.dense_mlp_params
    assert _params(layer_matrices(QNEXT_DENSE, tp), tp) == pytest.approx(own, rel=1e-12)
    # Llama-3.1-8B: qkv (32 + 2 x 8) x 128 from 4096, o_proj, gate_up 2 x 14336, down
    llama = 4096 * 48 * 128 + 4096 * 4096 + 4096 * 2 * 14336 + 14336 * 4096
    assert _params(layer_matrices(LLAMA8B, tp), tp) == llama == LLAMA8B.attn_params + LLAMA8B.dense_mlp_params


def test_a_moe_hybrid_is_one_matrix_of_its_linear_parameters():
    """MoE (and MLA) layers are one aggregate matrix holding the per-layer weights every token
    multiplies (attention with its gate, linear layers, shared expert, router, norms)."""
    (n, r), = layer_matrices(QNEXT, 1)
    assert n * r == pytest.approx((QNEXT.layer_params_dense_part + QNEXT.extra_linear_params) / 48, rel=1e-12)


def test_a_share_of_the_layers_weighs_a_matrix_by_that_share():
    """A matrix held by a fraction f of the layers counts f of its tiled and exact FLOPs: the ratio of
    one full matrix is unchanged by f, and a mix is the FLOP-weighted mean of its matrices' ratios."""
    a, b = (4096.0, 4096.0), (300.0, 4096.0)
    for M in (2, 65, 200):
        ra, rb = quantized_flops_ratio(M, (a,), 132), quantized_flops_ratio(M, (b,), 132)
        assert quantized_flops_ratio(M, ((a[0], a[1] * 0.25),), 132) == pytest.approx(ra, rel=1e-12)
        mixed = quantized_flops_ratio(M, ((a[0], a[1] * 0.25), (b[0], b[1] * 0.75)), 132)
        wa, wb = a[0] * a[1] * 0.25, b[0] * b[1] * 0.75
        assert mixed == pytest.approx((ra * wa + rb * wb) / (wa + wb), rel=1e-12)
