"""`SimResult`: one run's data (requests, iterations, summary, baseline), and the pool keys
`simulate --json` adds to any run's summary."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..costs.kv_cache import KVBudget
from ..engines import engine_label
from ..scenario.scenario import Scenario


@dataclass(frozen=True)
class SimResult:
    """One run: per-request and per-iteration DataFrames, the summary, and the baseline run."""
    scenario: Scenario
    requests: Any                      # pandas.DataFrame, one row per request
    iterations: Any                    # pandas.DataFrame, one row per iteration (all replicas); None: not kept
    summary: dict[str, Any]
    kv: KVBudget | None = None         # memory breakdown per GPU (None for hardware.kind fixed)
    baseline: SimResult | None = None
    trace: list | None = field(default=None, repr=False)
    # `<metric>_interval` -> [low, high], the 80 % intervals of the summary's speedups and TPOTs under a
    # real engine: filled by `specsight.simulate` (specsight/studies/simulate.py), empty from here
    intervals: dict[str, Any] = field(default_factory=dict)

    @property
    def engine(self) -> str:
        """The engine the run was priced under (`ideal`, `vllm v1`, ...)."""
        return engine_label(self.scenario.engine.kind, self.scenario.engine.version)


def pool_keys(result: SimResult) -> dict[str, Any]:
    """`pools` and `prefix_cache_hit_rate` for any run (`simulate --json`): a disaggregated run's
    pools, or the mixed fleet as one pool; the hit rate None without prefix caching."""
    s = result.summary
    pools = s.get("pools")
    if pools is None:
        hw = result.scenario.hardware
        tp = 1 if hw.is_fixed else int(hw.tp)
        pools = [{"pool": "mixed", "instances": int(hw.replicas), "tp": tp, "gpus": int(hw.replicas) * tp,
                  "gpu": hw.gpu, "mean_batch": s.get("mean_batch"), "ttft_ms_p50": s.get("ttft_ms_p50"),
                  "ttft_ms_p99": s.get("ttft_ms_p99"), "tpot_ms_p50": s.get("tpot_ms_p50"),
                  "tpot_ms_p99": s.get("tpot_ms_p99")}]
    return {"pools": pools, "prefix_cache_hit_rate": s.get("prefix_cache_hit_rate")}
