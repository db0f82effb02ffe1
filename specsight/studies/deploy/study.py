"""Deployable output: a simulated configuration as each serving engine launches it.

`deployment(scenario)` resolves the scenario (model, TP, dtype, drafter, K, policy, batch cap)
into a `ServingConfig`, then asks each engine module for its command: vllm.py
(`vllm serve MODEL ... --speculative-config '{...}'`), sglang.py (`python -m
sglang.launch_server ...`) and trtllm.py (`trtllm-serve MODEL ... --extra_llm_api_options
trtllm.yaml`). Each returns an `EngineCommand` (command.py, beside the `ServingConfig` it
reads): the argv and the files it reads, or the reason the engine cannot run what was
simulated (a drafter method or policy it lacks); nothing is mapped silently. Every flag and
field name, and the file@commit it was read in: docs/deploy.md.

Model names: the Hugging Face repo id a catalog config records as `_name_or_path` (the key
transformers itself writes into config.json); a config.json path: its `_name_or_path` when that
is a repo id, else the folder holding it (engines load local folders). `model_path` /
`draft_path` override both.
"""
from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.common.errors import SpecsightInputError

from . import sglang as deploy_sglang
from . import trtllm as deploy_trtllm
from . import vllm as deploy_vllm
from .command import EngineCommand, ServingConfig
from .disagg import pd_engines

ENGINES = ("vllm", "sglang", "trtllm")
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")   # org/name
# drafter methods whose engines load the drafter from the target's own checkpoint (no draft path)
IN_TARGET = ("mtp",)
NO_MODEL = ("ngram", "suffix", "self_spec")
@dataclass(frozen=True)
class Deployment:
    """The serving commands for one configuration, one `EngineCommand` per engine."""
    config: ServingConfig
    engines: tuple[EngineCommand, ...]

    def __getitem__(self, engine: str) -> EngineCommand:
        for e in self.engines:
            if e.engine == engine:
                return e
        raise SpecsightInputError("engine", engine, f"one of {', '.join(ENGINES)}")

    def to_dict(self) -> dict[str, Any]:
        cfg = {k: v for k, v in vars(self.config).items()}
        return {"config": cfg, "engines": {e.engine: e.to_dict() for e in self.engines}}

    def text(self) -> str:
        """Each engine's command (and the files it reads), or why it cannot run this."""
        lines = []
        for e in self.engines:
            if not e.supported:
                lines.append(f"{e.engine}: not deployable: {e.unsupported}")
                continue
            lines.append(f"{e.engine}: {e.command}")
            lines += [f"  {name}:\n" + "\n".join("    " + s for s in text.rstrip().splitlines())
                      for name, text in e.files]
            lines += [f"  note: {n}" for n in e.notes]
        return "\n".join(lines)

    def write(self, out_dir: str | Path) -> dict[str, str]:
        """serve_<engine>.sh and the files each reads (trtllm.yaml, sglang_adaptive.json) under
        out_dir, for the engines that can run the configuration; returns {file name: path}."""
        from simulator.common.atomic_files import out_folder, write_text
        out = out_folder(out_dir)
        written: dict[str, str] = {}
        for e in self.engines:
            if not e.supported:
                continue
            for name, text in e.files:
                written[name] = str(write_text(out / name, text))
            script = out / f"serve_{e.engine}.sh"
            written[script.name] = str(write_text(script, shell_script(e, self.config.scenario)))
            script.chmod(0o755)
        return written


def shell_script(e: EngineCommand, scenario: str) -> str:
    """A bash script that runs e.argv from its own folder's files: the file arguments become
    "$HERE/NAME" (HERE: the script's folder, defined only where a file argument uses it)."""
    names = {name for name, _ in e.files}
    uses_files = any(w in names for w in e.argv)
    lines: list[list[str]] = [[]]
    for w in e.argv:
        if w.startswith("--"):                     # one flag and its values per line
            lines.append([])
        lines[-1].append(f'"$HERE/{w}"' if w in names else shlex.quote(w))
    return ("#!/usr/bin/env bash\n"
            f"# {e.engine}: the serving command for specsight scenario {scenario} (docs/deploy.md)\n"
            + "".join(f"# note: {n}\n" for n in e.notes)
            + ('HERE="$(cd "$(dirname "$0")" && pwd)"\n' if uses_files else "")
            + "exec " + " \\\n  ".join(" ".join(ws) for ws in lines) + "\n")


# ---- names --------------------------------------------------------------------------------
def hub_name(name_or_path: str, field_name: str) -> str:
    """The Hugging Face repo id (or local folder) an engine loads for a catalog name or a
    config.json path (the rule in the module docstring)."""
    from simulator.common.input_files import read_json
    from simulator.models.catalog import config_path  # load_model's own rule
    cfg_path, _, catalog = config_path(name_or_path)
    cfg = read_json(cfg_path, field_name)
    hub = cfg.get("_name_or_path") if isinstance(cfg, Mapping) else None
    if isinstance(hub, str) and HUB_ID.match(hub):
        return hub
    if not catalog:
        return str(cfg_path.parent)
    raise SpecsightInputError(field_name, name_or_path,
                              f"models/{name_or_path}.json records no Hugging Face repo id (_name_or_path): give "
                              "the checkpoint's config.json path, or model_path= / draft_path= in the Python API")


# ---- policies as data ---------------------------------------------------------------------
def policy_params(policy: Any) -> dict[str, Any]:
    """The engine-facing parameters of a simulator policy object (plain, JSON-able)."""
    kind = policy.kind
    if kind == "static":
        return {"k": int(policy.k)}
    if kind == "batch_schedule":
        return {"rows": [[b, k] for b, k in policy.rows]}
    if kind == "vllm_dynamic":
        return {"ranges": [list(r) for r in policy.ranges]}
    if kind == "trtllm_schedule":
        return {"schedule": None if policy.schedule is None else [list(r) for r in policy.schedule],
                "max_concurrency": policy.max_concurrency, "acceptance_window": policy.window or None,
                "acceptance_length_threshold": policy.threshold}
    if kind == "sglang_adaptive":
        return {"entries": [{"batch_size": bs, "candidate_steps": list(steps), "up_hysteresis": up,
                             "down_hysteresis": down, "ceiling_coeff": ceil}
                            for bs, steps, up, down, ceil in policy.entries],
                "ema_alpha": policy.ema_alpha, "warmup_batches": policy.warmup, "update_interval": policy.interval}
    return {}


# ---- scenario -> ServingConfig -> Deployment ------------------------------------------------
def serving_config(scenario: Any, overrides: Iterable[str] = (), *, model_path: str | None = None,
                   draft_path: str | None = None) -> ServingConfig:
    """The scenario (a YAML path or mapping, with `key.path=value` overrides) as a ServingConfig."""
    from simulator.scenario.scenario import load_scenario
    sc = load_scenario(scenario, overrides)
    if sc.hardware.is_fixed:
        raise SpecsightInputError("hardware.kind", "fixed", "a deployable configuration needs a model and a GPU "
                                                            "(hardware: {gpu: ..., tp: ...})")
    d = sc.drafter
    static_k = getattr(sc.policy, "k", sc.k_max) if sc.policy.kind == "static" else sc.k_max
    method = d.method if d is not None and static_k > 0 and sc.policy.speculates else None
    draft = None
    if method is not None and d.model and method not in IN_TARGET + NO_MODEL:
        draft = draft_path or hub_name(d.model, "drafter.model")
    hw, eng = sc.hardware, sc.engine
    return ServingConfig(
        scenario=sc.name, model=model_path or hub_name(str(sc.model), "model"), tp=hw.tp, dtype=hw.dtype,
        kv_dtype=hw.kv_dtype if hw.kv_dtype not in (None, hw.dtype) else None, max_num_seqs=eng.max_num_seqs,
        max_num_batched_tokens=eng.max_num_batched_tokens, gpu_memory_utilization=eng.gpu_memory_utilization,
        engine_kind=eng.kind, method=method, draft_model=draft, draft_tp=None if d is None else d.draft_tp,
        k=static_k if method else 0, tree=bool(d and d.is_tree), tree_nodes=0 if d is None else d.tree_nodes,
        tree_branches=1 if d is None else d.branches, ep=int(hw.ep), dp_attention=bool(hw.dp_attention),
        policy=sc.policy.kind if method else "off",
        policy_params=policy_params(sc.policy) if method else {})


def deploy_config(cfg: ServingConfig) -> Deployment:
    """Each engine's command for cfg."""
    return Deployment(cfg, (deploy_vllm.build(cfg), deploy_sglang.build(cfg), deploy_trtllm.build(cfg)))


def deployment(scenario: Any, overrides: Iterable[str] = (), *, model_path: str | None = None,
               draft_path: str | None = None) -> Deployment:
    """The serving command of each engine (vLLM, SGLang, TensorRT-LLM) for a scenario, as data; a
    disaggregated one: each engine's prefill and decode servers (disagg.py), the decode pool's
    configuration as the deployment's."""
    from simulator.scenario.disagg_spec import pool_source

    from ..shared.overrides import scenario_source
    source = scenario_source(scenario, overrides)
    if source.get("disaggregation") is None:
        return deploy_config(serving_config(source, model_path=model_path, draft_path=draft_path))
    pools = [deploy_config(serving_config(pool_source(source, pool), model_path=model_path, draft_path=draft_path))
             for pool in ("prefill", "decode")]
    d = source["disaggregation"]
    counts = (int(d["prefill"].get("instances", 1)), int(d["decode"].get("instances", 1)))
    return Deployment(pools[1].config, pd_engines(pools[0].config, pools[0].engines, pools[1].config, pools[1].engines,
                                                  counts))


# ---- the configuration a capacity plan chose --------------------------------------------------
NO_SPECULATION_DIR = "no_speculation"     # where the best configuration without speculation's commands go


@dataclass(frozen=True)
class PlanDeployment:
    """The cheapest plan row some engine can run, its deployment, and the cheaper rows skipped
    (label, why no engine runs them); `plain`: the same for the rows without speculation, when
    the chosen row speculates (what a planner runs to compare, or when speculation is not wanted)."""
    config: str
    deployment: Deployment
    skipped: tuple[tuple[str, str], ...] = ()
    plain: PlanDeployment | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"chosen": self.config, "priced_engine": self.deployment.config.engine_kind,
                **self.deployment.to_dict(), "skipped": [{"config": c, "why": w} for c, w in self.skipped],
                **({"no_speculation": self.plain.to_dict()} if self.plain is not None else {})}

    def text(self) -> str:
        head = [f"serving commands for {self.config} (docs/deploy.md):", "  " + priced_line(self.deployment.config)]
        head += [f"  (cheaper {c} skipped: {w})" for c, w in self.skipped]
        out = "\n".join(head) + "\n" + self.deployment.text()
        if self.plain is not None:
            out += (f"\nwithout speculation, the best configuration is {self.plain.config} (written under "
                    f"{NO_SPECULATION_DIR}/):\n" + self.plain.deployment.text())
        return out

    def write(self, out_dir: str | Path) -> dict[str, str]:
        """The chosen configuration's files under out_dir, the best one without speculation's under
        out_dir/no_speculation; returns {file name: path} (no_speculation/NAME for those)."""
        files = self.deployment.write(out_dir)
        if self.plain is not None:
            files.update({f"{NO_SPECULATION_DIR}/{k}": v
                          for k, v in self.plain.deployment.write(Path(out_dir) / NO_SPECULATION_DIR).items()})
        return files


def priced_line(cfg: ServingConfig) -> str:
    """Which engine's rounds the plan's capacities were priced under, beside commands for all three."""
    if cfg.engine_kind == "ideal":
        return ("priced under engine ideal (the cost model's passes alone, no serving engine's rounds or host "
                "work): --set engine.kind=vllm (sglang, trtllm) prices the plan as that engine runs it")
    return (f"priced under engine {cfg.engine_kind}: its command runs what was priced; the others run the same "
            f"configuration, not priced under their own rounds")


def plan_deployment(plan: Any, scenario: Any, overrides: Iterable[str] = (), policies: Any = None,
                    ks: Any = (), *, model_path: str | None = None,
                    draft_path: str | None = None) -> PlanDeployment | None:
    """The serving commands for a CapacityPlan's cheapest row that meets the SLO ($/M output
    tokens, then GPUs, then the larger capacity and the lower TPOT p99) and that at least one
    engine can run; None when no row meets it. The arguments are the plan's own (scenario,
    overrides, policies, ks)."""
    import math

    from simulator.common.limits import MAX_K

    from ..plan.study import DEFAULT_POLICIES, configurations, speculates
    from ..shared.inputs import int_list
    from ..shared.overrides import override_strings, scenario_source
    source = scenario_source(scenario, overrides)
    text = ",".join(policies or DEFAULT_POLICIES) if not isinstance(policies, str) else policies
    pols = [p.strip() for p in text.split(",") if p.strip()]
    by_label = dict(configurations(source, pols, int_list("--k", ks, lo=1, hi=MAX_K) if ks else []))

    def cost(r: Mapping[str, Any]) -> tuple[float, float, float, float]:
        """$/M tokens, GPUs; on a tie the larger capacity, then the lower TPOT p99."""
        c, t = r.get("cost_per_million_output_tokens_usd"), r.get("tpot_ms_p99_at_max")
        return (math.inf if c is None else c, r.get("gpus") or math.inf, -r["max_qps_per_replica"],
                math.inf if t is None else t)
    rows = sorted((r for r in plan.rows if r.get("max_qps_per_replica") and r["config"] in by_label), key=cost)
    return with_plain([(r["config"], source, override_strings(by_label[r["config"]]), speculates(by_label[r["config"]]))
                       for r in rows], model_path, draft_path)


def with_plain(candidates: list[tuple[str, Any, Iterable[str], bool]], model_path: str | None,
               draft_path: str | None) -> PlanDeployment | None:
    """first_deployable over (label, scenario, overrides, speculates), cheapest first; when the one
    chosen speculates, the first deployable of those that do not as its `plain`."""
    chosen = first_deployable(((lab, sc, ov) for lab, sc, ov, _ in candidates), model_path, draft_path)
    if chosen is None or not any(sp for lab, _, _, sp in candidates if lab == chosen.config):
        return chosen
    plain = first_deployable(((lab, sc, ov) for lab, sc, ov, sp in candidates if not sp), model_path, draft_path)
    return dataclasses.replace(chosen, plain=plain)


def first_deployable(candidates: Iterable[tuple[str, Any, Iterable[str]]], model_path: str | None,
                     draft_path: str | None) -> PlanDeployment | None:
    """The first of (label, scenario, overrides), cheapest first, that at least one engine can
    run, with the cheaper ones skipped and why; None when there is none."""
    skipped: list[tuple[str, str]] = []
    for label, scenario, overrides in candidates:
        dep = deployment(scenario, overrides, model_path=model_path, draft_path=draft_path)
        if any(e.supported for e in dep.engines):
            return PlanDeployment(label, dep, tuple(skipped))
        skipped.append((label, "; ".join(f"{e.engine}: {e.unsupported}" for e in dep.engines)))
    return None



def search_deployment(search: Any, *, model_path: str | None = None,
                      draft_path: str | None = None) -> PlanDeployment | None:
    """The serving commands for a configuration search's (plan_search.PlanSearch) cheapest ranked
    configuration that at least one engine can run; None when no configuration meets the SLO."""
    from ..plan.study import speculates
    return with_plain([(r["config"], search.scenario_for(r), (), speculates(r["overrides"])) for r in search.rows
                       if r.get("rank") is not None], model_path, draft_path)
