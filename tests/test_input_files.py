"""Every input file goes through one checked reader (simulator/common/input_files.py): a FIFO, a device, a
directory or a symlink loop is refused by its kind before it is opened (never a hang), sizes are
bounded, nesting, alias cycles and long integers are refused with their position, and an error
names the file and the position, never the file's contents (robust to any input)."""
from __future__ import annotations

import os
import threading

import pytest
import yaml

from simulator.common import input_files
from simulator.common.errors import SpecsightInputError
from simulator.common.input_files import MAX_NESTING, parse_yaml, read_json, read_text
from specsight.cli import main

SECRET = "SECRET-CONTENT-MUST-NOT-PRINT"


def _refused(path, *words, kind="json"):
    with pytest.raises(SpecsightInputError) as e:
        read_json(path, "--x", kind)
    for w in words:
        assert w in str(e.value), str(e.value)
    return str(e.value)


def test_fifo_device_directory_and_loop_are_refused_by_kind_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    result = {}

    def read_all():                     # a thread, so a read that blocked would show as a live thread
        result["fifo"] = _refused(fifo, "FIFO")
        result["zero"] = _refused("/dev/zero", "character device")
        result["dir"] = _refused(tmp_path, "directory")
        result["loop"] = _refused(tmp_path / "a", "symlink loop")
    t = threading.Thread(target=read_all, daemon=True)
    t.start()
    t.join(timeout=60)
    assert not t.is_alive(), "a read blocked"
    assert len(result) == 4, result


def test_size_is_bounded_before_reading(tmp_path):
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:
        f.truncate(65 * 2 ** 20)        # sparse: larger than a json file may be, no disk used
    _refused(huge, "at most 67,108,864 bytes")


def test_decode_nesting_and_digits_errors_give_the_position_not_the_content(tmp_path):
    binary = tmp_path / "b.json"
    binary.write_bytes(b'{"a": 1,\n "' + SECRET.encode() + b'\xff"}')
    msg = _refused(binary, "not UTF-8", "line 2 column")
    assert SECRET not in msg
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    _refused(deep, "nested too deeply")
    shallow_but_over = tmp_path / "over.json"
    shallow_but_over.write_text("[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1))
    _refused(shallow_but_over, f"more than {MAX_NESTING} levels")
    digits = tmp_path / "d.json"
    digits.write_text('{"completed":\n ' + "9" * 5000 + "}")
    _refused(digits, "4,300 digits", "line 2 column 2")


def test_yaml_alias_cycles_and_bombs_are_refused_and_1e_floats_are_numbers():
    with pytest.raises(SpecsightInputError, match="contains itself"):
        parse_yaml("seed: &a [*a]", "--grid seed", "&a [*a]")
    bomb = "a: &a [1,1,1,1,1,1,1,1,1]\n" + "".join(
        f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    with pytest.raises(SpecsightInputError, match="more than"):
        parse_yaml(bomb, "scenario", "bomb.yaml")
    assert parse_yaml("a: 5e-05\nb: 1E3\nc: '1e3'", "x", "y") == {"a": 5e-05, "b": 1000.0, "c": "1e3"}
    assert parse_yaml("a: 1.0e-05", "x", "y") == yaml.safe_load("a: 1.0e-05")


def test_a_kept_parse_is_handed_out_as_a_copy_and_failures_and_long_texts_are_not_kept():
    """parse_yaml keeps a text's checked parse by its content: a caller changing what it got does not
    change the next caller's, an edited text is parsed again, a refused text is refused every time
    and a text over MAX_KEPT_CHARS is parsed without being kept."""
    text = "gpu: {name: h-test, mem: [80, 96]}\n"
    first = parse_yaml(text, "--x", "a.yaml")
    first["gpu"]["mem"].append(1)
    first["gpu"]["name"] = "changed"
    assert parse_yaml(text, "--x", "a.yaml") == {"gpu": {"name": "h-test", "mem": [80, 96]}}
    assert parse_yaml(text.replace("96", "141"), "--x", "a.yaml")["gpu"]["mem"] == [80, 141]
    deep = "a: " + "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1) + "\n"
    for _ in range(2):
        with pytest.raises(SpecsightInputError, match="nest"):
            parse_yaml(deep, "--x", "deep.yaml")
    kept = input_files._kept_parse.cache_info().currsize
    long = "k: [" + ", ".join(["1"] * (input_files.MAX_KEPT_CHARS // 3)) + "]\n"
    assert len(long) > input_files.MAX_KEPT_CHARS and len(parse_yaml(long, "--x", "long.yaml")["k"]) > 1000
    assert input_files._kept_parse.cache_info().currsize == kept


def test_a_secret_file_given_as_any_input_is_never_echoed(tmp_path, capsys):
    secret = tmp_path / "shadow"
    secret.write_text(f"root:{SECRET}:19000:0:99999:7:::\n{SECRET}\n")
    from scenario_files import write_scenario
    from test_cli_flags import FIXED
    sc = write_scenario(tmp_path / "s.yaml", FIXED, "Is a secret file echoed? (test scenario)")
    for argv in (["simulate", str(secret)], ["validate", str(secret)],
                 ["cost", "--model", str(secret), "--hardware", "h100-sxm", "--batch", "1", "--new-tokens", "1",
                  "--context", "8"],
                 ["cost", "--model", "llama-3.1-8b", "--hardware", str(secret), "--batch", "1", "--new-tokens", "1",
                  "--context", "8"],
                 ["calibrate", "--engine", "vllm", "--from-bench", str(secret), "--scenario", str(sc), "--out",
                  str(tmp_path / "p.yaml")]):
        assert main(argv) == 2, argv
        out = capsys.readouterr()
        assert SECRET not in out.err + out.out, argv
        assert str(secret) in out.err, argv


def test_read_text_refuses_empty_and_missing(tmp_path):
    (tmp_path / "e.yaml").write_text("  \n")
    with pytest.raises(SpecsightInputError, match="is empty"):
        read_text(tmp_path / "e.yaml", "scenario", "scenario")
    with pytest.raises(SpecsightInputError, match="no such file"):
        read_text(tmp_path / "missing.yaml", "scenario", "scenario")


@pytest.mark.parametrize("argv_tail", [
    ["calibrate", "--engine", "vllm", "--from-bench", "FILE", "--scenario", "SC", "--out", "OUT/p.yaml"],
    ["validate", "FILE"],
    ["simulate", "SC", "--set", "engine.profile=FILE", "--set", "engine.kind=vllm"],
])
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "deep", "digits", "binary"])
def test_every_reader_refuses_every_bad_kind_in_one_line(argv_tail, kind, tmp_path, capsys):
    """The bench file, the ground-truth run and the engine profile (the readers that used to read
    by themselves) refuse a FIFO, /dev/zero, deep nesting, a 5,000-digit integer, binary bytes."""
    from scenario_files import write_scenario
    from test_cli_flags import FIXED
    sc = write_scenario(tmp_path / "sc.yaml", {**FIXED, "workload": {**FIXED["workload"], "num_requests": 2}},
                        "Does every reader refuse bad files? (test scenario)")
    path = {"fifo": tmp_path / "fifo", "/dev/zero": "/dev/zero", "deep": tmp_path / "deep",
            "digits": tmp_path / "digits", "binary": tmp_path / "binary"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "digits":
        path.write_text('{"completed": ' + "9" * 5000 + "}")
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 8)
    argv = [str(sc) if a == "SC" else a.replace("FILE", str(path)).replace("OUT", str(tmp_path)) for a in argv_tail]
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("specsight: error:")]
    assert len(lines) == 1 and "Traceback" not in err and str(path) in lines[0], err


@pytest.mark.parametrize("kind", ["fifo", "directory", "binary"])
def test_engine_groundtruth_results_refuse_a_fifo_or_directory_in_one_line(kind, tmp_path, capsys):
    """`validate --engine-groundtruth FILE` and `calibrate --from-groundtruth FILE` read through the
    checked reader: a FIFO (which used to block), a directory or binary bytes is one line, exit 2."""
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(bytes(range(256)) * 8)
    for argv, flag in ((["validate", "--engine-groundtruth", str(path)], "--engine-groundtruth"),
                       (["calibrate", "--engine", "vllm", "--from-groundtruth", str(path),
                         "--out", str(tmp_path / "host.yaml")], "--from-groundtruth")):
        done = threading.Event()
        rc: list[int] = []
        worker = threading.Thread(target=lambda a=argv, r=rc, d=done: (r.append(main(a)), d.set()), daemon=True)
        worker.start()
        if not done.wait(60):                   # (a blocked open of the FIFO never returns)
            with open(path, "w"):              # unblock the reader so the thread ends
                pass
            pytest.fail(f"{argv[0]} blocked on a {kind}")
        err = capsys.readouterr().err
        lines = [ln for ln in err.splitlines() if ln.startswith("specsight: error:")]
        assert rc == [2] and len(lines) == 1 and "Traceback" not in err, err
        assert lines[0].startswith(f"specsight: error: {flag}=") and str(path) in lines[0], err
