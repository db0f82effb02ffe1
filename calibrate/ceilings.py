"""The device's ceilings, measured: read bandwidth, matmul FLOP/s and a pass's fixed dispatch time.

A CPU has no datasheet profile: its profile's peaks are measured here (`measure_peaks`), and so is
its per-kernel dispatch time (`measure_dispatch`), which the fit cannot tell apart from memory
time. A GPU's peaks come from its datasheet profile.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from simulator.models.model_spec import ModelSpec

from .layers import DecoderModel, PassRunner
from .microbench import pass_call
from .timing import time_fn


def weight_bytes(spec: ModelSpec, layers: int, dtype: str) -> int:
    """Bytes of weights a pass streams (`layers` layers + LM head): the CPU bandwidth probe's buffer."""
    from simulator.hardware.hardware import DTYPE_BYTES
    s = dataclasses.replace(spec, num_layers=layers)
    return int((s.layer_params_dense_part + s.lm_head_params) * DTYPE_BYTES[dtype])


def measure_peaks(device: str, dtype: str, nbytes: int, repeats: int = 5,
                  evict: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Read bandwidth over a buffer of `nbytes` and a square matmul's FLOP/s in `dtype`: the
    fastest of `repeats`. Used as the CPU profile's ceilings.

    NOTE: the bandwidth probe reads (a matrix-vector product over the buffer, as a decode pass
    reads its weights) rather than copies: a copy also writes, and on a CPU the write-allocate
    traffic and a second buffer of the same size change which cache level the data lives in
    (measured on the development Xeon, 32 MB: copy 14 GB/s counting read + write, read 24 GB/s).
    Both orientations of the product are timed and the faster kept: W x over W [rows, 512]
    (torch.mv) and x W over the same bytes viewed as [512, rows], the [in, out] layout of the
    timed model's weights (calibrate.layers.Linear). On the development Xeon (87 MB, one thread)
    the second read 14-15 GB/s where torch.mv read 10 GB/s: a ceiling the one-token passes
    exceed is no ceiling. evict: run before every timed read (`Evictor`), as before every timed
    pass, so the ceiling is measured from the memory level the passes stream from."""
    from .layers import TORCH_DTYPES
    cols = 512
    rows = max(2048, nbytes // (4 * cols))
    w = torch.ones(rows, cols, dtype=torch.float32, device=device)           # [rows, cols]
    x = torch.ones(cols, dtype=torch.float32, device=device)                 # [cols]
    w_in_out = w.view(cols, rows)                                            # [in = cols, out = rows], same bytes
    x_row = torch.ones(1, cols, dtype=torch.float32, device=device)          # [1, in]
    # A ceiling is the best a device does: the fastest repeat (interference only adds time).
    probes = {"W x (torch.mv, W [rows, 512])": lambda: torch.mv(w, x),
              "x W (W [512, rows], the model's [in, out] layout)": lambda: x_row @ w_in_out}
    read_s = {k: min(time_fn(fn, device, 2, repeats, before=evict)) for k, fn in probes.items()}
    read_kernel = min(read_s, key=read_s.get)
    bw = rows * cols * 4 / read_s[read_kernel]
    # Peak FLOP/s: the best of a few square matmuls (a CPU's GEMM blocking favours some sizes: on
    # the development Xeon 1024^3 ran 10-20 % below 512^3 and 2048^3).
    best, best_size = 0.0, 0
    for size in ((512, 1024, 2048) if torch.device(device).type == "cpu" else (8192,)):
        a = torch.randn(size, size, dtype=TORCH_DTYPES[dtype], device=device)
        b = torch.randn(size, size, dtype=TORCH_DTYPES[dtype], device=device)
        flops_s = 2 * size ** 3 / min(time_fn(lambda a=a, b=b: a @ b, device, 2, repeats))
        if flops_s > best:
            best, best_size = flops_s, size
    return {"read_bytes_s": bw, "read_buffer_bytes": rows * cols * 4, "read_kernel": read_kernel,
            "read_bytes_s_by_kernel": {k: rows * cols * 4 / t for k, t in read_s.items()},
            "matmul_flops_s": best, "matmul_size": best_size}


def measure_dispatch(spec: ModelSpec, layers: int, device: str, dtype: str, warmup: int = 3,
                     repeats: int = 15) -> dict[str, float]:
    """Fixed time of a forward pass when its bytes and FLOPs are negligible: `spec`'s structure
    with every width shrunk to one 64-wide head (d = 64, MLP 64, vocabulary 256), one sequence,
    one token, 16 cached, `layers` layers; the fastest of `repeats`. Divided by the cost model's
    kernel count (simulator.costs.cost_model: KERNELS_PER_LAYER per layer + KERNELS_FIXED) it is the
    per-kernel launch time: on a CPU the eager dispatch of every op, which the fit cannot tell
    apart from the memory time (both are flat in tokens and grow with layers)."""
    from simulator.costs.cost_model import KERNELS_FIXED, KERNELS_PER_LAYER
    tiny = dataclasses.replace(spec, name=f"{spec.name}/dispatch", hidden_size=64, num_heads=1, num_kv_heads=1,
                               head_dim=64, intermediate_size=64, vocab_size=256, attention_bias=False)
    model = DecoderModel(tiny, layers, dtype=dtype, device=device)
    cache = model.new_cache(1, 64)
    toks = torch.zeros(1, 1, dtype=torch.int64, device=device)
    run = pass_call(PassRunner(model), toks, cache, 16, layers, "all")
    t = min(time_fn(run, device, warmup, repeats))
    kernels = layers * KERNELS_PER_LAYER + KERNELS_FIXED
    return {"pass_s": t, "layers": layers, "kernels": kernels, "kernel_launch_us": 1e6 * t / kernels}

