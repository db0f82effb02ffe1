"""The roofline cost model: hand-computed cases, conservation, monotonicity, the analytic break-even."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.common.errors import SpecsightInputError
from simulator.costs.cost_model import CostModel, PassShape
from simulator.costs.pass_shape import causal_pairs
from simulator.costs.pass_time import attention_time_s
from simulator.hardware.hardware import Efficiency, load_profile
from simulator.models.catalog import load_model
from simulator.speculation.analytic import breakeven_batch, speedup
from simulator.speculation.drafters import Drafter, DrafterSpec

H100 = load_profile("h100-sxm")
L8B = load_model("llama-3.1-8b")


def test_batch1_is_memory_bound_above_weight_floor():
    """Llama-3.1-8B bf16 on H100 SXM, batch 1, context 1024: the weight-read floor is
    16.06 GB / 3.35 TB/s = 4.79 ms; the pass is memory-bound and cannot beat the floor."""
    cm = CostModel(L8B, H100)
    cost = cm.breakdown(PassShape.uniform(1, 1, 1024))
    floor_s = 16.06e9 / 3.35e12
    assert floor_s == pytest.approx(4.79e-3, abs=1e-5)
    assert cost.bound == "memory"
    assert cost.time_s >= floor_s
    # the weights actually read: everything but the embedding table (a lookup reads T rows)
    read = (L8B.params_total - L8B.embedding_params) * 2
    assert cost.ops["linear"].bytes + cost.ops["lm_head"].bytes == pytest.approx(read, rel=1e-6)
    # with achieved bandwidth the memory term alone is read / (bw * eff)
    eff = H100.efficiency.memory
    assert cost.ops["linear"].time_s >= cost.ops["linear"].bytes / (3.35e12 * eff)


def test_large_verify_batch_is_compute_bound():
    """Batch 256 x 5 new tokens: compute-bound, and no faster than FLOPs / peak."""
    cm = CostModel(L8B, H100)
    cost = cm.breakdown(PassShape.uniform(256, 5, 1024))
    assert cost.bound == "compute"
    assert cost.time_s >= cost.flops / 989.4e12
    # FLOPs of the linear layers are 2 * params * tokens (hand count)
    lin = L8B.layer_params_dense_part
    assert cost.ops["linear"].flops == pytest.approx(2 * lin * 256 * 5)


def test_breakdown_sums_to_fast_path_and_vectorises():
    for name, tp in [("llama-3.1-8b", 1), ("llama-3.1-70b", 4), ("deepseek-v3", 8), ("mixtral-8x7b", 2)]:
        cm = CostModel(load_model(name), H100, tp=tp)
        shapes = [PassShape.uniform(b, n, c) for b, n, c in [(1, 1, 128), (32, 4, 4096), (256, 1, 100)]]
        for s in shapes:
            assert cm.breakdown(s).time_s == pytest.approx(cm.shape_time_s(s), rel=1e-12)
        arr = cm.time_s(np.array([s.num_tokens for s in shapes]), np.array([s.sum_context for s in shapes]),
                        np.array([s.sum_attn_pairs for s in shapes]), np.array([s.num_logits for s in shapes]))
        assert np.allclose(arr, [cm.shape_time_s(s) for s in shapes], rtol=1e-12)


def test_from_sequences_matches_uniform():
    a = PassShape.from_sequences([(4, 100)] * 8)
    b = PassShape.uniform(8, 4, 100)
    assert a == b
    mixed = PassShape.from_sequences([(1, 10), (3, 5)], logits="last")
    assert (mixed.num_tokens, mixed.sum_context, mixed.num_logits) == (4, 15, 2)
    assert mixed.sum_attn_pairs == 1 * 10 + 1 + 3 * 5 + 6


def test_sharp_roofline_is_max():
    cm = CostModel(L8B, H100, efficiency=Efficiency(0.8, 0.7, float("inf")))
    o = cm.breakdown(PassShape.uniform(1, 1, 0)).ops["linear"]
    assert o.time_s == pytest.approx(max(o.flops / (989.4e12 * 0.7), o.bytes / (3.35e12 * 0.8)))


shapes = st.tuples(st.integers(1, 512), st.integers(1, 16), st.integers(0, 65536))


@given(shapes, st.integers(1, 64), st.integers(1, 8192))
@settings(max_examples=80, deadline=None)
def test_more_tokens_or_context_never_cost_less(shape, extra_tokens, extra_ctx):
    b, n, c = shape
    for name in ("llama-3.1-8b", "deepseek-v3"):
        cm = CostModel(load_model(name), H100, tp=8 if name == "deepseek-v3" else 1)
        t0 = cm.shape_time_s(PassShape.uniform(b, n, c))
        assert cm.shape_time_s(PassShape.uniform(b, n + extra_tokens, c)) >= t0
        assert cm.shape_time_s(PassShape.uniform(b, n, c + extra_ctx)) >= t0
        assert cm.shape_time_s(PassShape.uniform(b + extra_tokens, n, c)) >= t0


@given(st.integers(1, 4096), st.integers(2, 64), st.integers(1, 8))
@settings(max_examples=60, deadline=None)
def test_more_experts_touched_never_cost_less(tokens, experts, k):
    """Expected distinct experts E (1 - (1 - k/E)^T) grows with T and with k: so does the MoE cost."""
    k = min(k, experts)
    base = load_model("mixtral-8x7b")
    spec = dataclasses.replace(base, num_experts=experts, experts_per_token=k)
    cm = CostModel(spec, H100)
    t = cm.time_s(float(tokens), 0.0, float(tokens), 1.0)
    assert cm.time_s(float(tokens + 1), 0.0, float(tokens + 1), 1.0) >= t
    if k < experts:
        cm_k = CostModel(dataclasses.replace(spec, experts_per_token=k + 1), H100)
        assert cm_k.time_s(float(tokens), 0.0, float(tokens), 1.0) >= t


def test_moe_coverage_closed_form():
    """At T = 1 a MoE layer reads k experts; as T grows it reads all E."""
    mix = load_model("mixtral-8x7b")
    cm = CostModel(mix, H100)
    one = cm.breakdown(PassShape.uniform(1, 1, 0)).ops["moe_experts"].bytes
    many = cm.breakdown(PassShape.uniform(4096, 1, 0)).ops["moe_experts"].bytes
    per_expert = mix.expert_params * 2 * mix.num_moe_layers
    assert one == pytest.approx(2 * per_expert)        # top-2 of 8
    assert many == pytest.approx(8 * per_expert, rel=1e-6)


def test_tp_splits_weights_and_adds_allreduce():
    m = load_model("llama-3.1-70b")
    c1, c4 = CostModel(m, H100, tp=1), CostModel(m, H100, tp=4)
    s = PassShape.uniform(8, 1, 1024)
    assert c4.breakdown(s).ops["linear"].bytes == pytest.approx(c1.breakdown(s).ops["linear"].bytes / 4)
    assert "allreduce" in c4.breakdown(s).ops and "allreduce" not in c1.breakdown(s).ops


@pytest.mark.parametrize("tp", [3, 0, -1])
def test_bad_tp(tp):
    with pytest.raises(SpecsightInputError, match="tp"):
        CostModel(L8B, H100, tp=tp)


def test_missing_dtype_is_named():
    with pytest.raises(SpecsightInputError, match="dtype.*a100-80gb-sxm"):
        CostModel(L8B, load_profile("a100-80gb-sxm"), dtype="fp8")


def test_analytic_speedup_falls_with_batch_and_crosses_one():
    cm = CostModel(L8B, H100)
    d = Drafter(DrafterSpec("draft_model", 4, model="llama-3.2-1b"), L8B, cm)
    s = speedup(cm, d, np.array([1.0, 8, 64, 512]), 1024, 4, 0.7)
    assert s[0] > 1 and np.all(np.diff(s) < 0)
    be = breakeven_batch(cm, d, 1024, 4, 0.7)
    assert be.breakeven_batch is not None and 1 < be.breakeven_batch < 1024
    assert speedup(cm, d, be.breakeven_batch, 1024, 4, 0.7) == pytest.approx(1.0, abs=1e-6)


def test_long_context_moves_breakeven_up():
    """KV reads grow with context, not K: the verify pass stays memory-bound to larger batches."""
    cm = CostModel(L8B, H100)
    d = Drafter(DrafterSpec("draft_model", 3, model="llama-3.2-1b"), L8B, cm)
    short = breakeven_batch(cm, d, 512, 3, 0.6, max_batch=1e5).breakeven_batch
    long = breakeven_batch(cm, d, 32768, 3, 0.6, max_batch=1e5).breakeven_batch
    assert short is not None
    assert long is None or long > short          # None: it never crosses 1 up to 10^5 sequences
    assert speedup(cm, d, short, 32768, 3, 0.6) > 1.0


def test_drafter_costs_are_ordered():
    """Per round at batch 1: n-gram (host only) < EAGLE-3 head < 1B draft model < target layers-skip draft."""
    cm = CostModel(L8B, H100)
    t = {}
    for spec in [DrafterSpec("ngram", 3), DrafterSpec("eagle3", 3, model="eagle3-llama-3.1-8b"),
                 DrafterSpec("draft_model", 3, model="llama-3.2-1b"), DrafterSpec("self_spec", 3, layer_fraction=0.5)]:
        t[spec.method] = Drafter(spec, L8B, cm).propose_time_s(1, 3, 1024)
    assert t["ngram"] < t["eagle3"] < t["draft_model"] < t["self_spec"]


def test_memory_limit_on_batch():
    """Batch is capped by KV memory: (HBM x util - weights) / (KV bytes per sequence)."""
    from simulator.speculation.analytic import max_batch_in_memory
    cm = CostModel(L8B, H100)
    b = max_batch_in_memory(cm, None, context=1024, k=0, gpu_memory_utilization=0.9)
    kv_seq = 1025 * 32 * 2 * 8 * 128 * 2
    assert b == pytest.approx((80e9 * 0.9 - L8B.params_total * 2) / kv_seq)
    assert max_batch_in_memory(cm, None, context=32768, k=0) < b


# ---- one-token passes: matrix-vector kernels (efficiency.memory_gemv) --------------------------
H100_BW, H100_PEAK = 3.35e12, 989.4e12       # H100 SXM datasheet: bytes/s, dense bf16 FLOP/s
# Llama-3.1-8B weights every token multiplies, by hand (d 4096, 32 heads of 128, 8 KV heads, MLP 14336,
# 32 layers): fused QKV d (32 + 2 x 8) 128, output projection 32 x 128 x d, SwiGLU gate/up/down 3 d I,
# and the layer's two RMSNorm weight vectors 2 d (ModelSpec.layer_params_dense_part counts them with it).
L8B_LINEAR = 32 * (4096 * (32 + 2 * 8) * 128 + 32 * 128 * 4096 + 3 * 4096 * 14336 + 2 * 4096)


def _roof(t_c, t_m, p):
    return max(t_c, t_m) if p == float("inf") else (t_c ** p + t_m ** p) ** (1 / p)


@pytest.mark.parametrize("batch, new_tokens, logits", [(1, 1, None), (1, 2, 1), (8, 1, None), (1, 5, None)])
def test_without_memory_gemv_every_pass_streams_at_one_rate(batch, new_tokens, logits):
    """No memory_gemv (every datasheet profile): one token or many, the linear layers and the LM
    head stream their weights at bandwidth x efficiency.memory, by hand: Llama-3.1-8B bf16 on H100
    SXM (memory 0.80, compute 0.70, p = 1.84)."""
    e = H100.efficiency
    assert e.memory_gemv is None and (e.memory, e.compute, e.roofline_sharpness) == (0.8, 0.7, 1.84)
    bw, peak, p = H100_BW * 0.8, H100_PEAK * 0.7, 1.84
    s = PassShape.uniform(batch, new_tokens, 1024, logits)
    T, n_logits = batch * new_tokens, s.num_logits
    ops = CostModel(L8B, H100).breakdown(s).ops
    assert ops["linear"].time_s == pytest.approx(_roof(2 * L8B_LINEAR * T / peak, 2 * L8B_LINEAR / bw, p), rel=1e-12)
    assert ops["lm_head"].time_s == pytest.approx(
        _roof(2 * L8B.lm_head_params * n_logits / peak, 2 * L8B.lm_head_params / bw, p), rel=1e-12)
    # memory_gemv equal to memory is the same model: the same floats, not merely close ones
    same = CostModel(L8B, H100, efficiency=dataclasses.replace(e, memory_gemv=e.memory))
    assert same.shape_time_s(s) == CostModel(L8B, H100).shape_time_s(s)


@pytest.mark.parametrize("p", [float("inf"), 1.83])
def test_one_token_pass_streams_weights_at_the_gemv_rate(p):
    """memory_gemv = 0.95, memory = 0.80: a one-token pass's linear layers take
    linear bytes / (bw x 0.95) (memory-bound; with p finite, the soft roofline of the same terms);
    two tokens take bytes / (bw x 0.80). The LM head follows the logits: one logit is a GEMV even
    when the pass holds two tokens (a draft step scoring its last position)."""
    cm = CostModel(L8B, H100, efficiency=Efficiency(0.8, 0.7, p, memory_gemv=0.95))
    peak = H100_PEAK * 0.7
    one = cm.breakdown(PassShape.uniform(1, 1, 1024)).ops
    assert one["linear"].bound == "memory"
    assert one["linear"].time_s == pytest.approx(
        _roof(2 * L8B_LINEAR / peak, 2 * L8B_LINEAR / (H100_BW * 0.95), p), rel=1e-12)
    if p == float("inf"):
        assert one["linear"].time_s == pytest.approx(2 * L8B_LINEAR / (H100_BW * 0.95), rel=1e-12)
    two = cm.breakdown(PassShape.uniform(1, 2, 1024, logits_per_seq=1)).ops
    assert two["linear"].time_s == pytest.approx(
        _roof(2 * L8B_LINEAR * 2 / peak, 2 * L8B_LINEAR / (H100_BW * 0.8), p), rel=1e-12)
    assert two["lm_head"].time_s == pytest.approx(
        _roof(2 * L8B.lm_head_params / peak, 2 * L8B.lm_head_params / (H100_BW * 0.95), p), rel=1e-12)
    # everything that is not a weight stream keeps efficiency.memory: KV reads, elementwise, sampling
    base = CostModel(L8B, H100, efficiency=Efficiency(0.8, 0.7, p)).breakdown(PassShape.uniform(1, 1, 1024)).ops
    for k in ("attention", "elementwise", "sampling", "overhead"):
        assert one[k].time_s == base[k].time_s, k


def test_one_token_routed_experts_stream_at_the_gemv_rate():
    """Mixtral at T = 1 reads its top-2 experts per layer through matrix-vector kernels."""
    mix = load_model("mixtral-8x7b")
    cm = CostModel(mix, H100, efficiency=Efficiency(0.8, 0.7, float("inf"), memory_gemv=0.95))
    o = cm.breakdown(PassShape.uniform(1, 1, 0)).ops["moe_experts"]
    assert o.time_s == pytest.approx(2 * mix.expert_params * 2 * mix.num_moe_layers / (H100_BW * 0.95), rel=1e-12)


@pytest.mark.parametrize("memory_gemv,memory_attention", [(None, None), (0.95, None), (0.5, None), (None, 0.6),
                                                           (0.95, 0.9)])
def test_breakdown_agrees_with_fast_path_with_and_without_memory_gemv(memory_gemv, memory_attention):
    """Scalars (float and int), numpy arrays mixing one-token and many-token passes, and the
    explained path all give the same seconds, with and without the one-token and KV rates."""
    for name, tp in [("llama-3.1-8b", 1), ("mixtral-8x7b", 2), ("deepseek-v3", 8)]:
        hw = dataclasses.replace(H100, efficiency=dataclasses.replace(H100.efficiency, memory_gemv=memory_gemv,
                                                                      memory_attention=memory_attention))
        cm = CostModel(load_model(name), hw, tp=tp)
        shapes = [PassShape.uniform(b, n, c, lg) for b, n, c, lg in
                  [(1, 1, 128, None), (1, 2, 300, 1), (1, 4, 64, None), (8, 1, 1000, None), (256, 5, 100, None)]]
        scalar = [cm.shape_time_s(s) for s in shapes]
        for s, t in zip(shapes, scalar):
            assert cm.breakdown(s).time_s == pytest.approx(t, rel=1e-12)
        arr = cm.time_s(*(np.array([getattr(s, f) for s in shapes], float)
                          for f in ("num_tokens", "sum_context", "sum_attn_pairs", "num_logits")))
        np.testing.assert_allclose(arr, scalar, rtol=1e-12)


def test_breakdown_reports_the_fast_paths_own_terms():
    """The explained path reads the pieces of time_s's terms: weights = linear (+ routed experts),
    the LM head, the attention roof (pass_time.attention_time_s) and the all-reduce, bit for bit."""
    for name, tp in [("llama-3.1-8b", 1), ("mixtral-8x7b", 2), ("deepseek-v3", 8)]:
        cm = CostModel(load_model(name), H100, tp=tp)
        for s in (PassShape.uniform(1, 1, 128), PassShape.uniform(7, 3, 333), PassShape.uniform(256, 5, 100)):
            ops = cm.breakdown(s).ops
            weights, head, _, allreduce = cm._pass_terms(float(s.num_tokens), float(s.num_logits))
            moe = ops["moe_experts"].time_s if "moe_experts" in ops else None
            assert (ops["linear"].time_s if moe is None else ops["linear"].time_s + moe) == weights
            assert ops["lm_head"].time_s == head
            c = cm.pass_constants(s.num_seqs)
            assert ops["attention"].time_s == attention_time_s(c, s.num_tokens, s.sum_context, s.sum_attn_pairs)
            if tp > 1:
                assert ops["allreduce"].time_s == allreduce + c.allreduce_fixed_s
        s = PassShape.from_sequences([(1, 127)])       # integer sums, as from_sequences builds them
        assert cm.shape_time_s(s) == pytest.approx(cm.time_s(1.0, 127.0, 128.0, 1.0), rel=1e-12)


@pytest.mark.parametrize("bad", [0.0, -0.2, 1.5, float("nan"), "0.9", True])
def test_bad_memory_gemv_is_named(bad):
    with pytest.raises(SpecsightInputError, match=r"efficiency\.memory_gemv") as e:
        Efficiency(0.8, 0.7, 2.0, memory_gemv=bad)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("bad", [0, 1.2, "fast", [0.9]])
def test_bad_memory_gemv_in_a_profile_file_is_one_line(tmp_path, bad):
    import yaml

    from simulator.hardware.hardware import profile_from_dict
    raw = yaml.safe_load(open(H100.path))
    raw["efficiency"]["memory_gemv"] = bad
    raw["sources"]["efficiency.memory_gemv"] = "unit test"
    with pytest.raises(SpecsightInputError, match=r"h100\.yaml: efficiency\.memory_gemv") as e:
        profile_from_dict(raw, "h100.yaml")
    assert "\n" not in str(e.value)


def test_memory_gemv_in_a_profile_needs_a_source_and_round_trips():
    import yaml

    from simulator.hardware.hardware import profile_from_dict
    raw = yaml.safe_load(open(H100.path))
    raw["efficiency"]["memory_gemv"] = 0.9
    with pytest.raises(SpecsightInputError, match=r"sources.*efficiency\.memory_gemv"):
        profile_from_dict(raw, "h100.yaml")
    raw["sources"]["efficiency.memory_gemv"] = "unit test"
    prof = profile_from_dict(raw, "h100.yaml")
    assert prof.efficiency.memory_gemv == 0.9 and prof.to_dict()["efficiency"]["memory_gemv"] == 0.9
    assert "memory_gemv" not in H100.to_dict()["efficiency"]      # absent stays absent


@pytest.mark.parametrize("method,model,tree", [("draft_model", "llama-3.2-1b", False),
                                               ("eagle3", "eagle3-llama-3.1-8b", False),
                                               ("eagle3", "eagle3-llama-3.1-8b", True)])
def test_draft_steps_compute_logits_only_where_they_propose(method, model, tree):
    """A round's first draft step ingests the catch-up tokens but proposes from one position per
    sequence; later steps propose one token per sequence (per branch for a tree): LM head and
    sampling are charged for those positions only, whatever the catch-up."""
    target = load_model("llama-3.1-8b")
    cm = CostModel(target, load_profile("h100-sxm"))
    spec = DrafterSpec(method=method, model=model, num_speculative_tokens=3, tree=tree,
                       tree_nodes=12 if tree else 0, tree_branches=3 if tree else 1)
    d = Drafter(spec, target, cm)
    dc, batch, catchup, ctx = d.draft_cost, 8, 8 * 3, 8 * 500
    width = 3 if tree else 1
    nb = batch * width
    steps = [dc.time_s(catchup, ctx, causal_pairs(catchup, ctx, batch), batch, batch)]
    steps += [dc.time_s(nb, ctx + batch * j, causal_pairs(nb, ctx + batch * j, batch), nb, batch) for j in (1, 2)]
    assert d.propose_time_s(batch, 3, ctx, catchup_tokens=catchup) == 0.0 + steps[0] + steps[1] + steps[2]


def test_activations_are_as_wide_as_the_models_dtype():
    """Elementwise and all-reduce traffic moves activations: 2 bytes each in bf16, fp16 and fp8
    (fp8 weights compute in bf16), 4 in fp32 (the CPU calibration's dtype); so at fp32 the
    elementwise op's bytes, and its time on a bandwidth-bound pass, are exactly twice bf16's."""
    hw = dataclasses.replace(H100, peak_tflops={**H100.peak_tflops, "fp32": 67.0})
    cms = {d: CostModel(L8B, hw, tp=2, dtype=d) for d in ("bf16", "fp16", "fp8", "fp32")}
    assert {d: cm.activation_bytes for d, cm in cms.items()} == {"bf16": 2, "fp16": 2, "fp8": 2, "fp32": 4}
    shape = PassShape.uniform(8, 4, 1000)
    ew = {d: cm.breakdown(shape).ops["elementwise"] for d, cm in cms.items()}
    assert ew["fp32"].bytes == 2 * ew["bf16"].bytes and ew["fp8"].bytes == ew["bf16"].bytes
    assert ew["fp32"].time_s == 2 * ew["bf16"].time_s
    assert cms["fp32"].allreduce_bytes_per_token == 2 * cms["bf16"].allreduce_bytes_per_token


def test_attention_reads_the_kv_cache_at_its_own_rate():
    """efficiency.memory_attention prices attention's KV reads alone: the attention op's memory
    time is its bytes over bandwidth x memory_attention, the other ops are unchanged, and an absent
    rate is efficiency.memory bit for bit."""
    eff = H100.efficiency
    same = CostModel(L8B, dataclasses.replace(H100, efficiency=dataclasses.replace(eff, memory_attention=eff.memory)))
    base, fast = CostModel(L8B, H100), CostModel(L8B, dataclasses.replace(
        H100, efficiency=dataclasses.replace(eff, memory_attention=0.95)))
    shape = PassShape.uniform(64, 1, 4096)      # decode: bandwidth-bound attention
    b, f = base.breakdown(shape).ops, fast.breakdown(shape).ops
    assert f["attention"].bytes == b["attention"].bytes
    assert f["attention"].time_s == pytest.approx(b["attention"].time_s * eff.memory / 0.95, rel=1e-3)
    assert all(f[k] == b[k] for k in b if k != "attention")
    assert same.time_s(64.0, 64 * 4096.0, 64 * 4097.0, 64.0) == base.time_s(64.0, 64 * 4096.0, 64 * 4097.0, 64.0)
    with pytest.raises(SpecsightInputError, match="memory_attention"):
        dataclasses.replace(eff, memory_attention=1.5)


def test_cost_cli_says_whether_the_batch_fits_in_memory(capsys):
    """weights + batch x (context + new) x KV bytes per token against the GPU's memory: Llama-3.1-8B
    bf16 holds 131072 B of KV per token, so 512 sequences of 1024 tokens (68.7 GB) beside 16.06 GB of
    weights exceed an 80 GB H100 and 256 of them (34.4 GB) do not."""
    import json as _json

    from specsight.cli import main as cli
    args = ["cost", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--new-tokens", "1", "--context", "1023", "--json"]
    assert cli([*args, "--batch", "256"]) == 0
    small = _json.loads(capsys.readouterr().out)
    assert small["fits_in_hbm"] is True and small["kv_bytes_per_gpu"] == 256 * 1024 * 131072
    assert cli([*args, "--batch", "512"]) == 0
    big = _json.loads(capsys.readouterr().out)
    assert big["fits_in_hbm"] is False and big["kv_bytes_per_gpu"] == 2 * small["kv_bytes_per_gpu"]
    assert cli([*args[:-1], "--batch", "512"]) == 0
    assert "does not fit" in capsys.readouterr().out
    assert small["context_window_tokens"] == 131072 and small["within_context_window"] is True
    assert cli(["cost", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--new-tokens", "1", "--context", "131072",
                "--batch", "1"]) == 0
    assert "exceeds llama-3.1-8b's context window of 131072 tokens" in capsys.readouterr().out
    assert cli([*args, "--batch", "0"]) == 2
    assert capsys.readouterr().err.strip() == "specsight: error: --batch=0: must be an integer in [1, 65536]"


def test_causal_pairs_counts_each_new_tokens_keys():
    """causal_pairs is the query-key pair count of a causal pass: new token j (1-based) of a
    sequence with c cached tokens attends to c + j keys; exact on integers; B sequences sharing
    T tokens evenly give B times one sequence's count; elementwise on arrays."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        n, c = int(rng.integers(0, 300)), int(rng.integers(0, 5000))
        assert causal_pairs(n, c) == sum(c + j for j in range(1, n + 1))
        b = int(rng.integers(1, 9))
        assert causal_pairs(b * n, b * c, b) == b * causal_pairs(n, c)
    n, c = rng.integers(1, 64, 32), rng.integers(0, 4096, 32)
    assert np.array_equal(causal_pairs(n, c), [causal_pairs(int(x), int(y)) for x, y in zip(n, c)])
    shape = PassShape.from_sequences(zip(n.tolist(), c.tolist()))
    assert shape.sum_attn_pairs == causal_pairs(n, c).sum()


def test_drafter_kinds_are_properties_of_the_spec():
    """Callers ask the drafter what it is (lookup, first step of one token, chained steps), not its method name."""
    kinds = {m: DrafterSpec(method=m, model="x" if m in ("draft_model", "eagle", "eagle3", "mtp", "medusa", "parallel")
                            else None) for m in ("draft_model", "eagle3", "medusa", "parallel", "ngram", "suffix",
                                                 "self_spec")}
    assert [m for m, s in kinds.items() if s.is_lookup] == ["ngram", "suffix"]
    assert [m for m, s in kinds.items() if s.first_step_one_token] == ["self_spec"]
    assert [m for m, s in kinds.items() if s.proposes_in_steps] == ["draft_model", "eagle3", "self_spec"]
    assert not DrafterSpec(method="self_spec", kv_budget_tokens=512).proposes_in_steps
