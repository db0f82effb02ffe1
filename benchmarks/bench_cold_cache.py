"""Why the CPU calibration evicts the caches before every timed repeat (not a test).

Times a 1-layer draft step (Llama-3.2-1B dims / 8, fp32, one thread, context 256) right after
something else ran: the same step (its weights still cached: how back-to-back repeats time it), the
8-layer target's pass (what precedes a draft step in a speculative round), and a 144 MB read. Prints
the fastest and the median of 10 per batch size:

    .venv/bin/python benchmarks/bench_cold_cache.py
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    import torch

    from calibrate.layers import DecoderModel, PassRunner, scaled_spec
    from simulator.models.catalog import load_model

    torch.set_num_threads(1)
    target = PassRunner(DecoderModel(scaled_spec(load_model("llama-3.1-8b"), 8), 8, dtype="fp32"))
    draft = PassRunner(DecoderModel(scaled_spec(load_model("llama-3.2-1b"), 8), 1, dtype="fp32"))
    buf = torch.ones(36 * 2**20)                                            # 144 MB
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for batch in (1, 8, 32):
        tc, dc = target.model.new_cache(batch, 384), draft.model.new_cache(batch, 384)
        tc.lengths.fill_(256)
        dc.lengths.fill_(256)
        tok = torch.randint(0, target.model.spec.vocab_size, (batch, 1))
        step = lambda tok=tok, dc=dc: draft(tok, dc, logits="last", max_length=256)  # noqa: E731
        before = {"after the same step": step,
                  "after a target pass": lambda tok=tok, tc=tc: target(tok, tc, logits="all", max_length=256),
                  "after a 144 MB read": lambda: buf.view(512, -1).T @ torch.ones(512)}
        times: dict[str, list[float]] = {k: [] for k in before}
        for _ in range(10):
            for k, f in before.items():
                f()
                t0 = time.perf_counter()
                step()
                times[k].append(time.perf_counter() - t0)
        print(f"batch {batch:>2}: " + "; ".join(f"{k} {1e3 * min(v):.2f} / {1e3 * statistics.median(v):.2f} ms"
                                               for k, v in times.items()) + "  (fastest / median of 10)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
