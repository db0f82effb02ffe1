#!/usr/bin/env bash
# One prepared GPU check (issue #5): exact-sampling benchmark, calibration of Llama-3.1-8B
# dimensions (and its Llama-3.2-1B draft) in bf16, real speculative decoding (ground truth) at
# batch 1, 8, 32, 64 and K 0, 2, 4, and the simulator's prediction of that run.
#
# Usage (repository root; needs torch, numpy, scipy, pandas, pyyaml; tqdm optional):
#     OUT=/path/to/results bash scripts/gpu_check.sh                 # on the GPU machine
#     OUT=/tmp/gpu_dry bash scripts/gpu_check.sh --cpu-dry-run       # the same pipeline, tiny, on a CPU
#     (or SPECSIGHT_CPU_DRY_RUN=1)
# The package need not be pip-installed: modules run with python -m and PYTHONPATH=$PWD (kept
# after any PYTHONPATH already set, e.g. /tmp/site holding wheels installed with --target).
#
# Budget: every step has its own timeout; all together finish in under 8 minutes on an H200.
# Results, flat in $OUT (8 files): log.txt (every step's output), sampling_h200.md,
# h200-sxm.calibrated.yaml, h200-sxm.calibrated.points.jsonl, calibration_h200.json,
# groundtruth_h200.json, validation_h200.md, validation_h200.json.
# A failed step is reported and the steps that do not depend on it still run; the exit code is
# the number of failed steps (0 = all passed).
set -o pipefail
set -u

OUT=${OUT:-out/gpu_check}
PY=${PYTHON:-python}
DRY=${SPECSIGHT_CPU_DRY_RUN:-0}
for a in "$@"; do
  case "$a" in
    --cpu-dry-run) DRY=1 ;;
    *) echo "unknown argument: $a" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD"
export PYTHONUNBUFFERED=1
LOG="$OUT/log.txt"
: > "$LOG"
T0=$(date +%s)
FAILED=0
FAILED_STEPS=""

if [[ "$DRY" == 1 ]]; then
  # Same commands, shrunk to seconds on a CPU: dims / 16, 2 target layers, tiny grid.
  DEV=(--device cpu --scale 16)
  SAMPLING=(--device cpu --quick --modes eager)
  CAL=(--grid cpu-tiny --layers 2 --draft-layers 1 --repeats 3)
  GT=(--layers 2 --draft-layers 1 --batch 1,4 --k 0,2 --steps 4 --warmup 1 --prompt-len 32)
  TO_SAMPLING=300; TO_CAL=600; TO_GT=600; TO_VAL=120
else
  DEV=(--device cuda --dtype bf16)
  SAMPLING=(--device cuda)
  # Calibrate at 2 and 4 layers (quick grid: batch 1..256, verify widths 1, 3, 5, context 128..32k).
  CAL=(--quick --layers 4 --draft-layers 4)
  # Ground truth at the real depth: 32 target layers, 16 draft layers.
  GT=(--layers 32 --draft-layers 16 --batch 1,8,32,64 --k 0,2,4 --steps 24 --warmup 3 --prompt-len 512)
  TO_SAMPLING=150; TO_CAL=180; TO_GT=150; TO_VAL=60
fi

step() {  # step NAME TIMEOUT_S CMD...: run, tee to the log, record failure
  local name=$1 limit=$2; shift 2
  local t=$(date +%s)
  echo "== [$name] $(date -u +%FT%TZ) timeout ${limit}s: $*" | tee -a "$LOG"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  echo "== [$name] exit $rc after $(( $(date +%s) - t )) s (total $(( $(date +%s) - T0 )) s)" | tee -a "$LOG"
  if [[ $rc -ne 0 ]]; then FAILED=$((FAILED + 1)); FAILED_STEPS="$FAILED_STEPS $name"; fi
  return $rc
}

{
  echo "specsight gpu_check $( [[ "$DRY" == 1 ]] && echo '(CPU DRY RUN)' ) on $(hostname) $(date -u +%FT%TZ)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$PY" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
} 2>&1 | tee -a "$LOG"

# 1. the exact sampling kernel, alone
step sampling "$TO_SAMPLING" "$PY" benchmarks/bench_sampling.py "${SAMPLING[@]}" --out "$OUT/sampling_h200.md"

# 2. calibration: forward passes over the grid -> fitted profile (+ the measured points, + the summary)
CAL_OK=0
step calibrate "$TO_CAL" bash -c '"$@" > "'"$OUT"'/calibration_h200.json"; rc=$?; cat "'"$OUT"'/calibration_h200.json"; exit $rc' _ \
  "$PY" -m specsight.calibrate_cmd calibrate "${DEV[@]}" --model llama-3.1-8b --draft llama-3.2-1b "${CAL[@]}" \
  --out "$OUT/h200-sxm.calibrated.yaml" --json && CAL_OK=1

# 3. ground truth: real speculative decoding, every round timed
GT_OK=0
step groundtruth "$TO_GT" "$PY" -m specsight.calibrate_cmd groundtruth "${DEV[@]}" --model llama-3.1-8b \
  --draft llama-3.2-1b "${GT[@]}" --out "$OUT/groundtruth_h200.json" --no-progress && GT_OK=1

# 4. validation: the simulator predicts the same run with the calibrated profile
if [[ $CAL_OK == 1 && $GT_OK == 1 ]]; then
  step validate "$TO_VAL" "$PY" -m specsight.calibrate_cmd validate "$OUT/groundtruth_h200.json" \
    --profile "$OUT/h200-sxm.calibrated.yaml" --out "$OUT/validation_h200.md"
  step validate-json "$TO_VAL" bash -c '"$@" > "'"$OUT"'/validation_h200.json"' _ \
    "$PY" -m specsight.calibrate_cmd validate "$OUT/groundtruth_h200.json" --profile "$OUT/h200-sxm.calibrated.yaml" --json
  if [[ "$DRY" != 1 ]]; then   # for comparison: the datasheet profile, uncalibrated (log only)
    step validate-datasheet "$TO_VAL" "$PY" -m specsight.calibrate_cmd validate "$OUT/groundtruth_h200.json" --profile h200-sxm
  fi
else
  echo "== [validate] skipped: calibrate ok=$CAL_OK groundtruth ok=$GT_OK" | tee -a "$LOG"
  FAILED=$((FAILED + 1)); FAILED_STEPS="$FAILED_STEPS validate(skipped)"
fi

echo "== gpu_check finished in $(( $(date +%s) - T0 )) s; failed steps: ${FAILED}${FAILED_STEPS:+ (${FAILED_STEPS# })}" | tee -a "$LOG"
ls -la "$OUT" | tee -a "$LOG"
exit "$FAILED"
