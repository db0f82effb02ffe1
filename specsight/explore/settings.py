"""The explorer's controls as one frozen value: read from a scenario, written as the `--set`
overrides the command line takes, as a URL query, and as the scenario YAML they make.

Every value stays the text the control holds, so a bad one reaches `load_scenario` exactly as
`specsight simulate SCENARIO --set KEY=TEXT` hands it over, and its error is the same line.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from simulator.common.errors import SpecsightInputError

ACCEPTANCE_MODES = ("alpha", "preset", "file")
LOADS = ("batch", "rate")
TREE_KEYS = ("tree", "tree_nodes", "tree_branches")      # the drafter's tree keys (drafters.DRAFTER)
DEFAULT_ALPHA = "0.7"              # the i.i.d. rate offered when a scenario's acceptance is not one


@dataclass(frozen=True)
class Settings:
    """What a planner changes, each as the control's text."""
    gpu: str                 # hardware profile name (catalog or calibrated)
    tp: str
    model: str
    drafter: str             # as `--drafter`: eagle3, draft_model:llama-3.2-1b, a catalog name
    k: str
    tree: str                # the drafter's tree keys, `tree: true, tree_nodes: 59, tree_branches: 4` ("" a chain)
    acceptance: str          # ACCEPTANCE_MODES
    alpha: str
    preset: str
    metrics_file: str        # path of an uploaded vLLM metrics file ("" for none)
    engine: str              # ideal, vllm, sglang, trtllm
    version: str             # "" for the engine's default
    load: str                # LOADS: closed-loop users (batch) or a Poisson rate
    batch: str
    rate: str                # requests per second
    prompt: str              # tokens (the length distribution's median, or its fixed value)
    output: str
    tpot_ms: str             # "" for no TPOT target
    ttft_ms: str

    def to_query(self) -> str:
        """The settings as a URL query (`?gpu=...&k=3...`)."""
        return "?" + urlencode(dataclasses.asdict(self))

    def replace(self, **changes: str) -> Settings:
        return dataclasses.replace(self, **{k: "" if v is None else str(v) for k, v in changes.items()})


FIELDS = tuple(f.name for f in dataclasses.fields(Settings))


def from_query(query: str, default: Settings) -> Settings:
    """`default` with the values a URL query names (unknown names are ignored, as a browser's
    extra parameters should be)."""
    given = {k: v for k, v in parse_qsl(query.lstrip("?"), keep_blank_values=True) if k in FIELDS}
    return dataclasses.replace(default, **given)


def _length_center(dist: Any) -> str:
    if isinstance(dist, Mapping):
        for key in ("value", "median", "mean"):
            if dist.get(key) is not None:
                return str(dist[key])
        if dist.get("low") is not None and dist.get("high") is not None:
            return str((int(dist["low"]) + int(dist["high"])) // 2)
        return ""
    return "" if dist is None else str(dist)


def _drafter_text(block: Any) -> str:
    if not isinstance(block, Mapping):
        return "eagle3"
    method, model = block.get("method", ""), block.get("model")
    return f"{method}:{model}" if model else str(method)


def tree_text(block: Any) -> str:
    """The tree keys a drafter block sets, as the tree control writes them."""
    if not isinstance(block, Mapping):
        return ""
    return ", ".join(f"{k}: {json.dumps(block[k])}" for k in TREE_KEYS if k in block)


def tree_overrides(text: str) -> list[str]:
    """The tree control's `KEY: VALUE, ...` (braces optional) as `drafter.KEY=VALUE` overrides,
    every tree key set (one left out takes the schema's default: "" is a chain); the values
    are checked by load_scenario, as `--set drafter.KEY=VALUE` is."""
    allowed = ", ".join(TREE_KEYS)
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    given: dict[str, str] = {}
    for part in filter(str.strip, body.split(",")):
        key, colon, value = part.partition(":")
        key = key.strip()
        if not colon or not value.strip():
            raise SpecsightInputError("tree", text, f"KEY: VALUE pairs of {allowed}, comma-separated "
                                      "(e.g. tree: true, tree_nodes: 59, tree_branches: 4; empty: a chain)")
        if key not in TREE_KEYS:
            raise SpecsightInputError("tree", key, f"a drafter tree key: {allowed}")
        given[key] = value.strip()
    from simulator.speculation.drafters import DRAFTER
    return [f"drafter.{k}={given.get(k, json.dumps(DRAFTER.keys[k].default))}" for k in TREE_KEYS]


def from_scenario(source: Mapping[str, Any]) -> Settings:
    """The controls' values a scenario (a checked mapping, `scenario_source`) starts from."""
    hw = source.get("hardware") or {}
    drafter = source.get("drafter") or {}
    acc = source.get("acceptance")
    wl = source.get("workload") or {}
    arr = wl.get("arrival") if isinstance(wl.get("arrival"), Mapping) else {}
    eng = source.get("engine") or {}
    slo = source.get("slo") or {}
    mode, alpha, preset = "alpha", DEFAULT_ALPHA, ""
    if isinstance(acc, (int, float)):
        alpha = str(acc)
    elif isinstance(acc, str):
        mode, preset = "preset", acc
    elif isinstance(acc, Mapping):
        if acc.get("model") == "preset":
            mode, preset = "preset", str(acc.get("name", ""))
        elif acc.get("model") == "iid":
            alpha = str(acc.get("alpha"))
    load = "rate" if arr.get("process") in ("poisson", "gamma", "constant") else "batch"
    return Settings(
        gpu=str(hw.get("profile") or hw.get("gpu") or ""), tp=str(hw.get("tp", 1)), model=str(source.get("model", "")),
        drafter=_drafter_text(drafter), k=str(drafter.get("num_speculative_tokens", 3) if drafter else 3),
        tree=tree_text(drafter),
        acceptance=mode, alpha=alpha, preset=preset, metrics_file="",
        engine=str(eng.get("kind", "ideal")), version=str(eng.get("version") or ""),
        load=load, batch=str(arr.get("concurrency", 16)), rate=str(arr.get("qps", 4.0)),
        prompt=_length_center(wl.get("prompt_len")), output=_length_center(wl.get("output_len")),
        tpot_ms="" if slo.get("tpot_ms_p99") is None else str(slo["tpot_ms_p99"]),
        ttft_ms="" if slo.get("ttft_ms_p99") is None else str(slo["ttft_ms_p99"]))


def _length_overrides(key: str, dist: Any, text: str) -> list[str]:
    """A length control: the fixed value, or the lognormal's median (its mean dropped, its
    other keys kept); another distribution is replaced by a fixed length."""
    if isinstance(dist, Mapping) and dist.get("dist") in ("lognormal", "fixed"):
        center = "median" if dist["dist"] == "lognormal" else "value"
        kept = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in dist.items() if k not in ("mean", center))
        return [f"{key}={{{kept}, {center}: {text}}}"]
    return [f"{key}={{dist: fixed, value: {text}}}"] if text.strip() else []


def overrides(base: Mapping[str, Any], s: Settings, drafter_block: Mapping[str, Any] | None = None) -> list[str]:
    """The `--set` overrides that put `base` at the settings `s`, in the command line's form
    (values are the controls' text, parsed as YAML). `drafter_block`: the drafter resolved from
    `s.drafter` (drafter_arg.resolve_drafter), None to leave the scenario's."""
    out: list[str] = ["hardware.gpu=", f"hardware.profile={json.dumps(s.gpu)}", f"hardware.tp={s.tp}",
                      f"model={json.dumps(s.model)}"]
    if drafter_block is not None:
        out.append(f"drafter={json.dumps(dict(drafter_block))}")
    out.append(f"drafter.num_speculative_tokens={s.k}")
    if drafter_block is not None or s.tree != tree_text(base.get("drafter")):
        out += tree_overrides(s.tree)
    if s.acceptance == "alpha":
        out.append(f"acceptance={{model: iid, alpha: {s.alpha}}}")
    elif s.acceptance == "preset":
        out.append(f"acceptance={{model: preset, name: {json.dumps(s.preset)}}}")
    else:
        out.append(f"acceptance={{model: trace, path: {json.dumps(s.metrics_file)}}}")
    eng = dict(base.get("engine") or {})
    eng.pop("version", None)
    eng["kind"] = s.engine
    out.append(f"engine={json.dumps(eng)}")
    if s.version:
        out.append(f"engine.version={json.dumps(s.version)}")
    if s.load == "batch":
        out.append(f"workload.arrival={{process: closed_loop, concurrency: {s.batch}}}")
    else:
        out.append(f"workload.arrival={{process: poisson, qps: {s.rate}}}")
    wl = base.get("workload") or {}
    out += _length_overrides("workload.prompt_len", wl.get("prompt_len"), s.prompt)
    out += _length_overrides("workload.output_len", wl.get("output_len"), s.output)
    out.append(f"slo.tpot_ms_p99={s.tpot_ms}")
    out.append(f"slo.ttft_ms_p99={s.ttft_ms}")
    return out


def scenario_yaml(source: Mapping[str, Any]) -> str:
    """The scenario as YAML text (what the download writes; `load_scenario` reads it back)."""
    import yaml
    head = f"# {source.get('name', 'scenario')}: written by `specsight explore` (docs/explore.md)\n"
    return head + yaml.safe_dump(dict(source), sort_keys=False, width=200)
