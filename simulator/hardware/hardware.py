"""GPU hardware profiles: one YAML file per GPU in hardware_profiles/, every number with its source.

A profile carries datasheet ceilings (memory, bandwidth, dense peak FLOP/s per dtype,
interconnect) and the defaults the cost model needs on top of them: the achieved fractions
of peak and the fixed overheads. A calibrated profile (written by `specsight calibrate`)
has the same fields plus a `calibration` block with its provenance; it overrides the
datasheet defaults only when it is named explicitly, and says so (`describe()`).
"""
from __future__ import annotations

import numbers
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.errors import SpecsightInputError, SpecsightWarning, closest_names, require_range
from ..common.input_files import read_yaml, usable_file
from ..common.limits import MAX_PRICE
from ..common.paths import HARDWARE_DIR, REPO_ROOT
from ..common.schema import check_keys, check_shape

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
MAX_PRICE_USD_PER_GPU_HOUR = MAX_PRICE   # no GPU rents for more (keeps every cost finite)
# Lower limits: far below any device (a CPU's DDR streams >= 10 GB/s, one core >= 1 GFLOP/s, 1 Gb
# Ethernet 0.125 GB/s), so every pass time stays a few days at most and its soft-roofline power
# t^p finite (p <= MAX_SHARPNESS: t^32 overflows float64 only past 4e9 s).
MIN_MEMORY_TB_S = 1e-4           # 0.1 GB/s
MIN_TFLOPS = 1e-4                # 0.1 GFLOP/s
MIN_LINK_GB_S = 1e-3             # 1 MB/s per direction
MAX_SHARPNESS = 32.0             # roofline_sharpness (fits give 1 to 2.2; 32 is max() to 2 %)
# peak_tflops keys: the dtypes above, and fp4 (FP4 tensor cores, Blackwell: the rate NVFP4 weights and
# activations run at, simulator/models/weight_formats.py); fp4 is a compute rate only, not a model dtype
PEAK_DTYPES = (*DTYPE_BYTES, "fp4")
ATTENTION_BLOCKS = ("split_kv", "per_sequence_head")     # Efficiency.attention_blocks


@dataclass(frozen=True)
class Interconnect:
    kind: str
    bandwidth_gb_s: float  # per GPU, per direction: what a ring all-reduce can use
    latency_us: float      # one small-message all-reduce (the alpha of the alpha-beta model)
    gpus_per_node: int | None = None               # the NVLink domain (absent: one domain of any size)
    internode_bandwidth_gb_s: float | None = None  # per GPU, per direction, its NIC to other nodes
    internode_latency_us: float | None = None      # one small collective across nodes


INTERNODE_KEYS = ("gpus_per_node", "internode_bandwidth_gb_s", "internode_latency_us")   # Interconnect's optional


def _check_internode(name: str, ic: Interconnect) -> None:
    """The optional inter-node keys: all three or none; gpus_per_node a whole number >= 1."""
    values = [getattr(ic, k) for k in INTERNODE_KEYS]
    if any(v is None for v in values) and any(v is not None for v in values):
        raise SpecsightInputError(f"{name}.interconnect", {k: v for k, v in zip(INTERNODE_KEYS, values)},
                                  f"all of {', '.join(INTERNODE_KEYS)}, or none (one NVLink domain)")
    g = ic.gpus_per_node
    if g is not None and (isinstance(g, bool) or not isinstance(g, numbers.Integral) or not 1 <= g <= 10 ** 6):
        raise SpecsightInputError(f"{name}.interconnect.gpus_per_node", g, "a whole number >= 1 (or absent)")
    _optional_number(f"{name}.interconnect.internode_bandwidth_gb_s", ic.internode_bandwidth_gb_s,
                     f"a number in [{MIN_LINK_GB_S:g}, 1e7] (or absent)", MIN_LINK_GB_S, 1e7)
    _optional_number(f"{name}.interconnect.internode_latency_us", ic.internode_latency_us,
                     "a number >= 0 (or absent)", 0, 1e9)


def _optional_number(field: str, value: Any, allowed: str, lo: float, hi: float | None = None,
                     lo_open: bool = False) -> None:
    """An optional profile number: absent (None), or a real number in range; a string or a bool
    is an error (float() would take "0.5" and True)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SpecsightInputError(field, value, "must be " + allowed)
    require_range(field, value, lo, hi, lo_open=lo_open)


def require_sm_count(name: str, efficiency: Efficiency, sm_count: int | None) -> None:
    """A profile (or a CostModel's efficiency override) whose attention runs per (sequence, KV
    head) must say how many multiprocessors run the blocks."""
    if efficiency.attention_blocks == "per_sequence_head" and sm_count is None:
        raise SpecsightInputError(f"{name}.sm_count", None,
                                  "a whole number >= 1: efficiency.attention_blocks per_sequence_head needs it")


@dataclass(frozen=True)
class Efficiency:
    """Achieved fractions of the datasheet peaks, and how sharply the roofline turns.

    Each op class takes (t_compute^p + t_memory^p)^(1/p) with p = roofline_sharpness:
    p -> infinity is the classic max() roofline; a finite p rounds the knee where a GEMM
    is neither purely bandwidth- nor compute-bound (where speculation's verify pass lives).

    memory_gemv: the fraction of the bandwidth the weight streaming reaches when a pass holds
    exactly one token, so the library runs a matrix-vector kernel (cuBLAS/MKL GEMV) instead of
    a matrix-matrix one (GEMM, with tiling or packing). None means "same as memory".

    memory_attention: the fraction of the bandwidth attention reaches streaming the KV cache (its
    own kernels: each query reads its sequence's cache, not a shared weight matrix). None means
    "same as memory".

    attention_blocks: how the attention kernel spreads a pass's KV reads over the device.
    "split_kv" (the default): the keys of each sequence are split over thread blocks (flash-decoding,
    paged attention v2, FlashInfer), so the device fills at any batch and the reads take
    bytes / bandwidth. "per_sequence_head": one thread block per (sequence, KV head) streams all of
    that head's keys (torch's scaled_dot_product_attention with a mask, on its memory-efficient
    kernel): B x H_kv blocks run in ceil(B H_kv / sm_count) waves, each block at sm_count-th of the
    bandwidth, so at small batch and long context most multiprocessors idle
    (CostModel.kv_wave_factor). Needs HardwareProfile.sm_count.
    """
    memory: float
    compute: float
    roofline_sharpness: float = 4.0
    memory_gemv: float | None = None
    memory_attention: float | None = None
    attention_blocks: str = "split_kv"

    def __post_init__(self) -> None:
        if self.attention_blocks not in ATTENTION_BLOCKS:
            raise SpecsightInputError("efficiency.attention_blocks", self.attention_blocks,
                                      f"one of {', '.join(ATTENTION_BLOCKS)}")
        _optional_number("efficiency.memory_gemv", self.memory_gemv, "a number in (0, 1] (or absent: same as memory)",
                         0, 1, lo_open=True)
        _optional_number("efficiency.memory_attention", self.memory_attention,
                         "a number in (0, 1] (or absent: same as memory)", 0, 1, lo_open=True)

    @property
    def memory_one_token(self) -> float:
        """The bandwidth fraction of a one-token (matrix-vector) pass's weight streaming."""
        return self.memory if self.memory_gemv is None else self.memory_gemv

    @property
    def memory_kv(self) -> float:
        """The bandwidth fraction of attention's KV-cache reads."""
        return self.memory if self.memory_attention is None else self.memory_attention


@dataclass(frozen=True)
class Overheads:
    kernel_launch_us: float  # per kernel launched in a forward pass
    iteration_us: float      # per engine iteration (host scheduling, input preparation)
    # Host sampling time per probability row a pass hands to the sampler (one per logit position:
    # a draft step's B rows are drawn from, a verify pass's B (K + 1) rows are read by the
    # acceptance kernel), on top of the LM head and softmax the pass itself is charged for.
    # Measured by `specsight calibrate` (host points); absent (None) = 0, every datasheet profile.
    sampling_row_us: float | None = None
    # Fixed time of a speculative round's verification step (the acceptance kernel's own launches
    # or host calls, whatever the batch), charged once per round with K > 0, on top of the rows.
    # Measured by `specsight calibrate` (host points); absent (None) = 0, every datasheet profile.
    verify_round_us: float | None = None


@dataclass(frozen=True)
class HardwareProfile:
    name: str
    description: str
    vendor: str
    memory_capacity_gb: float
    memory_bandwidth_tb_s: float
    peak_tflops: Mapping[str, float]
    interconnect: Interconnect
    efficiency: Efficiency
    overheads: Overheads
    sources: Mapping[str, str] = field(default_factory=dict)
    calibration: Mapping[str, Any] | None = None
    path: str | None = None
    # Streaming multiprocessors (a GPU) or parallel workers (a CPU: torch's threads) that run an
    # attention kernel's thread blocks; needed by efficiency.attention_blocks = per_sequence_head.
    sm_count: int | None = None
    # USD per GPU-hour, for capacity plans (specsight plan); its source under `sources` says whose
    # price, which kind (on-demand, serverless) and when. Absent: plans need a price given to them.
    price_usd_per_gpu_hour: float | None = None

    def __post_init__(self) -> None:
        # upper limits: no device has more (they keep every derived figure finite)
        require_range(f"{self.name}.memory_capacity_gb", self.memory_capacity_gb, 0, 1e5, lo_open=True)
        require_range(f"{self.name}.memory_bandwidth_tb_s", self.memory_bandwidth_tb_s, MIN_MEMORY_TB_S, 1e4)
        for dt, v in self.peak_tflops.items():
            if dt not in PEAK_DTYPES:
                raise SpecsightInputError(f"{self.name}.peak_tflops.{dt}", v,
                                          f"dtype must be one of {sorted(PEAK_DTYPES)}")
            require_range(f"{self.name}.peak_tflops.{dt}", v, MIN_TFLOPS, 1e7)
        require_range(f"{self.name}.efficiency.memory", self.efficiency.memory, 0, 1, lo_open=True)
        require_range(f"{self.name}.efficiency.compute", self.efficiency.compute, 0, 1, lo_open=True)
        require_range(f"{self.name}.efficiency.roofline_sharpness", self.efficiency.roofline_sharpness, 1,
                      MAX_SHARPNESS)
        require_range(f"{self.name}.interconnect.bandwidth_gb_s", self.interconnect.bandwidth_gb_s, MIN_LINK_GB_S,
                      1e7)
        require_range(f"{self.name}.interconnect.latency_us", self.interconnect.latency_us, 0, 1e9)
        _check_internode(self.name, self.interconnect)
        require_range(f"{self.name}.overheads.kernel_launch_us", self.overheads.kernel_launch_us, 0, 1e9)
        require_range(f"{self.name}.overheads.iteration_us", self.overheads.iteration_us, 0, 1e9)
        for key in ("sampling_row_us", "verify_round_us"):
            _optional_number(f"{self.name}.overheads.{key}", getattr(self.overheads, key),
                             "a number >= 0 (or absent: 0)", 0, 1e9)
        if self.sm_count is not None and (not isinstance(self.sm_count, numbers.Integral)
                                          or isinstance(self.sm_count, bool)
                                          or not 1 <= self.sm_count <= 10 ** 7):
            raise SpecsightInputError(f"{self.name}.sm_count", self.sm_count, "a whole number >= 1 (or absent)")
        require_sm_count(self.name, self.efficiency, self.sm_count)
        _optional_number(f"{self.name}.price_usd_per_gpu_hour", self.price_usd_per_gpu_hour,
                         "a number of USD per GPU-hour in (0, 1e6] (or absent)", 0, MAX_PRICE_USD_PER_GPU_HOUR,
                         lo_open=True)

    # Derived values in SI units.
    @property
    def memory_bytes(self) -> float:
        return self.memory_capacity_gb * 1e9

    @property
    def memory_bandwidth_bytes_s(self) -> float:
        return self.memory_bandwidth_tb_s * 1e12

    @property
    def interconnect_bytes_s(self) -> float:
        return self.interconnect.bandwidth_gb_s * 1e9

    def peak_flops(self, dtype: str) -> float:
        """Dense peak FLOP/s for `dtype`; an error naming the dtype(s) to set if this profile lacks it
        (a CPU-calibrated profile has fp32 only)."""
        if dtype not in self.peak_tflops:
            have = sorted(self.peak_tflops)
            fix = (f"set hardware.dtype={have[0]}" if len(have) == 1
                   else f"set hardware.dtype to one of {', '.join(have)}")
            raise SpecsightInputError("dtype", dtype,
                                      f"this profile ({self.name}) has peak figures for {', '.join(have)}: {fix} "
                                      "(`--dtype` on specsight cost)")
        return float(self.peak_tflops[dtype]) * 1e12

    @property
    def is_calibrated(self) -> bool:
        return self.calibration is not None

    def describe(self) -> str:
        """One line saying which profile and which fit the numbers come from."""
        if self.calibration:
            c = self.calibration
            e, o = self.efficiency, self.overheads
            held = (c.get("residuals") or {}).get("heldout_ape_median")
            rates = "" if e.memory_gemv is None else f", one-token (GEMV) memory {e.memory_gemv:.3g}"
            rates += "" if e.memory_attention is None else f", attention KV memory {e.memory_attention:.3g}"
            if e.attention_blocks != "split_kv":
                rates += f", attention {e.attention_blocks} over {self.sm_count} multiprocessors"
            fit = (f"fit: memory {e.memory:.3g}{rates}, compute {e.compute:.3g}, sharpness {e.roofline_sharpness:.3g}, "
                   f"launch {o.kernel_launch_us:.4g} us, iteration {o.iteration_us:.4g} us"
                   + (f", sampling {o.sampling_row_us:.3g} us per row" if o.sampling_row_us is not None else "")
                   + (f", verify {o.verify_round_us:.3g} us per speculative round"
                      if o.verify_round_us is not None else "")
                   + (f", held-out median error {100 * float(held):.1f} %" if held is not None else ""))
            return (f"hardware profile {self.name} (CALIBRATED: {c.get('method', 'fit')} on "
                    f"{c.get('device_name', '?')} {c.get('date', '')}; {fit}; overrides the defaults of base profile "
                    f"{c.get('base_profile', '?')}; file {self._shown_path()})")
        return f"hardware profile {self.name} (datasheet defaults; file {self._shown_path()})"

    def _shown_path(self) -> str:
        """The profile's file, relative to the repository when it lies inside it."""
        if self.path is None:
            return "none"
        try:
            return str(Path(self.path).resolve().relative_to(REPO_ROOT))
        except ValueError:
            return str(self.path)

    def to_dict(self) -> dict[str, Any]:
        d = {
            "name": self.name, "description": self.description, "vendor": self.vendor,
            "memory_capacity_gb": self.memory_capacity_gb,
            "memory_bandwidth_tb_s": self.memory_bandwidth_tb_s,
            "peak_tflops": dict(self.peak_tflops),
            "interconnect": {k: v for k, v in vars(self.interconnect).items() if v is not None},  # absent: one domain
            # memory_gemv, memory_attention: absent = memory; attention_blocks: absent = split_kv
            "efficiency": {k: v for k, v in vars(self.efficiency).items()
                           if v is not None and not (k == "attention_blocks" and v == "split_kv")},
            "overheads": {k: v for k, v in vars(self.overheads).items() if v is not None},  # optional terms: absent = 0
            **({"sm_count": self.sm_count} if self.sm_count is not None else {}),
            **({"price_usd_per_gpu_hour": self.price_usd_per_gpu_hour}
               if self.price_usd_per_gpu_hour is not None else {}),
            "sources": dict(self.sources),
        }
        if self.calibration is not None:
            d["calibration"] = dict(self.calibration)
        return d


def _numeric_leaves(d: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out += _numeric_leaves(v, key + ".")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(key)
    return out


REQUIRED_KEYS = ("name", "memory_capacity_gb", "memory_bandwidth_tb_s", "peak_tflops", "interconnect.kind",
                 "interconnect.bandwidth_gb_s", "interconnect.latency_us", "efficiency.memory", "efficiency.compute",
                 "overheads.kernel_launch_us", "overheads.iteration_us")
_SOURCED_SECTIONS = ("memory_capacity_gb", "memory_bandwidth_tb_s", "peak_tflops", "interconnect", "efficiency",
                     "overheads", "sm_count", "price_usd_per_gpu_hour")


def incomplete_keys(raw: Mapping[str, Any], sources: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """Every problem of completeness at once: the required keys that are missing, and the numbers
    without a source string under `sources` (a profile's numbers are all cited)."""
    missing = []
    for key in REQUIRED_KEYS:
        section, _, leaf = key.rpartition(".")
        holder = raw.get(section) if section else raw
        if not isinstance(holder, Mapping) or leaf not in holder:
            missing.append(key)
    unsourced = [k for k in _numeric_leaves({k: raw[k] for k in _SOURCED_SECTIONS if k in raw})
                 if not str(sources.get(k, "")).strip()]
    return missing, unsourced


def profile_from_dict(raw: Mapping[str, Any], where: str) -> HardwareProfile:
    """Build and validate a profile from parsed YAML; `where` names the file in errors."""
    if not isinstance(raw, Mapping):
        raise SpecsightInputError(where, type(raw).__name__, "a hardware profile must be a YAML mapping")
    check_shape(raw, where)
    check_keys(raw, where)

    sources = raw.get("sources") or {}
    if not isinstance(sources, Mapping):
        raise SpecsightInputError(f"{where}: sources", sources, "must map dotted field names to source strings")
    missing, unsourced = incomplete_keys(raw, sources)
    if missing or unsourced:
        parts = ([f"required keys missing: {', '.join(missing)}"] if missing else []) + \
            ([f"numbers without a source string under sources: {', '.join(unsourced)}"] if unsourced else [])
        n = len(missing) + len(unsourced)
        raise SpecsightInputError(where, f"{n} {'key' if n == 1 else 'keys'} missing or unsourced",
                                  "; ".join(parts) + " (`specsight profiles new NAME --from h100-sxm` writes a "
                                  "complete profile to edit)")

    def get(key: str, kind: type | tuple = (int, float)) -> Any:
        v = raw[key]
        if not isinstance(v, kind) or isinstance(v, bool):
            raise SpecsightInputError(f"{where}: {key}", v,
                                      f"must be {getattr(kind, '__name__', 'a number or mapping')}")
        return v

    def sub(section: str, keys: tuple[str, ...], optional: Mapping[str, Any] = {}) -> dict[str, Any]:
        m = get(section, Mapping)
        out = {k: m[k] for k in keys}
        for k, default in optional.items():
            out[k] = m.get(k, default)
        return out

    def num(path: str, v: Any) -> float:
        """A profile number as a float: a string, a boolean or an integer too large for a float is refused."""
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise SpecsightInputError(f"{where}: {path}", v, "must be a number")
        try:
            return float(v)
        except OverflowError:
            raise SpecsightInputError(f"{where}: {path}", v, "must be a finite number") from None

    ic = sub("interconnect", ("kind", "bandwidth_gb_s", "latency_us"), dict.fromkeys(INTERNODE_KEYS))
    eff = sub("efficiency", ("memory", "compute"), {"roofline_sharpness": 4.0, "memory_gemv": None,
                                                   "memory_attention": None, "attention_blocks": "split_kv"})
    ov = sub("overheads", ("kernel_launch_us", "iteration_us"), {"sampling_row_us": None, "verify_round_us": None})
    try:
        return HardwareProfile(
            name=str(get("name", str)),
            description=str(raw.get("description", "")),
            vendor=str(raw.get("vendor", "")),
            memory_capacity_gb=num("memory_capacity_gb", get("memory_capacity_gb")),
            memory_bandwidth_tb_s=num("memory_bandwidth_tb_s", get("memory_bandwidth_tb_s")),
            peak_tflops={str(k): num(f"peak_tflops.{k}", v) for k, v in get("peak_tflops", Mapping).items()},
            interconnect=Interconnect(str(ic["kind"]), num("interconnect.bandwidth_gb_s", ic["bandwidth_gb_s"]),
                                      num("interconnect.latency_us", ic["latency_us"]),
                                      *(ic[k] for k in INTERNODE_KEYS)),   # type-checked by HardwareProfile
            efficiency=Efficiency(num("efficiency.memory", eff["memory"]), num("efficiency.compute", eff["compute"]),
                                  num("efficiency.roofline_sharpness", eff["roofline_sharpness"]),
                                  eff["memory_gemv"], eff["memory_attention"],    # type-checked by Efficiency
                                  str(eff["attention_blocks"])),
            overheads=Overheads(num("overheads.kernel_launch_us", ov["kernel_launch_us"]),
                                num("overheads.iteration_us", ov["iteration_us"]),
                                ov["sampling_row_us"], ov["verify_round_us"]),   # type-checked by HardwareProfile
            sources={str(k): str(v) for k, v in sources.items()},
            calibration=raw.get("calibration"),
            path=where,
            sm_count=raw.get("sm_count"),                                       # type-checked by HardwareProfile
            price_usd_per_gpu_hour=raw.get("price_usd_per_gpu_hour"),           # type-checked by HardwareProfile
        )
    except (TypeError, ValueError, OverflowError) as e:
        if isinstance(e, SpecsightInputError):
            raise SpecsightInputError(f"{where}: {e.field}", e.value, e.allowed) from None
        raise SpecsightInputError(where, "?", f"malformed profile: {e}") from None


def available_profiles() -> list[str]:
    return sorted(p.stem for p in HARDWARE_DIR.glob("*.yaml"))


def load_profile(name_or_path: str) -> HardwareProfile:
    """A profile by catalog name (file stem in hardware_profiles/) or by path to a YAML file."""
    p = Path(str(name_or_path))
    if p.suffix in (".yaml", ".yml"):
        if usable_file(p) is None:
            read_yaml(p, "gpu", "profile")       # says why: missing, a directory, unreadable, a name too long
    else:
        p = HARDWARE_DIR / f"{name_or_path}.yaml"
        if usable_file(p) is None:
            raise SpecsightInputError("gpu", name_or_path, closest_names(str(name_or_path), available_profiles()))
    raw = read_yaml(p, str(p), "profile")
    prof = profile_from_dict(raw, str(p))
    if p.parent == HARDWARE_DIR and prof.name != p.stem:
        raise SpecsightInputError(f"{p}: name", prof.name, f"must equal the file stem {p.stem!r}")
    warn_unfinished(prof)
    return prof


REPLACE_MARK, EDIT_MARK = "REPLACE:", "EDIT:"      # what `specsight profiles new` leaves for the user to replace


def warn_unfinished(prof: HardwareProfile) -> None:
    """A profile `profiles new` wrote, not yet edited: warn while a source still says REPLACE: (its
    number is still the base GPU's) or the description EDIT:."""
    left = [k for k, v in prof.sources.items() if str(v).startswith(REPLACE_MARK)]
    if left or prof.description.startswith(EDIT_MARK):
        what = (f"{len(left)} source(s) still marked {REPLACE_MARK} (e.g. {left[0]}: its number is still the "
                f"base GPU's)" if left else "") + (" and " if left and prof.description.startswith(EDIT_MARK) else "") \
            + (f"its description still marked {EDIT_MARK}" if prof.description.startswith(EDIT_MARK) else "")
        warnings.warn(f"hardware profile {prof.name} ({prof.path}) is unfinished: {what}", SpecsightWarning,
                      stacklevel=3)
