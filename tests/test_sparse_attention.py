"""DeepSeek Sparse Attention (DSA: DeepSeek-V3.2, GLM-5) priced by hand: the lightning indexer over
every cached token, the MLA over the top index_topk keys per query, in decode, verify and prefill;
KV memory of every token (latent + index key); the indexer's weights, replicated on every GPU."""
import pytest

from simulator.common.errors import SpecsightInputError
from simulator.costs.cost_model import CostModel
from simulator.costs.pass_shape import PassShape
from simulator.hardware.hardware import load_profile
from simulator.models.catalog import load_model
from simulator.models.layer_types import window_pairs
from simulator.models.model_config import spec_from_config
from simulator.speculation.drafter_structure import raw_config

L, TOPK = 61, 2048                                  # DeepSeek-V3.2: layers, index_topk
INDEX_KEY_BYTES = 128 * 1 + 4                       # fp8 key of index_head_dim 128 + one fp32 scale
INDEX_FLOPS_PER_PAIR = 2 * 64 * 128                 # 64 index heads, dot products of 128
MLA_FLOPS_PER_PAIR = 2 * 128 * (2 * 512 + 64)       # absorbed MLA: 128 heads over the 512 + 64 latent
LATENT_BF16_BYTES = (512 + 64) * 2
INDEXER_PARAMS = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64   # wq_b, wk, k_norm, weights_proj


@pytest.fixture(scope="module")
def v32():
    return CostModel(load_model("deepseek-v3.2"), load_profile("h200-sxm"), tp=8, dtype="fp8")


def _attention(cm: CostModel, seqs: list[tuple[int, int]], logits: str = "last"):
    return cm.breakdown(PassShape.from_sequences(seqs, logits)).ops["attention"]


@pytest.mark.parametrize("c", [1000, 2047, 2048, 5000, 131072])
def test_decode_reads_every_index_key_and_the_top_k_latents(v32, c):
    """One sequence decoding one token after c cached: the indexer scores c + 1 keys with all 64
    heads on every GPU and reads c + 2 index keys (c cached, its own written and read); the MLA
    (128 heads over TP 8) attends to min(c + 1, 2048) keys and reads min(c, 2047) + 2 latents."""
    a = _attention(v32, [(1, c)])
    flops = L * INDEX_FLOPS_PER_PAIR * (c + 1) + L * MLA_FLOPS_PER_PAIR / 8 * min(c + 1, TOPK)
    nbytes = L * INDEX_KEY_BYTES * (c + 2) + L * LATENT_BF16_BYTES * (min(c, TOPK - 1) + 2)
    assert a.flops == pytest.approx(flops, rel=1e-12)
    assert a.bytes == pytest.approx(nbytes, rel=1e-12)


@pytest.mark.parametrize("c", [500, 100_000])
def test_verify_k_plus_one_queries_each_attend_their_top_k(v32, c):
    """A verify of K + 1 = 4 positions after c cached: the indexer scores the causal pairs 4 c + 10;
    the MLA's pairs are sum_j min(c + j + 1, 2048) (layer_types.window_pairs: 4 c + 10 below the
    top-k, 4 x 2048 above); the four queries read min(c, 2047) cached latents once (a lower bound:
    a kernel that gathers each query's own top-k reads up to 4 x 2048) and write and read their own 4."""
    n = 4
    a = _attention(v32, [(n, c)], logits="all")
    pairs = n * c + n * (n + 1) // 2
    assert window_pairs(n, c, TOPK) == (pairs if c + n <= TOPK else n * TOPK)
    flops = L * INDEX_FLOPS_PER_PAIR * pairs + L * MLA_FLOPS_PER_PAIR / 8 * window_pairs(n, c, TOPK)
    nbytes = L * INDEX_KEY_BYTES * (c + 2 * n) + L * LATENT_BF16_BYTES * (min(c, TOPK - 1) + 2 * n)
    assert a.flops == pytest.approx(flops, rel=1e-12)
    assert a.bytes == pytest.approx(nbytes, rel=1e-12)


def test_prefill_indexer_is_quadratic_and_attention_capped_at_top_k(v32):
    """A prefill of n tokens from nothing: the indexer scores n (n + 1) / 2 pairs; the MLA at most
    n x 2048 (each query attends to its top 2048; the first 2048 queries to fewer, which min(P, T W)
    overstates by at most 2048 x 2049 / 2 pairs)."""
    n = 16384
    a = _attention(v32, [(n, 0)])
    pairs = n * (n + 1) // 2
    exact = window_pairs(n, 0, TOPK)
    flops = L * INDEX_FLOPS_PER_PAIR * pairs + L * MLA_FLOPS_PER_PAIR / 8 * n * TOPK
    assert a.flops == pytest.approx(flops, rel=1e-12)
    assert n * TOPK - exact == TOPK * (TOPK - 1) // 2


def test_kv_memory_holds_latent_and_index_key_of_every_token(v32):
    """Not capped at the top-k: the indexer reads every token again at the next step."""
    per_token = L * (LATENT_BF16_BYTES + INDEX_KEY_BYTES)
    assert v32.kv_bytes_per_token == per_token
    for tokens in (1000, 100_000):
        assert v32.kv_bytes_held(3, tokens) == 3 * tokens * per_token


def test_indexer_weights_counted_and_replicated():
    """V3.2 = V3's backbone + 61 indexers (0.85B): 671B within 2 %; active adds them too. Per GPU
    under TP 8 the indexer's weights are read whole (replicated), the rest sharded."""
    m32, m3 = load_model("deepseek-v3.2"), load_model("deepseek-v3")
    assert m32.indexer_params == INDEXER_PARAMS and m3.indexer_params == 0
    assert m32.params_total - m3.params_total == L * INDEXER_PARAMS
    assert m32.params_active - m3.params_active == L * INDEXER_PARAMS
    assert m32.params_total == pytest.approx(671e9, rel=0.02)
    hw = load_profile("h200-sxm")
    c32, c3 = CostModel(m32, hw, tp=8, dtype="fp8"), CostModel(m3, hw, tp=8, dtype="fp8")
    assert c32.linear_bytes - c3.linear_bytes == pytest.approx(L * INDEXER_PARAMS * 1.0, rel=1e-12)
    assert c32.linear_flops_per_token - c3.linear_flops_per_token == pytest.approx(2.0 * L * INDEXER_PARAMS,
                                                                                   rel=1e-12)
    assert c32.weight_bytes_per_gpu - c3.weight_bytes_per_gpu == pytest.approx(L * INDEXER_PARAMS, rel=1e-12)


def test_dense_mla_unchanged_and_sparse_cheaper_only_past_the_top_k():
    """DeepSeek-V3 has no DSA (no window, every token read). V3.2's pass costs more than V3's at
    1k context (the indexer and its weights on top) and less at 128k (2048 latents instead of 128k)."""
    hw = load_profile("h200-sxm")
    c32 = CostModel(load_model("deepseek-v3.2"), hw, tp=8, dtype="fp8")
    c3 = CostModel(load_model("deepseek-v3"), hw, tp=8, dtype="fp8")
    assert load_model("deepseek-v3").sparse is None and c3.window == 0
    B = 16
    short, long_ = PassShape.from_sequences([(1, 1024)] * B), PassShape.from_sequences([(1, 131072)] * B)
    assert c32.shape_time_s(short) > c3.shape_time_s(short)
    assert c32.shape_time_s(long_) < c3.shape_time_s(long_)


def test_dsa_config_errors_name_the_key():
    cfg = dict(raw_config("deepseek-v3.2"))
    del cfg["index_n_heads"]
    with pytest.raises(SpecsightInputError, match="index_n_heads"):
        spec_from_config(cfg, "x", "x.json", None)
    cfg = dict(raw_config("deepseek-v3.2"), index_topk=0)
    with pytest.raises(SpecsightInputError, match="index_topk"):
        spec_from_config(cfg, "x", "x.json", None)
    cfg = dict(raw_config("deepseek-v3.2"), kv_lora_rank=0)
    with pytest.raises(SpecsightInputError, match="index_topk"):
        spec_from_config(cfg, "x", "x.json", None)


def test_glm52_index_sharing_later_steps_read_the_top_k_of_both_caches():
    """GLM-5.2's MTP (one DSA layer, index_share_for_mtp_iteration): step 1 reads every cached index
    key and the top-k latents; steps 2..K are capped at index_topk cached tokens a sequence
    (drafter_structure), so they read 2048 index keys (an overstatement: they skip the indexer) and
    2047 latents. GLM-5's index key is 132 bytes, its latent 576 bf16 elements."""
    from simulator.speculation.drafter_structure import round_costs
    from simulator.speculation.drafters import Drafter, DrafterSpec
    target = load_model("glm-5")
    cm = CostModel(target, load_profile("h200-sxm"), tp=8, dtype="fp8")
    d = Drafter(DrafterSpec(method="mtp", model="glm-5.2-mtp", num_speculative_tokens=3), target, cm)
    B, c = 4, 30_000
    costs = round_costs(d.structure, d.draft_cost, B, 3, B * c)
    index, latent = INDEX_KEY_BYTES, LATENT_BF16_BYTES
    first = index * (B * c + 2 * B) + latent * (B * (TOPK - 1) + 2 * B)
    later = index * (B * TOPK + 2 * B) + latent * (B * (TOPK - 1) + 2 * B)
    assert [p.ops["attention"].bytes for p in costs] == pytest.approx([first, later, later], rel=1e-12)
