"""Reading one key of an HF-style config.json, checked: every reader names the file and the key in
its input error (simulator/models/model_config.py, simulator/models/layer_types.py)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..common.errors import SpecsightInputError, require_int


def config_value(cfg: Mapping[str, Any], where: str, *keys: str, default: Any = None, required: bool = False) -> Any:
    """The first of `keys` the config sets (not null); else `default`, or an input error when required."""
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    if required:
        raise SpecsightInputError(f"{where}: {keys[0]}", None, "required key is missing")
    return default


def config_int(cfg: Mapping[str, Any], where: str, *keys: str, default: Any = None, required: bool = False) -> int:
    """An integer key (under any of its names), range-checked by schema_table.MODEL_CONFIG: NaN,
    infinities, strings, booleans and absurd sizes are refused by name."""
    from ..common.schema import check
    from ..scenario.schema_table import MODEL_CONFIG
    key = next((k for k in keys if k in cfg and cfg[k] is not None), keys[0])
    v = config_value(cfg, where, *keys, default=default, required=required)
    return int(check(MODEL_CONFIG[keys[0]], v, f"{where}: {key}"))


def config_flag(cfg: Mapping[str, Any], where: str, key: str, default: bool) -> bool:
    """A true/false key (absent: `default`); anything else is refused by name."""
    v = cfg.get(key, default)
    if not isinstance(v, bool):
        raise SpecsightInputError(f"{where}: {key}", v, "must be true or false")
    return v


def config_token_ids(cfg: Mapping[str, Any], where: str, key: str) -> tuple[int, ...]:
    """A special-token id (or a list of them: Llama 3.1's eos_token_id) as a tuple; absent or null: ()."""
    v = cfg.get(key)
    if v is None:
        return ()
    items = v if isinstance(v, list) else [v]
    if not items or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in items):
        raise SpecsightInputError(f"{where}: {key}", v, "a token id (an integer >= 0) or a list of them")
    return tuple(items)


def config_text(cfg: Mapping[str, Any], where: str, key: str) -> str | None:
    """A string key, or None when absent."""
    v = cfg.get(key)
    if v is not None and not isinstance(v, str):
        raise SpecsightInputError(f"{where}: {key}", v, "must be a string")
    return v


def config_sliding_window(cfg: Mapping[str, Any], where: str) -> tuple[int, bool | None]:
    """(sliding_window, use_sliding_window): the window in tokens (0 when absent or null) and the switch."""
    use = cfg.get("use_sliding_window")
    if use is not None and not isinstance(use, bool):
        raise SpecsightInputError(f"{where}: use_sliding_window", use, "must be true or false")
    window = cfg.get("sliding_window")
    if window is None:
        return 0, use
    if isinstance(window, bool) or not isinstance(window, int):
        raise SpecsightInputError(f"{where}: sliding_window", window, "a number of tokens >= 0 (or null: none)")
    return require_int(f"{where}: sliding_window", window, lo=0, hi=10 ** 12), use
