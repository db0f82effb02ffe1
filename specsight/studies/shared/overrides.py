"""A scenario as a plain mapping, and the dotted key-path overrides that studies apply to it.

A *point* is a mapping of dotted key paths to values, e.g.
`{"workload.arrival.concurrency": 32, "drafter.num_speculative_tokens": 3}`; values are applied
with the scenario loader's `key.path=value` overrides (written as JSON, which YAML reads back
unchanged). A *grid* is `key.path=v1,v2,...` (values parsed as YAML); several grids give their
cartesian product of points.
"""
from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from simulator.common.errors import SpecsightInputError
from simulator.common.input_files import parse_yaml


def describe_scenario(source: Mapping[str, Any], overrides: Iterable[str] = (),
                      engines: Sequence[str] | None = None) -> dict[str, Any]:
    """{scenario, deployment, drafter, engine, hardware} in words, for titles and headers: the scenario's
    name with the `--set` overrides applied to it, the model on its profile (a profile file outside
    hardware_profiles/ by its name and path) at its TP under its engine (`engines`: each of those
    kinds, a study run once per engine), and the drafter."""
    from simulator.engines import engine_label
    hw = source.get("hardware") or {}
    d = source.get("drafter") or {}
    eng = source.get("engine") or {}
    engine = engine_label(eng.get("kind"), eng.get("version")) if engines is None else ", ".join(
        engine_label(e, eng.get("version") if e == eng.get("kind") else None) for e in engines)
    if hw.get("kind", "roofline") == "fixed":
        where = f"fixed step costs ({hw.get('target_step_s')} s per pass)"
    else:
        where = f"{source.get('model')} on {profile_shown(hw.get('profile') or hw.get('gpu'))} x{hw.get('tp', 1)}"
        dis = source.get("disaggregation")
        if dis:
            where += ", disaggregated " + " + ".join(
                f"{dis[p].get('instances', 1)} {p} x{dis[p].get('tp') or hw.get('tp', 1)}"
                + (f" on {dis[p]['gpu']}" if dis[p].get("gpu") else "") for p in ("prefill", "decode"))
    drafter = d.get("method", "?") + (f" ({d['model']})" if d.get("model") else "")
    overrides = list(overrides)
    shown = " ".join(f"--set {o}" for o in overrides)
    name = f"{source.get('name')} ({shown})" if shown else source.get("name")
    return {"scenario": name, "deployment": f"{where}, engine{'s' if engines else ''} {engine}", "drafter": drafter,
            "engine": engine, "hardware": where}


def profile_shown(gpu: Any) -> str:
    """A catalog profile by its name; a profile file by the name it declares and its path."""
    from simulator.hardware.hardware import load_profile
    text = str(gpu)
    if not text.endswith((".yaml", ".yml")):
        return text
    try:
        return f"{load_profile(text).name} ({text})"
    except SpecsightInputError:
        return text


def own_policy(source: Mapping[str, Any]) -> Mapping[str, Any]:
    """The scenario's own policy block ({} when it has none or names only a kind)."""
    p = source.get("policy")
    return p if isinstance(p, Mapping) else {}


def scenario_source(scenario: Any, overrides: Iterable[str] = ()) -> dict[str, Any]:
    """The scenario as a plain mapping (a path, a mapping or a Scenario), validated, with `--set`
    style overrides applied and the workload's flat arrival form normalised to the nested form
    (so `workload.arrival` can be replaced as a whole)."""
    from simulator.scenario.scenario import Scenario, load_scenario
    from simulator.workload.workload import ARRIVAL_KEYS

    overrides = list(overrides)
    sc = scenario if isinstance(scenario, Scenario) and not overrides else load_scenario(
        scenario.source if isinstance(scenario, Scenario) else scenario, overrides)
    raw = copy.deepcopy(dict(sc.source))
    raw.setdefault("name", sc.name)
    wl = raw.get("workload")
    if isinstance(wl, Mapping) and isinstance(wl.get("arrival"), str):
        wl = dict(wl)
        sub: dict[str, Any] = {"process": wl["arrival"]}
        for key in ARRIVAL_KEYS.get(wl["arrival"], ()):
            if key in wl:
                sub[key] = wl.pop(key)
        wl["arrival"] = sub
        raw["workload"] = wl
    return raw


def override_strings(overrides: Mapping[str, Any]) -> list[str]:
    """{"a.b": value} -> ["a.b=<value as JSON>"] for load_scenario (JSON is valid YAML)."""
    return [f"{k}={json.dumps(v)}" for k, v in overrides.items()]


def parse_grid(spec: str) -> tuple[str, list[Any]]:
    """`key.path=v1,v2,...` -> (key.path, [values parsed as YAML]). Commas inside [] or {} do not
    split, so `policy={kind: goodput},{kind: static}` gives two values."""
    if "=" not in spec:
        raise SpecsightInputError("--grid", spec, "must look like key.path=v1,v2,...")
    key, _, text = spec.partition("=")
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise SpecsightInputError("--grid", spec,
                                  "the key path must be dotted names, e.g. drafter.num_speculative_tokens=1,2,3")
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    values = []
    for p in parts:
        if not p.strip():
            raise SpecsightInputError(f"--grid {key}", text, "empty value in the comma-separated list")
        values.append(parse_yaml(p, f"--grid {key}", p))
    return key, values


def grid_points(grids: Sequence[str] | Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """The cartesian product of grids as a list of {key: value} points. `grids`: `key=v1,v2`
    strings (values parsed as YAML) or a mapping {key: [values]}."""
    if not grids:
        raise SpecsightInputError("--grid", None, "at least one, e.g. --grid drafter.num_speculative_tokens=1,2,3")
    if isinstance(grids, Mapping):
        parsed = [(str(k), list(v)) for k, v in grids.items()]
    else:
        parsed = [parse_grid(g) for g in grids]
    keys = [k for k, _ in parsed]
    dup = {k for k in keys if keys.count(k) > 1}
    if dup:
        raise SpecsightInputError("--grid", sorted(dup)[0], "each key once (list all its values in one --grid)")
    return [dict(zip(keys, combo)) for combo in itertools.product(*(v for _, v in parsed))]


CATALOG_KEYS = ("hardware.gpu", "hardware.profile")   # grid values that name a hardware_profiles/ entry


def check_points(source: Mapping[str, Any], points: Sequence[Mapping[str, Any]]) -> None:
    """Refuse a grid up front, before any point runs: every point's overrides must pass the
    scenario schema on `source` (a misspelt key gets "did you mean"; a value the schema refuses
    says what is allowed), and a hardware.gpu or hardware.profile value must name a profile.
    The error names the grid (`--grid KEY...`). A point the schema accepts may still fail when it
    runs (a model that does not fit its GPUs): that is the point's own result."""
    from simulator.hardware.hardware import load_profile
    from simulator.scenario.scenario import checked_source

    seen: set[str] = set()
    for point in points:
        try:
            checked_source(source, override_strings(point))
            for key in CATALOG_KEYS:
                name = point.get(key)
                if isinstance(name, str) and name not in seen:
                    load_profile(name)
                    seen.add(name)
        except SpecsightInputError as e:
            field = e.field.removeprefix("--set ")
            if field in ("gpu", "profile"):
                field = next(k for k in CATALOG_KEYS if k in point)
            raise SpecsightInputError(f"--grid {field}", e.value, e.allowed) from None


def point_label(point: Mapping[str, Any]) -> str:
    """`key=value, key2=value2`: a grid point in words (values as JSON)."""
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in point.items())
