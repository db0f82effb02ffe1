#!/bin/bash
# usage: bash benchmarks/run_cpu_calibration.sh LETTER
# The issue's three commands on this machine's CPU (calibrate --quick, ground truth at batch 1, 8,
# 32 and K 0, 2, 4, validate), pinned to CPU 1, with start and end times and /proc/loadavg.
# Writes out/cpuX.yaml (+ .points.jsonl), out/calX.json, out/gtX.json, out/validationX.md/.json, out/finalX.log.
set -u
cd "$(dirname "$0")/.."
X=$1
mkdir -p out
LOG=out/final$X.log
: > $LOG
echo "calibrate start $(date +%H:%M:%S) load $(cat /proc/loadavg)" >> $LOG
taskset -c 1 .venv/bin/specsight calibrate --device cpu --model llama-3.1-8b --draft llama-3.2-1b --quick --out out/cpu$X.yaml --json > out/cal$X.json 2> out/cal$X.err
echo "calibrate end $(date +%H:%M:%S) load $(cat /proc/loadavg)" >> $LOG
echo "groundtruth start $(date +%H:%M:%S) load $(cat /proc/loadavg)" >> $LOG
taskset -c 1 .venv/bin/specsight groundtruth --device cpu --model llama-3.1-8b --draft llama-3.2-1b --batch 1,8,32 --k 0,2,4 --out out/gt$X.json > out/gt$X.out 2> out/gt$X.err
echo "groundtruth end $(date +%H:%M:%S) load $(cat /proc/loadavg)" >> $LOG
.venv/bin/specsight validate out/gt$X.json --profile out/cpu$X.yaml --out out/validation$X.md > out/validation$X.txt
.venv/bin/specsight validate out/gt$X.json --profile out/cpu$X.yaml --json > out/validation$X.json
cat $LOG
head -8 out/validation$X.md | tail -4
