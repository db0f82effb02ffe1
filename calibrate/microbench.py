"""Time real forward passes over a grid of batch shapes; resumable, one JSONL line per point.

A point is one forward pass shape: (model role, layers, batch B, new tokens per sequence n,
context c). The target is timed at two layer counts (time must grow linearly with layers; the
per-layer slope is reported), with logits at every position (the verify pass: n = K + 1); the
draft at its step shapes (n = 1, and n = 2 for the first step of a round, which also ingests the
last committed token), logits at the last position. Each pass returns float32 probabilities
(LM head + softmax: what a sampler reads).

Timing (STYLE.md, calibration): warm-up passes first, device synchronised around
time.perf_counter for every repeat, the median kept (the minimum and all repeats are recorded
too). Each point is appended to the JSONL file as soon as it is measured, under a key that
hashes everything that identifies the measurement (model dims, device, dtype, torch version,
threads, repeats); a rerun with the same key skips the points already there, so an interrupted
calibration resumes where it stopped.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from simulator.common.jsonl import open_append, read_records, write_record
from simulator.models.model_spec import ModelSpec

from .grids import Grid
from .layers import DecoderModel, KVCache, PassRunner
from .machine import device_name
from .timing import Evictor, progress_bar, time_fn


@dataclass(frozen=True)
class BenchConfig:
    target: ModelSpec                    # dims as timed (already scaled on the CPU)
    draft: ModelSpec | None
    layers: tuple[int, int]              # the two target layer counts
    draft_layers: int
    grid: Grid
    device: str = "cpu"
    dtype: str = "fp32"
    warmup: int = 2
    repeats: int = 5
    seed: int = 0
    graphs: bool = False                 # CUDA graphs for the passes (calibrate.layers.PassRunner)
    # Bytes read before every timed repeat to evict the caches (0: none, repeats run back to back
    # with a warm cache). See `Evictor`.
    evict_bytes: int = 0
    # Sweeps over the grid: the repeats of every pass are split over this many passes through the
    # whole grid (1: a pass's repeats back to back). See `measure`.
    sweeps: int = 1
    # The passes' attention: "torch" (SDPA) or "vllm" (vLLM's CPU kernels, calibrate.vllm_attention,
    # loaded from the engine's environment before measuring).
    attention: str = "torch"

    def identity(self) -> dict[str, Any]:
        """Everything a measurement depends on (the resume key hashes this)."""
        def dims(s: ModelSpec | None) -> Any:
            if s is None:
                return None
            return {k: getattr(s, k) for k in ("hidden_size", "num_heads", "num_kv_heads", "head_dim",
                                                "intermediate_size", "vocab_size", "attention_bias")}
        return {"target": dims(self.target), "draft": dims(self.draft), "device": device_name(self.device),
                "dtype": self.dtype, "torch": torch.__version__, "threads": torch.get_num_threads(),
                "warmup": self.warmup, "repeats": self.repeats, "graphs": self.graphs,
                **({"evict_bytes": self.evict_bytes} if self.evict_bytes else {}),
                **({"sweeps": self.n_sweeps} if self.n_sweeps > 1 else {}),
                **({"attention": self.attention} if self.attention != "torch" else {})}

    @property
    def n_sweeps(self) -> int:
        return max(1, min(self.sweeps, self.repeats))

    def evictor(self) -> Evictor | None:
        """The cache-evicting read run before every timed repeat, or None (evict_bytes 0)."""
        return Evictor(self.evict_bytes, self.device) if self.evict_bytes else None

    def sweep_repeats(self, s: int) -> int:
        """Timed repeats of every pass in sweep s: `repeats` split as evenly as they go."""
        q, r = divmod(self.repeats, self.n_sweeps)
        return q + (1 if s < r else 0)

    @property
    def key(self) -> str:
        return hashlib.sha1(json.dumps(self.identity(), sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Point:
    role: str          # "target" | "draft" | "host" (per-round host work: sampling draws, verify_chain)
    layers: int
    batch: int
    new_tokens: int    # for "host": K
    context: int

    @property
    def id(self) -> str:
        return f"{self.role}:{self.layers}:{self.batch}:{self.new_tokens}:{self.context}"


def grid_points(cfg: BenchConfig) -> list[Point]:
    g, pts = cfg.grid, []
    for L in sorted(set(cfg.layers)):
        for b in g.batches:
            for c in g.contexts:
                if b * c > g.max_kv_tokens:
                    continue
                pts += [Point("target", L, b, n, c) for n in g.new_tokens if b * n <= g.max_tokens]
    if cfg.draft is not None:
        for b in g.batches:
            for c in g.contexts:
                if b * c <= g.max_kv_tokens:
                    pts += [Point("draft", cfg.draft_layers, b, n, c) for n in g.draft_new_tokens
                            if b * n <= g.max_tokens]
    for b in g.batches:
        pts += [Point("host", 0, b, k, 0) for k in g.sampling_ks]
    return pts


def read_points(path: Path, key: str) -> dict[str, dict]:
    """Measured points of this configuration in a JSONL file (a torn last line is ignored)."""
    return {rec["id"]: rec for rec in read_records(path) if rec.get("key") == key and "sweep" not in rec}


def calibration_inputs(calibration: dict, points_path: str | Path) -> tuple[list[dict], dict[str, ModelSpec]]:
    """What a calibrated profile was fitted on, from its `calibration` record and the points file
    `specsight calibrate` wrote: the measured points of its grid (read_points under the record's
    key) and the specs it timed (the catalog models at the record's scale), as fit_device and
    fit_attention_blocks take them."""
    from simulator.models.catalog import load_model

    from .layers import scaled_spec
    scale = calibration.get("scale", 1)
    specs = {"target": scaled_spec(load_model(calibration["model"]), scale)}
    if calibration.get("draft"):
        specs["draft"] = scaled_spec(load_model(calibration["draft"]), scale)
    return list(read_points(Path(points_path), calibration["key"]).values()), specs


def read_sweeps(path: Path, key: str) -> dict[tuple[str, int], dict]:
    """The per-sweep records under `key`: (id, sweep) -> record (measure keeps those of the
    points not yet complete)."""
    return {(rec["id"], rec["sweep"]): rec for rec in read_records(path) if rec.get("key") == key and "sweep" in rec}


def measure(cfg: BenchConfig, jsonl: str | Path, progress: bool = True,
            host_work: Callable[[int, int, int, torch.Generator], Callable[[], Any]] | None = None) -> list[dict]:
    """Measure every grid point not yet in `jsonl` (appending each as it is measured); return all
    points of this configuration, old and new.

    host_work(B, K, V, generator) -> a callable doing one round's host-side sampling work (draws
    and, for K > 0, the exact verify kernel) on random probabilities; default: `host_work_fn`."""
    if host_work is None:
        from .host_work import host_work_fn as host_work
    jsonl = Path(jsonl)
    jsonl.parent.mkdir(parents=True, exist_ok=True)
    done = read_points(jsonl, cfg.key)
    todo = [p for p in grid_points(cfg) if p.id not in done]
    partial = {k: rec for k, rec in read_sweeps(jsonl, cfg.key).items() if k[0] not in done} \
        if cfg.n_sweeps > 1 else {}                   # sweeps on disk of the points still to finish
    resumed = sum(1 for (pid, s) in partial if s < cfg.n_sweeps - 1)
    # a step per pass per sweep
    bar = progress_bar(len(done) + len(todo) * cfg.n_sweeps, len(done) + resumed, progress)
    runners: dict[str, PassRunner] = {}

    def runner(role: str) -> PassRunner:
        if role not in runners:
            runners.clear()          # one model in memory at a time
            if torch.device(cfg.device).type == "cuda":
                torch.cuda.empty_cache()
            spec = cfg.target if role == "target" else cfg.draft
            n = max(cfg.layers) if role == "target" else cfg.draft_layers
            runners[role] = PassRunner(DecoderModel(spec, n, dtype=cfg.dtype, device=cfg.device, seed=cfg.seed,
                                                    attention=cfg.attention),
                                       graphs=cfg.graphs)
        return runners[role]

    gen = torch.Generator(device=cfg.device).manual_seed(cfg.seed)
    evict = cfg.evictor() if todo else None
    # Group the shapes that share a cache: (role, batch, context); within a group, each width at
    # both layer counts back to back, so the per-layer slope compares passes timed seconds apart
    # (a shared machine's speed drifts over minutes).
    todo.sort(key=lambda p: (p.role != "target", p.role, p.batch, p.context, p.new_tokens, p.layers))
    # NOTE: sweeps. With cfg.sweeps > 1 every sweep times every pass (its share of the repeats,
    # after the warm-up calls), so each pass's repeats are spread over the whole calibration and
    # every pass's statistic sees the same states of a drifting machine: otherwise a pass timed in
    # a fast minute and its neighbour in a slow one differ by the machine, not by their shapes.
    # Each sweep's times are appended as they are measured ("sweep" records); the point's record
    # follows its last sweep, so an interrupted calibration resumes within a sweep.
    cache_key, cache = None, None

    def time_point(p: Point, repeats: int) -> list[float]:
        nonlocal cache_key, cache
        if p.role == "host":
            cache_key, cache = None, None
            vocab = cfg.target.vocab_size
            return time_fn(host_work(p.batch, p.new_tokens, vocab, gen), cfg.device, cfg.warmup, repeats, before=evict)
        r = runner(p.role)
        ck = (p.role, p.batch, p.context)
        if ck != cache_key:
            r.reset()
            cache = None
            cache = r.model.new_cache(p.batch, p.context + max(cfg.grid.new_tokens) + PassRunner.KEY_BUCKET)
            cache_key = ck
        toks = torch.randint(0, r.model.spec.vocab_size, (p.batch, p.new_tokens), device=cfg.device, generator=gen)
        logits = "all" if p.role == "target" else "last"
        return time_fn(pass_call(r, toks, cache, p.context, p.layers, logits), cfg.device, cfg.warmup, repeats,
                       before=evict)

    with open_append(jsonl) as f:
        for s in range(cfg.n_sweeps):
            last = s == cfg.n_sweeps - 1
            for p in todo:
                if (p.id, s) not in partial:
                    t_s = time_point(p, cfg.sweep_repeats(s))     # (one sweep: all the repeats)
                    partial[(p.id, s)] = {"key": cfg.key, "id": p.id, "sweep": s, "times_s": [round(t, 9) for t in t_s],
                                          "t": time.strftime("%Y-%m-%dT%H:%M:%S")}
                    if cfg.n_sweeps > 1:
                        write_record(f, partial[(p.id, s)])
                    if not last:
                        bar.update(1)     # (sweeps resumed from disk are in the bar's start)
                if not last:
                    continue
                times = [t for i in range(cfg.n_sweeps) for t in partial[(p.id, i)]["times_s"]]
                rr = next(iter(runners.values())) if runners and p.role != "host" else None
                rec = {"key": cfg.key, "id": p.id, **dataclasses.asdict(p), "graphs": bool(rr and rr.graphs),
                       **({"graphs_failed": rr.graphs_failed} if rr is not None and rr.graphs_failed else {}),
                       "median_s": statistics.median(times),
                       "min_s": min(times), "times_s": times,
                       **({"sweeps": cfg.n_sweeps} if cfg.n_sweeps > 1 else {}),
                       "t": time.strftime("%Y-%m-%dT%H:%M:%S")}
                write_record(f, rec)
                done[p.id] = rec
                bar.update(1)
    bar.close()
    return list(done.values())


def pass_call(r: PassRunner, toks: torch.Tensor, cache: KVCache, context: int, layers: int,
              logits: str) -> Callable[[], Any]:
    """One forward pass over the first `layers` layers (the rest of the model stays idle), every
    sequence holding `context` cached tokens, through the ragged path the ground truth uses."""
    cache.lengths.fill_(context)
    return lambda: r(toks, cache, logits=logits, num_layers=layers, max_length=context)


