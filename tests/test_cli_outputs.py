"""`simulate --out` and `--grid` values: a bad folder or a YAML tag is one input-error line, exit 2."""
from __future__ import annotations

import pytest

from specsight.cli import main

SCENARIO = "scenarios/llama8b-rtx4090-single-user.yaml"


@pytest.mark.parametrize("out", ["/dev/null/x", "/etc/passwd"])
def test_simulate_out_that_cannot_be_a_folder_is_one_line(out, capsys):
    assert main(["simulate", SCENARIO, "--set", "workload.num_requests=2", "--out", out]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"specsight: error: --out='{out}': a folder this run can create")


def test_simulate_out_writes_every_table_whole(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", SCENARIO, "--set", "workload.num_requests=2", "--baseline", "--out", str(out)]) == 0
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert all(not n.split("/")[-1].startswith(".") for n in names), names     # no temporary file left
    assert {"summary.json", "scenario.yaml", "baseline/summary.json"} <= set(names)


def test_grid_values_refuse_yaml_tags(tmp_path, capsys):
    code = main(["sweep", SCENARIO, "--grid", "seed=!!python/object:os.system x,2", "--out", str(tmp_path)])
    assert code == 2
    assert "unsupported YAML tag" in capsys.readouterr().err
