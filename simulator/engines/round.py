"""One speculative round as an engine runs it: its passes, each with its model, batch shape and
CUDA-graph mode (`Pass`), and what every engine declares about itself (`EngineDef`).

An engine file (vllm.py, sglang.py, trtllm.py) subclasses EngineDef: which drafter methods it runs
(others are refused with an input error naming the engine), the passes of one round for B
sequences and K drafts (`passes`), its CUDA-graph sizes (cuda_graphs.py), where the host syncs,
whether its scheduler overlaps the host with the GPU (plain decoding and speculation apart), the
attention kernel class of a multi-token verify, and its defaults for the `engine:` block.
docs/engines.md tabulates every engine's round; tests/test_engines.py checks each against it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..common.errors import SpecsightInputError
from ..speculation.drafter_structure import DrafterStructure
from ..speculation.drafters import DrafterSpec
from .device import DeviceClass
from .host import HostModel, HostOverrides

GRAPH_MODES = ("full", "piecewise", "round", "eager")
# full: the whole pass replays one captured graph (padded to the captured size)
# piecewise: the layers replay captured pieces, attention runs eagerly between them (vLLM)
# round: the pass sits inside one graph that holds the whole round (TensorRT-LLM one-model)
# eager: every kernel launched from the host
ATTENTION_CLASSES = ("decode", "prefill", "prefill_tree")


@dataclass(frozen=True)
class Pass:
    """One forward pass of a round: `count` identical passes of `seqs` sequences x
    `tokens_per_seq` new tokens, `logits_per_seq` logit rows each, on the target or the draft."""
    name: str
    model: str                 # "target" | "draft"
    seqs: int
    tokens_per_seq: int
    logits_per_seq: int
    graph: str                 # GRAPH_MODES
    count: int = 1
    padded_tokens: int | None = None   # tokens the replayed graph computes (None: eager, no padding)
    eager_launches: int = 0            # kernels the host launches eagerly around each repeat (inputs, logits)

    @property
    def tokens(self) -> int:
        return self.seqs * self.tokens_per_seq


@dataclass(frozen=True)
class EngineLimits:
    """The `engine:` values an engine runs with (the scenario's, or the engine's defaults)."""
    max_num_seqs: int
    max_num_batched_tokens: int
    tp: int


class EngineDef:
    """What an engine declares (subclassed per engine; instances are per version)."""
    name = "?"
    versions: tuple[str, ...] = ()
    default_version = ""
    methods: tuple[str, ...] = ()
    trees = True
    host_overrides: HostOverrides | None = None     # an engine profile's constants (engine.profile)
    # device class -> {version: data/engine_host file stem} of host time measured on that device class
    measured_hosts: dict[str, dict[str, str]] = {}

    def __init__(self, version: str | None):
        v = self.default_version if version is None else str(version)
        if v not in self.versions:
            raise SpecsightInputError("engine.version", version, f"{self.name}: one of {', '.join(self.versions)}")
        self.version = v

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"

    # ---- what it runs ---------------------------------------------------------------------
    def supported_methods(self) -> tuple[str, ...]:
        return self.methods

    def check(self, spec: DrafterSpec | None, tp: int) -> None:
        """Refuse a drafter this engine does not run (an input error naming the engine)."""
        if spec is None or spec.num_speculative_tokens == 0:
            return
        ok = self.supported_methods()
        if spec.method not in ok:
            raise SpecsightInputError("drafter.method", spec.method,
                                      f"{self.label} runs {', '.join(ok)} (docs/engines.md)")
        if spec.is_tree and not self.tree_ok():
            raise SpecsightInputError("drafter.tree", True, f"{self.label} verifies chains only (docs/engines.md)")
        if spec.draft_tp is not None and spec.draft_tp != tp:
            raise SpecsightInputError("drafter.draft_tp", spec.draft_tp,
                                      f"{self.label} runs the drafter at the target's TP ({tp}) (docs/engines.md)")

    def tree_ok(self) -> bool:
        return self.trees

    def drafter_kv_transferred(self, spec: DrafterSpec) -> bool:
        """Under prefill/decode disaggregation, whether the drafter's KV of the prompt crosses the
        link with the target's (the prefill instance runs the drafter over the prompt), rather than
        being rebuilt on the decode instance (its drafter ingests the whole context there). Each
        engine's rule and its sources: docs/simulator.md, Disaggregated serving."""
        return True

    def check_structure(self, structure: DrafterStructure, model: str | None) -> None:
        """Refuse a drafter structure this engine version predates: an MTP assistant that reads the
        target's KV (Gemma 4's, May 2026) and MTP steps sharing the first step's sparse index
        (GLM-5.2, June 2026; vLLM's index_share_for_mtp_iteration) came after every modelled version
        (vLLM v0.14.0 Jan 2026, SGLang v0.5.x, TensorRT-LLM 1.1) [I, from the dates]. An MTP
        checkpoint of M modules runs the same round as one module reused (TensorRT-LLM MTP-Vanilla
        and MTP-Eagle, ../shared/reference/engines.md §1): accepted wherever mtp is."""
        if structure.method == "mtp" and structure.kv_source == "target":
            raise SpecsightInputError("drafter.model", model, "an MTP assistant that reads the target's KV: "
                                      f"{self.label} predates assistant drafters (docs/engines.md)")
        if structure.index_share:
            raise SpecsightInputError("drafter.model", model, f"index_share_for_mtp_iteration: true: {self.label} "
                                      "predates MTP index sharing (docs/engines.md)")

    def gpu_modelled(self) -> bool:
        """Whether this version's round is modelled on a GPU (a version measured on a CPU only is not)."""
        on_other = any(self.version in vs for d, vs in self.measured_hosts.items() if d != "gpu")
        return not on_other or self.version in self.measured_hosts.get("gpu", {})

    def measured_host_name(self, device: DeviceClass) -> str | None:
        """The data/engine_host file stem of this version's host time measured on `device`, or None.
        A device class whose host the engine's built-in constants do not describe (a CPU: no
        overlap, no graphs) needs one: an input error names the versions that have one."""
        by_version = self.measured_hosts.get(device.name, {})
        if device.name == "gpu":
            if not self.gpu_modelled():
                raise SpecsightInputError("engine.version", self.version,
                                          f"{self.name} {self.version} is modelled on a CPU profile only "
                                          f"(its host time was measured there; docs/engines.md)")
            return None
        if self.version not in by_version:
            raise SpecsightInputError("engine.version", self.version,
                                      f"on a {device.name} profile {self.name} runs at a version whose host time "
                                      f"was measured there: {', '.join(by_version) or 'none'} (docs/engines.md)")
        return by_version[self.version]

    def defaults(self, speculating: bool, tp: int) -> dict:
        """The engine's own values for `engine:` keys a scenario leaves unset."""
        return {}

    # ---- its round ------------------------------------------------------------------------
    def passes(self, spec: DrafterSpec, B: int, k: int, width: int, lim: EngineLimits) -> list[Pass]:
        """The passes of one round, in the engine's order (k >= 1)."""
        raise NotImplementedError

    def plain_pass(self, B: int, lim: EngineLimits) -> Pass:
        """One plain decoding step (K = 0) of B sequences."""
        raise NotImplementedError

    def syncs(self, spec: DrafterSpec) -> int:
        """Host syncs inside one speculative round (beyond the iteration's own end)."""
        raise NotImplementedError

    def overlap(self, spec: DrafterSpec | None) -> bool:
        """Whether the scheduler overlaps host work with the GPU (spec None: plain decoding)."""
        raise NotImplementedError

    def host(self, spec: DrafterSpec | None) -> HostModel:
        raise NotImplementedError

    def host_model(self, spec: DrafterSpec | None) -> HostModel:
        """The host model iterations pay: the engine's own, or with an engine profile's constants."""
        h = self.host(spec)
        return h if self.host_overrides is None else self.host_overrides.apply(h)

    def attention_class(self, spec: DrafterSpec) -> str:
        """The kernel class of the verify pass's attention (ATTENTION_CLASSES)."""
        raise NotImplementedError

    # the drafter runs in the step that completes a prompt, before its first token is returned,
    # over the prompt (the replica prices it there: TTFT; the first decode round then ingests
    # only the first token, not the prompt). False: the first decode round ingests the prompt.
    drafts_in_prefill = False

    # ---- host work a round exposes beyond H(B) and its syncs (host.py) ----------------------
    def draft_step_floor_s(self, spec: DrafterSpec) -> float:
        """The least time of one draft forward where the propose loop is host-bound: a draft step
        takes max(its GPU time, this) (0: no such floor)."""
        return 0.0

    def launch_waits(self, spec: DrafterSpec) -> tuple[str, ...]:
        """The graphed passes of a round whose launch the host reaches only after a sync: the GPU
        waits for the host to launch their nodes (host.GRAPH_NODE_HOST_S a node)."""
        return ()

    def host_plans(self, spec: DrafterSpec, k: int) -> int:
        """Attention-metadata plans the host builds in series inside one round (plan_s each)."""
        return 0

    plan_s = 0.0

    def mixed_graph(self, tokens: int, lim: EngineLimits) -> int | None:
        """A pass holding prefill chunks: the tokens its piecewise graph computes, or None (eager)."""
        return None


def graphed(name: str, model: str, seqs: int, tokens_per_seq: int, logits_per_seq: int, mode: str,
            padded: int | None, count: int = 1, eager_launches: int = 0) -> Pass:
    """A pass that replays a graph of `padded` tokens, or runs eagerly where padded is None."""
    if padded is None:
        return Pass(name, model, seqs, tokens_per_seq, logits_per_seq, "eager", count, None, eager_launches)
    return Pass(name, model, seqs, tokens_per_seq, logits_per_seq, mode, count, padded, eager_launches)
