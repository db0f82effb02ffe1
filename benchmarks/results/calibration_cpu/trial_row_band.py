"""Trial (not adopted): a separate weight-streaming rate for passes of 6-11 rows on this CPU.

MKL's x @ W on one thread reads W at 5.1-8.4 GB/s from 6 to 10 rows and at 8.1-11.8 GB/s from 2 to 5
(gemm_small_m.txt), a band the roofline's one multi-row memory rate does not have. This refits
each committed CPU run (AH-AL) with the memory rate of passes and LM heads of 6 <= rows < 12
scaled by MULT (1.0: the shipped model), everything else fitted as `specsight calibrate` does,
and validates that run's ground truth with the refitted profile.

    .venv/bin/python benchmarks/results/calibration_cpu/trial_row_band.py > benchmarks/results/calibration_cpu/trial_row_band.txt
"""
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from calibrate.fit import fit_device                                          # noqa: E402
from calibrate.fit_host import host_overhead                                 # noqa: E402
from calibrate.groundtruth import load_run                                    # noqa: E402
from calibrate.microbench import calibration_inputs                          # noqa: E402
from calibrate.profile_writer import write_profile                           # noqa: E402
from calibrate.validate import compare, predict_rounds                       # noqa: E402
from simulator.cost_model import CostModel                                   # noqa: E402
from simulator.hardware import load_profile                                  # noqa: E402

HERE = Path(__file__).resolve().parent
LO, HI = 6, 12
_shipped = CostModel._pass_terms
MULT = 1.0


def _pass_terms(self, T, num_logits):
    w, h, rest, ar = _shipped(self, T, num_logits)
    if MULT == 1.0:
        return w, h, rest, ar
    p, ip, F, W = self.p, self._inv_p, self.peak_flops_s, self.bw_bytes_s * MULT
    Ta, La = np.asarray(T, float), np.asarray(num_logits, float)
    w2 = ((self.linear_flops_per_token * Ta / F) ** p + (self.linear_bytes / W) ** p) ** ip
    h2 = ((self.lm_head_flops_per_logit * La / F) ** p + (self.lm_head_bytes / W) ** p) ** ip
    w = np.where((Ta >= LO) & (Ta < HI), w2, w)
    h = np.where((La >= LO) & (La < HI), h2, h)
    if np.ndim(w) == 0:
        w, h = float(w), float(h)
    return w, h, rest, ar


CostModel._pass_terms = _pass_terms
CostModel._cache_terms = lambda self, T, L: _pass_terms(self, T, L)

print(f"memory rate x MULT for {LO} <= rows < {HI}; per run: fit (held-out median, train rms log residual), "
      "validation (tokens/s error median, sides of 1 right), speedups measured/predicted")
with tempfile.TemporaryDirectory() as tmp:
    for run in ["AH", "AI", "AJ", "AK", "AL"]:
        prof = load_profile(str(HERE / f"cpu{run}.yaml"))
        cal = prof.calibration
        recs, specs = calibration_inputs(cal, HERE / f"cpu{run}.points.jsonl")
        host = host_overhead(recs, "min")
        for MULT in (1.0, 0.8, 0.7, 0.6, 0.5):
            f = fit_device(recs, specs, prof, cal["dtype"], holdout_frac=0.3, seed=0, stat="min",
                           fixed={"overheads.kernel_launch_us": prof.overheads.kernel_launch_us})
            hw = write_profile(Path(tmp) / f"cpu{run}_{MULT}.yaml", prof, f.params, calibration=dict(cal),
                               fit_source="trial_row_band.py", iteration_us=host["iteration_us"],
                               sampling_row_us=host["sampling_row_us"], verify_round_us=host["verify_round_us"],
                               param_sources={"overheads.kernel_launch_us": "trial_row_band.py"})
            t, s = compare(predict_rounds(load_run(HERE / f"groundtruth_{run}.json"), hw))
            sp = t[t["k"] > 0]
            right = len(sp) - len(s["speedup_sign_disagreements"])
            print(f"{run} x{MULT:.1f}: held-out {100 * f.summary['heldout_ape_median']:.1f} %, "
                  f"rms {f.summary['rms_log_residual_train']:.4f}; tokens/s {100 * s['tok_s_ape_median']:.1f} %, "
                  f"sides {right}/{len(sp)}; "
                  + " ".join(f"B{r.batch}K{r.k} {r.measured_speedup:.2f}/{r.predicted_speedup:.2f}" for r in sp.itertuples()),
                  flush=True)
