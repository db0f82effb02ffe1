"""A scenario's `hardware:` block: where the model runs (a GPU profile priced by the cost model, or
fixed step times), its parallel layout and dtypes; the dataclass and its schema section."""
from __future__ import annotations

from dataclasses import dataclass

from ..common.errors import SpecsightInputError, closest_names, require_int, require_range
from ..common.limits import MAX_REPLICAS, MAX_SECONDS, MAX_TP, POS, path_field
from ..common.schema import Bool, Float, Int, Section, Str
from ..hardware.hardware import DTYPE_BYTES

HARDWARE_KINDS = ("roofline", "fixed")


@dataclass(frozen=True)
class HardwareSpec:
    """Where the model runs: a GPU profile (roofline cost model) or fixed per-step costs."""
    kind: str = "roofline"              # "roofline": the cost model; "fixed": constant step times
    gpu: str | None = None              # catalog name (hardware_profiles/<gpu>.yaml) or a YAML path
    profile: str | None = None          # a calibrated profile (name or path); replaces `gpu`
    tp: int = 1                         # tensor-parallel GPUs per replica
    ep: int = 1                         # expert-parallel groups of the routed experts (SGLang --ep-size)
    dp_attention: bool = False          # attention data-parallel over the tp GPUs (SGLang --enable-dp-attention)
    replicas: int = 1                   # replicas behind the router
    dtype: str = "bf16"                 # weight / compute dtype
    kv_dtype: str | None = None         # KV-cache dtype (default: dtype, bf16 for fp8 weights)
    target_step_s: float | None = None  # fixed: seconds per target pass (any batch, any content)
    draft_step_s: float = 0.0           # fixed: seconds per draft step (K steps per round)

    def __post_init__(self) -> None:
        w = "hardware"
        if self.kind not in HARDWARE_KINDS:
            raise SpecsightInputError(f"{w}.kind", self.kind, closest_names(str(self.kind), HARDWARE_KINDS))
        require_int(f"{w}.tp", self.tp, lo=1)
        require_int(f"{w}.replicas", self.replicas, lo=1)
        require_int(f"{w}.ep", self.ep, lo=1)
        if self.tp % self.ep:
            raise SpecsightInputError(f"{w}.ep", self.ep, f"a divisor of tp ({self.tp})")
        if self.dp_attention and self.ep not in (1, self.tp):
            raise SpecsightInputError(f"{w}.ep", self.ep, f"1 or tp ({self.tp}) with dp_attention "
                                                          "(simulator/models/moe_parallel.py: the allowed layouts)")
        if self.kind == "fixed":
            if self.target_step_s is None:
                raise SpecsightInputError(f"{w}.target_step_s", None,
                                          "required for kind fixed (seconds per target pass)")
            require_range(f"{w}.target_step_s", self.target_step_s, 0.0, lo_open=True)
            require_range(f"{w}.draft_step_s", self.draft_step_s, 0.0)
            if self.ep != 1 or self.dp_attention:
                raise SpecsightInputError(f"{w}.ep", self.ep, "1 (and dp_attention false) with kind: fixed")
        else:
            if not (self.gpu or self.profile):
                raise SpecsightInputError(f"{w}.gpu", None, "required: a hardware_profiles/ name or a profile path "
                                                              "(or kind: fixed with target_step_s)")
            for key in ("target_step_s",):
                if getattr(self, key) is not None:
                    raise SpecsightInputError(f"{w}.{key}", getattr(self, key), "only meaningful with kind: fixed")
            for key in ("dtype", "kv_dtype"):
                v = getattr(self, key)
                if v is not None and v not in DTYPE_BYTES:
                    raise SpecsightInputError(f"{w}.{key}", v, f"one of {', '.join(DTYPE_BYTES)}")

    @property
    def is_fixed(self) -> bool:
        return self.kind == "fixed"


HARDWARE = Section(doc="where the model runs", keys={
    "kind": Str(doc="roofline: the cost model on a GPU profile; fixed: constant step times",
                choices=HARDWARE_KINDS, default="roofline"),
    "gpu": path_field("hardware_profiles/<gpu>.yaml name, or a YAML path (required for roofline)", nullable=True),
    "profile": path_field("a calibrated profile (name or path); replaces gpu", nullable=True),
    "tp": Int(doc="GPUs of each replica: its tensor-parallel degree (see ep, dp_attention)", unit="GPUs", lo=1,
              hi=MAX_TP, default=1),
    "ep": Int(doc="expert-parallel degree of the routed experts: divides tp and the experts; tp with "
                  "dp_attention (SGLang --ep-size)", unit="GPUs", lo=1, hi=MAX_TP, default=1),
    "dp_attention": Bool(doc="attention data-parallel over the tp GPUs, each holding its own requests' KV; "
                             "needs ep = tp on a MoE model (SGLang --enable-dp-attention)", default=False),
    "replicas": Int(doc="replicas behind the router", lo=1, hi=MAX_REPLICAS, default=1),
    "dtype": Str(doc="weight and compute dtype", choices=tuple(DTYPE_BYTES), default="bf16"),
    "kv_dtype": Str(doc="KV-cache dtype (default: dtype; bf16 for fp8 weights)", choices=tuple(DTYPE_BYTES),
                    nullable=True),
    "target_step_s": Float(doc="fixed: seconds per target pass (required for fixed)", unit="s", hi=MAX_SECONDS,
                           **POS, nullable=True),
    "draft_step_s": Float(doc="fixed: seconds per draft step", unit="s", lo=0.0, hi=MAX_SECONDS, default=0.0),
})
