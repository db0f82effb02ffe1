"""`specsight simulate --no-iterations`: the run keeps no per-iteration log, writes no iterations
table, and reports the summary the logged run reports (counts exactly)."""
import json

from specsight.cli import main

SCENARIO = "scenarios/llama8b-h100-eagle3-chat.yaml"
SET = ["--set", "workload.num_requests=60"]


def test_no_iterations_keeps_the_summary_and_writes_no_iterations_table(tmp_path, capsys):
    assert main(["simulate", SCENARIO, *SET, "--baseline", "--json", "--out", str(tmp_path / "kept")]) == 0
    kept = json.loads(capsys.readouterr().out)
    assert main(["simulate", SCENARIO, *SET, "--baseline", "--json", "--no-iterations",
                 "--out", str(tmp_path / "none")]) == 0
    folded = json.loads(capsys.readouterr().out)
    counts = [k for k in ("num_iterations", "num_decode_rounds", "baseline_num_iterations") if k in kept]
    assert "num_iterations" in counts
    for key in counts:
        assert folded[key] == kept[key], key
    assert folded["itl_ms_p99"] == kept["itl_ms_p99"] and folded["tpot_ms_p50"] == kept["tpot_ms_p50"]
    names = {p.name.split(".")[0] for p in (tmp_path / "none").rglob("*") if p.is_file()}
    assert "iterations" not in names and "requests" in names
    assert any(p.name.startswith("iterations") for p in (tmp_path / "kept").iterdir())
