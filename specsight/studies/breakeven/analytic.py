"""The analytic model (simulator.speculation.analytic: no queueing, no prefill) for break-even studies.

`Analytic(source)`: a roofline scenario's deployment (simulator.scenario.resolve.resolve_deployment) with
the workload's mean lengths and the i.i.d. alpha matching its acceptance model, for overlaying
the closed form on a simulated study. `analytic_breakeven(model, hardware, drafter, alpha)`:
speedup against batch size per K and where it crosses 1, from the cost model alone.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from simulator.common.atomic_files import out_folder, write_csv
from simulator.common.errors import SpecsightInputError, require_int

from ..shared.inputs import int_list

BATCH_GRID = np.unique(np.round(np.geomspace(1, 1024, 61)))


class Analytic:
    """The scenario's cost model and drafter for simulator.speculation.analytic (roofline hardware only).
    `deployment`: the scenario's resolve_deployment, when the caller holds it already (one
    deployment re-priced under many acceptance settings: specsight.explore)."""

    def __init__(self, source: Mapping[str, Any], deployment: Any = None):
        from simulator.scenario.resolve import resolve_deployment
        from simulator.scenario.scenario import load_scenario
        from simulator.workload.workload import generate_requests

        sc = load_scenario(source)
        if sc.hardware.is_fixed or sc.drafter is None:
            raise SpecsightInputError("hardware" if sc.drafter is not None else "drafter", None,
                                      "the analytic model needs roofline hardware and a drafter")
        self.scenario = sc
        dep = resolve_deployment(sc) if deployment is None else deployment
        self.cm = dep.step_cost.cm
        self.drafter = dep.drafter
        reqs = generate_requests(sc.workload, np.random.default_rng(sc.seed))
        self.mean_prompt = float(np.mean(reqs.prompt_len))
        self.mean_output = float(np.mean(reqs.output_len))

    @property
    def mean_context(self) -> float:
        """Mean tokens cached during decode: the prompt plus half the output."""
        return self.mean_prompt + self.mean_output / 2.0

    def alpha(self, k: int) -> float:
        """The i.i.d. alpha giving the scenario's acceptance model's expected tokens at K."""
        from simulator.speculation.acceptance import expected_tokens
        from simulator.speculation.acceptance_presets import alpha_for_tau
        from simulator.speculation.spec_math import candidate_alpha
        tau = expected_tokens(self.scenario.acceptance.alphas(k))
        alpha = float(alpha_for_tau(min(tau, k + 1.0), k))
        s = self.drafter.spec
        if self.scenario.acceptance.per_depth and s.branches > 1:
            # the preset's rates already count a depth as accepted when any branch is: hand the
            # analytic model the per-candidate alpha, which it turns back into this per-depth rate
            alpha = candidate_alpha(alpha, s.branches)
        return alpha

    def speedup(self, batch: ArrayLike, context: ArrayLike, k: int, alpha: float) -> np.ndarray | float:
        from simulator.speculation.analytic import speedup
        return speedup(self.cm, self.drafter, np.asarray(batch, dtype=float), np.asarray(context, dtype=float),
                       k, alpha)

    def point(self, values: Mapping[str, float], k: int, sim_batch: float = math.nan) -> float:
        """The analytic speedup at one point of a study: `values` maps the axes swept there (batch,
        context, alpha) to their values; a batch not swept is the baseline's simulated mean batch
        (`sim_batch`, 1 when unknown), a context not swept the scenario's mean, an alpha not swept
        the one matching its acceptance at K. Scalars only: the printed value and every plotted
        point come from here (a real engine's cost model quantizes a scalar token count into
        tiles, which an array of batches would skip)."""
        batch = float(values["batch"]) if "batch" in values else (sim_batch if math.isfinite(sim_batch) else 1.0)
        ctx = float(values["context"]) + self.mean_output / 2.0 if "context" in values else self.mean_context
        alpha = float(values["alpha"]) if "alpha" in values else self.alpha(k)
        return float(self.speedup(batch, ctx, k, alpha))

    def best_k(self, batch: float, context: float, kmax: int) -> int:
        s = [float(self.speedup(batch, context, k, self.alpha(k))) for k in range(1, kmax + 1)]
        i = int(np.argmax(s))
        return i + 1 if s[i] > 1.0 else 0

    def batch_schedule(self, kmax: int, max_batch: int = 1024) -> list[list[int]]:
        """vLLM / TensorRT-LLM style [[max_batch, k], ...] from the analytic best K at each power of 2."""
        rows: list[list[int]] = []
        b = 1
        while b <= max_batch:
            k = self.best_k(b, self.mean_context, kmax)
            if rows and rows[-1][1] == k:
                rows[-1][0] = b
            else:
                rows.append([b, k])
            b *= 2
        if rows and rows[-1][1] == 0:   # past the last row K is 0 anyway
            rows.pop()
        return rows or [[1, 0]]


@dataclass(frozen=True)
class AnalyticBreakeven:
    """Speedup against batch size per K (`frame`: k, batch, speedup), each K's break-even
    (`results`: simulator.speculation.analytic.BreakEven by str(K)) and the largest batch whose KV fits."""
    model: str
    hardware: str                      # the profile's name
    hardware_profile: str              # the profile in words (where its numbers come from)
    tp: int
    dtype: str
    drafter: str
    alpha: float
    context: int
    frame: Any                         # pandas.DataFrame
    results: dict[str, Any]
    max_batch_in_memory: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        """The verdict per K (what `specsight breakeven --analytic --json` prints, less the files)."""
        df, res, mem = self.frame, self.results, self.max_batch_in_memory
        best = df.loc[df.groupby("batch")["speedup"].idxmax()]
        return {
            "model": self.model, "gpu": self.hardware, "hardware_profile": self.hardware_profile, "tp": self.tp,
            "drafter": self.drafter, "alpha": self.alpha, "context": self.context,
            "breakeven_batch": {k: be.breakeven_batch for k, be in res.items()},
            "speedup_at_batch1": {k: be.speedup_at_batch1 for k, be in res.items()},
            "never_pays": {k: be.never_pays for k, be in res.items()},
            "max_batch_in_memory": mem,
            "breakeven_within_memory": {k: (be.breakeven_batch is not None and be.breakeven_batch <= mem[k])
                                        for k, be in res.items()},
            "best_k": {int(b): (int(kk) if sp > 1.0 else 0)
                       for b, kk, sp in zip(best["batch"], best["k"], best["speedup"])},
        }

    def write(self, out_dir: str | Path) -> dict[str, str]:
        """breakeven_analytic.csv and .png under out_dir; returns {csv, png}."""
        from ..shared.speedup_curves_plot import plot_speedup_curves
        out = out_folder(out_dir)
        csv = write_csv(self.frame, out / "breakeven_analytic.csv")
        png = out / "breakeven_analytic.png"
        title = (f"{self.model} on {self.hardware} x{self.tp}, engine ideal, drafter {self.drafter}, "
                 f"alpha={self.alpha:g}, context {self.context}\nanalytic speedup vs batch (break-even where the "
                 f"curve crosses 1)")
        plot_speedup_curves(self.frame, x="batch", curve="k", y="speedup",
                            breakeven={f"K={int(k)}": be.breakeven_batch for k, be in self.results.items()},
                            title=title, xlabel="batch size (sequences decoding together)", path=png, logx=True,
                            vlines={"KV memory limit": min(self.max_batch_in_memory.values())})
        return {"csv": str(csv), "png": str(png)}


def analytic_breakeven(model: str, hardware: str, drafter: str, alpha: float, ks: Sequence[int] | str = (1, 2, 3, 4),
                       *, context: int = 1024, tp: int = 1, dtype: str = "bf16") -> AnalyticBreakeven:
    """Closed-form speedup over batch sizes 1..1024 for each K, from the cost model alone.

    model: catalog name or config.json; hardware: profile name or YAML path; drafter: a method
    (eagle3), method:model (draft_model:llama-3.2-1b) or a catalog name; alpha: i.i.d.
    acceptance rate; context: cached tokens per sequence."""
    import pandas as pd

    from simulator.common.limits import MAX_K, MAX_TOKENS, MAX_TP
    from simulator.costs.cost_model import CostModel
    from simulator.hardware.hardware import load_profile
    from simulator.models.catalog import load_model
    from simulator.speculation import spec_math
    from simulator.speculation.analytic import breakeven_batch, max_batch_in_memory, speedup
    from simulator.speculation.drafters import Drafter

    from ..shared.drafter_arg import resolve_drafter

    alpha = spec_math.check_alpha(alpha)
    ks = int_list("--k", ks, lo=1, hi=MAX_K)
    ctx = require_int("--context", context, lo=0, hi=MAX_TOKENS)
    require_int("--tp", tp, lo=1, hi=MAX_TP)
    hw = load_profile(hardware)
    target = load_model(model)
    cm = CostModel(target, hw, tp=tp, dtype=dtype)
    rows, result, mem_limit = [], {}, {}
    for k in ks:
        d = Drafter(resolve_drafter(drafter, model, k), target, cm)
        mem_limit[str(k)] = max_batch_in_memory(cm, d, ctx, k)
        s = speedup(cm, d, BATCH_GRID, ctx, k, alpha)
        result[str(k)] = breakeven_batch(cm, d, ctx, k, alpha, max_batch=float(BATCH_GRID[-1]))
        rows += [{"k": k, "batch": int(b), "speedup": float(v)} for b, v in zip(BATCH_GRID, s)]
    return AnalyticBreakeven(model, hw.name, hw.describe(), cm.tp, cm.dtype, drafter, alpha, ctx, pd.DataFrame(rows),
                             result, mem_limit)
