# Usage: .venv/bin/python benchmarks/results/calibration_h200/gpu_keylat.py benchmarks/results/calibration_h200 A_NS benchmarks/results/calibration_h200/groundtruth_h200.json benchmarks/results/calibration_h200/groundtruth_h200_t2.json benchmarks/results/calibration_h200/run3_repeat/groundtruth_h200.json benchmarks/results/calibration_h200/run3_repeat/groundtruth_h200_t2.json
"""Experiment: a fixed per-key time per block (a_ns) in the per_sequence_head attention:
1/W_eff = 1/(BW eff_attn) + a / (S bytes_per_key_per_head). Grid over a, refit the rest."""
import json, sys
sys.path.insert(0, '.')
import simulator.cost_model as cmod
from simulator.cost_model import CostModel
from calibrate.fit import fit_attention_blocks
from calibrate.fit_host import host_overhead
from calibrate.profile_writer import write_profile
from calibrate.validate import predict_rounds, compare
from simulator.hardware import load_profile
from calibrate.microbench import calibration_inputs
A_NS = float(sys.argv[2])
orig = CostModel.__init__
def init(self, model, hw, *a, **k):
    orig(self, model, hw, *a, **k)
    if self._waves and A_NS:
        bpk_head = 2 * model.head_dim * cmod.DTYPE_BYTES[self.kv_dtype]
        self.bw_kv_bytes_s = 1.0 / (1.0 / self.bw_kv_bytes_s + A_NS * 1e-9 / (self.sm_count * bpk_head))
        h = list(self._hot); h[3] = self.bw_kv_bytes_s; self._hot = tuple(h)
CostModel.__init__ = init
RUN = sys.argv[1]
recs, specs = calibration_inputs(load_profile('h200-sxm.calibrated').calibration, f'{RUN}/h200-sxm.calibrated.points.jsonl')
base, f, rep = fit_attention_blocks(recs, specs, load_profile('h200-sxm'), 'bf16', 132, 'x', holdout_frac=0.3, seed=0, stat='median')
s = f.summary
print('a_ns', A_NS, 'heldout %.4f max %.3f rms %.4f' % (s['heldout_ape_median'], s['heldout_ape_max'], s['rms_log_residual_train']), 'by role', {k: round(v, 3) for k, v in s['heldout_by_role'].items()})
print({k: round(v, 4) for k, v in f.params.items() if v is not None})
host = host_overhead(recs, 'median')
import tempfile
prof = write_profile(f'{tempfile.mkdtemp()}/k{A_NS}.yaml', base, f.params, calibration={'method': 'x'}, fit_source='x',
                     iteration_us=host['iteration_us'], sampling_row_us=host['sampling_row_us'], verify_round_us=host['verify_round_us'])
for gt in sys.argv[3:]:
    t, sm = compare(predict_rounds(json.load(open(gt)), prof))
    sp = t[t.k > 0]
    print(' ', gt.split('/')[-2][-8:], gt.split('/')[-1][:20], 'tok_s med %.3f max %.3f sign %.2f' % (sm['tok_s_ape_median'], sm['tok_s_ape_max'], sm['speedup_sign_agreement']),
          'draft err', ' '.join('%+.0f' % (100 * (r.predicted_draft_ms / r.measured_draft_ms - 1)) for r in sp.itertuples()),
          'spd', ' '.join('%.3f/%.3f' % (r.measured_speedup, r.predicted_speedup) for r in sp.itertuples() if abs(r.measured_speedup - 1) < 0.06))
