"""One round on a timeline: each pass of a speculative round (its model, tokens and graph mode),
the host time it leaves exposed and its syncs, beside one plain decode step at the same batch.

The bars of a row add up to the closed-form step time the explorer's curves use (priced.py):
`EngineStepCost.round_time_s` under a real engine, simulator.speculation.analytic's step times
under `ideal`. A speculative row emits E[tokens] per sequence, a plain one 1, so the row lengths
divided by those are the time per token that decides the speedup.
"""
from __future__ import annotations

from dataclasses import dataclass

from simulator.costs.pass_shape import causal_pairs
from simulator.engines.round import Pass

from .priced import Priced

PLAIN, SPEC = "plain step", "speculative round"


@dataclass(frozen=True)
class Bar:
    row: str              # PLAIN or SPEC
    name: str             # verify, draft_1, host, sync, ...
    kind: str             # target, draft, host, sync
    start_s: float
    duration_s: float
    detail: str           # tokens, graph mode, repeats


def _laid(row: str, parts: list[tuple[str, str, float, str]]) -> list[Bar]:
    bars, t = [], 0.0
    for name, kind, dur, detail in parts:
        bars.append(Bar(row, name, kind, t, float(dur), detail))
        t += float(dur)
    return bars


def _pass_detail(p: Pass) -> str:
    tokens = p.padded_tokens if p.padded_tokens is not None and p.graph != "eager" else p.tokens
    reps = f" x{p.count}" if p.count > 1 else ""
    return (f"{p.seqs} seq x {p.tokens_per_seq} tok{reps} ({tokens} computed), graph {p.graph}, "
            f"{p.logits_per_seq} logit rows/seq")


def _engine_rows(pr: Priced, B: int, k: int) -> list[Bar]:
    step, eng = pr.step, pr.step.engine
    c = B * pr.context
    plain_pass = step.plain_pass(B)
    t_plain = step.pass_s(plain_pass, c)
    host_plain = step.host_s(B, 0, 0, t_plain)
    out = _laid(PLAIN, [("decode", "target", t_plain, _pass_detail(plain_pass)),
                        ("host", "host", host_plain, "scheduler time left exposed" +
                         (" (overlapped with the GPU)" if eng.overlap(None) else " (no overlap)"))])
    parts: list[tuple[str, str, float, str]] = []
    spec = step.spec
    gpu = 0.0
    if spec.is_lookup:
        t = step.draft_s(B, k, c)
        parts.append(("propose", "host", t, f"{spec.method} lookup on the host"))
        gpu += t
    w = pr.drafter.verify_tokens_per_seq(k)
    for p in eng.passes(spec, B, k, w, step.lim):
        t = step.pass_s(p, c)
        gpu += t
        parts.append((p.name, p.model, t, _pass_detail(p)))
    host = step.host_s(B, k, 0, gpu)
    syncs = 0 if step.measured is not None else eng.syncs(spec)
    sync_s = eng.host_model(spec).sync_s
    parts.append(("host", "host", host - syncs * sync_s, "scheduler time left exposed" +
                  (" (overlapped with the GPU)" if eng.overlap(spec) else " (no overlap)")))
    parts += [("sync", "sync", sync_s, "the GPU idles until the host launches the next pass")] * syncs
    return out + _laid(SPEC, parts)


def _ideal_rows(pr: Priced, B: int, k: int, alpha: float) -> list[Bar]:
    cm, d, ctx = pr.cm, pr.drafter, pr.context
    t_plain = cm.time_s(B, B * ctx, B * causal_pairs(1, ctx), B, B)
    out = _laid(PLAIN, [("decode", "target", t_plain, f"{B} seq x 1 tok (cost model, no graphs)"),
                        ("host", "host", cm.round_overhead_s(0), "the profile's per-iteration overhead")])
    w = d.verify_tokens_per_seq(k)
    if d.spec.is_lookup:            # unmatched sequences verify one position
        m = d.spec.match_probability
        w = m * w + (1.0 - m)
    e_tok = pr.expected_tokens(k, alpha)
    t_draft = d.propose_time_s(B, k, B * ctx, catchup_tokens=B * e_tok)
    t_verify = cm.time_s(B * w, B * ctx, B * causal_pairs(w, ctx), B * w, B)
    return out + _laid(SPEC, [
        ("draft", "host" if d.spec.is_lookup else "draft", t_draft, f"propose {k} tokens ({d.spec.method})"),
        ("verify", "target", t_verify, f"{B} seq x {w:g} tok, logits at every position"),
        ("host", "host", cm.round_overhead_s(k), "per-iteration overhead + the verification step's fixed time")])


def round_timeline(pr: Priced, batch: int, alpha: float) -> list[Bar]:
    """The bars of one plain step and one speculative round of the scenario's K at `batch`."""
    B = max(1, int(batch))
    return _ideal_rows(pr, B, pr.k, alpha) if pr.step is None else _engine_rows(pr, B, pr.k)


def row_total_s(bars: list[Bar], row: str) -> float:
    return sum(b.duration_s for b in bars if b.row == row)
