"""Fuzzed command lines for every `specsight` command: random flags with odd values (huge, negative,
NaN, infinite, text, empty, a folder, a file, a missing path, a path through a file, 300-character
names) on top of a cheap valid command line.

`command_line(rng, tmp, scenario)` draws (command, argv); `run(argv)` runs it in this process and
classifies it as fuzz_mutate.run_cli does: "ok", "input_error" (one `specsight: error:` line, or
argparse's one `error:` line, exit code 2), or "traceback". calibrate and groundtruth never time
anything here: their flags are checked, then the step that would set up torch raises DryRun,
counted "ok"; `validate --published` always carries a flag it refuses (its table takes ~30 s).
A sweep that exits 1 because points failed counts as input_error when every failed point (in its
sweep.csv) says SpecsightInputError. Used by tests/test_fuzz.py (seeded, small) and
benchmarks/fuzz_campaign.py.
"""
from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path

import fuzz_mutate as fm

COMMANDS = ("profiles", "models", "cost", "analytic", "simulate", "breakeven", "breakeven-analytic", "plan", "sweep",
            "calibrate", "groundtruth", "validate", "validate-published")
NUMBERS = ["99999999999999999999", "-1", "0", "-0.0", "nan", "inf", "-inf", "1e308", "1e30", "0.5", "1", "2", "3",
           "1.5", "1e-300", "2147483648", "16000000"]
TEXTS = ["abc", "", " ", "x" * 300, "1,2,x", "1,,2", ",", "é", "{a: 1}", "[1, 2]", "~", "-", "--json"]
PATHS = ["DIR", "FILE", "FILE/x", "FILE/x.md", "DIR/missing/deep/x.yaml", "MISSING", "/dev/null", "/proc/x",
         "y" * 300, "DIR/" + "z" * 300]
NAMES = ["h100-sxm", "llama-3.1-8b", "eagle3", "nope", "x" * 300, "", "../etc/passwd", "DIR", "FILE"]
SET_VALUES = ["workload.num_requests=2", "seed=1e30", "engine.max_num_seqs=99999999999999999999",
              "workload.arrival.qps=1e308", "drafter.num_speculative_tokens=65", "x=1", "=", "seed", "seed=[",
              "acceptance.alpha=.nan", "hardware.tp=-1", "name=" + "n" * 300]

# per command: the cheap valid command line, and the flags to fuzz with the kind of value each takes
_NUM, _TXT, _PATH, _NAME, _SET, _BOOL = "num", "txt", "path", "name", "set", "bool"
SPEC: dict[str, tuple[list[str], dict[str, str]]] = {
    "profiles": (["profiles"], {"action": _TXT, "name": _NAME, "--json": _BOOL}),
    "models": (["models"], {"action": _TXT, "name": _NAME, "--json": _BOOL}),
    "cost": (["cost", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "8", "--new-tokens", "1",
              "--context", "128"],
             {"--model": _NAME, "--hardware": _NAME, "--tp": _NUM, "--dtype": _TXT, "--batch": _NUM,
              "--new-tokens": _NUM, "--context": _NUM, "--json": _BOOL}),
    "analytic": (["analytic", "--alpha", "0.7", "--k", "2"],
                 {"--alpha": _NUM, "--k": _NUM, "--c": _NUM, "--json": _BOOL}),
    "simulate": (["simulate", "SC", "--set", "workload.num_requests=2"],
                 {"scenario": _PATH, "--set": _SET, "--hardware": _NAME, "--baseline": _BOOL, "--out": _PATH,
                  "--json": _BOOL}),
    "breakeven": (["breakeven", "SC", "--set", "workload.num_requests=2", "--axis", "batch", "--values", "1,2",
                   "--k", "1", "--no-plot", "--workers", "1", "--no-progress", "--out", "OUT"],
                  {"scenario": _PATH, "--k": _NUM, "--out": _PATH, "--set": _SET, "--workers": _NUM,
                   "--dask": _TXT, "--metric": _TXT, "--hardware": _NAME, "--tolerance": _NUM}),
    "breakeven-analytic": (["breakeven", "--analytic", "--model", "llama-3.1-8b", "--hardware", "h100-sxm",
                            "--drafter", "eagle3", "--alpha", "0.7", "--k", "1,2", "--no-plot", "--out", "OUT"],
                           {"--k": _NUM, "--alpha": _NUM, "--context": _NUM, "--tp": _NUM, "--dtype": _TXT,
                            "--drafter": _NAME, "--model": _NAME, "--hardware": _NAME, "--out": _PATH,
                            "--json": _BOOL}),
    "plan": (["plan", "SC", "--target-qps", "1", "--policies", "off", "--set", "workload.num_requests=2",
              "--workers", "1", "--no-progress", "--out", "OUT"],
             {"scenario": _PATH, "--target-qps": _NUM, "--slo-tpot-ms-p99": _NUM, "--slo-ttft-ms-p99": _NUM,
              "--price-per-gpu-hour": _NUM, "--tolerance": _NUM, "--k": _NUM, "--policies": _TXT,
              "--workers": _NUM, "--dask": _TXT, "--out": _PATH, "--set": _SET, "--json": _BOOL}),
    "sweep": (["sweep", "SC", "--grid", "seed=1", "--set", "workload.num_requests=2", "--workers", "1",
               "--no-progress", "--out", "OUT"],
              {"scenario": _PATH, "--grid": _SET, "--set": _SET, "--workers": _NUM, "--dask": _TXT, "--out": _PATH,
               "--baseline": _BOOL, "--json": _BOOL}),
    "calibrate": (["calibrate", "--device", "cpu", "--scale", "64", "--layers", "1", "--out", "OUT/p.yaml"],
                  {"--layers": _NUM, "--draft-layers": _NUM, "--sweeps": _NUM, "--repeats": _NUM, "--warmup": _NUM,
                   "--holdout": _NUM, "--scale": _NUM, "--threads": _NUM, "--seed": _NUM, "--passes": _TXT,
                   "--stat": _TXT, "--model": _NAME, "--draft": _NAME, "--out": _PATH, "--points": _PATH,
                   "--hardware": _NAME, "--from-vidur": _PATH, "--json": _BOOL}),
    "groundtruth": (["groundtruth", "--device", "cpu", "--scale", "64", "--layers", "1", "--batch", "1", "--k", "0",
                     "--out", "OUT/gt.json"],
                    {"--layers": _NUM, "--draft-layers": _NUM, "--batch": _NUM, "--k": _NUM, "--steps": _NUM,
                     "--warmup": _NUM, "--prompt-len": _NUM, "--temperature": _NUM, "--scale": _NUM,
                     "--threads": _NUM, "--seed": _NUM, "--model": _NAME, "--draft": _NAME, "--out": _PATH}),
    "validate": (["validate", "RUN"],
                 {"run": _PATH, "--hardware": _NAME, "--dtype": _TXT, "--out": _PATH, "--json": _BOOL}),
    "validate-published": (["validate", "--published"], {"--out": _PATH, "--json": _BOOL}),
}
POSITIONAL = ("scenario", "run", "action", "name")


class DryRun(Exception):
    """Raised where calibrate or groundtruth would set up torch: every input was accepted."""


def _value(rng: random.Random, kind: str) -> str:
    if kind == _NUM:
        v = rng.choice(NUMBERS + TEXTS[:5])
        return ",".join([v, rng.choice(NUMBERS)]) if rng.random() < 0.15 else v
    if kind == _PATH:
        return rng.choice(PATHS)
    if kind == _NAME:
        return rng.choice(NAMES + PATHS[:4])
    if kind == _SET:
        return rng.choice(SET_VALUES)
    return rng.choice(TEXTS + NUMBERS[:4])


def command_line(rng: random.Random, tmp: Path, scenario: Path, command: str | None = None) -> tuple[str, list[str]]:
    """(command, argv): the command's cheap valid line with 1-3 flags set to odd values (or, one
    time in eight, left valid); placeholders become paths under `tmp`."""
    command = command or rng.choice(COMMANDS)
    base, flags = SPEC[command]
    argv = list(base)
    picks = rng.sample(sorted(flags), k=min(len(flags), rng.choice([1, 1, 2, 3]))) if rng.random() > 0.125 else []
    if command == "validate-published":             # its table takes ~30 s: always one flag it refuses
        argv += rng.choice([["--hardware", "h100-sxm"], ["--dtype", "bf16"], ["RUN"]])
    if command in ("calibrate", "groundtruth") and not picks:
        picks = [rng.choice(sorted(flags))]
    for flag in picks:
        kind = flags[flag]
        if flag in POSITIONAL:
            v = _value(rng, kind if flag != "action" else _TXT)
            idx = {"scenario": 1, "run": 1}.get(flag)
            if idx is not None and len(argv) > idx and argv[idx] in ("SC", "RUN"):
                argv[idx] = v
            else:
                argv.append(v)
        elif kind == _BOOL:
            argv.append(flag)
        else:
            argv += [flag, _value(rng, kind)] if rng.random() > 0.05 else [flag]
    return command, [_place(a, tmp, scenario) for a in argv]


def _place(arg: str, tmp: Path, scenario: Path) -> str:
    if arg == "SC":
        return str(scenario)
    if arg == "RUN":
        return str(tmp / "run.json")
    for name, path in (("OUT", tmp / "out"), ("DIR", tmp / "dir"), ("FILE", tmp / "file"),
                       ("MISSING", tmp / "missing.yaml")):
        if arg == name or arg.startswith(name + "/"):
            return str(path) + arg[len(name):]
    return arg


def prepare(tmp: Path) -> Path:
    """The folder, file and run.json the placeholders name; returns a small scenario."""
    (tmp / "dir").mkdir(exist_ok=True)
    (tmp / "file").write_text("not yaml: [")
    (tmp / "run.json").write_text('{"kind": "specsight-groundtruth", "runs": 3}')
    scenario = tmp / "fixed.yaml"
    raw = fm.base_scenarios()[0]
    raw["workload"]["num_requests"] = 4
    import yaml
    scenario.write_text(yaml.safe_dump(raw))
    return scenario


@contextlib.contextmanager
def dry_calibration() -> Iterator[None]:
    """calibrate/groundtruth/validate --published stop with DryRun where their work would begin."""
    import calibrate.pipeline as pipeline
    import specsight.studies.published.study as published

    def stop(*a, **k):
        raise DryRun()
    saved = (pipeline.prepare_machine, pipeline.calibrate_from_vidur, published.validate_published)
    pipeline.prepare_machine = pipeline.calibrate_from_vidur = published.validate_published = stop
    try:
        yield
    finally:
        pipeline.prepare_machine, pipeline.calibrate_from_vidur, published.validate_published = saved


def run(argv: list[str]) -> tuple[str, str]:
    """(outcome, detail) of one command line in this process (DryRun: "ok")."""
    with dry_calibration():
        outcome, detail = fm.run_cli(argv)
    if outcome == "traceback" and "DryRun" in detail:
        return "ok", "dry run"
    return classify_sweep(argv, outcome, detail)


def classify_sweep(argv: list[str], outcome: str, detail: str) -> tuple[str, str]:
    """A sweep exits 1 when a point failed, having run the others: an input error when every
    failed point's error is a SpecsightInputError (in this process or as a child process)."""
    if outcome == "traceback" and argv and argv[0] == "sweep" and detail.startswith("rc=1"):
        errors = _sweep_errors(detail)
        if errors and all(e.startswith("SpecsightInputError") for e in errors):
            return "input_error", errors[0]
    return outcome, detail


def _sweep_errors(stderr: str) -> list[str]:
    """The failed points' errors of a sweep: its `failed:` lines, and the sweep.csv its last line
    names (a point read back from the store prints no `failed:` line; --json prints no csv line)."""
    import csv
    import re
    errors = [ln.split(" failed: ", 1)[1] for ln in stderr.splitlines() if " failed: " in ln]
    m = re.search(r"wrote (.+\.csv) \(store:", stderr)
    if m:
        with open(m.group(1), newline="") as f:
            errors += [r["error"] for r in csv.DictReader(f) if r.get("error")]
    return errors
