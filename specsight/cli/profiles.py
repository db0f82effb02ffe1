"""`specsight profiles [show NAME | new NAME --from BASE]`: the hardware profiles (hardware_profiles/),
listed, one shown, or a new one written from a base to edit."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from simulator.common.errors import SpecsightInputError
from simulator.hardware.hardware import EDIT_MARK, REPLACE_MARK

from .args import add_json
from .emit import emit_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profiles", help="list hardware profiles, show one, or write a new one to edit")
    p.add_argument("action", nargs="?", choices=["list", "show", "new"], default="list")
    p.add_argument("name", nargs="?")
    p.add_argument("--from", dest="base", metavar="PROFILE",
                   help="new: the profile to copy (a hardware_profiles/ name or a YAML path)")
    p.add_argument("--out", metavar="PATH", help="new: the file to write, or a folder for NAME.yaml "
                                                 "(default: NAME.yaml here); an existing file is not overwritten")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import yaml

    from simulator.hardware.hardware import available_profiles, load_profile

    if args.action != "new" and (args.base or args.out):
        raise SpecsightInputError("--from" if args.base else "--out", args.base or args.out,
                                  "only with `profiles new NAME --from PROFILE`")
    if args.action == "new":
        return write_new(args)
    if args.action == "show":
        if not args.name:
            raise SpecsightInputError("profiles show NAME", None, "name a profile: " + ", ".join(available_profiles()))
        prof = load_profile(args.name)
        print(f"# {prof.describe()}", file=sys.stderr)
        if args.json:
            emit_json(prof.to_dict())
        else:
            print(yaml.safe_dump(prof.to_dict(), sort_keys=False, width=200), end="")
        return 0
    if args.name:
        raise SpecsightInputError("profiles list", args.name, "takes no name (profiles show NAME shows one)")
    rows = [load_profile(n) for n in available_profiles()]
    if args.json:
        emit_json([{"name": p.name, "memory_capacity_gb": p.memory_capacity_gb,
                    "memory_bandwidth_tb_s": p.memory_bandwidth_tb_s,
                    "peak_tflops": dict(p.peak_tflops), "calibrated": p.is_calibrated} for p in rows])
        return 0
    print(f"{'name':<28}{'memory GB':>10}{'HBM TB/s':>10}{'bf16 TFLOP/s':>14}{'fp8 TFLOP/s':>13}  interconnect")
    for p in rows:
        fp8 = p.peak_tflops.get("fp8")
        print(f"{p.name:<28}{p.memory_capacity_gb:>10g}{p.memory_bandwidth_tb_s:>10g}"
              f"{p.peak_tflops.get('bf16', float('nan')):>14g}"
              f"{(f'{fp8:g}' if fp8 else '-'):>13}  {p.interconnect.kind} {p.interconnect.bandwidth_gb_s:g} GB/s"
              + ("  [calibrated]" if p.is_calibrated else ""))
    return 0


NEW_NOTE = REPLACE_MARK + " carried over from {base}; cite this GPU's own source. Was: "


def profile_template(base: Any, name: str) -> dict[str, Any]:
    """A complete profile named `name` with every key of `base` (a HardwareProfile), each source
    prefixed by a note to replace it; the base's calibration block is not carried (it described
    another measurement)."""
    d = base.to_dict()
    d.pop("calibration", None)
    d["name"] = name
    d["description"] = f"{EDIT_MARK} describe this GPU (copied from {base.name}: {base.description})"
    d["sources"] = {k: NEW_NOTE.format(base=base.name) + str(v) for k, v in d["sources"].items()}
    return d


def write_new(args: argparse.Namespace) -> int:
    import yaml

    from simulator.hardware.hardware import load_profile

    if not args.name or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", args.name):
        raise SpecsightInputError("profiles new NAME", args.name,
                                  "a name of letters, digits, '.', '_' or '-' (the new profile's name)")
    if not args.base:
        raise SpecsightInputError("--from", None, "required with `profiles new`: the profile to copy, e.g. h100-sxm "
                                                  "(`specsight profiles` lists them)")
    base = load_profile(args.base)
    out = Path(args.out or f"{args.name}.yaml")
    if out.is_dir():
        out = out / f"{args.name}.yaml"
    if out.exists():
        raise SpecsightInputError("--out", str(out), "exists; name another file (profiles new never overwrites)")
    header = (f"# Hardware profile {args.name}, copied from {base.name} by `specsight profiles new`.\n"
              "# Edit every number for your GPU and replace each source (they still cite the base profile).\n"
              "# Use it in a scenario: hardware: {gpu: " + str(out) + "}\n"
              "# Optional keys (absent: the default), each with a source if given: efficiency.memory_gemv,\n"
              "# efficiency.memory_attention, efficiency.attention_blocks (per_sequence_head needs sm_count),\n"
              "# overheads.sampling_row_us, overheads.verify_round_us, sm_count (docs/calibration.md).\n")
    body = yaml.safe_dump(profile_template(base, args.name), sort_keys=False, width=120)
    try:
        out.write_text(header + body)
    except OSError as e:
        raise SpecsightInputError("--out", str(out), f"cannot be written: {e.strerror}") from None
    print(f"wrote {out} (from {base.name}; edit its numbers and sources)", file=sys.stderr)
    if args.json:
        emit_json({"path": str(out), "name": args.name, "base": base.name})
    return 0
