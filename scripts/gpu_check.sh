#!/usr/bin/env bash
# One prepared GPU check (issue #5), for an H200 with torch but no package registry:
#   1. calibrate: time forward passes of Llama-3.1-8B dimensions (and the Llama-3.2-1B draft's
#      step shapes) in bf16 over the cuda-quick grid at 2 and 4 layers, fit, write the profile
#      h200-sxm.calibrated (name = file stem) with its provenance and the measured points;
#   2. groundtruth: real speculative decoding at the real depths (32 target layers, 16 draft
#      layers), batch 1, 8, 32, 64 and K 0, 2, 4, every round timed;
#   3. validate: the simulator predicts that run with the calibrated profile (the table), and,
#      for comparison, with the datasheet profile h200-sxm.
#
# Usage (repository root or anywhere; the script cds to the root):
#     OUT=/path/to/results bash scripts/gpu_check.sh              # on the GPU machine
#     OUT=/tmp/gpu_dry bash scripts/gpu_check.sh --cpu-dry-run    # the same pipeline, tiny, on a CPU
# simpy is installed from the wheel in .whl/ (gitignored: a device run must carry ".whl") when
# the interpreter lacks it; numpy, scipy, pandas and pyyaml must be present (checked first).
#
# Results in $OUT (what comes back from the device machine):
#   hardware_profiles/h200-sxm.calibrated.yaml   the calibrated profile (copy it to hardware_profiles/)
#   h200-sxm.calibrated.points.jsonl             every measured pass (resumable)
#   calibration_h200.json                        held-out error, fitted values, layer scaling
#   groundtruth_h200.json                        the ground-truth run (every round)
#   validation_h200.md                           predicted against measured, per (batch, K)
#   validation_h200_datasheet.md                 the same with the uncalibrated datasheet profile
#   log.txt                                      every step's output and timing
#   extra.tar.gz                                 validation_h200.json, and with time to spare a ground truth
#                                                at temperature 2 (speedups on both sides of 1) and its validation
#
# Time: the whole script stops before BUDGET_S (default 540 s, under the device's 600 s per
# command): each step runs under `timeout` with min(its own limit, the time left). A failed
# step is logged, the steps that do not depend on it still run, and the exit code is the number
# of failed steps (0 = all passed).
set -o pipefail
set -u

DRY=${SPECSIGHT_CPU_DRY_RUN:-0}
for a in "$@"; do
  case "$a" in
    --cpu-dry-run) DRY=1 ;;
    *) echo "gpu_check: unknown argument: $a (allowed: --cpu-dry-run)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-out/gpu_check}
mkdir -p "$OUT/hardware_profiles"
OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python3}
BUDGET_S=${BUDGET_S:-540}
LOG="$OUT/log.txt"
EXTRA=$(mktemp -d)     # files beyond the device's 8 returned ones, tarred into $OUT/extra.tar.gz at the end
: > "$LOG"
T0=$(date +%s)
FAILED=0
FAILED_STEPS=""
export PYTHONUNBUFFERED=1
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

log() { echo "$*" | tee -a "$LOG"; }

# simpy from the carried wheel, only if the interpreter lacks it (the device has no registry).
if ! "$PY" -c "import simpy" 2>/dev/null; then
  if compgen -G ".whl/*.whl" > /dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>&1 | tee -a "$LOG" \
      && export PYTHONPATH=/tmp/site:$PYTHONPATH
  else
    log "gpu_check: simpy is missing and .whl/ holds no wheel (pip download simpy --no-deps -d .whl; carry .whl)"
  fi
fi
if ! "$PY" -c "import torch, numpy, scipy, pandas, yaml, simpy" 2>>"$LOG"; then
  log "gpu_check: missing Python packages (need torch, numpy, scipy, pandas, pyyaml, simpy); see $LOG"
  exit 10
fi

if [[ "$DRY" == 1 ]]; then
  # Same commands, shrunk to seconds on a CPU: dims / 16, 2 target layers, tiny grid.
  DEV=(--device cpu --scale 16)
  CAL=(--passes cpu-tiny --layers 2 --draft-layers 1 --repeats 3)
  GT=(--layers 2 --draft-layers 1 --batch 1,4 --k 0,2 --steps 4 --warmup 1 --prompt-len 32)
  TO_CAL=240; TO_GT=120; TO_VAL=60
else
  DEV=(--device cuda --dtype bf16)
  # cuda grid: batch 1..256, verify widths 1, 2, 3, 5, 8, context 128..32k (543 passes), target at 4
  # and 8 layers, the draft at its real depth (Llama-3.2-1B: 16 layers, as in the ground truth).
  CAL=(--passes cuda --layers 8 --draft-layers 16)
  # Ground truth at the real depths; 32 timed rounds per (batch, K) after 3 warm-up rounds.
  GT=(--layers 32 --draft-layers 16 --batch 1,8,32,64 --k 0,2,4 --steps 32 --warmup 3 --prompt-len 512)
  TO_CAL=230; TO_GT=150; TO_VAL=40
fi

step() {  # step NAME LIMIT_S CMD...: run under timeout (capped by the time left), log, count failures
  local name=$1 limit=$2; shift 2
  local left=$(( BUDGET_S - ($(date +%s) - T0) ))
  if (( left < 10 )); then
    log "== [$name] skipped: ${left}s of the ${BUDGET_S}s budget left"
    FAILED=$((FAILED + 1)); FAILED_STEPS="$FAILED_STEPS $name(no-time)"; return 124
  fi
  (( limit > left )) && limit=$left
  local t=$(date +%s)
  log "== [$name] $(date -u +%FT%TZ) timeout ${limit}s: $*"
  timeout --kill-after=5 "$limit" "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  log "== [$name] exit $rc after $(( $(date +%s) - t )) s (total $(( $(date +%s) - T0 )) s)"
  if [[ $rc -ne 0 ]]; then FAILED=$((FAILED + 1)); FAILED_STEPS="$FAILED_STEPS $name"; fi
  return $rc
}

{
  echo "specsight gpu_check $( [[ "$DRY" == 1 ]] && echo '(CPU DRY RUN)' ) on $(hostname) $(date -u +%FT%TZ)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$PY" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
} 2>&1 | tee -a "$LOG"

CLI=("$PY" -m specsight.cli)
PROFILE="$OUT/hardware_profiles/h200-sxm.calibrated.yaml"

# 1. calibration: forward passes over the grid -> fitted profile, measured points, summary JSON.
#    (--json: one JSON object on stdout, kept as calibration_h200.json and shown in the log.)
CAL_OK=0
step calibrate "$TO_CAL" bash -c '"$@" > "$0"; rc=$?; cat "$0"; exit $rc' "$OUT/calibration_h200.json" \
  "${CLI[@]}" calibrate "${DEV[@]}" --model llama-3.1-8b --draft llama-3.2-1b "${CAL[@]}" \
  --out "$PROFILE" --points "$OUT/h200-sxm.calibrated.points.jsonl" --json && CAL_OK=1

# 2. ground truth: real speculative decoding, every round timed (independent of step 1).
GT_OK=0
step groundtruth "$TO_GT" "${CLI[@]}" groundtruth "${DEV[@]}" --model llama-3.1-8b --draft llama-3.2-1b \
  "${GT[@]}" --out "$OUT/groundtruth_h200.json" --no-progress && GT_OK=1

# 3. validation: predicted against measured with the calibrated profile (Markdown table + JSON),
#    then with the datasheet profile for comparison (the dry run has no datasheet CPU profile).
if [[ $CAL_OK == 1 && $GT_OK == 1 ]]; then
  step validate "$TO_VAL" bash -c 'json=$0 md=$1; shift; "$@" > "$json"; rc=$?; cat "$md"; exit $rc' \
    "$EXTRA/validation_h200.json" "$OUT/validation_h200.md" "${CLI[@]}" validate "$OUT/groundtruth_h200.json" --hardware "$PROFILE" \
    --out "$OUT/validation_h200.md" --json
fi
if [[ $GT_OK == 1 && "$DRY" != 1 ]]; then
  step validate-datasheet "$TO_VAL" "${CLI[@]}" validate "$OUT/groundtruth_h200.json" --hardware h200-sxm \
    --out "$OUT/validation_h200_datasheet.md"
fi
if [[ $CAL_OK != 1 || $GT_OK != 1 ]]; then
  log "== [validate] skipped: calibrate ok=$CAL_OK groundtruth ok=$GT_OK"
  FAILED=$((FAILED + 1)); FAILED_STEPS="$FAILED_STEPS validate(skipped)"
fi

# 4. (only with time to spare) the same ground truth at temperature 2: both models' distributions
#    flatter, so the draft is accepted more often and the speedups fall on both sides of 1 (at
#    temperature 1 the random-weight draft is accepted too rarely for any K > 0 to pay), validated
#    with the same profile. Its files go to $EXTRA and come back in extra.tar.gz (the device
#    returns at most 8 files).
if [[ $CAL_OK == 1 && $GT_OK == 1 ]] && (( BUDGET_S - ($(date +%s) - T0) > TO_GT + TO_VAL )); then
  step groundtruth-t2 "$TO_GT" "${CLI[@]}" groundtruth "${DEV[@]}" --model llama-3.1-8b --draft llama-3.2-1b \
    "${GT[@]}" --temperature 2 --out "$EXTRA/groundtruth_h200_t2.json" --no-progress \
  && step validate-t2 "$TO_VAL" bash -c 'json=$0; "$@" > "$json"; rc=$?; cat "${json%.json}.md"; exit $rc' \
    "$EXTRA/validation_h200_t2.json" "${CLI[@]}" validate "$EXTRA/groundtruth_h200_t2.json" --hardware "$PROFILE" \
    --out "$EXTRA/validation_h200_t2.md" --json
fi
tar czf "$OUT/extra.tar.gz" -C "$EXTRA" . 2>&1 | tee -a "$LOG"

log "== gpu_check finished in $(( $(date +%s) - T0 )) s; failed steps: ${FAILED}${FAILED_STEPS:+ (${FAILED_STEPS# })}"
ls -la "$OUT" "$OUT/hardware_profiles" | tee -a "$LOG"
exit "$FAILED"
