"""The SimPy serving loop: the engine's processes (engine.py), routing (router.py), the replica
loop (replica.py; under a real engine: engine_replica.py), admission, chunked prefill and
preemption (scheduler.py), the decode batch (decode_batch.py), an iteration's cost (step_cost.py),
run-ahead (run_ahead.py), quiet rounds compiled with numba (compiled_rounds.py, decode_kernel.py),
and the metrics (metrics.py, iteration_totals.py; the SLO they count against: slo.py); a
disaggregated deployment's two pools (disagg.py; their summaries: disagg_pools.py) and prefix
caching (prefix_replica.py, prefix_cache.py, prefix_ranges.py).
"""
