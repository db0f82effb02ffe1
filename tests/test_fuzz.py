"""Seeded fuzzing: mutated shipped scenarios (tests/fuzz_mutate.py) through load_scenario +
simulate and through the CLI. Every outcome is a success with sane numbers or one
SpecsightInputError line; never a traceback. (The long campaign: benchmarks/fuzz_campaign.py.)"""
from __future__ import annotations

import collections
import random

import fuzz_mutate as fm

IN_PROCESS = 2500
CLI = 40


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
