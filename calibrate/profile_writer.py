"""Write a calibrated hardware profile: the base profile's YAML with the fitted and measured fields.

The file has the schema of hardware_profiles/*.yaml (name = file stem) plus a `calibration`
record; every replaced number carries its source. `write_profile` loads the file back with
simulator.hardware.hardware.load_profile, so a profile the simulator cannot use is never left behind.
`cpu_profile` is the base profile of a CPU, whose ceilings are measured (it has no datasheet).
"""
from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simulator.common.atomic_files import out_file, write_text
from simulator.hardware.hardware import HardwareProfile, load_profile

from .least_squares import PARAM_NAMES, RATES, with_params


def _round(x: Any, nd: int = 6) -> Any:
    """Round floats for YAML (so the file reads well); recurse into containers."""
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, str):
        return str(x)          # plain str (torch.__version__ is a str subclass YAML cannot write)
    if isinstance(x, float):
        return float(f"{x:.{nd}g}")
    if isinstance(x, Mapping):
        return {str(k): _round(v, nd) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_round(v, nd) for v in x]
    if isinstance(x, np.generic):
        return _round(x.item(), nd)
    return x


def write_profile(path: str | Path, base: HardwareProfile, params: Mapping[str, float], *,
                  calibration: Mapping[str, Any], fit_source: str, description: str | None = None,
                  iteration_us: float | None = None, iteration_source: str | None = None,
                  sampling_row_us: float | None = None, sampling_row_source: str | None = None,
                  verify_round_us: float | None = None, verify_round_source: str | None = None,
                  peaks: Mapping[str, Any] | None = None, peak_sources: Mapping[str, str] | None = None,
                  interconnect: Mapping[str, float] | None = None, interconnect_source: str | None = None,
                  header: str = "", param_sources: Mapping[str, str] | None = None) -> HardwareProfile:
    """Write a calibrated profile (same schema as hardware_profiles/*.yaml, name = file stem),
    then load it back with simulator.hardware.hardware.load_profile to prove the simulator can use it.

    peaks: replaces datasheet figures (memory_bandwidth_tb_s, peak_tflops, memory_capacity_gb),
    e.g. measured CPU ceilings; each replaced number takes its source from peak_sources.
    param_sources: sources of fitted-field values that were measured, not fitted (default: fit_source)."""
    path = Path(path)
    d = base.to_dict()
    d["name"] = path.stem
    if description is not None:
        d["description"] = description
    sources = dict(d["sources"])
    for k, v in (peaks or {}).items():
        d[k] = dict(v) if isinstance(v, Mapping) else v
        for leaf in ([f"{k}.{kk}" for kk in v] if isinstance(v, Mapping) else [k]):
            sources[leaf] = (peak_sources or {}).get(leaf, "measured by specsight calibrate")
        if isinstance(v, Mapping):   # drop sources of dtypes no longer present
            for s in [s for s in sources if s.startswith(f"{k}.") and s.split(".", 1)[1] not in v]:
                del sources[s]
    d["efficiency"] = with_params(base, params).to_dict()["efficiency"]     # (to_dict drops the absent fields)
    d["overheads"] = {"kernel_launch_us": params["overheads.kernel_launch_us"],
                      "iteration_us": d["overheads"]["iteration_us"] if iteration_us is None else iteration_us}
    for key, value, source in (("sampling_row_us", sampling_row_us, sampling_row_source),
                               ("verify_round_us", verify_round_us, verify_round_source)):
        if value is not None:             # absent: no such term (the cost model's default)
            d["overheads"][key] = value
            sources[f"overheads.{key}"] = source or "measured by specsight calibrate"
        else:
            sources.pop(f"overheads.{key}", None)
    for k in PARAM_NAMES:
        if k not in RATES or params.get(k) is not None:
            sources[k] = (param_sources or {}).get(k, fit_source)
        else:
            sources.pop(k, None)
    if iteration_us is not None:
        sources["overheads.iteration_us"] = iteration_source or "measured by specsight calibrate"
    if interconnect is not None:
        d["interconnect"] = {**d["interconnect"], **interconnect}
        for k in interconnect:
            if k != "kind":
                sources[f"interconnect.{k}"] = interconnect_source or "fitted by specsight calibrate"
    d["sources"] = sources
    cal = {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), **calibration}
    cal["base_profile"] = cal.get("base_profile", base.name)
    d["calibration"] = cal
    d = _round(d)
    text = yaml.safe_dump(d, sort_keys=False, width=120, allow_unicode=True)
    out_file(path)                          # its folder made; a path in the way is one line naming --out
    write_text(path, (header.rstrip() + "\n" if header else "") + text)
    return load_profile(str(path))



def cpu_profile(name: str, env: Mapping[str, Any], peaks: Mapping[str, Any], dtype: str) -> HardwareProfile:
    """A base profile for a CPU whose ceilings were just measured (`calibrate.ceilings.measure_peaks`):
    env is `calibrate.machine.environment`'s record, peaks measure_peaks' result."""
    from simulator.hardware.hardware import Efficiency, Interconnect, Overheads
    try:
        ram_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError, AttributeError):
        ram_gb = 1.0
    who = f"measured by specsight calibrate on {env['device_name']}"
    bw = peaks["read_bytes_s"]
    return HardwareProfile(
        name=name, description=f"CPU: {env['device_name']}", vendor="cpu",
        memory_capacity_gb=round(ram_gb, 2), memory_bandwidth_tb_s=bw / 1e12,
        peak_tflops={dtype: peaks["matmul_flops_s"] / 1e12},
        interconnect=Interconnect("none", bw / 1e9, 0.0),
        efficiency=Efficiency(1.0, 1.0, 4.0), overheads=Overheads(0.0, 0.0),
        sources={"memory_capacity_gb": f"{who}: physical memory (os.sysconf)",
                 "memory_bandwidth_tb_s": (f"{who}: matrix-vector product over a "
                                           f"{peaks['read_buffer_bytes'] / 1e6:.0f} MB "
                                           f"fp32 buffer (the timed model's weight bytes), bytes read / fastest time, "
                                           f"the faster of two orientations: {peaks['read_kernel']}"),
                 f"peak_tflops.{dtype}": (f"{who}: best of square {dtype} matmuls "
                                          f"(fastest: {peaks['matmul_size']}^3), fastest time"),
                 "interconnect.bandwidth_gb_s": ("no interconnect (one CPU); placeholder = measured read bandwidth, "
                                                 "unused at tp = 1"),
                 "interconnect.latency_us": "no interconnect (one CPU); unused at tp = 1",
                 "efficiency.memory": "fit", "efficiency.compute": "fit", "efficiency.roofline_sharpness": "fit",
                 "overheads.kernel_launch_us": "fit", "overheads.iteration_us": "measured"})
