# Non-view torch ops per decoder layer of the timed model (calibrate/layers.py), counted with a
# TorchDispatchMode on the CPU (one decode pass at 1 and 2 layers; the difference is one layer).
# Usage: .venv/bin/python benchmarks/count_layer_ops.py
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from calibrate.layers import DecoderModel, scaled_spec
from simulator.model_spec import load_model
VIEWS = {"view", "_unsafe_view", "reshape", "permute", "transpose", "expand", "split", "split_with_sizes", "chunk",
         "slice", "select", "unsqueeze", "squeeze", "alias", "as_strided", "t", "detach", "lift_fresh", "_to_copy_noop"}
class Count(TorchDispatchMode):
    def __init__(self): super().__init__(); self.ops = []
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func.__name__.split(".")[0]); return func(*args, **(kwargs or {}))
m = DecoderModel(scaled_spec(load_model("llama-3.1-8b"), 16), 2, dtype="fp32")
cache = m.new_cache(4, 256); cache.lengths.fill_(100)
toks = torch.zeros(4, 1, dtype=torch.int64)
res = {}
for L in (1, 2):
    c = Count()
    with c:
        m(toks, cache, logits="last", max_length=100, num_layers=L)
    res[L] = [o for o in c.ops if o not in VIEWS]
per = len(res[2]) - len(res[1])
print("non-view aten ops: 1 layer", len(res[1]), "2 layers", len(res[2]), "-> per layer", per)
