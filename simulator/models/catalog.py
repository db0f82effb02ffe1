"""A model by name: the catalog (models/<name>.json) or any HF config.json path, read and parsed
into a ModelSpec (model_config.py); a head's `specsight.target` is loaded as its target."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..common.errors import SpecsightInputError, closest_names
from ..common.input_files import read_json, usable_file
from ..common.paths import MODELS_DIR
from .model_config import spec_from_config
from .model_spec import ModelSpec


def available_models() -> list[str]:
    return sorted(p.stem for p in MODELS_DIR.glob("*.json"))


def _is_dir(p: Path) -> bool:
    try:
        return p.is_dir()
    except (OSError, ValueError):      # a name too long to be a directory
        return False


def config_path(name_or_path: str | Path) -> tuple[Path, str, bool]:
    """(config JSON path, model name, from the catalog) for what load_model takes: a .json path or a
    folder holding config.json as given, else the catalog's models/<name>.json (which may not exist)."""
    p = Path(str(name_or_path))
    if p.suffix == ".json" or _is_dir(p):
        if _is_dir(p):
            p = p / "config.json"
        return p, (p.parent.name if p.name == "config.json" else p.stem), False
    return MODELS_DIR / f"{name_or_path}.json", str(name_or_path), True


def head_target_mismatch(head: str, target: str) -> str | None:
    """The warning text when a drafter head's config says it was trained for another model
    (`"specsight": {"trained_for": HF id}`) than the target's config names (`_name_or_path`),
    else None (either config silent, or the two agree)."""
    def raw(name: str) -> Mapping:
        p, _, catalog = config_path(name)
        if catalog and usable_file(p) is None:
            return {}
        cfg = read_json(p, "model", "config")
        return cfg if isinstance(cfg, Mapping) else {}
    meta = raw(head).get("specsight")
    trained = meta.get("trained_for") if isinstance(meta, Mapping) else None
    target_id = raw(target).get("_name_or_path")
    if not trained or not target_id or str(trained) == str(target_id):
        return None
    return (f"drafter {head} was trained for {trained}, not for the target {target} ({target_id}): its acceptance "
            f"on this target is not what its publications measured")


def load_model(name_or_path: str, field: str = "model", _head: bool = False) -> ModelSpec:
    """A model by catalog name (models/<name>.json) or by path to any HF config.json.
    (_head: loading a head's target, which may not be a head itself.)"""
    if not isinstance(name_or_path, (str, Path)) or not str(name_or_path):
        raise SpecsightInputError(field, name_or_path, "a catalog name (models/<name>.json) or a config.json path")
    p, name, catalog = config_path(name_or_path)
    if catalog and usable_file(p) is None:
        raise SpecsightInputError(field, name_or_path, closest_names(str(name_or_path), available_models())
                                  + " (`specsight models` lists them)")
    cfg = read_json(p, field, "config")
    meta = cfg.get("specsight") if isinstance(cfg, Mapping) else None
    target = None
    if isinstance(meta, Mapping) and meta.get("target"):
        if _head:
            raise SpecsightInputError(f"{field}: specsight.target", meta["target"],
                                      "a head's target must be a full model, not another head")
        target = load_model(str(meta["target"]), field=f"{p}: specsight.target", _head=True)
    return spec_from_config(cfg, name, str(p), target)
