"""`specsight models [show M]`: the model catalog (models/), listed or one model's shapes shown."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from simulator.common.errors import SpecsightInputError

from .args import add_json
from .emit import emit_json

if TYPE_CHECKING:
    from simulator.models.model_spec import ModelSpec


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list the model catalog, or show one model's shapes and parameter counts")
    p.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    p.add_argument("name", nargs="?")
    add_json(p)
    p.set_defaults(func=run)


def model_kind(m: ModelSpec) -> str:
    """The list's kind column: a head's target, else dense or MoE, MLA, and the attention of each
    layer where not every layer is full attention (counts by kind, the sliding layers' window)."""
    if m.head_kind:
        return f"{m.head_kind} head for {m.target}"
    kind = ("MoE" if m.is_moe else "dense") + (" MLA" if m.is_mla else "")
    counts = [(m.num_linear_layers, "linear"), (m.num_sliding_layers, f"sliding (window {m.window})"),
              (m.num_full_layers, "full")]
    if m.num_full_layers == m.num_layers:
        return kind
    return kind + ", " + " + ".join(f"{n} {name}" for n, name in counts if n)


def run(args: argparse.Namespace) -> int:
    from simulator.models.catalog import available_models, load_model

    if args.action == "show":
        if not args.name:
            raise SpecsightInputError("models show M", None, "name a model: " + ", ".join(available_models()))
        spec = load_model(args.name)
        d = spec.to_dict()
        if args.json:
            emit_json(d)
        else:
            for k, v in d.items():
                if v not in (0, None, False) or k in ("params_total", "params_active"):
                    print(f"{k:<28}{v}")
        return 0
    if args.name:
        raise SpecsightInputError("models list", args.name, "takes no name (models show M shows one)")
    rows = [load_model(n) for n in available_models()]
    if args.json:
        emit_json([{"name": m.name, "params_total": m.params_total, "params_active": m.params_active,
                    "head_kind": m.head_kind} for m in rows])
        return 0
    print(f"{'name':<26}{'total B':>10}{'active B':>10}{'layers':>8}{'hidden':>8}{'heads/kv':>10}  kind")
    for m in rows:
        print(f"{m.name:<26}{m.params_total/1e9:>10.3f}{m.params_active/1e9:>10.3f}{m.num_layers:>8}{m.hidden_size:>8}"
              f"{f'{m.num_heads}/{m.num_kv_heads}':>10}  {model_kind(m)}")
    return 0
