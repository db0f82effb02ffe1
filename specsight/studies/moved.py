"""The flat module paths of specsight.studies before its study sub-packages, kept for one release.

`import specsight.studies.breakeven_axes` (any old path below) still works and warns
(DeprecationWarning): it gives the module at its new path, the same module object. The four old
paths that are now packages (breakeven, fleet_day, deploy, published) forward their old names
(`from specsight.studies.fleet_day import fleet_day`) to the package's `study` module, warning too.
docs/layout.md maps every old path to its new one.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

PACKAGE = "specsight.studies"
# old module under specsight.studies -> the module at its new path
MOVED = {
    "analytic": "specsight.studies.breakeven.analytic",
    "atomic_files": "simulator.common.atomic_files",
    "breakeven": "specsight.studies.breakeven.study",
    "breakeven_axes": "specsight.studies.breakeven.axes",
    "breakeven_capacity": "specsight.studies.breakeven.capacity",
    "breakeven_drafters": "specsight.studies.breakeven.drafters",
    "breakeven_engines": "specsight.studies.breakeven.engines",
    "breakeven_outputs": "specsight.studies.breakeven.outputs",
    "capacity_plan": "specsight.studies.plan.study",
    "capacity_plan_outputs": "specsight.studies.plan.outputs",
    "capacity_plan_price": "specsight.studies.plan.price",
    "crossings": "specsight.studies.breakeven.crossings",
    "deploy": "specsight.studies.deploy.study",
    "deploy_sglang": "specsight.studies.deploy.sglang",
    "deploy_trtllm": "specsight.studies.deploy.trtllm",
    "deploy_vllm": "specsight.studies.deploy.vllm",
    "engine_plots": "specsight.studies.breakeven.engine_plots",
    "executors": "specsight.studies.shared.executors",
    "fleet_day": "specsight.studies.fleet_day.study",
    "fleet_day_outputs": "specsight.studies.fleet_day.outputs",
    "inputs": "specsight.studies.shared.inputs",
    "jsonable": "specsight.studies.shared.jsonable",
    "overrides": "specsight.studies.shared.overrides",
    "plan_search": "specsight.studies.plan.search",
    "plan_search_outputs": "specsight.studies.plan.search_outputs",
    "plan_search_plot": "specsight.studies.plan.search_plot",
    "plot_labels": "specsight.studies.shared.plot_labels",
    "plots": "specsight.studies.shared.plots",
    "point_store": "specsight.studies.shared.point_store",
    "points": "specsight.studies.shared.points",
    "published": "specsight.studies.published.study",
    "published_report": "specsight.studies.published.report",
    "saturation": "specsight.studies.shared.saturation",
    "store_claims": "specsight.studies.shared.store_claims",
}
NOW_PACKAGES = ("breakeven", "fleet_day", "deploy", "published")   # old modules, now packages: forward()


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new}; the old path goes in the next release", DeprecationWarning, stacklevel=3)


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: Any) -> ModuleType:  # noqa: ANN401
        _warn(spec.name, self.new)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """The module at the new path is already executed."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:  # noqa: ANN401
        head, _, leaf = fullname.rpartition(".")
        new = MOVED.get(leaf) if head == PACKAGE and leaf not in NOW_PACKAGES else None
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(new))


def forward(package: str, name: str) -> Any:  # noqa: ANN401
    """`package.name` of the old flat module `package` (now a package): the name from its `study` module."""
    if name.startswith("_"):
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    study = importlib.import_module(f"{package}.study")
    if not hasattr(study, name):
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    _warn(f"{package}.{name}", f"{package}.study.{name}")
    return getattr(study, name)


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedFinder())
