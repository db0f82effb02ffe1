"""`specsight profiles [show NAME]`: the hardware profiles (hardware_profiles/), listed or one shown."""
from __future__ import annotations

import argparse
import sys

from simulator.errors import SpecsightInputError

from .args import add_json
from .emit import emit_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profiles", help="list hardware profiles, or show one")
    p.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    p.add_argument("name", nargs="?")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import yaml

    from simulator.hardware import available_profiles, load_profile

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
