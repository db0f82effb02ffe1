"""Scenario files: one YAML mapping that says what to simulate, validated into frozen dataclasses.

    name: fixed-cost-demo
    seed: 0
    hardware: {kind: fixed, target_step_s: 0.02, draft_step_s: 0.001}  # or {gpu: h100-sxm, tp: 1, replicas: 1}
    model: llama-3.1-8b                   # catalog name or path to a config.json
    drafter: {method: draft_model, model: llama-3.2-1b, num_speculative_tokens: 3}
    acceptance: {model: iid, alpha: 0.7}
    policy: {kind: static}
    workload: {arrival: {process: closed_loop, concurrency: 1}, num_requests: 200, prompt_len: 128, output_len: 256}
    engine: {max_num_seqs: 256, max_num_batched_tokens: 8192, block_size: 16, gpu_memory_utilization: 0.9}
    slo: {tpot_ms_p99: 50, ttft_ms_p99: 2000}

`load_scenario(path_or_mapping, overrides)` applies `key.path=value` overrides (the value is
parsed as YAML), checks every key's type and range against the schema (simulator/scenario/schema_table.py,
docs/schema.md), builds the specs, and refuses work beyond the scenario's limits
(simulator/scenario/work_limits.py); every error names the key path it is about. Units and defaults:
docs/simulator.md.
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.errors import SpecsightInputError, closest_names, require_int
from ..common.input_files import parse_yaml, read_yaml
from ..common.keys import reject_unknown
from ..common.paths import SCENARIOS_DIR
from ..common.schema import check, check_shape
from ..serving.slo import SLOSpec
from ..speculation.acceptance import tree_acceptance
from ..speculation.acceptance_spec import AcceptanceSpec
from ..speculation.drafters import DrafterSpec
from ..speculation.engine_policies import check_policy_engine
from ..speculation.policy_spec import PolicySpec
from ..workload.workload import ARRIVAL_KEYS, WorkloadSpec
from .disagg_spec import check_disaggregation
from .engine_spec import EngineSpec
from .hardware_spec import HardwareSpec
from .schema_table import SCENARIO, TOP_KEYS
from .work_limits import check_kernel_setup, check_work_limits


@dataclass(frozen=True)
class Scenario:
    """A validated scenario. `source` keeps the mapping it was built from (after overrides)."""
    name: str
    seed: int
    hardware: HardwareSpec
    model: str | None
    drafter: DrafterSpec | None
    acceptance: Any            # an acceptance.AcceptanceModel (unbound; the engine binds a copy)
    policy: Any                # a policies.Policy (the engine runs a fresh copy per replica)
    workload: WorkloadSpec
    engine: EngineSpec
    slo: SLOSpec
    description: str = ""
    disaggregation: Mapping[str, Any] | None = None    # prefill and decode pools (disagg_spec.py); None: mixed
    source: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def k_max(self) -> int:
        """The largest K any round may use (the drafter's num_speculative_tokens; 0 without one)."""
        return 0 if self.drafter is None else int(self.drafter.num_speculative_tokens)

    def baseline(self) -> Scenario:
        """The same scenario with speculation off (K = 0 every round): the speedup reference."""
        return load_scenario(self.source, ["policy={kind: 'off'}"])

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(dict(self.source))


# ---- overrides ---------------------------------------------------------------------------
def apply_override(raw: dict[str, Any], assignment: str) -> None:
    """Apply one `a.b.c=value` (value parsed as YAML) to a nested mapping, in place."""
    if "=" not in assignment:
        raise SpecsightInputError("--set", assignment, "must look like key.path=value")
    path, _, text = assignment.partition("=")
    keys = [k.strip() for k in path.strip().split(".")]
    if not keys or any(not k for k in keys):
        raise SpecsightInputError("--set", assignment, "the key path must be dotted names, e.g. engine.max_num_seqs=64")
    value = parse_yaml(text, f"--set {path}", text) if text.strip() else None
    if keys[0] not in TOP_KEYS:
        raise SpecsightInputError(f"--set {keys[0]}", text,
                                  f"unknown top-level key; {closest_names(keys[0], TOP_KEYS)}")
    node: Any = raw
    for i, k in enumerate(keys[:-1]):
        nxt = node.get(k)
        if nxt is None:
            nxt = node[k] = {}
        elif isinstance(nxt, str) and i == 0 and k == "model":
            raise SpecsightInputError(f"--set {path}", text, "model is a name or path, not a mapping")
        elif not isinstance(nxt, dict):
            where = ".".join(keys[: i + 1])
            raise SpecsightInputError(f"--set {path}", text, f"{where} is {nxt!r}, not a mapping")
        node = nxt
    node[keys[-1]] = value


# ---- loading -----------------------------------------------------------------------------
def _dataclass_from(cls: type, raw: Mapping[str, Any] | None, where: str) -> Any:
    raw = raw or {}
    reject_unknown(raw, [f.name for f in dataclasses.fields(cls)], where)
    return cls(**dict(raw))


def _normalise_workload(raw: Any) -> Any:
    """Accept the flat form `{arrival: poisson, qps: 2, ...}` as well as `{arrival: {process: poisson, qps: 2}}`."""
    if not isinstance(raw, Mapping):
        return raw
    w = dict(raw)
    arr = w.get("arrival")
    if isinstance(arr, str):
        sub: dict[str, Any] = {"process": arr}
        for key in ARRIVAL_KEYS.get(arr, ()):
            if key in w:
                sub[key] = w.pop(key)
        w["arrival"] = sub
    return w


def _normalise_policy(raw: Any) -> Any:
    """YAML 1.1 reads a bare `off` as False: `policy: off` and `{kind: off}` mean kind off."""
    if raw is False:
        return {"kind": "off"}
    if isinstance(raw, Mapping) and raw.get("kind") is False:
        return {**raw, "kind": "off"}
    return raw


def checked_source(path_or_mapping: str | Path | Mapping[str, Any], overrides: Iterable[str] = ()) -> dict[str, Any]:
    """The scenario mapping read, overridden, normalised (flat workload and `policy: off` forms)
    and checked against the schema: every key a string, every value of its type and in range."""
    if isinstance(path_or_mapping, Mapping):
        check_shape(path_or_mapping, "scenario")
        raw: Any = copy.deepcopy(dict(path_or_mapping))
    else:
        path_or_mapping = scenario_path(path_or_mapping)
        raw = read_yaml(path_or_mapping, "scenario", "scenario")
        check_shape(raw, str(path_or_mapping))
    if not isinstance(raw, dict):
        raise SpecsightInputError("scenario", type(raw).__name__, "a scenario must be a YAML mapping")
    for a in overrides:
        apply_override(raw, a)
    check_shape(raw, "scenario")
    if "workload" in raw:
        raw["workload"] = _normalise_workload(raw["workload"])
    if "policy" in raw:
        raw["policy"] = _normalise_policy(raw["policy"])
    return check(SCENARIO, raw, "")


def scenario_path(name_or_path: str | Path) -> str | Path:
    """A shipped scenario by name (scenarios/<name>.yaml, as models and GPUs go by name), else the
    path as given (an unknown name without a YAML suffix gets "did you mean")."""
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")) or "/" in text or not text:
        return name_or_path
    shipped = SCENARIOS_DIR / f"{text}.yaml"
    try:
        if Path(text).exists():
            return name_or_path
        if shipped.is_file():
            return shipped
    except OSError:                  # a name the file system refuses (too long): read_yaml says so
        return name_or_path
    names = sorted(p.stem for p in SCENARIOS_DIR.glob("*.yaml"))
    raise SpecsightInputError("scenario", text, "a scenario file or a shipped scenario's name: "
                              + closest_names(text, names))


def load_scenario(path_or_mapping: str | Path | Mapping[str, Any], overrides: Iterable[str] = ()) -> Scenario:
    """Read (a YAML path, or an already-parsed mapping), apply `key.path=value` overrides, validate."""
    raw = checked_source(path_or_mapping, overrides)
    default_name = "scenario" if isinstance(path_or_mapping, Mapping) else Path(scenario_path(path_or_mapping)).stem
    name = str(raw.get("name") or default_name)
    seed = require_int("seed", raw.get("seed", 0), lo=0)
    hardware = _dataclass_from(HardwareSpec, raw.get("hardware"), "hardware")
    model = raw.get("model")
    if model is None and not hardware.is_fixed:
        raise SpecsightInputError("model", None, "required: a catalog name (models/<name>.json) or a config.json path")

    drafter = None
    if raw.get("drafter") is not None:
        drafter = DrafterSpec.from_mapping(raw["drafter"], where="drafter")
    k_max = 0 if drafter is None else int(drafter.num_speculative_tokens)

    acc_raw = raw.get("acceptance")
    if acc_raw is None:
        if k_max > 0:
            raise SpecsightInputError("acceptance", None, "required with a drafter, e.g. {model: iid, alpha: 0.7}")
        acc_raw = {"model": "iid", "alpha": 0.0}
    acceptance = AcceptanceSpec.from_mapping(acc_raw, where="acceptance", k_max=max(k_max, 1))
    check_kernel_setup(acceptance, raw)             # its Monte Carlo set-up runs on the next line

    pol_raw = raw.get("policy")
    if pol_raw is None:
        pol_raw = {"kind": "static" if k_max > 0 else "off"}
    # the goodput policy's prior: per-depth rates for a tree drafter (as the engine samples them)
    branches = drafter.branches if drafter is not None else 1
    prior = tree_acceptance(acceptance, branches).alphas(k_max) if k_max > 0 else None
    policy = PolicySpec.from_mapping(pol_raw, where="policy", k_max=k_max, prior_alphas=prior)

    workload = WorkloadSpec.from_mapping(raw["workload"], where="workload")
    engine = _dataclass_from(EngineSpec, raw.get("engine"), "engine")
    check_policy_engine(policy, engine.kind, drafter)      # an engine's own rule runs under that engine only
    slo = _dataclass_from(SLOSpec, raw.get("slo"), "slo")
    check_disaggregation(raw.get("disaggregation"), hardware)
    sc = Scenario(name=name, seed=seed, hardware=hardware, model=None if model is None else str(model),
                  drafter=drafter, acceptance=acceptance, policy=policy, workload=workload,
                  engine=engine, slo=slo, description=str(raw.get("description") or ""),
                  disaggregation=raw.get("disaggregation"), source=raw)
    check_work_limits(sc)
    return sc


def as_scenario(s: Scenario | str | Path | Mapping[str, Any]) -> Scenario:
    """`s` itself if it is a Scenario, else load_scenario(s)."""
    return s if isinstance(s, Scenario) else load_scenario(s)
