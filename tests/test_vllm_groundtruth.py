"""vLLM ground truth: the checkpoints' construction, the results file and resume, the missing-engine
error, and (only where .venv-vllm exists) one real engine run whose counters must show the
self-draft's guaranteed acceptance."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from calibrate import vllm_checkpoints as ckpt
from calibrate import vllm_results
from calibrate.vllm_grid import (
    FULL_BATCHES,
    FULL_GRID,
    MODELS,
    QUICK_GRID,
    REPEATED_BATCHES,
    REPEATED_GRID,
    REPEATED_REPEATS,
    Session,
    SpecRun,
    plan_sessions,
    run_name,
)
from calibrate.vllm_launch import REPO, engine_python
from simulator.common.errors import SpecsightInputError

CONFIGS = sorted(p.parent.name for p in (REPO / "models" / "groundtruth").glob("*/config.json"))
ENGINE_VENV = REPO / ".venv-vllm"
HAS_VLLM = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"


def _params(cfg: dict) -> int:
    h, inter, n = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    hd = cfg["head_dim"]
    attn = h * hd * (2 * cfg["num_attention_heads"] + 2 * cfg["num_key_value_heads"])
    return n * (attn + 3 * h * inter) + 2 * cfg["vocab_size"] * h


def test_every_drafter_in_the_grid_has_a_config_of_its_targets_shape():
    for model, specs in FULL_GRID.items():
        target = ckpt.load_config(model)
        assert target["vocab_size"] <= target["hidden_size"]          # one-hot embeddings fit
        for s in specs:
            name = s.drafter(model)
            if name is None:
                continue
            d = ckpt.load_config(name)
            assert d["vocab_size"] == target["vocab_size"] and d["hidden_size"] == target["hidden_size"], name
            if s.method == "eagle3":
                ids = d["eagle_aux_hidden_state_layer_ids"]
                assert len(set(ids)) == len(ids) and all(0 <= i <= target["num_hidden_layers"] for i in ids)
                assert d["intermediate_size"] >= d["vocab_size"]     # the MLP lookup has a unit per token
            if s.method in ("eagle", "eagle3"):
                assert d["num_hidden_layers"] == 1


def test_the_two_targets_differ_in_size_by_more_than_an_order_of_magnitude():
    """tiny-s: a step is mostly engine host work; tiny-m: the forward pass dominates."""
    small, medium = (_params(ckpt.load_config(m)) for m in ("tiny-s", "tiny-m"))
    assert medium / small > 50
    assert set(MODELS) == {"tiny-s", "tiny-m"} and set(CONFIGS) >= {"tiny-s", "tiny-m"}


def test_target_map_is_one_cycle_through_the_vocabulary():
    f = ckpt.target_map(256)
    seen, v = set(), 0
    for _ in range(256):
        seen.add(v)
        v = int(f[v])
    assert v == 0 and len(seen) == 256


@pytest.mark.parametrize("design,share", [("agree", 1.0), ("random", 0.0), ("mix 0.5", 0.5)])
def test_draft_map_agrees_on_the_designed_share(design, share):
    f = ckpt.target_map(1024)
    agree = (ckpt.draft_map(f, design) == f).float().mean().item()
    # mix: a binomial(1024, 0.5) share, within 4 sd (sd = 0.0156)
    assert abs(agree - share) <= (4 * math.sqrt(share * (1 - share) / 1024) if 0 < share < 1 else 0)


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def test_target_and_draft_model_emit_their_lookup():
    """The residual stream stays E[v] (o_proj, down_proj zero), so lm_head(norm(E[v])) picks f(v)."""
    cfg = ckpt.load_config("tiny-s")
    f = ckpt.target_map(cfg["vocab_size"])
    w = ckpt.causal_lm_weights(cfg, f, seed=0)
    assert not w["model.layers.0.self_attn.o_proj.weight"].any() and not w["model.layers.1.mlp.down_proj.weight"].any()
    e = w["model.embed_tokens.weight"]
    logits = _rms(e, w["model.norm.weight"]) @ w["lm_head.weight"].T
    assert torch.equal(logits.argmax(-1), f)


def test_eagle_head_predicts_g_of_the_next_token():
    """EAGLE-1 (vLLM llama_eagle.py): hidden = fc([E[t], h]); the layer adds nothing; the target's
    lm_head gives f(pi(t)) = g(t)."""
    cfg = ckpt.load_config("tiny-s-eagle")
    f = ckpt.target_map(cfg["vocab_size"])
    g = ckpt.draft_map(f, "mix 0.5")
    target_head = ckpt.causal_lm_weights(ckpt.load_config("tiny-s"), f, 0)["lm_head.weight"]
    pi = torch.where(g == f, torch.arange(f.numel()), torch.argsort(f)[g])
    w = ckpt.eagle_weights(cfg, pi, seed=0)
    e = w["embed_tokens.weight"]
    hidden = torch.randn(e.shape[0], cfg["hidden_size"])          # the target's hidden: ignored by fc
    h = torch.cat([e, hidden], -1) @ w["fc.weight"].T
    assert torch.equal((h @ target_head.T).argmax(-1), g)


def test_eagle3_head_chains_the_lookup_over_draft_steps():
    """EAGLE-3 (vLLM llama_eagle3.py, norm after residual): residual = fc(aux) = E[t_i]; MLP(post-norm)
    adds E[g(v)] - E[v]; lm_head = f. Step 1 gives f(g(t_i)); feeding the prenorm hidden back, step 2
    gives f(g(g(t_i)))."""
    cfg = ckpt.load_config("tiny-s-eagle3")
    f = ckpt.target_map(cfg["vocab_size"])
    g = ckpt.draft_map(f, "mix 0.5")
    w = ckpt.eagle3_weights(cfg, f, g, seed=0)
    e = w["embed_tokens.weight"]
    aux = torch.cat([e] * len(cfg["eagle_aux_hidden_state_layer_ids"]), -1)

    def step(residual: torch.Tensor) -> torch.Tensor:
        x = _rms(residual, w["midlayer.post_attention_layernorm.weight"])
        gate, up = x @ w["midlayer.mlp.gate_proj.weight"].T, x @ w["midlayer.mlp.up_proj.weight"].T
        return residual + (torch.nn.functional.silu(gate) * up) @ w["midlayer.mlp.down_proj.weight"].T
    h1 = step(aux @ w["fc.weight"].T)
    assert torch.equal((_rms(h1, w["norm.weight"]) @ w["lm_head.weight"].T).argmax(-1), f[g])
    h2 = step(h1)
    assert torch.equal((_rms(h2, w["norm.weight"]) @ w["lm_head.weight"].T).argmax(-1), f[g[g]])


def test_ngram_prompts_hold_the_targets_next_span_and_end_on_its_start():
    plan = MODELS["tiny-s"]
    span = plan.output_len // 2
    f = ckpt.target_map(256)
    for p in ckpt.prompts("tiny-s", 4, plan.prompt_len, span):
        assert len(p) == plan.prompt_len
        x = p[-1]
        at = p.index(x)
        assert p[at:at + span + 1] == [x] + [int(v) for v in _orbit(f, x, span)]


def _orbit(f: torch.Tensor, x: int, n: int) -> list[int]:
    out = []
    for _ in range(n):
        x = int(f[x])
        out.append(x)
    return out


def _raw(name: str, method: str = "eagle", batch: int = 4) -> dict:
    rep = {"wall_s": 1.0, "output_tokens": 256, "tpot_ms": 2.0, "output_tokens_per_s": 256.0, "load_1m": 1.5,
           "process": 0, **{f"{m}_ms_p{q}": 2.0 for m in ("tpot", "itl") for q in (50, 90, 99)}}
    base = [{**rep, "tpot_ms": t} for t in (3.0, 4.0, 5.0)]
    return {"kind": "run", "name": name, "method": method, "k": 2, "batch": batch, "design": "agree",
            "draft": "tiny-s-eagle", "repeats": [rep] * 3, "baseline_repeats": base,
            "acceptance": {"num_drafts": 10, "num_draft_tokens": 20, "num_accepted_tokens": 15,
                           "accepted_per_pos": [10, 5]}}


def test_run_record_has_the_interface_fields_and_same_process_speedups():
    rec = vllm_results.run_record(_raw("s-eagle-k2-b4"), "tiny-s", {"vllm": "0.32.0"}, 64, 32)
    for key in ("name", "model", "target_config", "draft_config", "method", "k", "batch", "prompt_len",
                "output_len", "acceptance_design", "repeats", "tpot_ms", "output_tokens_per_s", "baseline",
                "speedup", "speedup_spread", "acceptance", "mean_accept_len", "env"):
        assert key in rec, key
    assert rec["speedups"] == [1.5, 2.0, 2.5] and rec["speedup"] == 2.0 and rec["speedup_spread"] == [1.5, 2.5]
    assert rec["mean_accept_len"] == 2.5 and rec["baseline"] == "s-plain-b4"
    assert (REPO / rec["target_config"]).exists() and (REPO / rec["draft_config"]).exists()


def test_results_file_resumes_by_name_and_drops_a_torn_last_line(tmp_path):
    out = tmp_path / "runs.jsonl"
    vllm_results.start(out, "specsight groundtruth --engine vllm", {"vllm": "0.32.0"})
    vllm_results.append(out, vllm_results.run_record(_raw("s-eagle-k2-b4"), "tiny-s", {}, 64, 32))
    with out.open("a") as f:
        f.write('{"kind": "run", "name": "s-eagle-k2-b8", "rep')          # interrupted mid-write
    header, runs = vllm_results.read(out)
    assert header["command"].startswith("specsight") and [r["name"] for r in runs] == ["s-eagle-k2-b4"]
    vllm_results.start(out, "another command", {})                         # a resumed grid keeps its header
    assert vllm_results.read(out)[0]["command"] == "specsight groundtruth --engine vllm"
    done = vllm_results.done_names(out)
    grid = {"tiny-s": (SpecRun("eagle", 2),)}
    (session,) = plan_sessions(grid, (4, 8), 3, str(tmp_path), done)
    assert session.runs[0]["names"] == {8: "s-eagle-k2-b8"}
    assert session.plain_names == {4: "s-plain-b4", 8: "s-plain-b8"}
    assert Session.from_json(json.loads(json.dumps(session.to_json()))) == session
    assert plan_sessions(grid, (4,), 3, str(tmp_path), done | {"s-plain-b4"}) == []


def test_a_corrupt_line_inside_the_file_is_a_one_line_error(tmp_path):
    out = tmp_path / "runs.jsonl"
    out.write_text('{"kind": "header"}\nnot json\n{"kind": "run", "name": "x"}\n')
    with pytest.raises(SpecsightInputError, match="one JSON object a line"):
        vllm_results.read(out)


def test_full_grid_meets_the_issues_coverage():
    names = {run_name(MODELS[m].short, s.method, s.k, s.design, b) for m, specs in FULL_GRID.items()
             for s in specs for b in FULL_BATCHES}
    assert len(names) >= 24
    methods = {s.method for specs in FULL_GRID.values() for s in specs}
    assert methods == {"ngram", "draft_model", "eagle", "eagle3"}
    assert {s.k for s in FULL_GRID["tiny-s"]} == {1, 2, 3, 4} and max(FULL_BATCHES) >= 16
    assert QUICK_GRID.keys() <= FULL_GRID.keys()


def test_repeated_grid_meets_the_goals_coverage_and_is_part_of_the_full_grid():
    """The many-repeat set the goals are judged on: at least 24 runs of at least 3 methods, K 1-4,
    batch 1-16, a run that loses by construction (random drafts) on each model, at least the 3
    repeats the issue asks, every run also one of the full grid's (so the two files measure the
    same configurations)."""
    names = [run_name(MODELS[m].short, s.method, s.k, s.design, b) for m, specs in REPEATED_GRID.items()
             for s in specs for b in REPEATED_BATCHES]
    assert len(set(names)) == len(names) >= 24
    assert len({s.method for specs in REPEATED_GRID.values() for s in specs}) >= 3
    ks = {s.k for specs in REPEATED_GRID.values() for s in specs}
    assert min(ks) == 1 and max(ks) >= 4
    assert min(REPEATED_BATCHES) == 1 and max(REPEATED_BATCHES) >= 16
    assert all(any(s.design == "random" for s in specs) for specs in REPEATED_GRID.values())
    assert set(REPEATED_REPEATS) == set(REPEATED_GRID) and min(REPEATED_REPEATS.values()) >= 3
    for m, specs in REPEATED_GRID.items():
        assert set(specs) <= set(FULL_GRID[m]) and set(REPEATED_BATCHES) <= set(FULL_BATCHES)
    sessions = plan_sessions(REPEATED_GRID, REPEATED_BATCHES, REPEATED_REPEATS, "cache", set())
    assert {s.model: s.repeats for s in sessions} == REPEATED_REPEATS


@pytest.mark.parametrize("text, want", [("5", {"tiny-s": 5, "tiny-m": 5}),
                                        ("tiny-s=15", {"tiny-s": 15, "tiny-m": 3}),
                                        (" tiny-m=7 , tiny-s=2 ", {"tiny-s": 2, "tiny-m": 7})])
def test_repeats_flag_takes_a_count_or_one_per_target(text, want):
    from specsight.cli.groundtruth_vllm import parse_repeats
    assert parse_repeats(text, ["tiny-s", "tiny-m"]) == want


def test_a_target_the_repeats_flag_does_not_name_keeps_the_repeated_sets_count():
    from specsight.cli.groundtruth_vllm import parse_repeats
    got = parse_repeats("tiny-s=20", list(REPEATED_REPEATS), REPEATED_REPEATS)
    assert got == {**REPEATED_REPEATS, "tiny-s": 20}


@pytest.mark.parametrize("text, named", [("0", "'0'"), ("x", "'x'"), ("tiny-s=", "'tiny-s='"),
                                         ("tiny-q=3", "'tiny-q'"), ("tiny-s=-1", "'tiny-s=-1'")])
def test_a_bad_repeats_flag_is_one_line_naming_it(text, named):
    from specsight.cli.groundtruth_vllm import parse_repeats
    with pytest.raises(SpecsightInputError, match=f"--repeats={named}"):
        parse_repeats(text, ["tiny-s", "tiny-m"])


def test_missing_engine_environment_names_the_install_command(tmp_path):
    with pytest.raises(SpecsightInputError, match="scripts/setup.sh --engine vllm"):
        engine_python(tmp_path / "no-such-venv")
    this_venv = Path(sys.executable).parent.parent            # specsight's own venv: it has no vllm
    with pytest.raises(SpecsightInputError, match="vllm is not installed there; run `bash scripts/setup.sh"):
        engine_python(this_venv)


def test_cli_without_the_engine_prints_one_line_and_exits_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "specsight.cli", "groundtruth", "--engine", "vllm", "--quick",
                        "--engine-venv", str(tmp_path / "absent"), "--out", str(tmp_path / "runs.jsonl")],
                       capture_output=True, text=True, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin"})
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "bash scripts/setup.sh --engine vllm" in lines[0]
    assert not (tmp_path / "runs.jsonl").exists()


def _has_engine() -> bool:
    py = ENGINE_VENV / "bin" / "python"
    return py.exists() and subprocess.run([str(py), "-c", HAS_VLLM], capture_output=True).returncode == 0


NO_ENGINE = "no vLLM engine: .venv-vllm is absent (bash scripts/setup.sh --engine vllm)"


@pytest.mark.slow
@pytest.mark.skipif(not _has_engine(), reason=NO_ENGINE)
def test_real_engine_self_draft_accepts_every_token_under_greedy(tmp_path, monkeypatch):
    """vLLM 0.32's own counters: a draft model that is the target accepts all it drafts, and the
    runner has already required its greedy output to equal the plain engine's token for token.
    Both engines run inside the runner's process (VLLM_ENABLE_V1_MULTIPROCESSING=0, passed on by
    calibrate.vllm_launch.engine_env): the same scheduler, model runner and counters, each up in
    about 3 s where a spawned EngineCore and worker each import torch and vLLM again (about 22 s
    an engine, and 5 s to stop, on a 2-core machine)."""
    from calibrate.vllm_launch import run_grid
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    out = tmp_path / "runs.jsonl"
    recs = run_grid(out, {"tiny-s": (SpecRun("draft_model", 2, "self"),)}, (2,), 1, ENGINE_VENV,
                    tmp_path / "cache", "pytest", settle_s=0.0)    # (no engine process left to stop spinning)
    spec = next(r for r in recs if r["method"] == "draft_model")
    acc = spec["acceptance"]
    assert acc["num_drafts"] > 0 and acc["num_accepted_tokens"] == acc["num_draft_tokens"] > 0
    assert spec["acceptance_rate"] == 1.0
    assert {r["name"] for r in recs} == {"s-draft_model-self-k2-b2", "s-plain-b2"}
    assert vllm_results.read(out)[0]["env"]["vllm"] == "0.32.0"


def test_crossover_is_the_first_batch_below_one_after_one_at_or_above():
    def rec(batch: int, speedup: float, k: int = 2) -> dict:
        return {"model": "tiny-s", "method": "eagle", "design": "agree", "k": k, "batch": batch, "speedup": speedup}
    rows = vllm_results.crossovers([rec(1, 1.6), rec(4, 1.1), rec(2, 1.3), rec(8, 0.9), rec(16, 0.7),
                                    rec(1, 0.8, k=4), rec(4, 0.7, k=4)])
    assert [(r["k"], r["batches"], r["stops_paying_at_batch"]) for r in rows] == [
        (2, [1, 2, 4, 8, 16], 8), (4, [1, 4], None)]
