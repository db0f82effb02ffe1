"""Seeded fuzzing: mutated shipped scenarios (tests/fuzz_mutate.py) through load_scenario +
simulate and through the CLI, and every command's flags with odd values (tests/fuzz_flags.py).
Every outcome is a success with sane numbers or one SpecsightInputError line; never a traceback.
(The long campaign: benchmarks/fuzz_campaign.py.)"""
from __future__ import annotations

import collections
import random

import fuzz_flags as ff
import fuzz_mutate as fm

IN_PROCESS = 2500
CLI = 40
PER_COMMAND = 8          # fuzzed command lines per command (13 commands and modes)


def test_mutated_scenarios_succeed_or_say_what_is_wrong():
    pool = fm.base_scenarios()
    counts: collections.Counter = collections.Counter()
    failures = []
    for i in range(IN_PROCESS):
        rng = random.Random(15_000_000 + i)
        raw, what = fm.mutate(rng, pool)
        outcome, detail = fm.run_in_process(raw)
        counts[outcome] += 1
        if outcome not in ("ok", "input_error"):
            failures.append(f"case {i}: {what}\n{detail}")
    assert not failures, f"{counts}\n" + "\n".join(failures[:3])
    assert counts["ok"] > IN_PROCESS // 20 and counts["input_error"] > IN_PROCESS // 2, counts


def test_mutated_files_through_the_cli(tmp_path):
    pool = fm.base_scenarios()
    counts: collections.Counter = collections.Counter()
    failures = []
    for i in range(CLI):
        rng = random.Random(16_000_000 + i)
        raw, what = fm.mutate(rng, pool) if i % 4 else (rng.choice(pool), "unmutated")
        path = tmp_path / f"s{i}.yaml"
        path.write_bytes(fm.scenario_bytes(raw, rng))
        argv = ["simulate", str(path), "--json"]
        if i % 3 == 0:
            argv += ["--set", rng.choice(["seed='12'", "engine.block_size=1e30", "acceptance.name=[a]",
                                          "workload.num_requests=2147483648", "seed=!!python/name:os.system",
                                          "slo={a: 1, a: 2}", "workload.output_len=-0.0", "seed=3"])]
        outcome, detail = fm.run_cli(argv)
        counts[outcome] += 1
        if outcome not in ("ok", "input_error"):
            failures.append(f"case {i}: {what} {argv}\n{detail}")
    assert not failures, f"{counts}\n" + "\n".join(failures[:3])
    assert counts["ok"] >= 3, counts


def test_every_command_and_flag_succeeds_or_says_what_is_wrong(tmp_path):
    """Each command (profiles ... validate --published) with 1-3 flags set to odd values: success
    or one error line with exit code 2 (calibrate and groundtruth stop where timing would start)."""
    scenario = ff.prepare(tmp_path)
    counts: collections.Counter = collections.Counter()
    failures = []
    for i in range(PER_COMMAND * len(ff.COMMANDS)):
        rng = random.Random(17_000_000 + i)
        command, argv = ff.command_line(rng, tmp_path, scenario, ff.COMMANDS[i % len(ff.COMMANDS)])
        outcome, detail = ff.run(argv)
        counts[command, outcome] += 1
        if outcome not in ("ok", "input_error"):
            failures.append(f"case {i}: {argv}\n{detail}")
    assert not failures, f"{counts}\n" + "\n".join(failures[:3])
    assert all(counts[c, "input_error"] for c in ff.COMMANDS), counts
    assert sum(n for (_, o), n in counts.items() if o == "ok") >= len(ff.COMMANDS), counts
