"""Weight formats: bytes per weight (block scales included) and the dtype a weight's matrix
products run in on a given GPU; per-part formats of a checkpoint (gpt-oss: routed experts MXFP4,
attention, router, embedding and LM head bf16).

Bits per weight, each element plus its share of the block scale:
    bf16, fp16       16
    fp8               8   (per-tensor or 128 x 128 block scales: well under 0.01 bit, not counted)
    mxfp4          4.25   4-bit E2M1 elements, one 8-bit E8M0 scale per block of 32 (OCP Microscaling
                          Formats (MX) Specification v1.0, 2023, MXFP4: block size 32, scale E8M0)
    nvfp4           4.5   4-bit E2M1 elements, one FP8 E4M3 scale per block of 16, plus one FP32
                          scale per tensor, not counted (NVIDIA, "Introducing NVFP4 for Efficient and
                          Accurate Low-Precision Inference", developer blog, 2025)
    int4        4.15625   INT4 weight-only, group size 128: per group of 128 input channels one fp16
                          scale and one 4-bit zero point (the GPTQ / AWQ checkpoint layout: qweight
                          and qzeros packed 8 per int32, scales fp16 [in / 128, out])

Compute: a product runs in the dtype both operands share. Weight-only formats (int4, mxfp4) are
dequantized to the activations in the kernel (W4A16: Marlin, gpt-oss's Triton/Marlin MoE paths),
so they run at the activation dtype's rate. NVFP4 checkpoints quantize activations too (W4A4:
NVIDIA's DeepSeek-R1-FP4 model card: "weights and activations of the linear operators within
transformer blocks are quantized to FP4"); where the profile lists an `fp4` peak (Blackwell,
`peak_tflops.fp4`) they run at it, elsewhere (Hopper and older have no FP4 tensor cores) as W4A16
at the activation dtype's rate. gpt-oss's MXFP4 experts are not trained for FP4 activations and
are priced W4A16 everywhere; Blackwell engines that quantize those activations to MXFP8 (W4A8)
are not modelled.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..common.errors import SpecsightInputError

if TYPE_CHECKING:
    from ..hardware.hardware import HardwareProfile
    from .model_spec import ModelSpec

WEIGHT_BITS = {"fp32": 32.0, "bf16": 16.0, "fp16": 16.0, "fp8": 8.0,
               "mxfp4": 4.0 + 8.0 / 32, "nvfp4": 4.0 + 8.0 / 16, "int4": 4.0 + (16.0 + 4.0) / 128}
FOUR_BIT_FORMATS = ("mxfp4", "nvfp4", "int4")
# The parts of a checkpoint a format can be set for. "attention": the token mixers' projections
# (softmax and linear attention); "mlp": dense MLPs, shared experts, the router and a head's fusion
# projections; "experts": routed experts; "embedding", "lm_head". Norms keep the model dtype.
WEIGHT_PARTS = ("attention", "mlp", "experts", "embedding", "lm_head")
PEAK_FP4 = "fp4"               # the profile key of the FP4 tensor-core rate (peak_tflops.fp4)


def bytes_per_weight(fmt: str) -> float:
    """Bytes one weight takes in `fmt`, its block scales included (WEIGHT_BITS / 8)."""
    if fmt not in WEIGHT_BITS:
        raise SpecsightInputError("weight format", fmt, f"one of {', '.join(WEIGHT_BITS)}")
    return WEIGHT_BITS[fmt] / 8


def compute_dtype(fmt: str, activation_dtype: str, peak_dtypes: tuple[str, ...] | frozenset) -> str:
    """The peak_tflops key a product with `fmt` weights runs at: the format itself for the
    activation-precision formats, fp4 for NVFP4 where the profile has an FP4 rate, else the
    activation dtype (W4A16)."""
    if fmt not in FOUR_BIT_FORMATS:
        return activation_dtype
    if fmt == "nvfp4" and PEAK_FP4 in peak_dtypes:
        return PEAK_FP4
    return activation_dtype


def _check_parts(formats: Mapping[str, Any], where: str) -> dict[str, str]:
    if not isinstance(formats, Mapping):
        raise SpecsightInputError(where, formats, f"a mapping of {', '.join(WEIGHT_PARTS)} to a weight format")
    out = {}
    for part, fmt in formats.items():
        if part not in WEIGHT_PARTS:
            raise SpecsightInputError(f"{where}.{part}", fmt, f"a part: one of {', '.join(WEIGHT_PARTS)}")
        if fmt not in WEIGHT_BITS:
            raise SpecsightInputError(f"{where}.{part}", fmt, f"one of {', '.join(WEIGHT_BITS)}")
        out[str(part)] = str(fmt)
    return out


def formats_from_config(cfg: Mapping[str, Any], where: str) -> tuple[tuple[str, str], ...]:
    """Per-part formats a config.json states: its `specsight.weights` mapping (part -> format), else
    its published `quantization_config` where it names a 4-bit format:
      quant_method mxfp4 (gpt-oss): routed experts MXFP4 (its modules_to_not_convert keep attention,
        router, embedding and LM head in bf16);
      quant_method modelopt, quant_algo NVFP4 (NVIDIA's FP4 checkpoints): the linear layers of the
        transformer blocks (attention, MLP, experts), attention kept when exclude_modules names self_attn;
      quant_method gptq / awq, bits 4: the linear layers of the transformer blocks.
    Other quantization configs (fp8 ones) are left to the scenario's dtype. () when none applies."""
    meta = cfg.get("specsight")
    if isinstance(meta, Mapping) and meta.get("weights") is not None:
        return tuple(sorted(_check_parts(meta["weights"], f"{where}: specsight.weights").items()))
    q = cfg.get("quantization_config")
    if not isinstance(q, Mapping):
        return ()
    method = str(q.get("quant_method", "")).lower()
    if method == "mxfp4":
        return (("experts", "mxfp4"),)
    if method == "modelopt" and str(q.get("quant_algo", "")).upper() == "NVFP4":
        excluded = " ".join(str(m) for m in (q.get("exclude_modules") or ()))
        parts = ("mlp", "experts") if "self_attn" in excluded else ("attention", "mlp", "experts")
        return tuple((p, "nvfp4") for p in sorted(parts))
    if method in ("gptq", "awq") and q.get("bits") == 4:
        return tuple((p, "int4") for p in sorted(("attention", "mlp", "experts")))
    return ()


@dataclass(frozen=True)
class WeightCosts:
    """What per-part formats change in a cost model (per tensor-parallel shard): bytes at each part's
    format; FLOPs at the rate of the dtype its products run in, carried as FLOPs at the dtype's rate
    (x dtype peak / part's peak: `*_slow`), so the pass-time arithmetic is unchanged."""
    linear_bytes: float            # attention, MLP (shared experts, router, head projections), norms
    linear_flops_per_token: float  # their FLOPs at the dtype's rate
    linear_flops_shown: float      # true FLOPs / linear_flops_per_token
    expert_bytes: float            # one routed expert
    experts_slow: float            # dtype peak / the experts' peak
    lm_head_bytes: float
    head_slow: float
    weight_bytes: float            # every weight the GPU holds


def weight_costs(m: ModelSpec, hw: HardwareProfile, tp: int, dtype: str) -> WeightCosts:
    """The weight costs of `m` in its per-part formats (ModelSpec.weight_formats; the others and the
    norms in `dtype`), on `hw`, per shard of `tp`."""
    act = dtype if dtype in ("fp32", "fp16") else "bf16"      # what W4A16 kernels compute in
    peak = hw.peak_flops(dtype)

    def fmt(part: str) -> str:
        return m.weight_format(part, dtype)

    def slow(part: str) -> float:
        return peak / hw.peak_flops(compute_dtype(fmt(part), act, tuple(hw.peak_tflops)))

    parts = m.params_by_part()
    norm_b = bytes_per_weight(dtype)
    norms = m.num_layers * m.norm_params
    lin_true = parts["attention"] + parts["mlp"] + norms
    lin_equiv = parts["attention"] * slow("attention") + parts["mlp"] * slow("mlp") + norms
    return WeightCosts(
        linear_bytes=(parts["attention"] * bytes_per_weight(fmt("attention"))
                      + parts["mlp"] * bytes_per_weight(fmt("mlp")) + norms * norm_b) / tp,
        linear_flops_per_token=2.0 * lin_equiv / tp,
        linear_flops_shown=lin_true / lin_equiv if lin_equiv else 1.0,
        expert_bytes=m.expert_params * bytes_per_weight(fmt("experts")) / tp,
        experts_slow=slow("experts"),
        lm_head_bytes=m.lm_head_params * bytes_per_weight(fmt("lm_head")) / tp,
        head_slow=slow("lm_head"),
        weight_bytes=sum(n * (norm_b if part == "norm" else bytes_per_weight(fmt(part)))
                         for part, n in parts.items()) / tp)
