"""What a new user meets first, fixed as they expect: a padded draft vocabulary accepted, a new
profile written whole and a broken one reported whole, errors that name their fix, a sliding window
priced without a word, plot labels that never overlap, and argparse errors in the one-line form; a
shipped scenario by its name, a negative flag value checked by its command, a key of another
acceptance model answered with the mapping to write, and a `profiles new` profile that warns until
it is finished."""
import copy
import dataclasses
import json
import warnings

import pytest
import yaml

import specsight
from simulator.common.errors import SpecsightInputError, SpecsightWarning
from simulator.costs.cost_model import CostModel
from simulator.hardware.hardware import load_profile, profile_from_dict
from simulator.models.catalog import load_model
from simulator.models.model_config import spec_from_config
from simulator.scenario.scenario import load_scenario
from simulator.speculation.drafters import VOCAB_PAD_MULTIPLE, Drafter, DrafterSpec, vocab_mismatch
from specsight.cli import main

H100 = load_profile("h100-sxm")
Q7B = load_model("qwen2.5-7b")
Q05B = load_model("qwen2.5-0.5b")
L8B = load_model("llama-3.1-8b")
SCENARIO = "scenarios/llama8b-h100-eagle3-chat.yaml"


def _cli(argv, capsys):
    """(exit code, stdout, stderr) of `specsight argv` in this process."""
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


# ---- 1. a draft vocabulary that differs only by padding ---------------------------------------
def test_qwen_half_b_drafts_for_qwen_7b():
    """151,936 against 152,064 rows: one tokenizer (same bos/eos ids, model_type qwen2), the smaller
    rounded up to a multiple of 256 is the larger: accepted, and the draft is priced."""
    assert (Q05B.vocab_size, Q7B.vocab_size) == (151936, 152064)
    assert vocab_mismatch(Q05B, Q7B) is None and vocab_mismatch(Q7B, Q05B) is None
    d = Drafter(DrafterSpec("draft_model", 3, model="qwen2.5-0.5b"), Q7B, CostModel(Q7B, H100))
    assert d.draft_cost is not None and d.weight_bytes_per_gpu() > 0


def test_a_real_vocabulary_mismatch_is_refused_with_the_way_out():
    """Llama-3.2-1B (128,256) for Qwen2.5-7B: another tokenizer; the error names what to use instead."""
    with pytest.raises(SpecsightInputError) as e:
        Drafter(DrafterSpec("draft_model", 3, model="llama-3.2-1b"), Q7B, CostModel(Q7B, H100))
    text = str(e.value)
    assert "drafter.model" in text and "128256" in text and "152064" in text
    assert "target's tokenizer" in text and "ngram" in text and "eagle" in text and "\n" not in text


@pytest.mark.parametrize("change, needle", [
    (dict(vocab_size=151936 - VOCAB_PAD_MULTIPLE), "more than padding"),
    (dict(bos_token_id=1), "bos_token_id differs"),
    (dict(eos_token_ids=(2,)), "eos_token_id differs"),
    (dict(bos_token_id=None), "do not both state bos_token_id"),
    (dict(model_type="llama"), "model_type differs"),
])
def test_padding_rule_needs_every_condition(change, needle):
    draft = dataclasses.replace(Q05B, **change)
    assert needle in (vocab_mismatch(draft, Q7B) or "")


def test_equal_vocabularies_need_no_token_ids():
    bare = dataclasses.replace(L8B, bos_token_id=None, eos_token_ids=(), model_type=None)
    assert vocab_mismatch(bare, L8B) is None


# ---- 2. a new profile, whole; a broken profile, reported whole ---------------------------------
def test_profiles_new_writes_a_complete_profile_that_loads(tmp_path, capsys):
    out = tmp_path / "my-gpu.yaml"
    rc, _, err = _cli(["profiles", "new", "my-gpu", "--from", "h100-sxm", "--out", str(out)], capsys)
    assert rc == 0 and str(out) in err
    prof = load_profile(str(out))
    new, base = prof.to_dict(), H100.to_dict()
    assert prof.name == "my-gpu"
    for key in base:                              # every key, every number carried over
        if key not in ("name", "description", "sources"):
            assert new[key] == base[key], key
    assert set(new["sources"]) == set(base["sources"])
    assert all(v.startswith("REPLACE: carried over from h100-sxm") for v in new["sources"].values())
    text = out.read_text()
    assert text.startswith("# Hardware profile my-gpu") and f"hardware: {{gpu: {out}}}" in text
    rc, _, err = _cli(["profiles", "new", "my-gpu", "--from", "h100-sxm", "--out", str(out)], capsys)
    assert rc == 2 and "exists" in err and err.count("\n") == 1          # never overwritten


def test_profiles_new_needs_a_base_and_a_name(tmp_path, capsys):
    rc, _, err = _cli(["profiles", "new", "x", "--out", str(tmp_path)], capsys)
    assert rc == 2 and "--from" in err and "h100-sxm" in err
    rc, _, err = _cli(["profiles", "new", "--from", "h100-sxm"], capsys)
    assert rc == 2 and "profiles new NAME" in err
    rc, _, err = _cli(["profiles", "show", "h100-sxm", "--from", "h100-sxm"], capsys)
    assert rc == 2 and "only with" in err


def test_profile_loader_reports_every_missing_and_unsourced_key_at_once():
    raw = yaml.safe_load(open(H100.path))
    del raw["memory_bandwidth_tb_s"]
    del raw["interconnect"]["latency_us"]
    del raw["efficiency"]["compute"]
    del raw["sources"]["peak_tflops.fp8"]
    del raw["sources"]["overheads.iteration_us"]
    with pytest.raises(SpecsightInputError) as e:
        profile_from_dict(raw, "mine.yaml")
    text = str(e.value)
    for key in ("memory_bandwidth_tb_s", "interconnect.latency_us", "efficiency.compute", "peak_tflops.fp8",
                "overheads.iteration_us"):
        assert key in e.value.allowed, key
    assert "5 keys missing or unsourced" in text and "profiles new" in text and "\n" not in text


# ---- 3. errors that name their fix -------------------------------------------------------------
def _fp32_profile(tmp_path):
    raw = copy.deepcopy(H100.to_dict())
    raw.update(name="cpu-box", peak_tflops={"fp32": 1.5})
    raw["sources"] = {k: v for k, v in raw["sources"].items() if not k.startswith("peak_tflops")}
    raw["sources"]["peak_tflops.fp32"] = "unit test"
    path = tmp_path / "cpu-box.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_cpu_profile_with_bf16_says_set_fp32(tmp_path, capsys):
    prof = load_profile(str(_fp32_profile(tmp_path)))
    with pytest.raises(SpecsightInputError, match=r"peak figures for fp32: set hardware\.dtype=fp32"):
        CostModel(L8B, prof, dtype="bf16")
    rc, _, err = _cli(["cost", "--model", "llama-3.1-8b", "--hardware", str(_fp32_profile(tmp_path / "..")),
                       "--batch", "1", "--new-tokens", "1", "--context", "10"], capsys)
    assert rc == 2 and "set hardware.dtype=fp32" in err and err.count("\n") == 1


@pytest.mark.parametrize("override, suggestion", [
    ("hardware.gpuu=h100-sxm", "did you mean gpu?"),
    ("drafter.num_speculative_token=3", "did you mean num_speculative_tokens"),
    ("workload.arival.qps=2", "did you mean arrival?"),
    ("slo.tpot_ms_p9=40", "did you mean tpot_ms_p99"),
    ("drafterr.method=eagle3", "did you mean drafter?"),
])
def test_misspelt_scenario_key_gets_did_you_mean(override, suggestion, capsys):
    rc, _, err = _cli(["simulate", SCENARIO, "--set", override], capsys)
    assert rc == 2 and suggestion in err and err.count("\n") == 1


# ---- 4. a sliding window is priced (simulator/models/layer_types.py), and nothing warns ---------------
def _config(**extra):
    cfg = json.load(open(Q7B.path))
    cfg.update(extra)
    return cfg


def test_sliding_window_fields_and_in_use_rule():
    assert (Q7B.sliding_window, Q7B.use_sliding_window, Q7B.sliding_window_in_use) == (131072, False, False)
    on = spec_from_config(_config(sliding_window=4096, use_sliding_window=None), "m", "m.json")
    assert on.sliding_window == 4096 and on.sliding_window_in_use
    wide = spec_from_config(_config(sliding_window=32768, use_sliding_window=True), "m", "m.json")
    assert not wide.sliding_window_in_use                  # as wide as the context window: binds nowhere
    off = spec_from_config(_config(sliding_window=4096, use_sliding_window=False), "m", "m.json")
    assert not off.sliding_window_in_use
    with pytest.raises(SpecsightInputError, match="use_sliding_window"):
        spec_from_config(_config(use_sliding_window="yes"), "m", "m.json")


def test_qwen2_window_slides_from_max_window_layers_on():
    """Qwen2Config: with the window switched on, layers i >= max_window_layers slide. The shipped
    Qwen2.5-7B sets max_window_layers = 28 = its layers: even switched on, no layer slides."""
    on = spec_from_config(_config(sliding_window=4096, use_sliding_window=True), "qwen2.5-7b", "m.json")
    assert on.num_sliding_layers == 0
    assert CostModel(on, H100).kv_bytes_per_token == CostModel(Q7B, H100).kv_bytes_per_token
    half = spec_from_config(_config(sliding_window=4096, use_sliding_window=True, max_window_layers=14), "h", "h.json")
    assert (half.num_full_layers, half.num_sliding_layers, half.window) == (14, 14, 4096)
    assert half.params_total == Q7B.params_total


def test_a_window_in_use_is_priced_and_nothing_warns(tmp_path, capsys):
    path = tmp_path / "windowed.json"
    path.write_text(json.dumps(_config(sliding_window=4096, use_sliding_window=True, max_window_layers=0)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpecsightWarning)
        windowed = load_model(str(path))
        load_model("qwen2.5-7b")
    assert windowed.num_sliding_layers == 28
    full, win = CostModel(Q7B, H100), CostModel(windowed, H100)
    at = dict(num_tokens=8.0, sum_context=8 * 30000.0, sum_attn_pairs=8 * 30000.5, num_logits=8.0, num_seqs=8.0)
    assert win.time_s(**at) < full.time_s(**at)
    rc, out, err = _cli(["cost", "--model", str(path), "--hardware", "h100-sxm", "--batch", "1",
                         "--new-tokens", "1", "--context", "100"], capsys)
    assert rc == 0 and "warning" not in err


def test_simulate_prices_a_sliding_window_without_warning(tmp_path):
    from simulator.run import simulate
    path = tmp_path / "windowed-sim.json"
    cfg = _config(sliding_window=4096, max_window_layers=0)
    del cfg["use_sliding_window"]                                        # absent: the window is in use
    path.write_text(json.dumps(cfg))
    scenario = {"name": "w", "seed": 1, "hardware": {"gpu": "h100-sxm"}, "model": str(path),
                "workload": {"arrival": {"process": "closed_loop", "concurrency": 2}, "num_requests": 4,
                             "prompt_len": 64, "output_len": 8}}
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpecsightWarning)
        simulate(scenario)


# ---- 6. argparse errors in the one-line form -----------------------------------------------------
@pytest.mark.parametrize("argv, line", [
    (["breakeven", SCENARIO, "--axis", "bach"], "specsight: error: --axis='bach': did you mean batch"),
    (["simulat"], "specsight: error: command='simulat': did you mean simulate"),
    ([], "specsight: error: command=None: required; one of profiles"),
    (["cost", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "x", "--new-tokens", "1",
      "--context", "1"], "specsight: error: --batch='x': must be a number"),
    (["simulate", SCENARIO, "--sett", "a=1"], "specsight: error: argument='--sett': unknown; did you mean --set"),
    (["simulate"], "specsight: error: scenario=None: required; `specsight simulate -h` lists the arguments"),
    (["breakeven", SCENARIO, "--axis"], "specsight: error: --axis=None: needs a value"),
    (["groundtruth", "--batch", "1,x"], "specsight: error: --batch='1,x': expected comma-separated integers"),
    (["profiles", "shw"], "specsight: error: action='shw': did you mean show?"),
])
def test_argparse_errors_are_one_line_exit_2(argv, line, capsys):
    rc, _, err = _cli(argv, capsys)
    assert rc == 2 and err.startswith(line) and err.count("\n") == 1 and "usage:" not in err


# ---- 5. plots: labels that never overlap, ticks at the simulated values, the SLO drawn ---------------
def _captured(monkeypatch, module):
    """Keep each figure the plots of `module` save (they close it; its renderer still answers)."""
    figs = []
    real = module.save_figure

    def keep(fig, path):
        figs.append(fig)
        return real(fig, path)
    monkeypatch.setattr(module, "save_figure", keep)
    return figs


def _latency_frame():
    """Saturated points: 12, 18 and 24 requests/s land on almost the same throughput and TPOT."""
    import pandas as pd
    rows = []
    for q, tput, tpot in ((6, 900.0, 20.0), (12, 1720.0, 41.0), (18, 1724.0, 41.3), (24, 1725.0, 41.4)):
        for k in (1, 3):
            rows.append({"qps": q, "curve": f"K={k}", "base_output_tokens_per_s": tput, "base_tpot_ms_p50": tpot,
                         "base_tpot_ms_p99": 1.5 * tpot, "spec_output_tokens_per_s": tput * 1.05,
                         "spec_tpot_ms_p50": tpot * 0.8, "spec_tpot_ms_p99": tpot * 1.2, "speedup": 1.0 + k / 10})
    return pd.DataFrame(rows)


def _boxes(ax):
    """The window boxes of the axes' texts, as saved (a closed figure gets a fresh Agg canvas)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = ax.figure.canvas
    r = (canvas if isinstance(canvas, FigureCanvasAgg) else FigureCanvasAgg(ax.figure)).get_renderer()
    return [t.get_window_extent(r) for t in ax.texts if t.get_visible() and t.get_text()]


def test_latency_throughput_labels_never_overlap_and_the_slo_is_drawn(tmp_path, monkeypatch):
    from specsight.studies.shared import latency_plot
    from specsight.studies.shared.latency_plot import plot_latency_throughput
    figs = _captured(monkeypatch, latency_plot)
    plot_latency_throughput(_latency_frame(), x_axis="qps", title="t", path=tmp_path / "lt.png",
                            slo_tpot_ms_p99=50.0)
    fig = figs[0]
    for ax in fig.axes:
        boxes = _boxes(ax)
        assert len(boxes) >= 2                         # some labels placed, the colliding ones left out
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
        texts = [t.get_text() for t in ax.texts]
        # 12, 18 and 24 land on one spot of plain decoding's curve: one label names all three
        assert "12, 18, 24" in texts and not {"12", "18", "24"} & set(texts), texts
    p99 = fig.axes[1]
    assert any(list(line.get_ydata()) == [50.0, 50.0] and line.get_color() == "red" for line in p99.lines)
    assert (tmp_path / "lt.png").stat().st_size > 0
    figs.clear()
    plot_latency_throughput(_latency_frame(), x_axis="qps", title="t", path=tmp_path / "none.png")
    assert not any(line.get_color() == "red" for ax in figs[0].axes for line in ax.lines)


def test_place_labels_skips_what_would_collide():
    import matplotlib.pyplot as plt

    from specsight.studies.shared.plot_labels import place_labels
    fig, ax = plt.subplots()
    ax.plot([0, 10], [0, 10])
    n = 200                                  # more than the placer's places around one point (rings x directions)
    placed = place_labels(ax, [(5, 5)] * n, [f"label {i}" for i in range(n)])
    boxes = _boxes(ax)
    assert 0 < len(placed) == len(boxes) < n
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    plt.close(fig)


@pytest.mark.parametrize("logx, values", [(False, [6.0, 12.0, 18.0, 24.0]), (True, [1.0, 3.0, 24.0, 96.0])])
def test_breakeven_ticks_are_the_simulated_values(tmp_path, monkeypatch, logx, values):
    import pandas as pd

    from specsight.studies.shared import breakeven_marks
    from specsight.studies.shared.breakeven_plot import plot_breakeven
    figs = _captured(monkeypatch, breakeven_marks)
    df = pd.DataFrame([{"x": v, "curve": f"K={k}", "speedup": 1.3 - v / 100 - k / 50} for v in values for k in (1, 2)])
    plot_breakeven(df, x="x", breakeven={"K=1": values[1], "K=2": values[1] * 1.01}, title="t", xlabel="x",
                   ylabel="y", path=tmp_path / "b.png", logx=logx)
    ax = figs[0].axes[0]
    assert list(ax.get_xticks()) == values
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"{v:g}" for v in values]
    boxes = _boxes(ax)                                 # the two close break-even labels and the note
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_drafter_mapping_misspelt_key_gets_did_you_mean():
    with pytest.raises(SpecsightInputError, match="did you mean num_speculative_tokens"):
        DrafterSpec.from_mapping({"method": "ngram", "num_speculative_token": 3})


# ---- issue 26: a planner's frictions ---------------------------------------------------------
def test_a_shipped_scenario_loads_by_its_name():
    sc = load_scenario("llama8b-h100-eagle3-chat", ["workload.num_requests=4"])
    assert sc.name == "llama8b-h100-eagle3-chat" and sc.model == "llama-3.1-8b"
    res = specsight.simulate(load_scenario("llama8b-h100-eagle3-chat", ["workload.num_requests=4"]))
    assert res.summary["num_requests"] == 4
    with pytest.raises(SpecsightInputError, match="did you mean llama8b-h100-eagle3-chat"):
        load_scenario("llama8b-h100-eagle3-chatt")


@pytest.mark.parametrize("flag, value, field", [("--values", "-3,5", "--values"), ("--k", "-1", "k")])
def test_a_negative_value_gets_the_commands_own_message(flag, value, field, capsys):
    rc, _, err = _cli(["breakeven", "scenarios/llama8b-h100-eagle3-chat.yaml", "--axis", "batch", flag, value], capsys)
    assert rc == 2
    assert err.startswith(f"specsight: error: {field}=") and ("must be an integer >= 1" in err or "in [1, 64]" in err)
    assert "expected one argument" not in err


def test_a_key_of_another_acceptance_model_says_what_to_write(capsys):
    rc, _, err = _cli(["simulate", "scenarios/llama8b-h100-eagle3-chat.yaml", "--set", "acceptance.alpha=0.6"],
                      capsys)
    assert rc == 2
    assert err.strip() == ("specsight: error: acceptance.alpha=0.6: unknown key for model preset; a key of model "
                           "iid or beta or kernel: replace the mapping, model iid with it "
                           "(--set 'acceptance={model: iid, alpha: 0.6}')")
    assert load_scenario("scenarios/llama8b-h100-eagle3-chat.yaml",
                         ["acceptance={model: iid, alpha: 0.6}"]).acceptance.alpha == 0.6


def test_a_new_profile_warns_until_its_sources_and_description_are_replaced(tmp_path, capsys):
    path = tmp_path / "my-gpu.yaml"
    rc, _, err = _cli(["profiles", "new", "my-gpu", "--from", "h100-sxm", "--out", str(path)], capsys)
    assert rc == 0 and "warning" not in err
    with pytest.warns(SpecsightWarning, match=r"my-gpu .* is unfinished: \d+ source\(s\) still marked REPLACE:.* "
                                              r"and its description still marked EDIT:"):
        load_profile(str(path))
    finished = path.read_text().replace("REPLACE: carried over", "measured").replace("EDIT: describe", "my")
    path.write_text(finished)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpecsightWarning)
        load_profile(str(path))
