"""Disaggregated serving: the KV transfer's time against its closed form, the decode pool's
admission after it, speculation on the decode pool only, and the conservation of requests and
tokens across the two pools."""
from __future__ import annotations

import numpy as np
import pytest

from simulator.common.errors import SpecsightInputError
from simulator.run import simulate
from simulator.run.seeds import SEED_WORKLOAD
from simulator.workload.workload import generate_requests

# llama-3.1-8b, bf16 KV at TP 1: 2 (K, V) x 32 layers x 8 KV heads x 128 head dim x 2 bytes
KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2


def scenario(pools: dict, workload: dict, **extra) -> dict:
    return {"hardware": {"gpu": "h100-sxm", "tp": 1}, "model": "llama-3.1-8b", "workload": workload,
            "disaggregation": pools, **extra}


def test_transfer_time_is_latency_plus_bytes_over_bandwidth():
    """One request at a time: end-to-end TTFT minus the prefill pool's TTFT is the transfer,
    latency + prompt x KV bytes per token / bandwidth (overridden link: 25 GB/s, 15 us)."""
    prompt = 3000
    wl = {"arrival": {"process": "constant", "qps": 2.0}, "num_requests": 5, "prompt_len": prompt, "output_len": 8}
    pools = {"prefill": {"instances": 1}, "decode": {"instances": 1}, "link": "network",
             "bandwidth_gb_s": 25.0, "latency_us": 15.0}
    r = simulate(scenario(pools, wl))
    expect_s = 15e-6 + prompt * KV_BYTES_PER_TOKEN / 25e9
    s = r.summary
    assert s["kv_link"] == "network"
    assert s["kv_transfer_ms_mean"] == pytest.approx(expect_s * 1e3, rel=1e-12)
    assert s["ttft_ms_p50"] - s["pools"][0]["ttft_ms_p50"] == pytest.approx(expect_s * 1e3, rel=1e-9)


def test_link_from_the_profile_nvlink_within_a_node_network_across():
    wl = {"arrival": {"process": "constant", "qps": 1.0}, "num_requests": 2, "prompt_len": 1000, "output_len": 4}
    small = simulate(scenario({"prefill": {"instances": 2}, "decode": {"instances": 2}}, wl)).summary
    big = simulate(scenario({"prefill": {"instances": 4}, "decode": {"instances": 6}}, wl)).summary
    # hardware_profiles/h100-sxm.yaml: NVLink 450 GB/s, 20 us; 8 GPUs a node; NIC 50 GB/s, 10 us
    assert small["kv_link"] == "nvlink" and big["kv_link"] == "network"
    assert small["kv_transfer_ms_mean"] == pytest.approx((20e-6 + 1000 * KV_BYTES_PER_TOKEN / 450e9) * 1e3)
    assert big["kv_transfer_ms_mean"] == pytest.approx((10e-6 + 1000 * KV_BYTES_PER_TOKEN / 50e9) * 1e3)


def test_conservation_across_pools_with_speculation_on_decode_only():
    """2P3D under a Poisson load with a tight decode KV (preemptions): every request finishes once,
    the prefill pool computes every prompt token exactly once and emits K = 0 rounds only, and the
    tokens emitted across both pools are the requests' output tokens."""
    wl = {"arrival": {"process": "poisson", "qps": 40.0}, "num_requests": 300,
          "prompt_len": {"dist": "uniform", "low": 200, "high": 3000}, "output_len": {"dist": "uniform", "low": 2,
                                                                                       "high": 400}}
    pools = {"prefill": {"instances": 2}, "decode": {"instances": 3, "num_gpu_blocks": 600}}
    sc = scenario(pools, wl, drafter={"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 3},
                  acceptance={"model": "iid", "alpha": 0.7})
    r = simulate(sc)
    req, it = r.requests, r.iterations
    assert not req["finish_s"].isna().any()
    drawn = generate_requests(r.scenario.workload, np.random.default_rng(
        np.random.SeedSequence(r.scenario.seed).spawn(4)[SEED_WORKLOAD]))
    assert (req["output_tokens"].to_numpy() == drawn.output_len).all()
    assert (req["prompt_tokens"].to_numpy() == drawn.prompt_len).all()
    prefill, decode = it[it["replica"] < 2], it[it["replica"] >= 2]
    assert int(prefill["num_prefill_tokens"].sum()) == int(req["prompt_tokens"].sum())
    assert (prefill["k"] == 0).all() and (prefill["num_decode"] == 0).all()
    assert (decode["k"] > 0).any()
    assert r.summary["preemptions"] > 0          # the decode pool recomputed some (its own waiting queue)
    assert int(it["tokens_emitted"].sum()) == int(req["output_tokens"].sum())
    assert (req["first_token_s"] > req["arrival_s"]).all() and (req["finish_s"] >= req["first_token_s"]).all()
    assert [p["pool"] for p in r.summary["pools"]] == ["prefill", "decode"]
    assert r.summary["gpus"] == 5


def test_decode_admission_waits_for_room():
    """One decode slot (max_num_seqs 1): requests whose KV has arrived wait, so each decode starts
    after the previous one finished, and the decode batch never holds two."""
    wl = {"arrival": {"process": "constant", "qps": 1000.0}, "num_requests": 6, "prompt_len": 100, "output_len": 20}
    pools = {"prefill": {"instances": 1}, "decode": {"instances": 1, "max_num_seqs": 1}}
    r = simulate(scenario(pools, wl))
    it = r.iterations
    assert int(it[it["replica"] == 1]["num_decode"].max()) == 1
    fin = np.sort(r.requests["finish_s"].to_numpy())
    assert np.all(np.diff(fin) > 0)


DRAFT_MODEL = {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 3}
EAGLE3 = {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3}


@pytest.mark.parametrize("engine, drafter, moved", [
    ({"kind": "sglang"}, DRAFT_MODEL, True),                      # sgl-project/sglang PR #33584
    ({"kind": "vllm"}, EAGLE3, True),                             # NixlConnector moves the drafter's layers
    ({"kind": "vllm"}, DRAFT_MODEL, False),                       # issue #54926: recomputed on decode
    ({"kind": "trtllm"}, EAGLE3, True),                           # one-model: in the target's KV manager
    ({"kind": "trtllm", "version": "0.20"}, EAGLE3, False),       # two-model: ModelDrafter's context request
    ({"kind": "trtllm"}, DRAFT_MODEL, False),
])
def test_drafter_kv_transferred_or_rebuilt_as_each_engine_does(engine, drafter, moved):
    """One request: the transfer carries the drafter's KV per token where the engine moves it
    (latency + prompt x (target + drafter) bytes / bandwidth) and the target's alone where it
    rebuilds it; then the decode instance's first round drafts after ingesting one token (moved)
    or the whole context, prompt + first token (rebuilt: the drafter's prefill there)."""
    from simulator.scenario.disagg_spec import pool_source
    from simulator.scenario.engine_defaults import with_engine_defaults
    from simulator.scenario.resolve import resolve_deployment
    from simulator.scenario.scenario import load_scenario
    prompt = 2000
    wl = {"arrival": {"process": "constant", "qps": 1.0}, "num_requests": 1, "prompt_len": prompt, "output_len": 6}
    pools = {"prefill": {"instances": 1}, "decode": {"instances": 1}, "link": "network",
             "bandwidth_gb_s": 25.0, "latency_us": 15.0}
    sc = scenario(pools, wl, drafter=drafter, acceptance={"model": "iid", "alpha": 0.7}, policy={"kind": "static"},
                  engine=engine)
    r = simulate(sc)
    dec = with_engine_defaults(load_scenario(pool_source(sc, "decode")))
    dep = resolve_deployment(dec)
    drafter_kv = dep.drafter.kv_bytes_per_token_per_gpu()
    assert drafter_kv > 0
    per_token = KV_BYTES_PER_TOKEN + (drafter_kv if moved else 0.0)
    assert r.summary["kv_transfer_ms_mean"] == pytest.approx((15e-6 + prompt * per_token / 25e9) * 1e3, rel=1e-12)
    first = r.iterations[r.iterations["replica"] == 1].iloc[0]
    assert (first["num_decode"], first["k"]) == (1, 3)
    # the round drafts over the prompt's cached tokens; the rebuilt drafter first ingests prompt + first token
    one, whole = dep.step_cost.draft_s(1, 3, prompt, 1), dep.step_cost.draft_s(1, 3, prompt, prompt + 1)
    assert whole > 1.2 * one
    assert first["draft_s"] == pytest.approx(one if moved else whole, rel=1e-12)


@pytest.mark.parametrize("engine, drafter, moved", [
    ({"kind": "sglang"}, EAGLE3, True),           # the PD prefill engine runs the drafter (PR #33584)
    ({"kind": "vllm"}, DRAFT_MODEL, False),       # rebuilt on the decode server (issue #54926)
])
def test_prefill_pool_runs_and_holds_the_drafter_where_its_kv_is_moved(engine, drafter, moved, monkeypatch):
    """One request, one prompt chunk: where the engine moves the drafter's KV the prefill
    iteration is the target's chunk (as without speculation) + the drafter's pass over it
    (draft_s at K = 1 ingesting the prompt), and the prefill pool's blocks are
    floor((free - drafter weights) / (block x (target + drafter) KV per token)); where it rebuilds
    it the prefill iteration and blocks are those of the run without speculation."""
    from simulator.run import disaggregated
    from simulator.scenario.disagg_spec import pool_source
    from simulator.scenario.engine_defaults import with_engine_defaults
    from simulator.scenario.resolve import resolve_deployment
    from simulator.scenario.scenario import load_scenario
    prompt = 2000
    wl = {"arrival": {"process": "constant", "qps": 1.0}, "num_requests": 1, "prompt_len": prompt, "output_len": 6}
    pools = {"prefill": {"instances": 1, "max_num_batched_tokens": 4096}, "decode": {"instances": 1}}
    sc = scenario(pools, wl, drafter=drafter, acceptance={"model": "iid", "alpha": 0.7}, policy={"kind": "static"},
                  engine=engine)
    caps: dict[str, list[int]] = {"prefill": [], "decode": []}
    real = disaggregated._pool_capacity

    def spy(dep, longest, bs, pool):
        caps[pool].append(real(dep, longest, bs, pool))
        return caps[pool][-1]
    monkeypatch.setattr(disaggregated, "_pool_capacity", spy)
    r = simulate(sc)
    plain = simulate({**sc, "policy": {"kind": "off"}})          # a run without speculation
    (cap_spec, cap_plain), pf = caps["prefill"], lambda res: res.iterations[res.iterations["replica"] == 0]
    row, row0 = pf(r).iloc[0], pf(plain).iloc[0]
    assert len(pf(r)) == 1 and (row["num_prefill_tokens"], row["k"]) == (prompt, 0)
    assert (row["verify_s"], row["prefill_s"]) == (row0["verify_s"], row0["prefill_s"])     # the target's chunk
    dec = resolve_deployment(with_engine_defaults(load_scenario(pool_source(sc, "decode"))))
    kv0 = resolve_deployment(with_engine_defaults(load_scenario(pool_source(sc, "prefill")))).kv
    w_d, kv_d = dec.drafter.weight_bytes_per_gpu(), dec.drafter.kv_bytes_per_token_per_gpu()
    assert w_d > 0 and kv_d > 0 and kv0.kv_bytes_per_token == KV_BYTES_PER_TOKEN
    free = kv0.usable_bytes - kv0.target_weight_bytes - kv0.activation_reserve_bytes
    bs = kv0.block_size
    assert cap_plain == kv0.num_blocks == int(free // (bs * KV_BYTES_PER_TOKEN))
    if moved:
        drafter_s = dec.step_cost.draft_s(1, 1, 0, prompt)
        assert drafter_s > 0
        assert row["draft_s"] == pytest.approx(drafter_s, rel=1e-12)
        assert cap_spec == int((free - w_d) // (bs * (KV_BYTES_PER_TOKEN + kv_d))) < cap_plain
    else:
        assert row["draft_s"] == 0.0 and row["end_s"] == row0["end_s"]
        assert cap_spec == cap_plain
    assert row["end_s"] - row["start_s"] == pytest.approx(
        row["draft_s"] + row["verify_s"] + row["prefill_s"] + row["overhead_s"], rel=1e-12)


def test_bad_disaggregation_inputs():
    wl = {"arrival": {"process": "constant", "qps": 1.0}, "num_requests": 2, "prompt_len": 10, "output_len": 4}
    with pytest.raises(SpecsightInputError, match="hardware.replicas"):
        simulate({**scenario({"prefill": {"instances": 1}, "decode": {"instances": 1}}, wl),
                  "hardware": {"gpu": "h100-sxm", "replicas": 2}})
    with pytest.raises(SpecsightInputError, match="disaggregation.link"):
        simulate(scenario({"prefill": {}, "decode": {}, "link": "carrier-pigeon"}, wl))


def test_compiled_rounds_change_nothing_and_the_pools_batch_is_the_logs(monkeypatch):
    """The decode pool's compiled rounds give the trajectory Python's rounds give, and the pool's
    mean batch (decode sequences per decode round) is the iteration log's."""
    from simulator.serving.replica import Replica
    wl = {"arrival": {"process": "poisson", "qps": 30.0}, "num_requests": 150, "prompt_len": 500, "output_len": 100}
    sc = scenario({"prefill": {"instances": 1}, "decode": {"instances": 2}}, wl,
                  drafter={"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 2},
                  acceptance={"model": "iid", "alpha": 0.7})
    on = simulate(sc)
    monkeypatch.setattr(Replica, "KERNEL", False)
    off = simulate(sc)
    assert on.requests.equals(off.requests)
    it = on.iterations
    dec = it[(it["replica"] >= 1) & (it["num_decode"] > 0)]
    assert on.summary["pools"][1]["mean_batch"] == pytest.approx(dec["num_decode"].mean(), rel=1e-12)
    assert on.summary["mean_batch"] == on.summary["pools"][1]["mean_batch"]


def test_plan_unit_and_serving_commands_of_a_disaggregated_deployment():
    """A plan's replica is one xPyD unit (its GPUs); each engine gets prefill and decode servers,
    the K of speculation on the decode servers; EAGLE-3 also on vLLM's prefill server at K = 1 (its
    KV crosses with the target's, vLLM's P/D spec-decode test), not on SGLang's (which takes it from
    the decode servers' flags)."""
    import json

    from simulator.scenario.scenario import load_scenario
    from specsight.studies.deploy.study import deployment
    from specsight.studies.plan.study import replica_tp
    sc = load_scenario("llama8b-h100-eagle3-disagg", ["disaggregation.decode.tp=2"])
    assert replica_tp(sc.source) == 2 * 1 + 6 * 2
    dep = deployment(sc)
    names = [e.engine for e in dep.engines]
    assert names == ["vllm-prefill", "vllm-decode", "sglang-prefill", "sglang-decode", "trtllm-prefill",
                     "trtllm-decode", "trtllm-disaggregated"]

    def spec(argv):
        return json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec(dep["vllm-prefill"].argv) == {**spec(dep["vllm-decode"].argv), "num_speculative_tokens": 1}
    assert spec(dep["vllm-decode"].argv)["num_speculative_tokens"] == 3
    assert not any(a.startswith("--speculative") for a in dep["sglang-prefill"].argv)
    assert any(a.startswith("--speculative") for a in dep["sglang-decode"].argv)
    assert "NixlConnector" in dep["vllm-decode"].command and "NixlConnector" in dep["vllm-prefill"].command
    assert dep["sglang-decode"].argv[-4:] == ("--disaggregation-mode", "decode", "--disaggregation-transfer-backend",
                                              "mooncake")
    ngram = deployment(sc, ["drafter.method=ngram", "drafter.model=null"])
    assert not any(a.startswith("--speculative") for a in ngram["vllm-prefill"].argv)


def test_plan_prices_each_pool_at_its_own_gpu():
    """1P1D of two GPUs: an H200 prefill instance (TP 1) and an H100 decode instance (TP 2). The
    plan's $/hour is replicas x (1 x the H200's price + 2 x the H100's: hardware_profiles/*.yaml),
    and $/M output tokens follows from it."""
    from simulator.hardware.hardware import load_profile
    from specsight.studies.plan.outputs import headline
    from specsight.studies.plan.study import capacity_plan
    h200, h100 = (float(load_profile(g).price_usd_per_gpu_hour) for g in ("h200-sxm", "h100-sxm"))
    assert h200 != h100
    wl = {"arrival": {"process": "poisson", "qps": 4.0}, "num_requests": 120, "prompt_len": 500, "output_len": 24}
    sc = scenario({"prefill": {"instances": 1, "gpu": "h200-sxm"}, "decode": {"instances": 1, "tp": 2}}, wl,
                  slo={"tpot_ms_p99": 50, "ttft_ms_p99": 2000})
    p = capacity_plan(sc, 30.0, policies="off", tolerance=0.3, progress=False)
    (row,) = p.rows
    assert row["replicas"] and row["gpus"] == 3 * row["replicas"]
    hand_usd_h = row["replicas"] * (1 * h200 + 2 * h100)
    assert row["cost_per_hour_usd"] == pytest.approx(hand_usd_h, rel=1e-12)
    assert row["cost_per_million_output_tokens_usd"] == pytest.approx(hand_usd_h / (30.0 * 24 * 3600) * 1e6,
                                                                      rel=1e-12)
    assert "prefill (1 GPUs at $4.464)" in p.price_source and "decode (2 GPUs at $3.348)" in p.price_source
    assert "$3.72 per GPU-hour on average (prefill (1 GPUs at $4.464), decode (2 GPUs at $3.348))" in headline(p)


def _trtllm_files(dep) -> dict:
    import yaml
    return {name: yaml.safe_load(text) for e in ("trtllm-prefill", "trtllm-decode", "trtllm-disaggregated")
            for name, text in dep[e].files}


@pytest.mark.parametrize("method, decoding_type, on_context", [
    ("eagle3", "Eagle", True), ("mtp", "MTP", True), ("ngram", "NGram", False),
    ("draft_model", "Draft_Target", False)])
def test_trtllm_context_and_generation_servers_behind_trtllm_serve_disaggregated(method, decoding_type, on_context):
    """TensorRT-LLM's disaggregated serving as its docs write it: per pool `trtllm-serve MODEL
    --tp_size N --extra_llm_api_options YAML` with cache_transceiver_config (the context server's
    with disable_overlap_scheduler), and `trtllm-serve disaggregated -c disagg_config.yaml` listing
    P context and D generation servers. The generation servers speculate at the plan's K; MTP and
    EAGLE-3 (one-model) give the context server the same speculative_config, as TensorRT-LLM's
    disaggregated tests do; NGram and a draft model stay on the generation servers."""
    from simulator.scenario.scenario import load_scenario
    from specsight.studies.deploy.study import deployment
    drafter = {"eagle3": [],
               "mtp": ["model=qwen3-next-80b-a3b", "drafter.method=mtp", "drafter.model=qwen3-next-80b-a3b-mtp"],
               "ngram": ["drafter.method=ngram", "drafter.model=null"],
               "draft_model": ["drafter.method=draft_model", "drafter.model=llama-3.2-1b"]}[method]
    sc = load_scenario("llama8b-h100-eagle3-disagg", ["disaggregation.prefill.instances=3",
                                                      "disaggregation.decode.instances=5",
                                                      "disaggregation.decode.tp=2", *drafter])
    dep = deployment(sc)
    pre, dec, orch = dep["trtllm-prefill"], dep["trtllm-decode"], dep["trtllm-disaggregated"]
    assert pre.argv == ("trtllm-serve", dep.config.model, "--tp_size", "1", "--extra_llm_api_options",
                        "trtllm_prefill.yaml")
    assert dec.argv[2:] == ("--tp_size", "2", "--extra_llm_api_options", "trtllm_decode.yaml")
    assert orch.argv == ("trtllm-serve", "disaggregated", "-c", "disagg_config.yaml")
    f = _trtllm_files(dep)
    ctx, gen, cfg = f["trtllm_prefill.yaml"], f["trtllm_decode.yaml"], f["disagg_config.yaml"]
    assert ctx["disable_overlap_scheduler"] is True and "disable_overlap_scheduler" not in gen
    assert ctx["cache_transceiver_config"] == gen["cache_transceiver_config"] == {"backend": "DEFAULT"}
    assert (ctx["tensor_parallel_size"], gen["tensor_parallel_size"]) == (1, 2)
    assert gen["speculative_config"]["decoding_type"] == decoding_type
    assert gen["speculative_config"]["max_draft_len"] == 3
    assert ctx.get("speculative_config") == (gen["speculative_config"] if on_context else None)
    assert cfg["context_servers"]["num_instances"] == 3 and len(cfg["context_servers"]["urls"]) == 3
    assert cfg["generation_servers"]["num_instances"] == 5 and len(cfg["generation_servers"]["urls"]) == 5
    assert len(set(cfg["context_servers"]["urls"] + cfg["generation_servers"]["urls"])) == 8
    off = deployment(sc, ["policy.kind=off"])
    assert "speculative_config" not in _trtllm_files(off)["trtllm_decode.yaml"]


def test_trtllm_disaggregated_refuses_what_trtllm_refuses():
    from simulator.scenario.scenario import load_scenario
    from specsight.studies.deploy.study import deployment
    dep = deployment(load_scenario("llama8b-h100-eagle3-disagg", ["drafter.method=suffix", "drafter.model=null"]))
    assert [e.supported for e in dep.engines if e.engine.startswith("trtllm")] == [False, False, False]
    assert "suffix automaton" in dep["trtllm-decode"].unsupported


def test_prefill_pool_prefix_cache_frees_a_prompt_at_its_transfer():
    """Prefix caching on the prefill pool: a prompt's blocks join the LRU queue when its KV leaves
    (still findable, evictable), so with 200 blocks of room and requests one at a time, every
    request after the first finds the 256-token system prompt (16 blocks, the queue's most recent)
    and each admission evicts down to 200 hashes: 16 + 62 (N - 1) - 200 in all (each prompt 78 full
    blocks, 62 its own)."""
    n = 30
    wl = {"arrival": {"process": "constant", "qps": 1.0}, "num_requests": n, "prompt_len": 1000, "output_len": 4,
          "prefix": {"shared_tokens": 256}}
    pools = {"prefill": {"instances": 1, "num_gpu_blocks": 200}, "decode": {"instances": 1}}
    s = simulate(scenario(pools, wl, engine={"prefix_caching": True})).summary
    assert s["prefix_cache_hit_tokens"] == (n - 1) * 256
    assert s["prefix_cache_evictions"] == 16 + 62 * (n - 1) - 200


@pytest.mark.parametrize("drafter, moved", [(EAGLE3, True), (DRAFT_MODEL, False)])
def test_a_decode_pool_whose_engine_drafts_in_prefill_still_catches_up_as_the_kv_came(drafter, moved):
    """vLLM's CPU build (v1-0.32) prices a drafter's pass over a prompt in the prefill step
    (EngineDef.drafts_in_prefill); on a decode pool no prompt is prefilled there, so the first round
    ingests one token where the drafter's KV crossed with the target's and the whole context where
    it is rebuilt (that case fails where the decode pool kept the prefill-step rule's one token)."""
    from simulator.scenario.disagg_spec import pool_source
    from simulator.scenario.engine_defaults import with_engine_defaults
    from simulator.scenario.resolve import resolve_deployment
    from simulator.scenario.scenario import load_scenario
    prompt = 512
    wl = {"arrival": {"process": "constant", "qps": 0.5}, "num_requests": 1, "prompt_len": prompt, "output_len": 4}
    sc = scenario({"prefill": {"instances": 1}, "decode": {"instances": 1}}, wl, drafter=drafter,
                  acceptance={"model": "iid", "alpha": 0.7}, policy={"kind": "static"},
                  engine={"kind": "vllm", "version": "v1-0.32"})
    sc["hardware"] = {"profile": "hardware_profiles/cpu-vllm-groundtruth.yaml", "tp": 1, "dtype": "bf16"}
    r = simulate(sc)
    dep = resolve_deployment(with_engine_defaults(load_scenario(pool_source(sc, "decode"))))
    assert dep.step_cost.drafts_in_prefill
    first = r.iterations[r.iterations["replica"] == 1].iloc[0]
    assert first["num_decode"] == 1 and first["k"] > 0
    k = int(first["k"])
    one, whole = dep.step_cost.draft_s(1, k, prompt, 1), dep.step_cost.draft_s(1, k, prompt, prompt + 1)
    assert first["draft_s"] == pytest.approx(one if moved else whole, rel=1e-9)
