"""Resolve a command-line drafter name into a DrafterSpec.

Accepted forms: a method (`eagle3`: the head `eagle3-<target>` from models/; `ngram`, `suffix`,
`self_spec`: no model), `method:model` (`draft_model:llama-3.2-1b`), or a catalog name (a head's
kind gives the method; any other model is an independent `draft_model`).
"""
from __future__ import annotations

from simulator.common.errors import SpecsightInputError
from simulator.models.catalog import available_models, load_model
from simulator.speculation.drafters import HEAD_METHODS, METHODS, NEEDS_MODEL, DrafterSpec


def resolve_drafter(arg: str, target: str, k: int, **options) -> DrafterSpec:
    method, _, model = arg.partition(":")
    if method in METHODS:
        if not model and method in HEAD_METHODS:
            model = f"{method}-{target}"
            if model not in available_models():
                raise SpecsightInputError("drafter", arg,
                                          f"no {method} head for {target} in models/; pass {method}:<head config>")
        if not model and method in NEEDS_MODEL:
            raise SpecsightInputError("drafter", arg, f"{method} needs a model: {method}:<catalog name or config.json>")
        return DrafterSpec(method=method, model=model or None, num_speculative_tokens=k, **options)
    spec = load_model(arg, field="drafter")
    return DrafterSpec(method=spec.head_kind or "draft_model", model=arg, num_speculative_tokens=k, **options)
