"""Do separate vLLM engine sessions agree? A small fixed probe run in several engine sessions under
each way of isolating the timed engine (calibrate.vllm_grid.Session: settle_s, pin_host, realtime).

    PYTHONPATH=. python benchmarks/vllm_sessions.py --settings base,pin+settle --sessions 3 \
        --out benchmarks/results/vllm_sessions

Each session is one `specsight groundtruth --engine vllm` session (a runner process: the plain
engine up, a self-draft K=4 engine started beside it) on tiny-s at batch 1, 4 and 16, 3 repeat pairs
per batch, written to OUT/<setting>-<session>.jsonl (a finished file is skipped: the probe resumes).
The settings run in turn within each session index, so a drifting machine load meets them all.
`--summary` prints, per setting and run, every session's median speedup (plain TPOT for plain runs)
and their max / min, and the CPU time each part of the engine used during the timed repeats
(the runner's `cpu_ms`: this engine's EngineCore and worker, the other engine's processes, the
frontend), then the machine load the repeats started at.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from calibrate import vllm_launch, vllm_results  # noqa: E402
from calibrate.vllm_grid import SETTLE_S, SpecRun  # noqa: E402

SETTINGS = {
    "base": dict(settle_s=0.0, pin_host=False, realtime=False),
    "settle": dict(settle_s=SETTLE_S, pin_host=False, realtime=False),
    "pin": dict(settle_s=0.0, pin_host=True, realtime=False),
    "pin+settle": dict(settle_s=SETTLE_S, pin_host=True, realtime=False),
    "rt": dict(settle_s=SETTLE_S, pin_host=True, realtime=True),
}
GRID = {"tiny-s": (SpecRun("draft_model", 4, "self"),)}
BATCHES = (1, 4, 16)


def run(settings: list[str], sessions: int, out: Path, venv: Path, cache: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for i in range(sessions):
        for name in settings:
            path = out / f"{name}-{i}.jsonl"
            if path.exists() and len(vllm_results.read(path)[1]) == 2 * len(BATCHES):
                continue
            path.unlink(missing_ok=True)              # a torn session is run again whole
            command = (f"python benchmarks/vllm_sessions.py --settings {name} (session {i}; "
                       f"{json.dumps(SETTINGS[name])})")
            vllm_launch.run_grid(path, GRID, BATCHES, 3, venv, cache, command, process=i, **SETTINGS[name])


def summary(out: Path) -> str:
    by: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    cpu: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    load: dict[str, list[float]] = defaultdict(list)
    for path in sorted(out.glob("*.jsonl")):
        setting = path.stem.rsplit("-", 1)[0]
        runs = vllm_results.read(path)[1]
        if len(runs) != 2 * len(BATCHES):
            continue
        for r in runs:
            by[setting][r["name"]].append(r["speedup"] if r["method"] != "plain" else r["tpot_ms"])
            load[setting].extend(r["load_1m"])
            for rep in r["repeats"]:
                for k, v in (rep.get("cpu_ms") or {}).items():
                    cpu[setting][k].append(v / max(1e-9, 1e3 * rep["wall_s"]))
    lines = []
    for setting, runs in by.items():
        n = len(next(iter(runs.values())))
        lo, hi = min(load[setting]), max(load[setting])
        lines.append(f"{setting} ({n} sessions; load at the repeats {lo:.1f}-{hi:.1f}):")
        for name, vals in sorted(runs.items()):
            what = "plain TPOT ms" if "plain" in name else "speedup"
            lines.append(f"  {name:<26} {what:<13} " + " ".join(f"{v:.2f}" for v in vals)
                         + f"   max/min {max(vals) / min(vals):.2f}")
        share = ", ".join(f"{k} {100 * statistics.median(v):.0f} %" for k, v in cpu[setting].items())
        lines.append(f"  CPU during a timed repeat, median share of its wall time: {share}")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--settings", default="base,pin+settle", help=f"comma-separated: {', '.join(SETTINGS)}")
    p.add_argument("--sessions", type=int, default=3)
    p.add_argument("--out", default="benchmarks/results/vllm_sessions")
    p.add_argument("--engine-venv", default=str(REPO / ".venv-vllm"))
    p.add_argument("--cache", default=str(Path.home() / ".cache" / "specsight" / "groundtruth-checkpoints"))
    p.add_argument("--summary", action="store_true", help="print the summary of OUT; run nothing")
    a = p.parse_args()
    out = Path(a.out)
    if not a.summary:
        names = [s.strip() for s in a.settings.split(",") if s.strip()]
        bad = [s for s in names if s not in SETTINGS]
        if bad:
            p.error(f"--settings: {bad[0]} is not one of {', '.join(SETTINGS)}")
        run(names, a.sessions, out, Path(a.engine_venv), Path(a.cache))
    print(summary(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
