"""Ground truth (real speculative decoding in torch) and its validation against the simulator."""
import contextlib
import io
import json

import numpy as np
import pandas as pd
import pytest
import torch

from calibrate.groundtruth import GTConfig, load_run, run_groundtruth, run_interleaved, run_one, write_run
from calibrate.host_work import commit, draw, host_work_fn
from calibrate.layers import DecoderModel, PassRunner, scaled_spec
from calibrate.validate import compare, predict_rounds, speedup_interval, table_markdown
from simulator.hardware.hardware import load_profile
from simulator.models.catalog import load_model

TARGET = scaled_spec(load_model("llama-3.1-8b"), 32)
DRAFT = scaled_spec(load_model("llama-3.2-1b"), 32)


def test_commit_writes_after_each_sequence():
    buf = torch.zeros(2, 8, dtype=torch.int64)
    c = commit(buf, torch.tensor([2, 4]), torch.tensor([[5, 6, -1], [7, -1, -1]]), torch.tensor([2, 1]))
    assert c.tolist() == [4, 5]
    assert buf[0, 2:4].tolist() == [5, 6] and buf[1, 4].item() == 7


def test_draw_is_distributed_as_probs_and_seeded():
    """The ground truth's draw (inverse CDF, one uniform per row) samples each row's distribution
    exactly (chi-square at the sampling tests' level), never a zero-probability token, and the
    same generator seed gives the same tokens."""
    from sampling_stats import ALPHA, chisquare_pvalue
    probs = torch.tensor([[0.5, 0.0, 0.2, 0.3, 0.0, 0.0], [0.05, 0.05, 0.0, 0.1, 0.3, 0.5]])   # [B=2, V=6]
    n = 20000
    x = draw(probs.repeat(n, 1), torch.Generator().manual_seed(1)).view(n, 2)                # [n, 2]
    for b in range(2):
        counts = np.bincount(x[:, b].numpy(), minlength=6)
        assert chisquare_pvalue(counts, probs[b].numpy()) > ALPHA, b
    again = draw(probs.repeat(n, 1), torch.Generator().manual_seed(1)).view(n, 2)
    assert torch.equal(x, again)


def test_host_work_commits_what_a_round_emits_for_every_k():
    """One round's host work on 2 sequences of 8 committed tokens: K = 0 commits one drawn token
    each; K > 0 verifies the K drafts and commits accepted + 1 tokens each (1..K+1); the same
    generator seed gives the same round."""
    for k in (0, 1, 3):
        out = host_work_fn(2, k, 100, torch.Generator().manual_seed(0))()
        again = host_work_fn(2, k, 100, torch.Generator().manual_seed(0))()
        if k == 0:
            assert out.tolist() == again.tolist() == [9, 9]
            continue
        emitted, committed = out
        assert all(1 <= n <= k + 1 for n in emitted), emitted
        assert committed.tolist() == [8 + n for n in emitted]
        assert again[0] == emitted


def test_rounds_roll_back_the_caches():
    """After a speculative run, the target cache holds exactly the KV a fresh prefill of the
    committed tokens gives (rejected drafts left no trace), and the record is consistent."""
    torch.manual_seed(0)
    tgt = DecoderModel(TARGET, 2, dtype="fp32", seed=1)
    dft = DecoderModel(DRAFT, 1, dtype="fp32", seed=2)
    state = {}
    rec = run_one(PassRunner(tgt), PassRunner(dft), 3, 3, GTConfig(steps=6, warmup=1, prompt_len=16), state=state)
    rounds = rec["rounds"]
    assert len(rounds) == 7
    for a, b in zip(rounds, rounds[1:]):
        assert b["committed_before"] == [c + n + 1 for c, n in zip(a["committed_before"], a["accepted"])]
    assert all(0 <= n <= 3 for r in rounds for n in r["accepted"])
    buf, committed, tcache = state["buf"], state["committed"], state["tcache"]
    for b in range(3):
        n = int(committed[b]) - 1                                   # tokens in the target's cache
        fresh = tgt.new_cache(1, n + 8)
        tgt(buf[b:b + 1, :n], fresh, uniform_length=0, logits="last")
        for layer in range(2):
            torch.testing.assert_close(tcache.k[layer][b, :, :n], fresh.k[layer][0, :, :n], rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(tcache.v[layer][b, :, :n], fresh.v[layer][0, :, :n], rtol=1e-4, atol=1e-5)


def test_same_model_as_draft_accepts_everything():
    """A draft identical to the target (same weights): every draft token is accepted."""
    m = DecoderModel(TARGET, 1, dtype="fp32", seed=3)
    rec = run_one(PassRunner(m), PassRunner(m), 2, 2, GTConfig(steps=3, warmup=0, prompt_len=12))
    assert all(a == 2 for r in rec["rounds"] for a in r["accepted"])


def test_interleaved_rounds_alternate_in_time_and_emit_what_back_to_back_runs_emit():
    """run_interleaved: round r of every K runs before round r + 1 of any, and each K keeps its own
    caches and generator, so its contexts and accept lengths equal those of a run back to back."""
    tgt = DecoderModel(TARGET, 2, dtype="fp32", seed=0)
    dft = DecoderModel(DRAFT, 1, dtype="fp32", seed=1)
    cfg = GTConfig(steps=4, warmup=1, prompt_len=16)
    ks = (0, 2, 3)
    inter = run_interleaved(PassRunner(tgt), PassRunner(dft), 2, ks, cfg)
    alone = [run_one(PassRunner(tgt), PassRunner(dft), 2, k, cfg) for k in ks]
    for a, b in zip(inter, alone):
        assert (a["batch"], a["k"]) == (b["batch"], b["k"])
        assert [r["committed_before"] for r in a["rounds"]] == [r["committed_before"] for r in b["rounds"]]
        assert [r["accepted"] for r in a["rounds"]] == [r["accepted"] for r in b["rounds"]]
    starts = [(r["t_start_s"], i, r["round"]) for i, rec in enumerate(inter) for r in rec["rounds"]]
    order = [(rnd, i) for _, i, rnd in sorted(starts)]
    assert order == [(rnd, i) for rnd in range(cfg.warmup + cfg.steps) for i in range(len(ks))]


def test_groundtruth_interleaves_by_default_and_records_it():
    run = run_groundtruth(TARGET, DRAFT, target_layers=1, draft_layers=1, device="cpu", dtype="fp32",
                          cfg=GTConfig(batches=(1,), ks=(0, 1), steps=2, warmup=0, prompt_len=8), progress=False)
    assert run["config"]["interleave"] is True
    t = [[r["t_start_s"] for r in rec["rounds"]] for rec in run["runs"]]
    assert t[0][0] < t[1][0] < t[0][1] < t[1][1]


def test_default_rounds_give_every_configuration_enough_accept_lengths():
    """steps=None: max(min_steps, ceil(seq_rounds / batch)) rounds, the same for every K at a
    batch, recorded per configuration; an explicit steps wins."""
    cfg = GTConfig()
    assert [cfg.steps_for(b) for b in (1, 3, 8, 16, 32, 64)] == [256, 86, 32, 16, 16, 16]
    assert GTConfig(steps=5).steps_for(1) == 5
    run = run_groundtruth(TARGET, DRAFT, target_layers=1, draft_layers=1, device="cpu", dtype="fp32",
                          cfg=GTConfig(batches=(1, 4), ks=(0, 1), warmup=1, prompt_len=8, seq_rounds=8, min_steps=3),
                          progress=False)
    got = [(r["batch"], r["k"], r["steps"], len(r["rounds"])) for r in run["runs"]]
    assert got == [(1, 0, 8, 9), (1, 1, 8, 9), (4, 0, 3, 4), (4, 1, 3, 4)]
    for rec in run["runs"]:          # every configuration records at least seq_rounds accept lengths
        assert sum(len(r["accepted"]) for r in rec["rounds"] if not r["warmup"]) >= 8


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    run = run_groundtruth(TARGET, DRAFT, target_layers=2, draft_layers=1, device="cpu", dtype="fp32",
                          cfg=GTConfig(batches=(1, 2), ks=(0, 2), steps=3, warmup=1, prompt_len=16), progress=False)
    path = write_run(run, tmp_path_factory.mktemp("gt"))
    return path, run


def test_run_record_has_provenance_and_rounds(tiny_run):
    path, run = tiny_run
    assert path.name == "groundtruth.json" and load_run(path.parent)["runs"] == json.loads(path.read_text())["runs"]
    for k in ("device_name", "torch", "date", "dtype", "driver"):
        assert k in run["provenance"]
    assert [(r["batch"], r["k"]) for r in run["runs"]] == [(1, 0), (1, 2), (2, 0), (2, 2)]
    assert run["target"]["config"]["num_hidden_layers"] == 2 and run["draft"]["config"]["num_hidden_layers"] == 1


def test_validate_predicts_every_round_with_the_cost_model(tiny_run):
    _, run = tiny_run
    hw = load_profile("h200-sxm")          # any profile: this checks the plumbing, not the fidelity
    rounds = predict_rounds(run, hw, dtype="bf16")
    assert len(rounds) == sum(len(r["rounds"]) for r in run["runs"]) and (rounds["pred_s"] > 0).all()
    spec = rounds[rounds["k"] == 2]
    assert (spec["pred_draft_s"] > 0).all() and (rounds[rounds["k"] == 0]["pred_draft_s"] == 0).all()
    table, summary = compare(rounds)
    assert set(zip(table["batch"], table["k"])) == {(1, 0), (1, 2), (2, 0), (2, 2)}
    for c in ("measured_tok_s", "predicted_tok_s", "tok_s_err", "measured_speedup", "predicted_speedup"):
        assert table[c].notna().all()
    assert table.loc[table["k"] == 0, "measured_speedup"].eq(1.0).all()
    assert 0.0 <= summary["speedup_sign_agreement"] <= 1.0


def test_validate_charges_the_verify_step_once_per_speculative_round(tiny_run):
    import dataclasses
    _, run = tiny_run
    hw = load_profile("h200-sxm")
    hw_v = dataclasses.replace(hw, overheads=dataclasses.replace(hw.overheads, verify_round_us=250.0))
    a, b = predict_rounds(run, hw, dtype="bf16"), predict_rounds(run, hw_v, dtype="bf16")
    d = (b["pred_s"] - a["pred_s"]).to_numpy()
    spec = (a["k"] > 0).to_numpy()
    assert spec.any() and (~spec).any()
    np.testing.assert_allclose(d[spec], 250e-6, rtol=1e-9)
    assert (d[~spec] == 0).all()


def test_compare_drops_stalls_and_keeps_tokens():
    rows = [dict(batch=1, k=0, round=i, warmup=False, wall_s=1.0, draft_s=0.0, pred_s=1.1, pred_draft_s=0.0, emitted=1)
            for i in range(5)]
    rows[2]["wall_s"] = 100.0                                                   # a stall
    rows += [dict(batch=1, k=2, round=i, warmup=False, wall_s=1.5, draft_s=0.5, pred_s=1.5, pred_draft_s=0.5, emitted=2)
             for i in range(4)]
    t, s = compare(pd.DataFrame(rows))
    base = t[t["k"] == 0].iloc[0]
    assert base["rounds"] == 4 and base["dropped_stalls"] == 1 and base["total_err"] == pytest.approx(0.1)
    sp = t[t["k"] == 2].iloc[0]
    assert sp["measured_speedup"] == pytest.approx((2 / 1.5) / 1.0)
    assert sp["predicted_speedup"] == pytest.approx((2 / 1.5) / (1 / 1.1))
    assert s["speedup_sign_agreement"] == 1.0 and s["rounds_dropped_as_stalls"] == 1


def _walls(values, first_round=0):
    return pd.DataFrame({"round": np.arange(first_round, first_round + len(values)), "wall_s": values})


@pytest.mark.parametrize("paired", [False, True])
def test_speedup_interval_covers_the_true_speedup_at_its_level(paired):
    """Rounds with independent lognormal noise (cv 5 %) around 1 s (K = 0) and 2 s (K > 0), 3
    tokens against 1: the true speedup is 1.5. Over 300 seeded runs of 30 rounds the 95 %
    interval must cover it at a rate a binomial test does not reject at ALPHA = 1e-3."""
    from scipy import stats
    rng = np.random.default_rng(11)
    n, trials, hits = 30, 300, 0
    for t in range(trials):
        w0 = rng.lognormal(0.0, 0.05, n)
        wk = 2.0 * rng.lognormal(0.0, 0.05, n)
        point = (3 / wk.sum()) / (1 / w0.sum())
        lo, hi = speedup_interval(point, _walls(wk), _walls(w0), paired=paired, seed=t, resamples=1000)
        assert lo <= point <= hi
        hits += lo <= 1.5 <= hi
    assert stats.binomtest(hits, trials, 0.95).pvalue > 1e-3, hits / trials


def test_speedup_interval_pairs_interleaved_rounds_so_shared_drift_cancels():
    """A machine drifting +-30 % over the run, the same for both configurations: drawn in pairs
    the interval stays tight around the true 1.5; drawn independently it widens several-fold.
    Pairs are the round indices both kept (here K lost rounds 3 and 7). Same seed, same interval."""
    rng = np.random.default_rng(5)
    drift = 1.0 + 0.3 * np.sin(np.linspace(0, 3 * np.pi, 24))
    w0 = drift * rng.lognormal(0.0, 0.01, 24)
    wk = 2.0 * drift * rng.lognormal(0.0, 0.01, 24)
    point = (3 / wk.sum()) / (1 / w0.sum())
    keep = np.setdiff1d(np.arange(24), [3, 7])
    walls_k = _walls(wk).iloc[keep]
    paired = speedup_interval(point, walls_k, _walls(w0), paired=True, seed=3)
    apart = speedup_interval(point, walls_k, _walls(w0), paired=False, seed=3)
    assert paired[0] <= 1.5 <= paired[1] and apart[0] <= 1.5 <= apart[1]
    assert (paired[1] - paired[0]) * 4 < apart[1] - apart[0]
    assert speedup_interval(point, walls_k, _walls(w0), paired=True, seed=3) == paired


def test_speedup_interval_needs_enough_rounds():
    w = _walls(np.array([1.0, 1.1, 0.9, 1.05]))
    for paired in (False, True):
        assert all(np.isnan(speedup_interval(1.2, w, w, paired=paired)))
    # paired: five rounds each, but only four indices in common
    assert all(np.isnan(speedup_interval(1.2, _walls(np.ones(5)), _walls(np.ones(5), first_round=1), paired=True)))
    assert not any(np.isnan(speedup_interval(1.2, _walls(np.ones(5)), _walls(np.ones(5), first_round=1), paired=False)))


def test_compare_reports_which_measured_sides_of_1_are_unsettled():
    """K = 2 is 1.67x faster than plain decoding; K = 4 2.5 % slower, with each round 12 % off its
    mean: only K = 4's interval contains 1 (its width, not the point, decides), and a K with
    two rounds gets no interval and counts as unsettled."""
    rng = np.random.default_rng(2)
    z = rng.permutation(np.repeat([-1.0, 1.0], 10))       # mean 0 exactly
    rows = []
    for i in range(20):
        rows.append(dict(batch=4, k=0, round=i, warmup=False, wall_s=1.0 + 0.02 * z[i - 1], draft_s=0.0,
                         pred_s=1.0, pred_draft_s=0.0, emitted=4))
        rows.append(dict(batch=4, k=2, round=i, warmup=False, wall_s=1.5 + 0.05 * z[i - 2],
                         draft_s=0.3, pred_s=1.5, pred_draft_s=0.3, emitted=10))
        rows.append(dict(batch=4, k=4, round=i, warmup=False, wall_s=2.5 / 0.975 + 0.3 * z[i],
                         draft_s=0.6, pred_s=2.4, pred_draft_s=0.6, emitted=10))
    rows += [dict(batch=4, k=3, round=i, warmup=False, wall_s=2.0, draft_s=0.5, pred_s=2.0, pred_draft_s=0.5,
                  emitted=10) for i in range(2)]
    for interleaved in (False, True):
        t, s = compare(pd.DataFrame(rows), interleaved=interleaved)
        sp = t[t["k"] > 0].set_index("k")
        ok = sp.loc[[2, 4]]
        assert (ok["measured_speedup_lo"] <= ok["measured_speedup"]).all()
        assert (ok["measured_speedup"] <= ok["measured_speedup_hi"]).all()
        assert sp.loc[4, "measured_speedup"] == pytest.approx(0.975) and sp.loc[4, "measured_speedup_hi"] > 1.005
        assert sp.loc[2, "measured_speedup_lo"] > 1 and s["speedup_sign_unsettled"] == ["B=4 K=3", "B=4 K=4"]
        assert np.isnan(sp.loc[3, "measured_speedup_lo"]) and t.loc[t["k"] == 0, "measured_speedup_lo"].isna().all()
    assert "(too few rounds)" in table_markdown(t)


def test_compare_refuses_a_run_with_no_timed_rounds():
    rows = [dict(batch=1, k=0, round=0, warmup=True, wall_s=1.0, draft_s=0.0, pred_s=1.0, pred_draft_s=0.0, emitted=1)]
    with pytest.raises(ValueError, match="no timed rounds"):
        compare(pd.DataFrame(rows))


def test_cli_groundtruth_and_validate(tmp_path):
    from specsight.cli import main
    out = tmp_path / "run.json"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["groundtruth", "--device", "cpu", "--scale", "32", "--layers", "1", "--draft-layers", "1",
                     "--batch", "1,2", "--k", "0,1", "--steps", "2", "--warmup", "0", "--prompt-len", "8",
                     "--out", str(out), "--json"]) == 0
    res = json.loads(buf.getvalue())
    assert res["run"] == str(out) and len(res["configs"]) == 4
    # validate with the shipped A100 profile (the plumbing; CPU fidelity is in docs/calibration.md)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["validate", str(out), "--profile", "a100-80gb-sxm.vidur", "--dtype", "bf16", "--json", "--out",
                     str(tmp_path / "v.md")]) == 0
    v = json.loads(buf.getvalue())
    assert {"tok_s_ape_median", "speedup_sign_agreement", "rows"} <= set(v) and len(v["rows"]) == 4
    assert "| batch | K |" in (tmp_path / "v.md").read_text()
    # without --layers a CPU ground truth runs the CPU depths (8 target layers, 1 draft layer)
    run = json.loads(out.read_text())
    assert run["target"]["layers"] == 1 and run["config"]["interleave"] is True
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["groundtruth", "--device", "cpu", "--scale", "32", "--batch", "1", "--k", "0,1", "--steps", "1",
                     "--warmup", "0", "--prompt-len", "8", "--no-interleave", "--out", str(tmp_path / "d.json")]) == 0
    run = json.loads((tmp_path / "d.json").read_text())
    assert (run["target"]["layers"], run["draft"]["layers"], run["config"]["interleave"]) == (8, 1, False)
    # a CPU run without a profile is refused with one line
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["validate", str(out)]) == 2
    assert "--profile" in err.getvalue()


@pytest.mark.parametrize("argv, flag", [
    (["groundtruth", "--steps", "0"], "--steps"),
    (["groundtruth", "--warmup", "-1"], "--warmup"),
    (["groundtruth", "--temperature", "0"], "--temperature"),
    (["groundtruth", "--temperature=-1"], "--temperature"),
    (["groundtruth", "--temperature", "nan"], "--temperature"),
    (["calibrate", "--quick", "--holdout", "1.5"], "--holdout"),
    (["calibrate", "--quick", "--holdout", "0"], "--holdout"),
    (["calibrate", "--quick", "--holdout=-0.5"], "--holdout"),
    (["calibrate", "--quick", "--repeats", "0"], "--repeats"),
    (["calibrate", "--quick", "--warmup=-1"], "--warmup"),
])
def test_bad_calibrate_and_groundtruth_arguments_are_refused_before_any_work(argv, flag, tmp_path):
    """One line naming the flag, exit 2, nothing written (each is checked before a pass is timed)."""
    from specsight.cli import main
    out = tmp_path / ("run.json" if argv[0] == "groundtruth" else "p.yaml")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main([*argv, "--device", "cpu", "--scale", "32", "--out", str(out)]) == 2
    assert err.getvalue().startswith(f"specsight: error: {flag}") and err.getvalue().count("\n") == 1, err.getvalue()
    assert not list(tmp_path.iterdir())
