"""The CLI and file campaign (run by hand, not in CI): every command's flags, drawn from its argparse
definition, given odd values and files of every kind, each run in a forked child with a timeout.

    nice -n 15 .venv/bin/python benchmarks/cli_campaign.py --runs 1000 --seed 7 --timeout 120

Run i draws from random.Random(seed * 10**6 + i): a command (fuzz_flags.SPEC's cheap valid line),
then 1-3 of the flags its argparse parser defines (positionals included), each with a value of
the kind the action takes: a choice or a near-miss of one, a number (huge, negative, NaN, 1e308,
a 5,000-digit integer), text, or a path. Paths name files of every kind (FILES): empty, binary,
huge (sparse), nested 100,000 deep, a 5,000-digit integer, a YAML alias cycle, a FIFO, /dev/zero,
/dev/null, /dev/full, a directory, an unreadable file, a symlink loop, a dangling symlink, wrong
schema, non-UTF-8 names, and a file holding a secret marker; output paths also point at a
symlink to a file outside, a FIFO and a device.

The parent imports everything once, then forks a child per run (so a hang, a leak or an
allocation cannot touch the parent); a child past --timeout wall-clock seconds is killed and
counted a hang (a niced run on a shared machine can wait long: keep it generous). calibrate,
groundtruth and validate --published stop where timing would begin (fuzz_flags.dry_calibration).
Classes per run:
    ok            exit code 0
    input_error   exit code 2, one `specsight: error:` line, no traceback
    traceback     anything else (a traceback, another exit code, more than one error line)
    hang          killed past --timeout
    leak          the secret marker in stdout or stderr (an error echoing a file's contents)
    clobbered     a file outside the run's folders changed (a symlink or device followed)
Prints counts per class and per command, and up to --examples examples of each failure class.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import signal
import stat
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import fuzz_flags as ff  # noqa: E402

SECRET = "SECRET-7f3a-CONTENT-MUST-NOT-PRINT"
FAILURES = ("traceback", "hang", "leak", "clobbered")
NUMBERS = ["0", "-1", "1", "2", "3", "64", "65", "1e308", "-1e308", "nan", "inf", "-inf", "1e-300", "5e-05",
           "0.5", "1.5", "99999999999999999999", "9" * 5000, "2147483648", "1e19", "1024", "65536", "10000000"]
TEXTS = ["", " ", "abc", "x" * 300, "é", "café", "1,2,x", ",", "{a: 1}", "[1, 2]", "~", "-", "&a [*a]",
         "!!python/object:os.system x", "\udcff", "run 1,run_1", "a=1", "=", "null", ".nan"]
SET_KEYS = ["seed", "workload.num_requests", "name", "acceptance", "hardware.profile", "engine.profile",
            "limits.max_tokens", "workload.output_len", "model", "drafter.num_speculative_tokens"]


def make_files(tmp: Path) -> dict[str, str]:
    """One path per kind of file (FILES); `outside/` holds the files a run must never change."""
    d = tmp / "files"
    d.mkdir()
    (tmp / "outside").mkdir()
    victim = tmp / "outside" / "victim.txt"
    victim.write_text("line 1\nline 2\n")
    f: dict[str, str] = {}

    def put(name: str, data: bytes | str) -> str:
        p = d / name
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        return str(p)
    f["empty"] = put("empty.yaml", b"")
    f["binary"] = put("binary.bin", bytes(range(256)) * 64)
    huge = d / "huge.json"
    with huge.open("wb") as fh:
        fh.truncate(300 * 2 ** 20)                         # sparse: 300 MiB, no disk
    f["huge"] = str(huge)
    f["deep_json"] = put("deep.json", "[" * 100_000 + "]" * 100_000)
    f["deep_yaml"] = put("deep.yaml", "a: " + "[" * 5_000 + "]" * 5_000 + "\n")
    f["digits"] = put("digits.json", '{"completed": ' + "9" * 5_000 + "}")
    f["alias_cycle"] = put("alias.yaml", "seed: &a [*a]\n")
    f["alias_bomb"] = put("bomb.yaml", "a: &a [1,1,1,1,1,1,1,1,1]\n" + "".join(
        f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n" for p, c in zip("abcdefgh", "bcdefghi")))
    f["wrong_schema_yaml"] = put("wrong.yaml", "- 1\n- 2\n")
    f["wrong_schema_json"] = put("wrong.json", '{"kind": "specsight-groundtruth", "runs": [{"batch": 0, "k": -1}]}')
    f["secret"] = put("secret.yaml", f"root:{SECRET}:19000:0:99999:7:::\n{SECRET}\n")
    f["secret_json"] = put("secret.json", f'"{SECRET}"')
    f["csv_huge_values"] = put("counts.csv", "num_drafts,num_accepted_tokens_per_pos_0,n,accepted\n"
                                             f"1{'0' * 300},1{'0' * 299},10000000000000000000,99999999\n")
    fifo = d / "fifo"
    os.mkfifo(fifo)
    f["fifo"] = str(fifo)
    f["dir"] = str(d)
    unreadable = Path(put("unreadable.yaml", "seed: 1\n"))
    unreadable.chmod(0)
    f["unreadable"] = str(unreadable)
    (d / "loop_a").symlink_to(d / "loop_b")
    (d / "loop_b").symlink_to(d / "loop_a")
    f["symlink_loop"] = str(d / "loop_a")
    (d / "dangling").symlink_to(d / "nowhere")
    f["dangling"] = str(d / "dangling")
    f["dev_zero"], f["dev_null"], f["dev_full"], f["proc"] = "/dev/zero", "/dev/null", "/dev/full", "/proc/x.yaml"
    f["non_utf8_name"] = os.fsdecode(str(d).encode() + b"/o\xff.yaml")
    f["long_name"] = str(d / ("y" * 300))
    f["through_file"] = f["binary"] + "/x.yaml"
    f["scenario"] = str(ff.prepare(d))
    f["run"] = str(ROOT / "tests/data/calibration_cpu/groundtruth_AH.json")
    # outputs that point outside: a symlink to the victim, a folder whose points.jsonl is one
    (d / "out_link.yaml").symlink_to(victim)
    f["out_symlink"] = str(d / "out_link.yaml")
    (d / "out_dir").mkdir()
    (d / "out_dir" / "points.jsonl").symlink_to(victim)
    f["out_dir_with_link"] = str(d / "out_dir")
    return f


def _fingerprint(tmp: Path) -> str:
    h = hashlib.sha256()
    for p in sorted((tmp / "outside").iterdir()):
        h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


def subcommand_actions() -> dict[str, list[argparse.Action]]:
    """Each command's argparse actions (its own flags and positionals; not -h)."""
    from specsight.cli import build_parser
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: [a for a in p._actions if not isinstance(a, argparse._HelpAction)]
            for name, p in subs.choices.items()}


def _value(rng: random.Random, action: argparse.Action, files: dict[str, str]) -> str:
    r = rng.random()
    if action.choices and r < 0.5:
        c = [str(x) for x in action.choices]
        return rng.choice(c) if rng.random() < 0.7 else rng.choice(c)[:-1] + "x"
    if action.type in (int, float) or r < 0.35:
        v = rng.choice(NUMBERS)
        return v if rng.random() > 0.15 else ",".join([v, rng.choice(NUMBERS)])
    if r < 0.75:
        return rng.choice(list(files.values()))
    if action.dest in ("overrides", "grid") or r < 0.85:
        key = rng.choice(SET_KEYS)
        return f"{key}={rng.choice(TEXTS + NUMBERS[:8] + [files[rng.choice(list(files))]])}"
    return rng.choice(TEXTS)


def command_line(rng: random.Random, actions: dict[str, list[argparse.Action]], files: dict[str, str],
                 tmp: Path) -> tuple[str, list[str]]:
    """(command, argv): fuzz_flags' cheap valid line with 1-3 of the command's argparse flags odd."""
    command = rng.choice(ff.COMMANDS)
    base, _ = ff.SPEC[command]
    argv = [ff._place(a, tmp, Path(files["scenario"])) for a in base]
    if "RUN" in base:
        argv[base.index("RUN")] = files["run"]
    sub = "breakeven" if command == "breakeven-analytic" else "validate" if command == "validate-published" \
        else command
    acts = actions[sub]
    for act in rng.sample(acts, k=min(len(acts), rng.choice([1, 1, 2, 3]))):
        if not act.option_strings:                     # a positional: replace the base's, or add one
            v = _value(rng, act, files)
            if len(argv) > 1 and not argv[1].startswith("-") and command not in ("profiles", "models"):
                argv[1] = v
            else:
                argv.insert(1, v)
            continue
        flag = rng.choice(act.option_strings)
        if act.nargs == 0:
            argv.append(flag)
        else:
            argv += [flag, _value(rng, act, files)]
    if command in ("calibrate", "groundtruth") and "--device" not in argv:
        argv += ["--device", "cpu"]
    return command, argv


def _child(argv: list[str], out_fd: int, err_fd: int) -> None:
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    sys.stdout = os.fdopen(1, "w", closefd=False)
    sys.stderr = os.fdopen(2, "w", closefd=False)
    rc = 1
    try:
        from specsight.cli import main
        with ff.dry_calibration():
            rc = main(argv)
    except ff.DryRun:
        rc = 0
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 1
    except BaseException:   # noqa: BLE001 - a traceback is what the campaign counts
        import traceback
        traceback.print_exc()
        rc = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:
            pass
        os._exit(rc)


def run_one(argv: list[str], timeout_s: float, tmp: Path) -> tuple[str, str]:
    with tempfile.TemporaryFile(dir=tmp) as out, tempfile.TemporaryFile(dir=tmp) as err:
        pid = os.fork()
        if pid == 0:
            os.setpgid(0, 0)
            _child(argv, out.fileno(), err.fileno())
        deadline = time.time() + timeout_s
        status = None
        while time.time() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.02)
        else:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "hang", f"over {timeout_s:g} s: {argv}"
        rc = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if SECRET in stdout or SECRET in stderr:
        return "leak", f"{argv}: {stderr[-300:]}"
    if "Traceback" in stderr:
        return "traceback", f"{argv}\n{stderr[-1500:]}"
    if rc == 0:
        return "ok", ""
    errors = [ln for ln in stderr.splitlines() if ln.startswith("specsight: error:")]
    if rc == 2 and len(errors) == 1:
        return "input_error", errors[0]
    outcome, detail = ff.classify_sweep(argv, "traceback", f"rc={rc}: {stderr[-1500:]}")
    return outcome, detail if outcome != "traceback" else f"{argv}\n{detail}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--timeout", type=float, default=120.0, help="wall-clock seconds per run before a hang")
    ap.add_argument("--examples", type=int, default=3)
    ap.add_argument("--every", type=int, default=100, help="print the counts every N runs")
    a = ap.parse_args()
    import calibrate.pipeline  # noqa: F401
    import specsight.cli  # noqa: F401 - imported once; every child inherits it
    import specsight.studies.published  # noqa: F401
    actions = subcommand_actions()
    counts: collections.Counter = collections.Counter()
    per_command: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    examples: dict[str, list[str]] = collections.defaultdict(list)
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="cli-campaign-") as td:
        tmp = Path(td)
        files = make_files(tmp)
        before = _fingerprint(tmp)
        os.chdir(tmp)                         # relative outputs land here, not in the repository
        for i in range(a.runs):
            rng = random.Random(a.seed * 10 ** 6 + i)
            run_dir = tmp / f"run{i}"
            run_dir.mkdir()
            command, argv = command_line(rng, actions, files, run_dir)
            outcome, detail = run_one(argv, a.timeout, tmp)
            if outcome != "hang" and _fingerprint(tmp) != before:
                outcome, detail = "clobbered", f"{argv}: a file in outside/ changed"
                before = _fingerprint(tmp)
            counts[outcome] += 1
            per_command[command][outcome] += 1
            if outcome in FAILURES and len(examples[outcome]) < a.examples:
                examples[outcome].append(f"run {i}: {detail}")
            if (i + 1) % a.every == 0:
                print(f"{i + 1} runs, {time.time() - t0:.0f} s: {dict(counts)}", flush=True)
        for p in tmp.rglob("*"):              # unreadable files left by runs: let the clean-up remove them
            try:
                if not p.is_symlink() and stat.S_IMODE(p.stat().st_mode) == 0:
                    p.chmod(0o600)
            except OSError:
                pass
    print(json.dumps({"runs": a.runs, "seed": a.seed, "timeout_s": a.timeout, "seconds": round(time.time() - t0),
                      "counts": {k: counts[k] for k in ("ok", "input_error", *FAILURES)},
                      "per_command": {c: dict(v) for c, v in sorted(per_command.items())}}, indent=1))
    for kind, ex in examples.items():
        print(f"--- {kind}")
        for e in ex:
            print(e)
    return 1 if any(counts[k] for k in FAILURES) else 0


if __name__ == "__main__":
    sys.exit(main())
