"""The long fuzz campaign (not in CI): mutated scenarios through load_scenario + simulate and
through the CLI, counting every outcome.

    nice -n 19 .venv/bin/python benchmarks/fuzz_campaign.py --scenarios 100000 --cli 2000 \\
        --subprocess 200 --state out/fuzz_campaign.json

Outcomes: ok, input_error (a SpecsightInputError / one `specsight: error:` line, exit code 2),
traceback (anything else), hang (a run over --timeout CPU seconds, or ten times that in wall-clock
time: a niced process on a shared machine can wait long without running), nonsense (a finished
run with NaN, infinite, negative or out-of-order times). Case i is drawn from random.Random(seed, i), so
a run is reproducible; --state keeps the counts and the next case, so an interrupted campaign
resumes where it stopped. Progress and counts print every --every cases; at the end, up to
--examples examples of each failure kind.
  --cli         CLI runs in this process: half `specsight simulate` on a mutated file with odd --set
                values, half every other command and mode with odd flag values (tests/fuzz_flags.py;
                calibrate and groundtruth stop where timing would start)
  --subprocess  of those, how many run the installed `specsight` executable in a child process
                (never calibrate, groundtruth or validate --published: a child cannot stop before timing)
Counts are kept per command (`per_command` in the state file and the final print).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import fuzz_flags as ff  # noqa: E402
import fuzz_mutate as fm  # noqa: E402

KINDS = ("ok", "input_error", "traceback", "hang", "nonsense")
SET_KEYS = ["seed", "workload.num_requests", "engine.block_size", "hardware.tp", "workload.arrival.concurrency",
            "acceptance.alpha", "policy", "model", "hardware.gpu", "engine.max_num_seqs", "slo.tpot_ms_p99",
            "workload.output_len", "name", "limits.max_tokens", "drafter.num_speculative_tokens"]
SET_VALUES = ["12", '"12"', "1e30", "1.0e30", "[a]", "!!python/object:os.system x", "{a: 1, a: 2}", "-0.0", ".nan",
              ".inf", "2147483648", "16000000", "true", "~", "", "x" * 300, "[" * 50 + "]" * 50, "'é'", "off",
              "{kind: goodput}", "0", "-1", "99999999999999999999"]


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


NO_CHILD = ("calibrate", "groundtruth", "validate-published")     # in-process only (a dry run needs a patch)


def cli_argv(rng: random.Random, raw, tmp: Path, scenario: Path, child: bool) -> tuple[str, list[str]]:
    """(command, argv): half the time any command with odd flags (fuzz_flags), else `simulate` on
    a mutated file (or an odd path) with odd --set values."""
    if rng.random() < 0.5:
        commands = [c for c in ff.COMMANDS if not (child and c in NO_CHILD)]
        return ff.command_line(rng, tmp, scenario, rng.choice(commands))
    return "simulate-mutated", _simulate_argv(rng, raw, tmp)


def _simulate_argv(rng: random.Random, raw, tmp: Path) -> list[str]:
    r = rng.random()
    if r < 0.85:
        path = tmp / "scenario.yaml"
        path.write_bytes(fm.scenario_bytes(raw, rng))
        target = str(path)
    else:
        target = rng.choice([str(tmp), str(tmp / "missing.yaml"), "x" * 300 + ".yaml", "/dev/null", "",
                             str(tmp / ("y" * 300)), "scenarios", "/proc/self/mem"])
    argv = ["simulate", target]
    for _ in range(rng.choice([0, 0, 1, 2])):
        argv += ["--set", f"{rng.choice(SET_KEYS)}={rng.choice(SET_VALUES)}"]
    if rng.random() < 0.5:
        argv.append("--json")
    return argv


def run_subprocess(argv: list[str], timeout_s: float) -> tuple[str, str]:
    exe = ROOT / ".venv" / "bin" / "specsight"

    def cpu_limit() -> None:           # the child is killed (SIGXCPU) past timeout_s of CPU time
        resource.setrlimit(resource.RLIMIT_CPU, (int(timeout_s), int(timeout_s) + 5))
    try:
        p = subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=10 * timeout_s, cwd=ROOT,
                           preexec_fn=cpu_limit)
    except subprocess.TimeoutExpired:
        return "hang", f"over {10 * timeout_s} s wall-clock: " + " ".join(argv)[:300]
    if p.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return "hang", f"over {timeout_s} CPU s: " + " ".join(argv)[:300]
    return ff.classify_sweep(argv, *fm.classify_cli(p.returncode, p.stderr))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", type=int, default=100_000)
    ap.add_argument("--cli", type=int, default=2_000)
    ap.add_argument("--subprocess", type=int, default=200)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--timeout", type=float, default=60.0, help="CPU seconds per run before it counts as a hang")
    ap.add_argument("--state", default="out/fuzz_campaign.json")
    ap.add_argument("--every", type=int, default=1000)
    ap.add_argument("--examples", type=int, default=5)
    a = ap.parse_args()

    state_path = Path(a.state)
    state = {"next": 0, "counts": {"scenario": dict.fromkeys(KINDS, 0), "cli": dict.fromkeys(KINDS, 0)},
             "examples": {}, "seconds": 0.0, "args": vars(a)}
    if state_path.exists():
        state = json.loads(state_path.read_text())
        print(f"resuming at case {state['next']}", flush=True)
    pool = fm.base_scenarios()
    total = a.scenarios + a.cli
    cli_every = max(1, total // max(1, a.cli))
    sub_every = max(1, a.cli // max(1, a.subprocess)) if a.subprocess else 0
    signal.signal(signal.SIGPROF, _alarm)
    t0 = time.time() - state["seconds"]
    state.setdefault("per_command", {})
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        scenario = ff.prepare(tmp)
        for i in range(state["next"], total):
            rng = random.Random(a.seed * 10 ** 9 + i)
            raw, what = fm.mutate(rng, pool)
            is_cli = i % cli_every == cli_every - 1 and state["counts"]["cli"]["ok"] + sum(
                v for k, v in state["counts"]["cli"].items() if k != "ok") < a.cli
            where = "cli" if is_cli else "scenario"
            if is_cli:
                n_cli = sum(state["counts"]["cli"].values())
                child = bool(sub_every and n_cli % sub_every == 0)
                command, argv = cli_argv(rng, raw, tmp, scenario, child)
                if child:
                    outcome, detail = run_subprocess(argv, a.timeout)
                    what = "subprocess: " + " ".join(argv)[:300]
                else:
                    what = "main(): " + " ".join(argv)[:300]
            signal.setitimer(signal.ITIMER_PROF, a.timeout)       # CPU time of this process
            try:
                if not is_cli:
                    outcome, detail = fm.run_in_process(raw)
                elif not what.startswith("subprocess"):
                    outcome, detail = ff.run(argv)
            except Hang:
                outcome, detail = "hang", f"over {a.timeout} CPU s"
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
            state["counts"][where][outcome] += 1
            if is_cli:
                state["per_command"].setdefault(command, dict.fromkeys(KINDS, 0))[outcome] += 1
            if outcome not in ("ok", "input_error"):
                ex = state["examples"].setdefault(f"{where}/{outcome}", [])
                if len(ex) < a.examples:
                    ex.append({"case": i, "mutation": what, "detail": detail[-1500:]})
            if (i + 1) % a.every == 0 or i + 1 == total:
                state["next"], state["seconds"] = i + 1, time.time() - t0
                state_path.parent.mkdir(parents=True, exist_ok=True)
                tmp_state = state_path.with_suffix(".tmp")
                tmp_state.write_text(json.dumps(state, indent=1))
                os.replace(tmp_state, state_path)
                print(f"[{state['seconds']:7.0f} s] {i + 1:>7}/{total}  scenarios {state['counts']['scenario']}  "
                      f"cli {state['counts']['cli']}", flush=True)
    print("\nfinal counts:", json.dumps(state["counts"], indent=1))
    print("CLI runs per command:", json.dumps(state["per_command"], indent=1))
    for key, exs in state["examples"].items():
        print(f"\n== {key}: {len(exs)} example(s)")
        for ex in exs:
            print(f"-- case {ex['case']}: {ex['mutation']}\n{ex['detail']}")
    bad = sum(state["counts"][w][k] for w in ("scenario", "cli") for k in ("traceback", "hang", "nonsense"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
