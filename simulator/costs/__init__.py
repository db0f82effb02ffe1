"""The physics: the time of one forward pass for any batch shape (cost_model.py; the per-GPU
coefficients: shard_costs.py; the pass time and causal pair count: pass_time.py, pass_shape.py;
the per-op report: op_cost.py) and the KV cache's memory (kv_cache.py).
"""
