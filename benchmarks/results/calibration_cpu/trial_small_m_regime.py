"""Trial (not adopted): three GEMM regimes on this CPU instead of two.

MKL's x @ W on one thread (gemm_small_m.txt) has a matrix-vector kernel at 1 row, an unpacked
kernel from 2 to about 10 rows whose time rises from a memory floor by a near-constant cost per
row, and packed GEMM from 12 rows (a slower memory floor, packing included, then ~140 GFLOP/s).
The shipped roofline has the 1-row rate (memory_gemv) and one soft roofline for everything else.
This trial gives passes and LM heads of 1 < rows < M_PACK (12) their own additive term,
W / (bandwidth f_s) + flops / (peak c_s), fits f_s and c_s with the other parameters on each
committed CPU run's training points (the same seeded hold-out, least squares on log time, the
measured dispatch time fixed), and validates the run's ground truth.

    .venv/bin/python benchmarks/results/calibration_cpu/trial_small_m_regime.py AH,AI,AJ,AK,AL \
        > benchmarks/results/calibration_cpu/trial_small_m_regime.txt
    (a third argument, e.g. `AK 12 show`, also prints the log residuals of the passes at batch <= 8)
"""
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import numpy as np  # noqa: E402
from scipy.optimize import least_squares  # noqa: E402
from simulator.cost_model import CostModel  # noqa: E402
from calibrate.fit import PassPredictor, fit_device  # noqa: E402
from calibrate.fit_host import host_overhead  # noqa: E402
from calibrate.least_squares import ape  # noqa: E402
from calibrate.groundtruth import load_run  # noqa: E402
from calibrate.microbench import calibration_inputs  # noqa: E402
from calibrate.profile_writer import write_profile  # noqa: E402
from calibrate.validate import compare, predict_rounds  # noqa: E402
from simulator.hardware import load_profile  # noqa: E402

HERE = Path(__file__).resolve().parent
M_PACK = int(sys.argv[2]) if len(sys.argv) > 2 else 12
EXTRA = {"f_s": None, "c_s": None}
_shipped = CostModel._pass_terms

def _pass_terms(self, T, num_logits):
    w, h, rest, ar = _shipped(self, T, num_logits)
    if EXTRA["f_s"] is None:
        return w, h, rest, ar
    bw = self.hw.memory_bandwidth_bytes_s * EXTRA["f_s"]
    F = self.hw.peak_flops(self.dtype) * EXTRA["c_s"]
    Ta, La = np.asarray(T, float), np.asarray(num_logits, float)
    w2 = self.linear_bytes / bw + self.linear_flops_per_token * Ta / F
    h2 = self.lm_head_bytes / bw + self.lm_head_flops_per_logit * La / F
    w = np.where((Ta > 1) & (Ta < M_PACK), w2, w)
    h = np.where((La > 1) & (La < M_PACK), h2, h)
    if np.ndim(w) == 0:
        w, h = float(w), float(h)
    return w, h, rest, ar

CostModel._pass_terms = _pass_terms
CostModel._cache_terms = lambda self, T, L: _pass_terms(self, T, L)

def run(X, structure):
    prof = load_profile(str(HERE / f"cpu{X}.yaml")); cal = prof.calibration
    recs, specs = calibration_inputs(cal, HERE / f"cpu{X}.points.jsonl")
    launch = prof.overheads.kernel_launch_us
    EXTRA["f_s"] = None
    base = fit_device(recs, specs, prof, cal["dtype"], holdout_frac=0.3, seed=0, stat="min",
                      fixed={"overheads.kernel_launch_us": launch})
    df = base.points; held = df["heldout"].to_numpy()
    train = df[~held].reset_index(drop=True)
    pred_tr = PassPredictor(train, specs, prof, cal["dtype"]); pred_all = PassPredictor(df, specs, prof, cal["dtype"])
    y = np.log(train["median_s"].to_numpy())
    def params(th):
        return {"efficiency.memory": th[0], "efficiency.compute": th[1], "efficiency.roofline_sharpness": math.exp(th[2]),
                "overheads.kernel_launch_us": launch, "efficiency.memory_gemv": th[3], "efficiency.memory_attention": th[4]}
    def setx(th):
        if structure == "small":
            EXTRA["f_s"], EXTRA["c_s"] = th[5], th[6]
        else:
            EXTRA["f_s"] = None
    def resid(th):
        setx(th)
        return np.log(np.maximum(pred_tr(params(th)), 1e-12)) - y
    n = 7 if structure == "small" else 5
    lo = [1e-3, 1e-3, 0.0, 1e-3, 1e-3, 1e-3, 1e-3][:n]; hi = [1, 1, math.log(32), 1, 1, 1, 1][:n]
    best = None
    for p0 in (1.5, 3.0, 8.0):
        x0 = [0.5, 0.9, math.log(p0), 0.8, 0.6, 0.6, 0.3][:n]
        r = least_squares(resid, x0, bounds=(lo, hi), x_scale="jac")
        if best is None or r.cost < best.cost:
            best = r
    th = best.x; setx(th)
    pa = params(th)
    allp = pred_all(pa)
    a = ape(allp, df["median_s"].to_numpy())
    rms = float(np.sqrt(np.mean(best.fun ** 2)))
    host = host_overhead(recs, "min")
    with tempfile.TemporaryDirectory() as tmp:
        hw = write_profile(Path(tmp) / "p.yaml", prof, pa, calibration=dict(cal), fit_source="exp",
                           iteration_us=host["iteration_us"], sampling_row_us=host["sampling_row_us"],
                           verify_round_us=host["verify_round_us"], param_sources={"overheads.kernel_launch_us": "exp"})
        t, s = compare(predict_rounds(load_run(HERE / f"groundtruth_{X}.json"), hw), interleaved=True)
    df["r"] = np.log(allp / df["median_s"].to_numpy())
    if len(sys.argv) > 3:
        print(df[(df["batch"] <= 8)].groupby(["role", "batch", "new_tokens", "context"])["r"].mean().round(3).unstack().to_string())
    sp = t[t["k"] > 0]
    right = len(sp) - len(s["speedup_sign_disagreements"])
    extra = f" f_s {th[5]:.3f} c_s {th[6]:.3f}" if structure == "small" else ""
    print(f"{X} {structure:8s} held-out {100*np.median(a[held]):.1f} % rms {rms:.4f} p {math.exp(th[2]):.2f} m {th[0]:.3f} c {th[1]:.3f}{extra}; "
          f"tok/s {100*s['tok_s_ape_median']:.1f} % sides {right}/{len(sp)}; "
          + " ".join(f"B{r.batch}K{r.k} {r.measured_speedup:.2f}/{r.predicted_speedup:.2f}" for r in sp.itertuples()), flush=True)

for X in sys.argv[1].split(","):
    for st in ("shipped", "small"):
        run(X, st)
