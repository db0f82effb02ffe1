"""Non-view torch ops per decoder layer of the timed model (calibrate/layers.py), counted with a
TorchDispatchMode on the CPU: one decode pass at 1 and 2 layers, the difference is one layer.

    .venv/bin/python benchmarks/count_layer_ops.py
"""
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from calibrate.layers import DecoderModel, scaled_spec
from simulator.models.catalog import load_model

VIEWS = {"view", "_unsafe_view", "reshape", "permute", "transpose", "expand", "split", "split_with_sizes", "chunk",
         "slice", "select", "unsqueeze", "squeeze", "alias", "as_strided", "t", "detach", "lift_fresh", "_to_copy_noop"}


class Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func.__name__.split(".")[0])
        return func(*args, **(kwargs or {}))


def main() -> None:
    model = DecoderModel(scaled_spec(load_model("llama-3.1-8b"), 16), 2, dtype="fp32")
    cache = model.new_cache(4, 256)
    cache.lengths.fill_(100)
    tokens = torch.zeros(4, 1, dtype=torch.int64)
    ops = {}
    for layers in (1, 2):
        counter = Count()
        with counter:
            model(tokens, cache, logits="last", max_length=100, num_layers=layers)
        ops[layers] = [o for o in counter.ops if o not in VIEWS]
    print("non-view aten ops: 1 layer", len(ops[1]), "2 layers", len(ops[2]), "-> per layer", len(ops[2]) - len(ops[1]))


if __name__ == "__main__":
    main()
