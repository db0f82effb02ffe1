"""Files a user names (scenario YAML, CSV traces, model config.json, hardware profile YAML, names on
the CLI): missing, a directory, unreadable, non-UTF-8, empty, huge, a name too long, nested too
deeply, odd YAML. Each is one SpecsightInputError line (the CLI: `specsight: error:`, exit 2)."""
from __future__ import annotations

import json
import os
import pathlib

import pytest

from simulator.common.errors import SpecsightInputError
from simulator.common.input_files import MAX_BYTES
from simulator.hardware.hardware import load_profile
from simulator.models.catalog import load_model
from simulator.scenario.scenario import load_scenario
from specsight.cli import main

GOOD = "hardware: {kind: fixed, target_step_s: 0.01}\nworkload: {arrival: {process: poisson, qps: 2}, " \
       "num_requests: 3, prompt_len: 4, output_len: 4}\n"


def _one_line_error(call, *words: str) -> str:
    with pytest.raises(SpecsightInputError) as ei:
        call()
    msg = str(ei.value)
    assert "\n" not in msg and len(msg) < 600, msg
    for w in words:
        assert w in msg, msg
    return msg


def _scenario(tmp_path, data: bytes | str, name: str = "s.yaml") -> pathlib.Path:
    p = tmp_path / name
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return p


def test_scenario_file_missing_directory_empty_huge(tmp_path):
    _one_line_error(lambda: load_scenario(tmp_path / "nope.yaml"), "no such file")
    _one_line_error(lambda: load_scenario(tmp_path), "is a directory")
    _one_line_error(lambda: load_scenario(_scenario(tmp_path, "  \n")), "is empty")
    huge = _scenario(tmp_path, "# " + "x" * MAX_BYTES["scenario"] + "\n" + GOOD)
    _one_line_error(lambda: load_scenario(huge), "at most 1,048,576 bytes")
    _one_line_error(lambda: load_scenario("/dev/null"), "is a character device", "(a regular file)")


def test_scenario_file_unreadable(tmp_path, monkeypatch):
    p = _scenario(tmp_path, GOOD)
    real_open = os.open

    def deny(path, *a, **kw):
        if str(path) == str(p):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *a, **kw)
    monkeypatch.setattr(os, "open", deny)                 # (chmod 000 does not stop root)
    _one_line_error(lambda: load_scenario(p), "permission denied")


def test_scenario_not_utf8(tmp_path):
    _one_line_error(lambda: load_scenario(_scenario(tmp_path, GOOD.encode("utf-16"))), "not UTF-8")
    _one_line_error(lambda: load_scenario(_scenario(tmp_path, b"name: \xff\n" + GOOD.encode())), "not UTF-8", "byte 6")


def test_a_name_too_long_for_the_file_system(tmp_path):
    _one_line_error(lambda: load_scenario(tmp_path / ("x" * 300 + ".yaml")), "File name too long")
    _one_line_error(lambda: load_model("m" * 300), "model")
    _one_line_error(lambda: load_model("m" * 300 + ".json"), "File name too long")
    _one_line_error(lambda: load_profile("g" * 300), "gpu")
    _one_line_error(lambda: load_profile("g" * 300 + ".yaml"), "File name too long")
    raw = {"hardware": {"gpu": "g" * 300}, "model": "llama-3.1-8b",
           "workload": {"arrival": {"process": "poisson", "qps": 1}, "prompt_len": 4, "output_len": 4}}
    from simulator.run import simulate
    _one_line_error(lambda: simulate(raw), "gpu")


def test_deep_nesting_and_alias_bombs(tmp_path):
    _one_line_error(lambda: load_scenario(_scenario(tmp_path, "x: " + "[" * 3000 + "]" * 3000 + "\n")), "nested")
    _one_line_error(lambda: load_scenario(_scenario(tmp_path, "x: " + "{a: " * 100 + "1" + "}" * 100 + "\n")),
                    "nested more than 64 levels")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh"))
    _one_line_error(lambda: load_scenario(_scenario(tmp_path, bomb)), "values")
    deep: object = 1
    for _ in range(3000):
        deep = [deep]
    _one_line_error(lambda: load_scenario({"name": deep}), "levels of nesting")


def test_python_tags_are_unsupported_not_a_syntax_error(tmp_path):
    p = _scenario(tmp_path, "seed: !!python/object/apply:os.system ['echo hi']\n" + GOOD)
    msg = _one_line_error(lambda: load_scenario(p), "unsupported YAML tag", "python/object")
    assert "syntax" not in msg
    _one_line_error(lambda: load_scenario(_scenario(tmp_path, "seed: !custom 3\n" + GOOD)), "unsupported YAML tag")
    with pytest.raises(SpecsightInputError, match="unsupported YAML tag"):
        load_scenario(_scenario(tmp_path, GOOD), ["seed=!!python/name:os.system"])


def test_duplicate_keys_are_refused(tmp_path):
    _one_line_error(lambda: load_scenario(_scenario(tmp_path, "seed: 1\nseed: 2\n" + GOOD)), "duplicate key 'seed'",
                    "line 2")
    _one_line_error(lambda: load_scenario(_scenario(tmp_path, GOOD + "engine: {block_size: 8, block_size: 16}\n")),
                    "duplicate key 'block_size'")
    merged = "base: &b {max_num_seqs: 4}\n"      # a merge key overriding a merged value is not a duplicate
    with pytest.raises(SpecsightInputError, match="unknown key"):
        load_scenario(_scenario(tmp_path, merged + GOOD + "engine: {<<: *b, max_num_seqs: 8}\n"))


def test_odd_yaml_values(tmp_path):
    _one_line_error(lambda: load_scenario(_scenario(tmp_path, "seed: " + "9" * 5000 + "\n" + GOOD)), "4,300 digits")
    _one_line_error(lambda: load_scenario(_scenario(tmp_path, "name: [unclosed\n")), "malformed YAML", "line")
    _one_line_error(lambda: load_scenario(_scenario(tmp_path, "description: 2024-01-01\n" + GOOD)), "description",
                    "not a date")


def test_trace_files(tmp_path):
    def trace(path):
        return {"hardware": {"kind": "fixed", "target_step_s": 0.01},
                "workload": {"arrival": {"process": "trace", "path": str(path)}}}
    _one_line_error(lambda: load_scenario(trace(tmp_path / "none.csv")), "file not found")
    _one_line_error(lambda: load_scenario(trace(tmp_path)), "is a directory")
    bad = tmp_path / "t.csv"
    bad.write_bytes("arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n".encode("utf-16"))
    _one_line_error(lambda: load_scenario(trace(bad)), "not UTF-8")
    bad.write_bytes(b"")
    _one_line_error(lambda: load_scenario(trace(bad)), "is empty")
    _one_line_error(lambda: load_scenario(trace("t" * 300 + ".csv")), "workload.arrival.path")
    length = {"dist": "empirical", "path": str(tmp_path), "column": "x"}
    _one_line_error(lambda: load_scenario({**trace(tmp_path / "none.csv"), "workload": {
        "arrival": {"process": "poisson", "qps": 1}, "prompt_len": 4, "output_len": length}}), "is a directory")


def test_model_config_files(tmp_path):
    cfg = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 100}
    p = tmp_path / "config.json"
    for key, value, text in [("hidden_size", "NaN", "NaN"), ("vocab_size", "Infinity", "inf"),
                             ("num_hidden_layers", "1e30", "1e+30"), ("num_attention_heads", "true", "True"),
                             ("num_key_value_heads", "0", "0")]:
        p.write_text(json.dumps(cfg)[:-1] + f', "{key}": {value}}}')
        msg = _one_line_error(lambda: load_model(str(p)), key)
        assert text in msg, msg
    p.write_text(json.dumps({**cfg, "specsight": [1]}))
    _one_line_error(lambda: load_model(str(p)), "specsight")
    p.write_text(json.dumps({**cfg, "architectures": [1, 2]}))
    _one_line_error(lambda: load_model(str(p)), "architectures")
    p.write_text("[" * 3000 + "]" * 3000)
    _one_line_error(lambda: load_model(str(p)), "nested too deeply")
    p.write_bytes(json.dumps(cfg).encode("utf-16"))
    _one_line_error(lambda: load_model(str(p)), "not UTF-8")
    (tmp_path / "empty").mkdir()
    _one_line_error(lambda: load_model(str(tmp_path / "empty")), "no such file")
    head = tmp_path / "head.json"
    head.write_text(json.dumps({**cfg, "specsight": {"kind": "eagle", "target": str(head)}}))
    _one_line_error(lambda: load_model(str(head)), "not another head")


def test_hardware_profile_files(tmp_path):
    d = tmp_path / "dir.yaml"
    d.mkdir()
    _one_line_error(lambda: load_profile(str(d)), "is a directory")
    p = tmp_path / "p.yaml"
    p.write_bytes(b"name: \xfe\n")
    _one_line_error(lambda: load_profile(str(p)), "not UTF-8")
    p.write_text("name: a\nname: b\n")
    _one_line_error(lambda: load_profile(str(p)), "duplicate key")
    import yaml
    raw = yaml.safe_load((pathlib.Path(__file__).parent.parent / "hardware_profiles" / "h100-sxm.yaml").read_text())
    raw["memory_capacity_gb"] = 10 ** 400
    p.write_text(yaml.safe_dump(raw))
    _one_line_error(lambda: load_profile(str(p)), "memory_capacity_gb")


@pytest.mark.parametrize("target", ["DIR", "DIR/missing.yaml", "x" * 300 + ".yaml", "/dev/null"])
def test_cli_names_one_line(tmp_path, capsys, target):
    rc = main(["simulate", target.replace("DIR", str(tmp_path))])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("specsight: error: scenario="), err
