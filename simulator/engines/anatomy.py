"""The round anatomy table of docs/engines.md, generated from the engine files (the doc's copy is
checked against it: tests/test_engines.py). `python -m simulator.engines.anatomy` prints it.

One row per pass of one round, for B sequences and K drafts (chain), vLLM's default limits
(max_num_seqs 256, max_num_batched_tokens 8192; an engine's own defaults where it has them), TP 1.
"""
from __future__ import annotations

from ..speculation.drafters import LOOKUP_METHODS, DrafterSpec
from . import ENGINES
from .round import EngineDef, EngineLimits

EXAMPLE_B, EXAMPLE_K = 4, 3
HEADER = ("| engine | version | method | pass | model | sequences | tokens / seq | logits / seq | passes "
          "| CUDA graph | tokens computed | eager launches / pass | syncs / round | host overlap (spec / plain) "
          "| verify attention |")


def _limits(engine: EngineDef, tp: int = 1) -> EngineLimits:
    d = engine.defaults(True, tp)
    return EngineLimits(int(d.get("max_num_seqs", 256)), 8192, tp)


def anatomy_rows(B: int = EXAMPLE_B, k: int = EXAMPLE_K) -> list[tuple]:
    """Rows (engine, version, methods, pass, model, seqs, tokens/seq, logits/seq, passes, graph,
    tokens computed, eager launches around each pass, syncs, overlap, attention); methods whose
    rounds are identical share rows."""
    groups: dict[tuple, list[str]] = {}
    for cls in ENGINES.values():
        for version in cls.versions:
            eng = cls(version)
            lim = _limits(eng)
            for method in eng.supported_methods():
                spec = DrafterSpec(method=method, num_speculative_tokens=k,
                                   model=None if method in LOOKUP_METHODS else "x")
                sync = eng.syncs(spec)
                ov = ("on" if eng.overlap(spec) else "off") + " / " + ("on" if eng.overlap(None) else "off")
                passes = tuple((p.name, p.model, p.seqs, p.tokens_per_seq, p.logits_per_seq, p.count, p.graph,
                                p.padded_tokens if p.padded_tokens is not None else p.tokens, p.eager_launches,
                                sync, ov,
                                eng.attention_class(spec)) for p in eng.passes(spec, B, k, k + 1, lim))
                groups.setdefault((eng.name, version, passes), []).append(method)
    rows = []
    for (name, version, passes), methods in groups.items():
        rows += [(name, version, ", ".join(methods)) + p for p in passes]
    return rows


def anatomy_markdown(B: int = EXAMPLE_B, k: int = EXAMPLE_K) -> str:
    lines = [HEADER, "|" + "---|" * (HEADER.count("|") - 1)]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in anatomy_rows(B, k)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(anatomy_markdown(), end="")
