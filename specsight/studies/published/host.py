"""The published vLLM rows predicted with vLLM's host time measured on this project's CPU
(data/engine_host/vllm-0.32.0-cpu.yaml) carried to a GPU server's host, against the built-in
constants: how each row moves (docs/engines.md, "From a CPU to a GPU server's host").

Carried: H(B) = a + b B, scaled by HOST_TIME_FACTOR, as an engine profile (engine.profile: its
base_ms and per_seq_ms) on each vLLM row at the row's engine version; overlap, syncs and passes
stay as that version runs them. Not carried: the proposer's time per draft step (the GPU engine
model has no such term: its draft steps are the passes and their eager launches).

HOST_TIME_FACTOR: the engine's host work is single-threaded Python, so its time goes as one core's
speed, IPC x clock. This CPU is an AMD Zen 5 EPYC (family 26, /proc/cpuinfo; EPYC 9005 "Turin");
a typical H100/H200 server's host is a Zen 4 EPYC 9004 "Genoa" (or a Xeon Sapphire Rapids, about
as fast a core). AMD states Zen 5's IPC 16 % above Zen 4's (Computex and Tech Day 2024, reported
by hwcooling.net, "Zen 5: AMD's most innovative core since the original Zen", 2024); at equal
clocks (this VM reports 2.6 GHz, a Genoa part's base is 2.4-3.1 GHz) the host work takes 1.16x as
long there. The clock of either is not pinned: the factor is uncertain by the clock ratio.
"""
from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import yaml

HOST_TIME_FACTOR = 1.16
HOST_FILE = "vllm-0.32.0-cpu"


def engine_profile_file(version: str, a_s: float, b_s: float, folder: Path) -> Path:
    """An engine profile (simulator/engines/host.py's format) setting vLLM's H(B) at `version`."""
    p = folder / f"vllm-{version}-cpu-host.yaml"
    p.write_text(yaml.safe_dump({"engine": "vllm", "version": version, "constants": {
        "base_ms": {"value": 1e3 * a_s}, "per_seq_ms": {"value": 1e3 * b_s}}}))
    return p


def host_movement(factor: float = HOST_TIME_FACTOR, host_file: str = HOST_FILE) -> list[dict[str, Any]]:
    """Each vLLM row of the published table predicted with the built-in and with the carried H(B)."""
    from simulator.engines.measured_host import load_measured_host

    from .study import engine_for, load_published, predict, relative_error, scenario_for, side_ok
    host = load_measured_host(host_file)
    cat = load_published()
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for row in cat.rows:
            if row.engine != "vllm" or engine_for(row, cat.datasets)[0] != "vllm":
                continue
            version = scenario_for(row, cat.datasets, "vllm")["engine"].get("version", "v1")
            prof = engine_profile_file(version, factor * host.a_s, factor * host.b_s, Path(tmp))

            def with_profile(sc: dict, prof: Path = prof) -> dict:
                sc["engine"]["profile"] = str(prof)
                return sc

            before = predict(row, cat.datasets, "vllm")["predicted"]
            after = predict(row, cat.datasets, "vllm", with_profile)["predicted"]
            rec = {"name": row.name, "version": version, "figure": row.checks, "published": row.figure,
                   "predicted_builtin": before, "predicted_cpu_host": after,
                   "error_builtin": relative_error(before, row.figure),
                   "error_cpu_host": relative_error(after, row.figure)}
            if row.checks == "speedup":
                rec["side_builtin"], rec["side_cpu_host"] = side_ok(before, row.figure), side_ok(after, row.figure)
            out.append(rec)
    return out


def movement_markdown(rows: list[dict[str, Any]], factor: float = HOST_TIME_FACTOR) -> str:
    lines = ["| row | version | figure | published | predicted (built-in host) | predicted (CPU-measured host "
             f"x {factor:g}) | error built-in | error CPU host |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['version']} | {r['figure']} | {r['published']:.3g} "
                     f"| {r['predicted_builtin']:.3g} | {r['predicted_cpu_host']:.3g} "
                     f"| {100 * r['error_builtin']:.1f} % | {100 * r['error_cpu_host']:.1f} % |")
    e0 = [r["error_builtin"] for r in rows if math.isfinite(r["error_builtin"])]
    e1 = [r["error_cpu_host"] for r in rows if math.isfinite(r["error_cpu_host"])]
    if e0:
        import numpy as np
        lines += ["", f"Median error over these {len(e0)} rows: {100 * float(np.median(e0)):.1f} % built-in, "
                      f"{100 * float(np.median(e1)):.1f} % with the CPU-measured H(B) carried."]
    return "\n".join(lines) + "\n"
