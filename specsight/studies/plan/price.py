"""What one GPU-hour costs a capacity plan, and where that price comes from.

In order: the caller's price (`--price-per-gpu-hour`), the scenario's `pricing.usd_per_gpu_hour`,
then the hardware profile's `price_usd_per_gpu_hour` (every shipped profile carries one, with its
source under `sources`: docs/scenarios.md, "Prices"); a disaggregated deployment's pools each at
their own profile's price. A scenario on fixed step costs has no profile, and a profile may carry
no price: then the plan needs one of the first two.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulator.common.errors import SpecsightInputError, require_range

FLAG = "--price-per-gpu-hour"
GIVE_ONE = f"pass {FLAG} or set pricing.usd_per_gpu_hour in the scenario"


def gpu_hour_price(source: Mapping[str, Any], given: float | None = None) -> tuple[float, str]:
    """(USD per GPU-hour, where it comes from in words) for the scenario mapping `source`."""
    from simulator.common.limits import MAX_PRICE

    if given is not None:
        return require_range(FLAG, given, 0.0, MAX_PRICE, lo_open=True), FLAG
    pricing = source.get("pricing") or {}
    if pricing.get("usd_per_gpu_hour") is not None:
        where = pricing.get("source") or "the scenario's pricing.usd_per_gpu_hour"
        return float(pricing["usd_per_gpu_hour"]), f"scenario: {where}"
    hw = source.get("hardware") or {}
    name = hw.get("profile") or hw.get("gpu")
    if hw.get("kind", "roofline") == "fixed" or not name:
        raise SpecsightInputError(FLAG, None, f"fixed step costs have no hardware profile to price: {GIVE_ONE}")
    if source.get("disaggregation"):
        return _pools_price(source)
    return _profile_price(str(name))


def _profile_price(name: str) -> tuple[float, str]:
    from simulator.hardware.hardware import load_profile
    prof = load_profile(name)
    if prof.price_usd_per_gpu_hour is None:
        raise SpecsightInputError(FLAG, None, f"hardware profile {prof.name} carries no price_usd_per_gpu_hour: "
                                              f"{GIVE_ONE}")
    return float(prof.price_usd_per_gpu_hour), f"profile {prof.name}: {prof.sources.get('price_usd_per_gpu_hour', '')}"


def _pools_price(source: Mapping[str, Any]) -> tuple[float, str]:
    """A disaggregated deployment's price per GPU-hour: each pool's GPUs (instances x tp) at its
    own profile's price (disaggregation.<pool>.gpu, else hardware.gpu; hardware.profile replaces
    both, as in the simulation), averaged over the xPyD unit's GPUs, so that GPUs x price is the
    sum over the pools."""
    hw, d = source.get("hardware") or {}, source["disaggregation"]
    gpus, usd, where = 0, 0.0, []
    for pool in ("prefill", "decode"):
        p = d.get(pool) or {}
        name = hw.get("profile") or p.get("gpu") or hw.get("gpu")
        n = int(p.get("instances", 1)) * int(p.get("tp") or hw.get("tp", 1))
        price, src = _profile_price(str(name))
        gpus, usd = gpus + n, usd + n * price
        where.append((pool, n, price, src))
    if where[0][3] == where[1][3]:
        return usd / gpus, where[0][3]
    return usd / gpus, "; ".join(f"{pool} ({n} GPUs at ${price:g}): {src}" for pool, n, price, src in where)


def without_pricing(source: Mapping[str, Any]) -> dict[str, Any]:
    """The scenario less its pricing block: what the probes simulate (a price changes no result,
    so probes priced differently share their points)."""
    return {k: v for k, v in source.items() if k != "pricing"}
