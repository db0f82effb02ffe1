"""The engine a number was priced under is named wherever the number is: `simulate`'s table and
JSON, the break-even header, CSV and title, the plan's headline, CSV, JSON and beside its serving
commands, and the Python API's results. Titles follow `--set` overrides, and a profile file is
shown by its name and its path."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from scenario_files import write_scenario

from simulator.run import simulate
from specsight.cli import main
from specsight.studies.deploy.study import PlanDeployment, deployment
from specsight.studies.shared.overrides import describe_scenario, scenario_source

ROOT = Path(__file__).resolve().parent.parent
ROOF = {
    "name": "engine-named", "seed": 5,
    "hardware": {"gpu": "h100-sxm"}, "model": "llama-3.1-8b",
    "drafter": {"method": "eagle3", "model": "eagle3-llama-3.1-8b", "num_speculative_tokens": 3},
    "acceptance": {"model": "iid", "alpha": 0.6},
    "workload": {"arrival": {"process": "closed_loop", "concurrency": 1}, "num_requests": 4,
                 "prompt_len": 8, "output_len": 16},
    "slo": {"tpot_ms_p99": 50},
}


@pytest.fixture
def roof_path(tmp_path):
    return write_scenario(tmp_path / "roof.yaml", ROOF, "Is the engine named beside every number? (test scenario)")


def test_simulate_names_its_engine_in_the_table_the_json_and_the_result(roof_path, capsys):
    assert main(["simulate", str(roof_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["engine"] == "ideal"
    assert main(["simulate", str(roof_path), "--set", "engine.kind=vllm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["engine"] == "vllm v1"
    assert main(["simulate", str(roof_path), "--set", "engine.kind=sglang"]) == 0
    table = capsys.readouterr().out
    assert any(line.split() == ["engine", "sglang", "v0.5"] for line in table.splitlines())
    res = simulate(scenario_source(roof_path, ["engine.kind=trtllm"]))
    assert res.engine == "trtllm 1.1" and simulate(roof_path).engine == "ideal"


def test_the_header_names_the_engine_and_the_overrides():
    src = scenario_source(ROOT / "scenarios" / "llama8b-h100-eagle3-chat.yaml")
    assert describe_scenario(src)["deployment"].endswith(", engine ideal")
    over = ["model=llama-3.1-70b", "hardware.tp=4", "engine.kind=vllm"]
    m = describe_scenario(scenario_source(ROOT / "scenarios" / "llama8b-h100-eagle3-chat.yaml", over), over)
    assert m["scenario"] == ("llama8b-h100-eagle3-chat (--set model=llama-3.1-70b --set hardware.tp=4 "
                             "--set engine.kind=vllm)")
    assert m["deployment"] == "llama-3.1-70b on h100-sxm x4, engine vllm v1" and m["engine"] == "vllm v1"
    assert describe_scenario(src, engines=["ideal", "sglang"])["deployment"].endswith(", engines ideal, sglang v0.5")


def test_a_profile_file_is_shown_by_its_name_and_path(tmp_path):
    raw = yaml.safe_load((ROOT / "hardware_profiles" / "h100-sxm.yaml").read_text())
    raw["name"] = "my-h100"
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(raw))
    m = describe_scenario({**ROOF, "hardware": {"gpu": str(path)}})
    assert m["deployment"] == f"llama-3.1-8b on my-h100 ({path}) x1, engine ideal"


def test_breakeven_text_csv_and_json_name_the_engine(roof_path, tmp_path, capsys):
    out = tmp_path / "be"
    args = ["breakeven", str(roof_path), "--axis", "alpha", "--values", "0.5,0.9", "--k", "2", "--workers", "1",
            "--no-progress", "--no-plot", "--set", "engine.kind=vllm", "--out", str(out)]
    assert main(args) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head == ("engine-named (--set engine.kind=vllm): llama-3.1-8b on h100-sxm x1, engine vllm v1, "
                    "drafter eagle3 (eagle3-llama-3.1-8b)")
    csv = pd.read_csv(out / "breakeven_alpha.csv")
    assert csv.columns[0] == "engine" and set(csv["engine"]) == {"vllm v1"}
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["engine"] == "vllm v1"


def test_plan_says_which_engine_priced_what_its_commands_run(roof_path, tmp_path, capsys):
    ideal = PlanDeployment("static K=3", deployment(roof_path))
    assert ideal.text().splitlines()[1].startswith("  priced under engine ideal (the cost model's passes alone")
    assert ideal.to_dict()["priced_engine"] == "ideal"
    vllm = PlanDeployment("static K=3", deployment(roof_path, ["engine.kind=vllm"]))
    assert vllm.text().splitlines()[1].startswith("  priced under engine vllm: its command runs what was priced")
    out = tmp_path / "plan"
    assert main(["plan", str(roof_path), "--target-qps", "2", "--policies", "off", "--tolerance", "0.5",
                 "--workers", "1", "--no-progress", "--out", str(out), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["engine"] == "ideal"
    assert set(pd.read_csv(out / "plan.csv")["engine"]) == {"ideal"}
    assert "engine ideal" in (out / "plan.md").read_text().splitlines()[2]
