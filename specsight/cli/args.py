"""Flags shared by the commands: one spelling per concept, older spellings kept as aliases.

| concept                 | flag                       | aliases            |
| ----------------------- | -------------------------- | ------------------ |
| hardware profile        | --hardware NAME|YAML       | --gpu, --profile   |
| draft tokens per round  | --k 1,2,3 (list of ints)   |                    |
| output folder           | --out DIR                  |                    |
| one scenario override   | --set KEY.PATH=VALUE       |                    |
| a grid of overrides     | --grid KEY.PATH=V1,V2      |                    |
| machine-readable output | --json                     |                    |
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from simulator.common.atomic_files import out_file, out_folder

HARDWARE_FLAGS = ("--hardware", "--gpu", "--profile")
MAX_FOLDER_CHARS = 200          # a grid point's folder name (a file system allows 255 bytes)


SCENARIO_HARDWARE_HELP = ("hardware profile for the scenario's deployment: sets hardware.profile, which replaces "
                          "its hardware.gpu (roofline scenarios)")


def add_hardware(p: argparse.ArgumentParser, required: bool = False, help: str = "hardware profile") -> None:
    p.add_argument(*HARDWARE_FLAGS, dest="hardware", metavar="NAME|YAML", required=required,
                   help=f"{help}: a hardware_profiles/ name or a profile YAML (aliases --gpu, --profile)")


def scenario_overrides(args: argparse.Namespace) -> list[str]:
    """The scenario overrides a command's flags give: --hardware (as hardware.profile), then each --set."""
    import json
    hw = getattr(args, "hardware", None)
    return ([f"hardware.profile={json.dumps(hw)}"] if hw else []) + list(args.overrides)


def add_k(p: argparse.ArgumentParser, default: str | None, help: str, required: bool = False) -> None:
    p.add_argument("--k", default=default, required=required, metavar="K[,K...]",
                   help=help + " (comma-separated integers)")


def add_out(p: argparse.ArgumentParser, default: str | None, help: str) -> None:
    p.add_argument("--out", default=default, metavar="DIR", help=help)


def check_out_dir(path: str | Path, flag: str = "--out") -> Path:
    """Create a command's output folder before any work; a bad one is one line naming `flag`."""
    return out_folder(path, flag)


def check_out_file(path: str | Path, flag: str = "--out") -> Path:
    """Check a command's output file can be written before any work (its folder is created)."""
    return out_file(path, flag)


def add_set(p: argparse.ArgumentParser, help: str = "override a scenario value (parsed as YAML), "
            "e.g. --set engine.max_num_seqs=64; repeatable") -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE", help=help)


def add_grid(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--grid", action="append", default=[], metavar="KEY.PATH=V1,V2,...", help=help)


def add_json(p: argparse.ArgumentParser, help: str = "print one JSON object") -> None:
    p.add_argument("--json", action="store_true", help=help)


def add_executor(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", metavar="N", help="local processes, 1 to 1024 (default: CPU count; 1 = in this "
                   "process); checked by the library, so a bad value is one line naming --workers")
    p.add_argument("--dask", metavar="ADDRESS", help="run the points on a dask.distributed scheduler, e.g. tcp://host:8786")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


GRID_HELP = ("run the whole study at each point of a grid of scenario overrides (values parsed as YAML; "
             "repeatable: the product), each into DIR/KEY=VALUE,...")


def grid_cases(args: argparse.Namespace) -> list[tuple[dict[str, Any] | None, list[str], Path]]:
    """(grid point or None, scenario_overrides then the point's, output folder) per study to run:
    one without --grid, one per point of the grids' product with it."""
    base = scenario_overrides(args)
    if not args.grid:
        return [(None, base, Path(args.out))]
    from ..studies.shared.overrides import check_points, grid_points, override_strings, scenario_source
    points = grid_points(args.grid)
    check_points(scenario_source(args.scenario, base), points)     # a misspelt key fails here, once
    return [(pt, base + override_strings(pt), Path(args.out) / point_folder(pt)) for pt in points]


def point_folder(point: dict[str, Any]) -> str:
    """A folder name for a grid point: `key=value,key2=value2`, other characters as `_`. Distinct
    points get distinct names: when that replacement (or a cut to MAX_FOLDER_CHARS) changed the
    text, the name ends in `~` and 8 hex digits of the exact text's hash."""
    import hashlib
    import json
    text = ",".join(f"{k}={v if isinstance(v, (str, int, float)) else json.dumps(v)}" for k, v in point.items())
    name = re.sub(r"[^\w.=,+-]+", "_", text, flags=re.ASCII)
    if name == text and len(name) <= MAX_FOLDER_CHARS:
        return name
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{name[:MAX_FOLDER_CHARS - 9]}~{digest}"
