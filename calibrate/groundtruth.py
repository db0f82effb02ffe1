"""Ground truth: real speculative decoding in torch, timed round by round.

A target and an independent draft model (both `calibrate.layers.DecoderModel`, random weights,
the same vocabulary), each with its own KV cache, run B sequences from a random prompt of P
tokens. Each round:

    K = 0  plain decode: one target pass over the pending token, one draw from p.
    K > 0  draft: the first step ingests the last two committed tokens (so the draft catches up
           whether the previous round emitted 1 or K + 1 tokens: rewriting a valid slot is
           harmless), then K - 1 single-token steps; each step draws x_j ~ q_j.
           verify: one target pass over [pending token, x_1..x_K] (K + 1 positions, logits at
           every one), then calibrate.sampling.verify_chain (the exact kernel) emits
           accepted + 1 tokens per sequence.
           roll back: each cache's length is set to what was committed; rejected slots are
           masked out and overwritten next round.

A sequence of `committed` tokens has committed - 1 of them in the target's cache (the last is the
pending input of the next pass). Every round is timed between device synchronisations, and its
draft phase separately; the first `warmup` rounds are recorded but flagged. The record keeps what
the simulator needs to cost the same run: batch, K, each sequence's committed length before the
round and its accept length. With CUDA graphs, a round that captured a new graph (its context
crossed into a new key bucket) is flagged `captured_graphs` > 0: it timed the capture too.
"""
from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from simulator.common.input_files import read_json
from simulator.models.model_spec import ModelSpec

from .host_work import commit, draw
from .layers import DecoderModel, PassRunner, spec_to_config, synchronize
from .sampling import verify_chain


@dataclass(frozen=True)
class GTConfig:
    batches: tuple[int, ...] = (1, 8, 32)
    ks: tuple[int, ...] = (0, 2, 4)
    steps: int | None = None     # timed rounds per (batch, K); None: steps_for's rule
    warmup: int = 3              # extra rounds first, recorded with warmup: true
    prompt_len: int = 256
    temperature: float = 1.0
    seed: int = 0
    # True: at each batch, the K values' rounds run in turn (run_interleaved), so the speedups of
    # K > 0 over K = 0 compare the same stretch of machine time; False: each (batch, K) back to back.
    interleave: bool = True
    seq_rounds: int = 256        # steps=None: at least this many sequence-rounds per (batch, K) ...
    min_steps: int = 16          # ... and at least this many rounds

    def steps_for(self, batch: int) -> int:
        """Timed rounds at `batch`: `steps` if given, else max(min_steps, ceil(seq_rounds / batch)).

        Why enough sequence-rounds: each sequence-round draws one accept length, and the run's
        speedup of K over K = 0 is tokens per round over round time. At K = 4 on the CPU's
        random-weight models a round emits 3.11 tokens with sd 1.59 (256 rounds at batch 1 in
        tests/data/calibration_cpu/groundtruth_AO.json), so 16 draws know the mean to ~13 %
        (1 s.e.) and 256 to ~3 %; and a seeded run replays the same draws every time, so a short
        run's off mean is repeated, not averaged away. The prediction replays the recorded accept
        lengths either way; enough of them puts the measured point where the configuration stands."""
        if self.steps is not None:
            return self.steps
        return max(self.min_steps, -(-self.seq_rounds // batch))


class _Decoding:
    """One (batch, K) configuration's decoding state: its token buffer, its own KV caches (target
    and, for K > 0, draft) after the prompt's prefill, and the rounds run so far. `round()` runs
    and times the next round. Several of these can be advanced in turn (`run_groundtruth(...,
    interleave=True)`): each keeps its own caches, so only the order in time changes."""

    def __init__(self, target_run: PassRunner, draft_run: PassRunner | None, batch: int, k: int, cfg: GTConfig):
        if k > 0 and draft_run is None:
            raise ValueError("K > 0 needs a draft model")
        self.target_run, self.draft_run, self.batch, self.k, self.cfg = target_run, draft_run, batch, k, cfg
        target = target_run.model
        dev = self.dev = target.device
        self.steps = cfg.steps_for(batch)                                              # timed rounds
        P, rounds = cfg.prompt_len, cfg.warmup + self.steps
        self.gen = torch.Generator(device=dev).manual_seed(cfg.seed * 1000003 + batch * 101 + k)
        V = target.spec.vocab_size
        cap = P + rounds * (k + 1) + k + 2
        self.buf = torch.zeros(batch, cap + k + 1, dtype=torch.int64, device=dev)     # [B, S] token ids
        self.buf[:, :P] = torch.randint(0, V, (batch, P), device=dev, generator=self.gen)
        cap += PassRunner.KEY_BUCKET                                                  # graphs round keys up
        self.tcache = target.new_cache(batch, cap)
        target(self.buf[:, :P - 1], self.tcache, uniform_length=0, logits="last")   # prefill
        self.dcache = None
        if k > 0:
            assert draft_run is not None
            self.dcache = draft_run.model.new_cache(batch, cap)
            draft_run.model(self.buf[:, :P - 2], self.dcache, uniform_length=0, logits="last")
        self.committed = torch.full((batch,), P, dtype=torch.int64, device=dev)      # [B]
        self.host_committed = [P] * batch
        self.ar_b = torch.arange(batch, device=dev)
        self.rounds: list[dict] = []

    def _captures(self) -> int:
        return self.target_run.captures + (self.draft_run.captures if self.draft_run is not None else 0)

    def round(self) -> dict:
        """Run and time the next round; append its record to self.rounds and return it."""
        cfg, dev, k, gen, buf, ar_b = self.cfg, self.dev, self.k, self.gen, self.buf, self.ar_b
        target_run, draft_run, tcache, dcache = self.target_run, self.draft_run, self.tcache, self.dcache
        committed = self.committed
        r = len(self.rounds)
        before = list(self.host_committed)
        captures0 = self._captures()
        synchronize(dev)
        t0 = time.perf_counter()
        if k == 0:
            tcache.lengths.copy_(committed - 1)
            p = target_run(buf[ar_b, committed - 1][:, None], tcache, logits="last", temperature=cfg.temperature,
                           max_length=max(before) - 1)                            # [B, 1, V]
            synchronize(dev)
            x = draw(p[:, 0], gen)
            committed = commit(buf, committed, x[:, None], torch.ones_like(committed))
            self.host_committed = [c + 1 for c in self.host_committed]
            accepted = [0] * self.batch
            t_draft = 0.0
            synchronize(dev)
        else:
            assert draft_run is not None and dcache is not None
            dcache.lengths.copy_(committed - 2)
            idx = (committed - 2)[:, None] + torch.arange(2, device=dev)[None, :]
            inp = torch.gather(buf, 1, idx)                                       # [B, 2]
            qs, xs = [], []
            top = max(before) - 2
            for _ in range(k):
                q = draft_run(inp, dcache, logits="last", temperature=cfg.temperature, max_length=top)[:, 0]
                q = q.clone() if draft_run.graphs else q                          # [B, V]; a graph reuses its output
                synchronize(dev)
                dcache.lengths += inp.shape[1]
                top += inp.shape[1]
                x = draw(q, gen)
                qs.append(q)
                xs.append(x)
                inp = x[:, None]
            synchronize(dev)
            t_draft = time.perf_counter() - t0
            x_all = torch.stack(xs, 1)                                            # [B, K]
            tcache.lengths.copy_(committed - 1)
            vin = torch.cat([buf[ar_b, committed - 1][:, None], x_all], 1)        # [B, K+1]
            p = target_run(vin, tcache, logits="all", temperature=cfg.temperature, max_length=max(before) - 1)
            synchronize(dev)
            tokens, n_emit = verify_chain(p, torch.stack(qs, 1), x_all, generator=gen)
            committed = commit(buf, committed, tokens, n_emit)
            n_host = n_emit.tolist()                                              # the round's one sync
            self.host_committed = [c + n for c, n in zip(self.host_committed, n_host)]
            accepted = [n - 1 for n in n_host]
            synchronize(dev)
        wall = time.perf_counter() - t0
        self.committed = committed
        rec = {"round": r, "warmup": r < cfg.warmup, "captured_graphs": self._captures() - captures0,
               "wall_s": wall, "draft_s": t_draft, "committed_before": before, "accepted": accepted,
               "t_start_s": t0}
        self.rounds.append(rec)
        return rec

    def record(self) -> dict:
        graphs = self.target_run.graphs and (self.draft_run is None or self.draft_run.graphs or self.k == 0)
        return {"batch": self.batch, "k": self.k, "steps": self.steps, "rounds": self.rounds,
                "graphs": graphs}


def run_one(target_run: PassRunner, draft_run: PassRunner | None, batch: int, k: int, cfg: GTConfig,
            state: dict | None = None) -> dict:
    """Run one (batch, K) configuration's rounds back to back; return its record with per-round
    timings.

    Every pass is followed by a device synchronisation (the host reads what it sampled before it
    launches the next step), so host work adds to device time instead of hiding under it, as
    in the calibration, where each pass is timed between synchronisations.
    state: if given, receives the final token buffer, committed lengths and both caches (tests)."""
    d = _Decoding(target_run, draft_run, batch, k, cfg)
    _run_in_turn([d], target_run, draft_run, cfg)
    if state is not None:
        state.update(buf=d.buf, committed=d.committed, tcache=d.tcache, dcache=d.dcache)
    return d.record()


def run_interleaved(target_run: PassRunner, draft_run: PassRunner | None, batch: int, ks: tuple[int, ...],
                    cfg: GTConfig) -> list[dict]:
    """Every K of `ks` at one batch, their rounds in turn: round r of each K, then round r + 1 of
    each. Each configuration keeps its own caches and generator (the same tokens and accept
    lengths as run back to back); what changes is that the K values share every stretch of time,
    so the speedups over K = 0 compare rounds run under the same machine state."""
    runs = [_Decoding(target_run, draft_run, batch, k, cfg) for k in ks]
    _run_in_turn(runs, target_run, draft_run, cfg)
    return [d.record() for d in runs]


def _run_in_turn(runs: list[_Decoding], target_run: PassRunner, draft_run: PassRunner | None, cfg: GTConfig) -> None:
    """Every round of each configuration, round r of all of them before round r + 1; then drop the
    runners' CUDA graphs (they read these configurations' caches)."""
    for _ in range(cfg.warmup + runs[0].steps):          # (one batch: run_one, run_interleaved)
        for d in runs:
            d.round()
    target_run.reset()
    if draft_run is not None:
        draft_run.reset()


def run_groundtruth(target_spec: ModelSpec, draft_spec: ModelSpec | None, *, target_layers: int,
                    draft_layers: int, device: str, dtype: str, cfg: GTConfig, graphs: bool = False,
                    progress: bool = True, on_config: Callable[[dict], None] | None = None) -> dict:
    """Every (batch, K) of cfg; returns the run record (JSON-ready). graphs: CUDA graphs for the
    passes (calibrate.layers.PassRunner), as in the calibration that predicts this run."""
    from .machine import environment
    from .timing import progress_bar
    target = DecoderModel(target_spec, target_layers, dtype=dtype, device=device, seed=cfg.seed)
    draft = None
    if draft_spec is not None and any(k > 0 for k in cfg.ks):
        if draft_spec.vocab_size != target_spec.vocab_size:
            raise ValueError(f"draft vocabulary {draft_spec.vocab_size} != target's {target_spec.vocab_size}")
        draft = DecoderModel(draft_spec, draft_layers, dtype=dtype, device=device, seed=cfg.seed + 1)
    target_run = PassRunner(target, graphs=graphs)
    draft_run = PassRunner(draft, graphs=graphs) if draft is not None else None
    runs = []
    bar = progress_bar(len(cfg.batches) * len(cfg.ks), 0, progress, desc="groundtruth")
    for b in cfg.batches:
        recs = (run_interleaved(target_run, draft_run, b, cfg.ks, cfg) if cfg.interleave
                else [run_one(target_run, draft_run, b, k, cfg) for k in cfg.ks])
        for rec in recs:
            runs.append(rec)
            if on_config:
                on_config(rec)
            bar.update(1)
    bar.close()
    return {
        "kind": "specsight-groundtruth", "version": 1,
        "provenance": {**environment(device), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "dtype": dtype,
                       "cuda_graphs_requested": graphs,
                       "cuda_graphs_failed": target_run.graphs_failed
                       or (draft_run.graphs_failed if draft_run else None)},
        "config": dataclasses.asdict(cfg),
        "target": {"name": target_spec.name, "layers": target_layers,
                   "config": spec_to_config(dataclasses.replace(target_spec, num_layers=target_layers))},
        "draft": None if draft_spec is None else {
            "name": draft_spec.name, "layers": draft_layers,
            "config": spec_to_config(dataclasses.replace(draft_spec, num_layers=draft_layers))},
        "round_structure": {
            "draft_first_step_tokens_per_seq": 2, "draft_logits": "last",
            "verify_logits": "all", "sampling": "calibrate.sampling.verify_chain",
            "target_cached_tokens": "committed_before - 1",
            "draft_cached_tokens_at_round_start": "committed_before - 2"},
        "runs": runs,
    }


def write_run(run: dict, out: str | Path) -> Path:
    """Write the run to run_path(out), whole or not at all."""
    from simulator.common.atomic_files import out_file, write_text

    from .inputs import run_path
    return write_text(out_file(run_path(out)), json.dumps(run, indent=1))


def load_run(path: str | Path) -> dict:
    p = Path(path)
    if p.is_dir():
        p = p / "groundtruth.json"
    run = read_json(p, "run", "json")
    if not isinstance(run, dict) or run.get("kind") != "specsight-groundtruth":
        raise ValueError(f"{p}: not a specsight ground-truth run")
    return run
