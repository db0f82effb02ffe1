"""`specsight analytic --alpha A --k K[,K...] [--c C]`: the closed-form speculation math
(Leviathan et al. 2022) at each K."""
from __future__ import annotations

import argparse

from .args import add_json, add_k
from .emit import emit_json

MAX_STEP_RATIO = 1e3      # --c: a draft step a thousand target steps long (any c >= 1 never pays)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analytic", help="closed-form speculation math (Leviathan et al. 2022)")
    p.add_argument("--alpha", type=float, required=True, help="per-token acceptance rate in [0, 1)")
    add_k(p, None, "draft tokens per round; several K give one answer each", required=True)
    p.add_argument("--c", type=float, default=None, help="draft step time / target step time")
    add_json(p)
    p.set_defaults(func=run)


def closed_forms(alpha: float, k: int, c: float | None) -> dict:
    """Expected tokens per round at (alpha, K); with c, the batch-1 speedup, the optimal K and
    the compute increase."""
    from simulator.common.errors import require_range
    from simulator.speculation import spec_math

    out = {"alpha": alpha, "k": k, "expected_tokens_per_round": spec_math.expected_tokens_per_round(alpha, k)}
    if c is not None:
        c = require_range("--c", c, 0.0, MAX_STEP_RATIO)
        out.update(c=c, speedup=float(spec_math.speedup_batch1(alpha, k, c)),
                   optimal_k=spec_math.optimal_k(alpha, c),
                   compute_increase=float(spec_math.compute_increase(alpha, k, c)))
    return out


def run(args: argparse.Namespace) -> int:
    from simulator.common.limits import MAX_K
    from simulator.speculation import spec_math

    from ..studies.shared.inputs import int_list

    alpha = spec_math.check_alpha(args.alpha)
    answers = [closed_forms(alpha, k, args.c) for k in int_list("--k", args.k, lo=0, hi=MAX_K)]
    if args.json:
        emit_json(answers[0] if len(answers) == 1 else answers)
        return 0
    for i, out in enumerate(answers):
        if i:
            print()
        for key, v in out.items():
            print(f"{key:<28}{v:.4f}" if isinstance(v, float) else f"{key:<28}{v}")
    return 0
