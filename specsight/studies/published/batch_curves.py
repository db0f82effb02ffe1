"""The batch curves of the published table: each row's round and plain step split into the
engine's priced terms, and what each term does to the round-level speedup (docs/validation.md,
"What each term does on the batch curves")."""
from __future__ import annotations

import re
from typing import Any

from .study import PublishedCatalog

TERMS = (("node_floor", "kernel floor"), ("allreduce", "all-reduce curve"), ("moe_fixed", "MoE fixed"),
         ("draft_floor", "draft-step floor"), ("host", "H(B) shown"), ("syncs", "syncs"),
         ("launch_tails", "launch after sync"), ("plans", "host plans"))


def curve_groups(cat: PublishedCatalog) -> dict[str, list[Any]]:
    """The table's batch curves: rows that differ only in their batch (names ending -bN), two or more."""
    groups: dict[str, list[Any]] = {}
    for r in cat.rows:
        m = re.fullmatch(r"(.+)-b\d+", r.name)
        if m and r.drafter is not None:
            groups.setdefault(m.group(1), []).append(r)
    return {k: sorted(v, key=lambda r: int(r.setup["batch"])) for k, v in groups.items() if len(v) > 1}


def term_contributions(row: Any, cat: PublishedCatalog, accept_length: float) -> dict[str, float]:
    """One row's round and plain step split into the engine's terms (EngineStepCost.round_terms, at the
    row's batch and its mean context: prompt + half the output), and what each term does to the
    round-level speedup AL x plain / round: that speedup less the speedup without the term."""
    from simulator.scenario.engine_defaults import with_engine_defaults
    from simulator.scenario.resolve import resolve_deployment
    from simulator.scenario.scenario import load_scenario

    from .study import engine_for, scenario_for
    kind, _ = engine_for(row, cat.datasets)
    c = resolve_deployment(with_engine_defaults(load_scenario(scenario_for(row, cat.datasets, kind)))).step_cost
    ds = cat.datasets[row.setup["dataset"]]
    ctx = float(row.setup.get("prompt_tokens", ds["prompt_tokens"])) + 0.5 * float(
        row.setup.get("output_tokens", ds["output_tokens"]))
    B, k = int(row.setup["batch"]), int(row.drafter["k"])
    rnd = c.round_terms(B, k, ctx, c.drafter.verify_tokens_per_seq(k))
    plain = c.round_terms(B, 0, ctx, 1)
    s = accept_length * plain["total"] / rnd["total"]
    out = {"batch": B, "plain_ms": 1e3 * plain["total"], "round_ms": 1e3 * rnd["total"], "speedup": s}
    for key, _ in TERMS:
        without = accept_length * (plain["total"] - plain[key]) / (rnd["total"] - rnd[key])
        out[key] = s - without
    return out


def batch_curve_lines(cat: PublishedCatalog, df: Any) -> list[str]:
    """Per batch curve of the table, what each priced term does to the speedup at each batch."""
    al = dict(zip(df["name"], df["accept_length"]))
    pub = dict(zip(df["name"], df["published"]))
    head = " | ".join(label for _, label in TERMS)
    out = ["### What each term does on the batch curves", "",
           "For every batch curve of the table, each row's round and plain step as `EngineStepCost.round_terms` "
           "splits them (the row's batch, mean context: prompt + half the output), and what each term does "
           "to the round-level speedup AL x plain step / round: the speedup less the speedup without that "
           "term (negative: the term lowers it). The round-level speedup leaves out queueing and prefill, "
           "so it differs a little from the simulated one in the table.", ""]
    for name, rows in curve_groups(cat).items():
        out += [f"**{name}**", "", f"| batch | published | round-level | plain step (ms) | round (ms) | {head} |",
                "| --- | --- | --- | --- | --- |" + " --- |" * len(TERMS)]
        for r in rows:
            t = term_contributions(r, cat, float(al[r.name]))
            cells = " | ".join(f"{t[key]:+.3f}" for key, _ in TERMS)
            out.append(f"| {t['batch']} | {pub[r.name]:.2f}x | {t['speedup']:.2f}x | {t['plain_ms']:.2f} | "
                       f"{t['round_ms']:.2f} | {cells} |")
        out.append("")
    return out
