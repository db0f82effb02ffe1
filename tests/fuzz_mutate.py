"""Mutated scenarios for fuzzing: what a hostile or careless user might write.

`mutate(rng)` takes a shipped scenario (or a small fixed-cost one), applies 1-3 random mutations
(a value replaced by an odd one, a key dropped, misspelt, or non-string, a value from another
scenario) and returns (mapping, description). `run_in_process(raw)` and `run_cli(raw_or_bytes)`
classify what happens: "ok", "input_error" (a SpecsightInputError / one `specsight: error:`
line), "traceback" (anything else) or "nonsense" (a run that finished with NaN or negative
times). Used by tests/test_fuzz.py (seeded, small) and benchmarks/fuzz_campaign.py (long).
"""
from __future__ import annotations

import contextlib
import copy
import io
import math
import random
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
SMALL_REQUESTS = 12
SMALL_LIMITS = {"max_tokens": 2_000_000}    # keeps a mutated run short (a bigger one is an input error)

_FIXED = {"name": "fixed", "seed": 1,
          "hardware": {"kind": "fixed", "target_step_s": 0.02, "draft_step_s": 0.002, "replicas": 2},
          "drafter": {"method": "ngram", "num_speculative_tokens": 3, "match_probability": 0.7},
          "acceptance": {"model": "beta", "alpha": 0.7, "concentration": 5},
          "policy": {"kind": "adaptive"},
          "workload": {"arrival": {"process": "closed_loop", "concurrency": 3, "think_time_s": 0.1},
                       "num_requests": 20, "prompt_len": {"dist": "uniform", "low": 4, "high": 64},
                       "output_len": {"dist": "lognormal", "mean": 20, "sigma": 0.5, "max": 64}},
          "engine": {"max_num_seqs": 8, "max_num_batched_tokens": 256, "num_gpu_blocks": 400,
                     "router": "least_outstanding"},
          "slo": {"tpot_ms_p99": 50}}
_TRACE = {"name": "trace", "hardware": {"kind": "fixed", "target_step_s": 0.01},
          "workload": {"arrival": {"process": "trace", "path": "data/traces/azure_llm_inference_2023_conv.csv",
                                   "time_scale": 2.0, "max_requests": 15},
                       "output_len": {"dist": "empirical", "path": "data/traces/azure_llm_inference_2023_code.csv",
                                      "column": "num_decode_tokens"}},
          "drafter": {"method": "suffix"}, "acceptance": "lamda-8b-137b",
          "policy": {"kind": "batch_schedule", "schedule": [[2, 3], [8, 1]]}}


def base_scenarios() -> list[dict[str, Any]]:
    out = [copy.deepcopy(_FIXED), copy.deepcopy(_TRACE)]
    for p in sorted((ROOT / "scenarios").glob("*.yaml")):
        out.append(yaml.safe_load(p.read_text()))
    for sc in out:
        wl = sc.get("workload", {})
        if "num_requests" in wl or wl.get("arrival", {}).get("process") != "trace":
            wl["num_requests"] = min(int(wl.get("num_requests") or SMALL_REQUESTS), SMALL_REQUESTS)
        sc["limits"] = dict(SMALL_LIMITS)
    return out


ODD_VALUES: list[Any] = [
    None, True, False, 0, 1, -1, 2, 3, 7, 64, 0.5, -0.0, 1.5, -2.5, 1e-300, 1e30, 1e308, -1e308,
    float("nan"), float("inf"), float("-inf"), 2 ** 31, 2 ** 31 - 1, 2 ** 63, 2 ** 64, 10 ** 40,
    "12", "64", "0.5", "", " ", "abc", "x" * 300, "é字", "nan", "1e30", "null", "~", "off", "on",
    [], ["a"], [1, 2], [[1, 2]], {}, {"a": 1}, {None: 1}, {1: 2}, {"kind": "static"},
    "llama-3.1-8b", "h100-sxm", "static", "poisson", "closed_loop", "trace", "uniform", "iid", "eagle3",
    "data/traces/azure_llm_inference_2023_conv.csv", "/", "/etc/passwd", "scenarios", "../../x.yaml",
    16_000_000, 10 ** 6, 4096, 2 ** 20,
]
KEY_NAMES = ["qps", "concurrency", "k", "alpha", "max", "min", "sigma", "num_requests", "kind", "path",
             "process", "dist", "model", "name", "bogus", "num_speculative_token", "tree_nodes", "block_size"]


def with_value(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of `base` with the dotted `path` set to `value` (missing mappings created)."""
    raw = copy.deepcopy(base)
    node = raw
    keys = path.split(".")
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = value
    return raw


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            if k != "limits" or prefix:
                out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


def _parent(root: Any, path: tuple) -> Any:
    node = root
    for k in path[:-1]:
        node = node[k]
    return node


def _odd(rng: random.Random, pool: list[dict[str, Any]]) -> Any:
    r = rng.random()
    if r < 0.55:
        return copy.deepcopy(rng.choice(ODD_VALUES))
    if r < 0.75:                          # a value from somewhere in another scenario
        other = rng.choice(pool)
        p = rng.choice(_paths(other)[1:])
        return copy.deepcopy(_parent(other, p)[p[-1]])
    if r < 0.9:                           # a number near a boundary
        return rng.choice([rng.randint(-3, 3), rng.uniform(-1, 2), 10 ** rng.randint(0, 12),
                           rng.randint(0, 2 ** 40), 1 - 10 ** -rng.randint(1, 17)])
    depth = rng.choice([2, 5, 40, 200])     # nesting
    v: Any = 1
    for _ in range(depth):
        v = [v] if rng.random() < 0.5 else {"a": v}
    return v


def mutate_once(root: dict[str, Any], rng: random.Random, pool: list[dict[str, Any]]) -> str:
    paths = _paths(root)[1:]
    if not paths:
        root["workload"] = _odd(rng, pool)
        return "workload=odd"
    path = rng.choice(paths)
    parent, key = _parent(root, path), path[-1]
    op = rng.random()
    where = ".".join(map(str, path))
    cur = parent[key]
    if op < 0.3 and isinstance(cur, (int, float)) and not isinstance(cur, bool):      # a plausible change
        f = rng.choice([0, 0.1, 0.5, 0.9, 1.1, 2, 10, 100, 1000])
        parent[key] = type(cur)(cur * f) if rng.random() < 0.7 else type(cur)(cur + rng.choice([-2, -1, 1, 2]))
        return f"{where}={parent[key]!r:.60}"
    if op < 0.6:
        parent[key] = _odd(rng, pool)
        return f"{where}={parent[key]!r:.60}"
    if op < 0.7 and isinstance(parent, dict):
        del parent[key]
        return f"del {where}"
    if op < 0.8 and isinstance(parent, dict):
        new = rng.choice([None, 1, True, 1.5, str(key)[:-1] or "x", str(key) + "s", rng.choice(KEY_NAMES)])
        parent[new] = parent.pop(key)
        return f"rename {where} -> {new!r}"
    if isinstance(parent[key], dict):
        parent[key][rng.choice(KEY_NAMES)] = _odd(rng, pool)
        return f"add key under {where}"
    parent[key] = _odd(rng, pool)
    return f"{where}={parent[key]!r:.60}"


def mutate(rng: random.Random, pool: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], str]:
    pool = pool or base_scenarios()
    raw = copy.deepcopy(rng.choice(pool))
    what = [raw.get("name", "?")]
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if not isinstance(raw, dict):
            break
        what.append(mutate_once(raw, rng, pool))
    return raw, "; ".join(map(str, what))


def nonsense(result: Any) -> str | None:
    """Why a finished run's numbers are impossible (None when they are fine)."""
    req = result.requests
    for col in ("arrival_s", "first_token_s", "finish_s"):
        v = req[col].to_numpy(dtype=float)
        if not np.all(np.isfinite(v)):
            return f"{col} not finite"
        if np.any(v < 0):
            return f"{col} negative"
    if np.any(req["first_token_s"] < req["arrival_s"]) or np.any(req["finish_s"] < req["first_token_s"]):
        return "times out of order"
    if np.any(req["output_tokens"] < 1):
        return "a request emitted no token"
    s = result.summary
    for k in ("duration_s", "ttft_ms_mean", "e2e_ms_mean", "output_tokens_per_s"):
        v = s.get(k)
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            return f"summary {k}={v!r}"
    return None


def run_in_process(raw: Any) -> tuple[str, str]:
    """(outcome, detail) of load_scenario + simulate on a mapping."""
    from simulator.common.errors import SpecsightInputError
    from simulator.run import simulate
    from simulator.scenario.scenario import load_scenario
    try:
        res = simulate(load_scenario(raw))
    except SpecsightInputError as e:
        return "input_error", str(e)
    except Exception:
        return "traceback", traceback.format_exc(limit=-4)
    why = nonsense(res)
    return ("nonsense", why) if why else ("ok", "")


def scenario_bytes(raw: Any, rng: random.Random) -> bytes:
    """A mutated scenario as file contents, sometimes damaged as a file."""
    try:
        text = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError:
        text = "name: x\n"
    r = rng.random()
    if r < 0.75:
        return text.encode()
    damage = [
        lambda: text.encode()[: rng.randint(0, len(text))],                 # truncated
        lambda: text.encode("utf-16"),                                      # not UTF-8
        lambda: b"\xff\xfe" + text.encode(),
        lambda: b"",
        lambda: ("x: " + "[" * 3000 + "]" * 3000 + "\n").encode(),          # deep nesting
        lambda: ("x: " + "{a: " * 400 + "1" + "}" * 400 + "\n").encode(),
        lambda: b"name: a\nname: b\n" + text.encode(),                       # duplicate key
        lambda: b"seed: !!python/object/apply:os.system ['true']\n" + text.encode(),
        lambda: b"a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n",
        lambda: ("seed: " + "9" * 5000 + "\n").encode(),
        lambda: text.replace(":", "", 1).encode(),
        lambda: b"\t" + text.encode(),
    ]
    return rng.choice(damage)()


def run_cli(argv: list[str]) -> tuple[str, str]:
    """(outcome, detail) of specsight.cli.main(argv) in this process."""
    from specsight.cli import main
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    except SystemExit as e:                        # argparse: exit code 2 and a usage line
        rc = e.code if isinstance(e.code, int) else 1
    except Exception:
        return "traceback", traceback.format_exc(limit=-4)
    return classify_cli(rc, err.getvalue())


def classify_cli(rc: int, stderr: str) -> tuple[str, str]:
    if "Traceback" in stderr:
        return "traceback", stderr[-2000:]
    if rc == 0:
        return "ok", ""
    lines = [ln for ln in stderr.splitlines() if "error:" in ln]
    if rc == 2 and lines:
        return "input_error", lines[-1]
    return "traceback", f"rc={rc}: {stderr[-2000:]}"
