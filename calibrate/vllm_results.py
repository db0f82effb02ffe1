"""The vLLM ground truth's results file: one JSON object a line (notes/vllm-interface.md).

Line 1 is the header {"kind": "header", "command": ..., "env": {...}}; then one {"kind": "run"}
record per finished run, appended as each finishes, so an interrupted grid resumes by skipping the
names already present. Pure Python: read in specsight's venv, written from the runner's lines.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from simulator.common.errors import SpecsightInputError
from simulator.common.input_files import read_bytes

from .vllm_grid import MODELS, acceptance_design

RESULTS_DIR = Path("data/groundtruth/vllm-cpu")
REPEAT_KEYS = ("wall_s", "output_tokens", "tpot_ms", "itl_ms_p50", "itl_ms_p90", "itl_ms_p99", "tpot_ms_p50",
               "tpot_ms_p90", "tpot_ms_p99", "output_tokens_per_s", "load_1m", "process", "cpu_ms")


def default_path(version: str, repeated: bool = False) -> Path:
    """The full grid's results file, or the many-repeat set's (calibrate.vllm_grid.REPEATED_GRID)."""
    return RESULTS_DIR / version / ("runs-repeated.jsonl" if repeated else "runs.jsonl")


def read(path: Path) -> tuple[dict | None, list[dict]]:
    """(header, runs) of a results file; a torn last line (an interrupted write) is dropped."""
    header, runs = None, []
    if not path.exists():
        return None, []
    data = read_bytes(path, "results file", "json")       # (a regular file of bounded size: no hang)
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise SpecsightInputError("results file", str(path), f"is not UTF-8 text (byte {e.start:,})") from None
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise SpecsightInputError("results file", f"{path}:{i + 1}", "one JSON object a line") from None
        if rec.get("kind") == "header":
            header = rec
        elif rec.get("kind") == "run":
            runs.append(rec)
    return header, runs


def done_names(path: Path) -> set[str]:
    return {r["name"] for r in read(path)[1]}


def start(path: Path, command: str, env: dict) -> None:
    """Write the header unless the file already has one (a resumed grid keeps its first header)."""
    header, runs = read(path)
    if header is not None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(json.dumps(r) + "\n" for r in runs)
    path.write_text(json.dumps({"kind": "header", "command": command, "env": env}) + "\n" + body)


def append(path: Path, record: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def run_record(raw: dict, model: str, env: dict, output_len: int, ngram_span: int) -> dict:
    """The interface's run record from the runner's raw line (its repeats and same-process baselines)."""
    plan = MODELS[model]
    reps = [{k: r.get(k) for k in REPEAT_KEYS} for r in raw["repeats"]]
    method = raw["method"]
    rec = {"kind": "run", "name": raw["name"], "model": model,
           "target_config": f"models/groundtruth/{model}/config.json",
           "draft_config": f"models/groundtruth/{raw['draft']}/config.json" if raw.get("draft") else None,
           "method": method, "k": raw["k"], "batch": raw["batch"], "prompt_len": plan.prompt_len,
           "output_len": output_len, "design": raw.get("design"),
           "acceptance_design": acceptance_design(method, raw.get("design"), ngram_span),
           "repeats": reps, "tpot_ms": _median([r["tpot_ms"] for r in reps]),
           "output_tokens_per_s": _median([r["output_tokens_per_s"] for r in reps]),
           "load_1m": [r["load_1m"] for r in reps], "env": env}
    if method == "plain":
        rec.update(baseline=None, speedup=None, speedup_spread=None, acceptance=None, mean_accept_len=None)
        return rec
    base = raw["baseline_repeats"]
    ratios = [b["tpot_ms"] / s["tpot_ms"] for b, s in zip(base, reps)]
    acc = raw["acceptance"]
    rec.update(baseline=f"{plan.short}-plain-b{raw['batch']}", baseline_tpot_ms=[b["tpot_ms"] for b in base],
               baseline_cpu_ms=[b.get("cpu_ms") for b in base],
               speedups=ratios, speedup=_median(ratios), speedup_spread=[min(ratios), max(ratios)],
               acceptance=acc,
               mean_accept_len=(1 + acc["num_accepted_tokens"] / acc["num_drafts"]) if acc["num_drafts"] else None,
               acceptance_rate=(acc["num_accepted_tokens"] / acc["num_draft_tokens"]) if acc["num_draft_tokens"]
               else None)
    return rec


def crossovers(runs: list[dict]) -> list[dict]:
    """Where speculation stops paying, per series: along batch for each (model, method, design, K),
    the first batch whose median speedup is below 1 after one at or above 1 (None: no crossing)."""
    series: dict[tuple, list[dict]] = {}
    for r in runs:
        if r["method"] != "plain" and r.get("speedup") is not None:
            series.setdefault((r["model"], r["method"], r.get("design"), r["k"]), []).append(r)
    out = []
    for (model, method, design, k), rs in sorted(series.items(), key=lambda kv: str(kv[0])):
        rs = sorted(rs, key=lambda r: r["batch"])
        at = next((b["batch"] for a, b in zip(rs, rs[1:]) if a["speedup"] >= 1 > b["speedup"]), None)
        out.append({"model": model, "method": method, "design": design, "k": k, "batches": [r["batch"] for r in rs],
                    "speedups": [r["speedup"] for r in rs], "stops_paying_at_batch": at})
    return out
