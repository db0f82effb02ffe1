"""Deployable output (specsight.studies.deploy.study): each engine's command parsed as the engine would
parse it, every flag and field checked against the engines' documented names
(tests/data/engine_names.yaml, each with the file@commit it was read in), the per-batch-size K
schedules checked against the simulated rule at every batch size, and refusals where an engine
lacks what was simulated."""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
from pathlib import Path

import pytest
import yaml

from simulator.common.errors import SpecsightInputError
from simulator.common.paths import MODELS_DIR
from simulator.speculation.engine_policies import TrtllmSchedulePolicy, VllmDynamicPolicy
from simulator.speculation.policies import BatchSchedulePolicy, PolicyState
from specsight.studies.deploy.study import HUB_ID, deployment, hub_name

ROOT = Path(__file__).resolve().parents[1]
NAMES = yaml.safe_load((ROOT / "tests/data/engine_names.yaml").read_text())
EAGLE3_70B = ROOT / "scenarios/llama70b-tp4-h100-chat-eagle3.yaml"


def scenario(**changes) -> dict:
    """The shipped EAGLE-3 70B scenario with top-level blocks replaced or merged."""
    raw = yaml.safe_load(EAGLE3_70B.read_text())
    for key, value in changes.items():
        raw[key] = {**raw[key], **value} if isinstance(value, dict) and key in ("drafter", "engine") else value
    return raw


def parser_for(engine: str) -> argparse.ArgumentParser:
    """An argparse parser that knows only the engine's documented flags (choices where documented)."""
    p = argparse.ArgumentParser(prog=engine, add_help=False, allow_abbrev=False)
    p.add_argument("model", nargs="?")
    for flag, kind in NAMES[engine]["flags"].items():
        if kind == "flag":
            p.add_argument(flag, action="store_true")
        elif isinstance(kind, list):
            p.add_argument(flag, choices=kind)
        else:
            p.add_argument(flag, type={"int": int, "float": float}.get(kind, str))
    return p


def parse_script(path: Path, engine: str) -> tuple[argparse.Namespace, list[str]]:
    """The written script's exec line split as bash would (shlex), its program checked, its
    arguments parsed with only the documented flags: anything else is an error."""
    text = path.read_text().replace("\\\n", " ")
    line = next(s for s in text.splitlines() if s.startswith("exec "))
    words = shlex.split(line)[1:]
    prog = NAMES[engine]["program"]
    assert words[:len(prog)] == prog
    p = parser_for(engine)
    p.error = lambda msg: pytest.fail(f"{engine}: {msg}")     # argparse would exit(2)
    return p.parse_args(words[len(prog):]), words


def test_vllm_command_parses_with_the_documented_flags(tmp_path):
    dep = deployment(EAGLE3_70B)
    files = dep.write(tmp_path)
    ns, _ = parse_script(Path(files["serve_vllm.sh"]), "vllm")
    assert ns.model == "meta-llama/Llama-3.1-70B-Instruct" and ns.tensor_parallel_size == 4
    assert ns.max_num_seqs == 256 and ns.max_num_batched_tokens == 8192 and ns.dtype == "bfloat16"
    spec = json.loads(ns.speculative_config)
    assert set(spec) <= set(NAMES["vllm"]["speculative_config"])
    assert spec == {"method": "eagle3", "num_speculative_tokens": 3, "model": "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B"}
    assert spec["method"] in NAMES["vllm"]["methods"]
    assert dep["vllm"].command == shlex.join(dep["vllm"].argv)


def test_sglang_command_parses_with_the_documented_flags(tmp_path):
    files = deployment(EAGLE3_70B).write(tmp_path)
    ns, _ = parse_script(Path(files["serve_sglang.sh"]), "sglang")
    assert ns.__dict__["model_path"] == "meta-llama/Llama-3.1-70B-Instruct" and ns.tp_size == 4
    assert ns.speculative_algorithm == "EAGLE3"
    assert ns.speculative_draft_model_path == "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B"
    # a chain of K = 3: 3 draft steps, top-1, a verify window of the last token and 3 drafts
    assert (ns.speculative_num_steps, ns.speculative_eagle_topk, ns.speculative_num_draft_tokens) == (3, 1, 4)
    assert ns.max_running_requests == 256


def test_trtllm_yaml_loads_with_the_documented_fields(tmp_path):
    files = deployment(EAGLE3_70B).write(tmp_path)
    ns, words = parse_script(Path(files["serve_trtllm.sh"]), "trtllm")
    assert ns.model == "meta-llama/Llama-3.1-70B-Instruct" and ns.tp_size == 4
    assert ns.extra_llm_api_options == "$HERE/trtllm.yaml"      # the file beside the script
    opts = yaml.safe_load(Path(files["trtllm.yaml"]).read_text())
    assert set(opts) <= set(NAMES["trtllm"]["llm_args"])
    spec = opts["speculative_config"]
    assert set(spec) <= set(NAMES["trtllm"]["speculative_config"])
    assert spec["decoding_type"] in NAMES["trtllm"]["decoding_types"]
    assert (spec["decoding_type"], spec["max_draft_len"]) == ("Eagle", 3)
    assert opts["tensor_parallel_size"] == 4 and opts["max_batch_size"] == 256


def _vllm_k(ranges, scheduled: int) -> int:
    """vLLM's lookup: the K of the range holding the count, a gap or the tail inheriting the
    previous range's K (simulator/speculation/engine_policies.py, read in vllm/v1/spec_decode/dynamic/utils.py)."""
    k = None
    for a, _b, kk in ranges:
        if a <= scheduled:
            k = kk
    return k


def _trtllm_k(schedule: dict, active: int) -> int:
    """draft_len_schedule {b: K}: K of the first bound b >= active, 0 past the last."""
    return next((k for b, k in sorted(schedule.items()) if b >= active), 0)


def test_a_batch_schedule_becomes_each_engines_schedule_with_the_same_k_at_every_batch(tmp_path):
    rows = [[4, 3], [16, 1]]
    dep = deployment(scenario(policy={"kind": "batch_schedule", "schedule": rows}, engine={"max_num_seqs": 64}))
    policy = BatchSchedulePolicy(3, rows)
    ns, _ = parse_script(Path(dep.write(tmp_path)["serve_vllm.sh"]), "vllm")
    spec = json.loads(ns.speculative_config)
    ranges = spec["num_speculative_tokens_per_batch_size"]
    assert spec["num_speculative_tokens"] == 3
    opts = yaml.safe_load((tmp_path / "trtllm.yaml").read_text())["speculative_config"]
    sched = opts["draft_len_schedule"]
    assert opts["max_draft_len"] == sched[min(sched)] == 3         # TensorRT-LLM's validator
    for b in range(1, 65):
        want = policy.choose_k(b, PolicyState())
        assert _vllm_k(ranges, b) == want == _trtllm_k(sched, b), b
    assert not dep["sglang"].supported and "no per-batch-size K schedule" in dep["sglang"].unsupported


def test_engine_rules_pass_through_to_their_own_engine_only(tmp_path):
    ranges = [[1, 8, 3], [9, 32, 1], [33, 256, 0]]
    dep = deployment(scenario(policy={"kind": "vllm_dynamic", "num_speculative_tokens_per_batch_size": ranges},
                              engine={"kind": "vllm"}))
    spec = json.loads(parse_script(Path(dep.write(tmp_path)["serve_vllm.sh"]), "vllm")[0].speculative_config)
    policy = VllmDynamicPolicy(3, ranges)
    for c in range(1, 300):
        assert _vllm_k(spec["num_speculative_tokens_per_batch_size"], c) == policy.k_for_scheduled(c)
    for other in ("sglang", "trtllm"):
        assert "vllm's own rule" in dep[other].unsupported

    trt = {"kind": "trtllm_schedule", "draft_len_schedule": [[4, 3], [8, 2], [32, 1]], "acceptance_window": 50,
           "acceptance_length_threshold": 0.5}
    dep = deployment(scenario(policy=trt, engine={"kind": "trtllm"}))
    opts = yaml.safe_load(dict(dep["trtllm"].files)["trtllm.yaml"])["speculative_config"]
    assert set(opts) <= set(NAMES["trtllm"]["speculative_config"])
    assert (opts["acceptance_window"], opts["acceptance_length_threshold"]) == (50, 0.5)
    policy = TrtllmSchedulePolicy(3, trt["draft_len_schedule"])
    for a in range(1, 64):
        assert _trtllm_k(opts["draft_len_schedule"], a) == policy.k_for_active(a)
    assert not dep["vllm"].supported and not dep["sglang"].supported


def test_sglang_adaptive_writes_the_config_sglang_reads(tmp_path):
    dep = deployment(scenario(policy={"kind": "sglang_adaptive"}, engine={"kind": "sglang"}))
    files = dep.write(tmp_path)
    ns, _ = parse_script(Path(files["serve_sglang.sh"]), "sglang")
    assert ns.speculative_adaptive and ns.speculative_adaptive_config == "$HERE/sglang_adaptive.json"
    cfg = json.loads(Path(files["sglang_adaptive.json"]).read_text())
    names = NAMES["sglang"]["adaptive_config"]
    slots = {k: v for k, v in cfg.items() if k.isdigit()}
    assert set(cfg) - set(slots) <= set(names["top_level"])
    assert all(set(v) <= set(names["entry"]) for v in slots.values())
    # SGLang's default ladder with the steps above the drafter's K = 3 dropped (engine_policies.py)
    assert {k: v["candidate_steps"] for k, v in slots.items()} == {"1": [1, 3], "8": [0, 1, 3], "32": [0, 1],
                                                                    "64": [0]}
    assert not dep["vllm"].supported and not dep["trtllm"].supported


@pytest.mark.parametrize("method,model,refusing", [
    ("medusa", "medusa-llama-3.1-8b", {"vllm": "Medusa as a token tree", "sglang": "Medusa",
                                       "trtllm": "PyTorch backend"}),
    ("self_spec", None, {"vllm": "self-speculative", "sglang": "self-speculative", "trtllm": "self-speculative"}),
    ("suffix", None, {"sglang": "suffix", "trtllm": "SA"}),
    ("eagle", "eagle-llama-3.1-8b", {"trtllm": "EAGLE-3"}),
])
def test_a_method_an_engine_lacks_is_refused_by_name(method, model, refusing):
    drafter = {"method": method, "num_speculative_tokens": 3, "model": model}
    raw = scenario(model="llama-3.1-8b", hardware={"gpu": "h100-sxm", "tp": 1},
                   drafter={k: v for k, v in drafter.items() if v is not None},
                   acceptance={"model": "iid", "alpha": 0.7})
    dep = deployment(raw, draft_path="/ckpt/medusa" if method == "medusa" else None)
    for e in dep.engines:
        if e.engine in refusing:
            assert not e.supported and refusing[e.engine] in e.unsupported, e
        else:
            assert e.supported, e
    assert dep["vllm"].supported == (method not in ("self_spec", "medusa"))


def test_specsight_only_policies_are_refused_not_mapped():
    dep = deployment(scenario(policy={"kind": "goodput"}))
    for e in dep.engines:
        assert not e.supported and "not an engine feature" in e.unsupported


def test_no_speculation_serves_the_plain_model(tmp_path):
    dep = deployment(scenario(policy={"kind": "off"}))
    ns, words = parse_script(Path(dep.write(tmp_path)["serve_vllm.sh"]), "vllm")
    assert ns.speculative_config is None
    ns, _ = parse_script(tmp_path / "serve_sglang.sh", "sglang")
    assert ns.speculative_algorithm is None
    assert "speculative_config" not in yaml.safe_load((tmp_path / "trtllm.yaml").read_text())


def test_model_names_come_from_the_configs(tmp_path):
    for p in sorted(MODELS_DIR.glob("*.json")):
        cfg = json.loads(p.read_text())
        if "_name_or_path" in cfg:         # the repo id the config's own _source names
            assert HUB_ID.match(cfg["_name_or_path"]) and cfg["_source"].startswith(cfg["_name_or_path"]), p
    assert hub_name("llama-3.1-8b", "model") == "meta-llama/Llama-3.1-8B-Instruct"
    local = tmp_path / "my-model"
    local.mkdir()
    (local / "config.json").write_text((MODELS_DIR / "llama-3.2-1b.json").read_text().replace("_name_or_path", "_x"))
    assert hub_name(str(local / "config.json"), "model") == str(local)      # a local checkpoint folder
    with pytest.raises(SpecsightInputError, match="no Hugging Face repo id"):
        hub_name("medusa-llama-3.1-8b", "drafter.model")
    dep = deployment(EAGLE3_70B, model_path="/models/llama70b", draft_path="/models/eagle3")
    assert dep["vllm"].argv[2] == "/models/llama70b" and "/models/eagle3" in dep["vllm"].argv[-1]


def test_fixed_step_scenarios_have_no_deployment():
    raw = {"name": "fixed", "hardware": {"kind": "fixed", "target_step_s": 0.02},
           "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 4,
                        "prompt_len": 8, "output_len": 8}}
    with pytest.raises(SpecsightInputError, match="needs a model and a GPU"):
        deployment(raw)


SMALL = {
    "name": "plan-small", "seed": 1, "hardware": {"gpu": "h100-sxm", "tp": 1}, "model": "llama-3.1-8b",
    "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3},
    "acceptance": {"model": "iid", "alpha": 0.7}, "policy": {"kind": "static"},
    "workload": {"arrival": {"process": "poisson", "qps": 4}, "num_requests": 60, "prompt_len": 256,
                 "output_len": 64},
    "engine": {"max_num_seqs": 64, "max_num_batched_tokens": 4096},
    "slo": {"tpot_ms_p99": 40, "ttft_ms_p99": 1000},
}


@pytest.fixture(scope="module")
def small_plan(tmp_path_factory) -> tuple[Path, dict, str]:
    """`specsight plan` on SMALL, with --json and then as text on the same --out: the --out, the
    JSON and the text (the two tests below read one plan)."""
    from specsight.cli import main
    d = tmp_path_factory.mktemp("plan")
    path = d / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    out = d / "plan"
    argv = ["plan", str(path), "--target-qps", "20", "--policies", "off,static", "--out", str(out), "--no-progress"]
    printed = []
    for extra in (["--json"], []):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(argv + extra) == 0
        printed.append(buf.getvalue())
    return out, json.loads(printed[0]), printed[1]


def test_plan_prints_and_writes_the_chosen_configurations_commands(small_plan):
    """`specsight plan` deploys its cheapest row (ties: the larger capacity, then the lower TPOT
    p99), prints each engine's command and writes the scripts beside plan.csv."""
    out, res, text = small_plan
    rows = [r for r in res["plans"] if r["max_qps_per_replica"]]
    best = min(rows, key=lambda r: (r["cost_per_million_output_tokens_usd"], r["gpus"], -r["max_qps_per_replica"],
                                    r["tpot_ms_p99_at_max"]))
    dep = res["deployment"]
    assert dep["chosen"] == best["config"]
    for name in ("serve_vllm.sh", "serve_sglang.sh", "serve_trtllm.sh", "trtllm.yaml"):
        assert res["files"][name] == str(out / name) and (out / name).exists()
    ns, _ = parse_script(out / "serve_vllm.sh", "vllm")
    spec = None if ns.speculative_config is None else json.loads(ns.speculative_config)
    assert (spec is None) == best["config"].startswith("off")
    assert dep["engines"]["vllm"]["command"] == shlex.join(dep["engines"]["vllm"]["argv"])
    md = (out / "plan.md").read_text()                     # plan.md closes with the same commands
    assert "## Serving commands" in md and dep["engines"]["vllm"]["command"] in md
    assert f"serving commands for {best['config']}" in text


def test_plan_writes_the_best_configuration_without_speculation_too(small_plan):
    """When the cheapest row speculates, plan also prints and writes (under no_speculation/) the
    serving commands of the best row without it: the plain model, no --speculative-config."""
    from specsight.studies.deploy.study import NO_SPECULATION_DIR
    out, res, text = small_plan
    dep = res["deployment"]
    assert not dep["chosen"].startswith("off")                   # EAGLE-3 at alpha 0.7 is the cheaper here
    plain = dep["no_speculation"]
    assert plain["chosen"] == "off (no speculation)" and plain["config"]["method"] is None
    assert "--speculative-config" not in plain["engines"]["vllm"]["argv"]
    assert "--speculative-config" in dep["engines"]["vllm"]["argv"]
    script = out / NO_SPECULATION_DIR / "serve_vllm.sh"
    assert res["files"][f"{NO_SPECULATION_DIR}/serve_vllm.sh"] == str(script)
    ns, _ = parse_script(script, "vllm")
    assert ns.speculative_config is None and ns.model == dep["config"]["model"]
    assert "without speculation, the best configuration is off (no speculation)" in text
    assert plain["engines"]["vllm"]["command"] in text


def test_each_script_hands_the_engine_exactly_its_argv(tmp_path):
    """Run every written script with stand-in `vllm`, `python` and `trtllm-serve` programs that
    record their arguments: bash delivers argv word for word, the files as paths beside the script."""
    import os
    import subprocess
    import sys
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for prog in ("vllm", "python", "trtllm-serve"):
        stub = bin_dir / prog
        stub.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
        stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    adaptive = scenario(policy={"kind": "sglang_adaptive"}, engine={"kind": "sglang"})
    for i, dep in enumerate((deployment(EAGLE3_70B), deployment(adaptive))):
        out = tmp_path / f"out {i}"                         # a space in the folder: quoting matters
        files = dep.write(out)
        for e in (e for e in dep.engines if e.supported):
            run = subprocess.run(["bash", files[f"serve_{e.engine}.sh"]], env=env, capture_output=True,
                                 text=True, check=True)
            beside = {name: str(out.resolve() / name) for name, _ in e.files}
            assert json.loads(run.stdout) == [beside.get(w, w) for w in e.argv[1:]], e.engine


DSV3_EP = ROOT / "scenarios/deepseek-v3-2node-ep-mtp.yaml"


def test_expert_parallel_and_dp_attention_flags_parse_as_the_engines_spell_them(tmp_path):
    """EP16 + DP attention (the shipped two-node scenario): SGLang --ep-size 16 --dp-size 16
    --enable-dp-attention with the dense layers and LM head per attention rank; vLLM TP 1 x DP 16 with
    --enable-expert-parallel; TensorRT-LLM refused (no such fields written)."""
    dep = deployment(DSV3_EP)
    files = dep.write(tmp_path)
    sg, _ = parse_script(Path(files["serve_sglang.sh"]), "sglang")
    assert (sg.tp_size, sg.ep_size, sg.dp_size) == (16, 16, 16)
    assert sg.enable_dp_attention and sg.enable_dp_lm_head and sg.moe_dense_tp_size == 1
    vl, _ = parse_script(Path(files["serve_vllm.sh"]), "vllm")
    assert (vl.tensor_parallel_size, vl.data_parallel_size, vl.enable_expert_parallel) == (1, 16, True)
    assert not dep["trtllm"].supported and "expert-parallel" in dep["trtllm"].unsupported


def test_expert_parallelism_under_tp_attention(tmp_path):
    """EP groups smaller than the replica under TP attention: SGLang --ep-size M with no DP flags;
    vLLM refuses (its EP group is all DP x TP GPUs); EP over every GPU runs on vLLM with TP."""
    dep = deployment(DSV3_EP, ["hardware.dp_attention=false", "hardware.ep=8"])
    sg, words = parse_script(Path(dep.write(tmp_path)["serve_sglang.sh"]), "sglang")
    assert (sg.tp_size, sg.ep_size, sg.dp_size) == (16, 8, None) and "--enable-dp-attention" not in words
    assert not dep["vllm"].supported and "one EP group" in dep["vllm"].unsupported
    full = deployment(DSV3_EP, ["hardware.dp_attention=false"])
    vl, words = parse_script(Path(full.write(tmp_path / "full")["serve_vllm.sh"]), "vllm")
    assert vl.tensor_parallel_size == 16 and vl.enable_expert_parallel and "--data-parallel-size" not in words


def test_no_parallel_flags_without_ep_or_dp_attention(tmp_path):
    files = deployment(EAGLE3_70B).write(tmp_path)
    for engine in ("sglang", "vllm"):
        _, words = parse_script(Path(files[f"serve_{engine}.sh"]), engine)
        assert not {"--ep-size", "--dp-size", "--enable-dp-attention", "--data-parallel-size",
                    "--enable-expert-parallel"} & set(words)


def test_a_policy_that_never_speculates_deploys_no_drafter():
    """The simulator budgets a never-speculating run as a plain deployment (simulator/scenario/deployment.py,
    drafter_loaded); its serving command names no speculative method either, while a schedule with a
    K > 0 row keeps the drafter."""
    from specsight.studies.deploy.study import serving_config
    eagle = "scenarios/llama8b-h100-eagle3-chat.yaml"
    assert serving_config(eagle, ["policy={kind: batch_schedule, schedule: [[1, 0], [64, 0]]}"]).method is None
    assert serving_config(eagle, ["policy={kind: static, k: 0}"]).method is None
    assert serving_config(eagle, ["policy={kind: batch_schedule, schedule: [[1, 2], [64, 0]]}"]).method == "eagle3"
