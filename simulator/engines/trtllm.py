"""TensorRT-LLM, PyTorch backend (`engine.version: 1.1`, the 1.1.0 release line): one-model
speculation for MTP and EAGLE-3, two-model for draft models.

Facts from ../shared/reference/engines.md (TensorRT-LLM:tensorrt_llm/_torch/speculative/eagle3.py@001e6700,
drafting_loops.py@03dd9bb8, llm_args.py, interface.py; blog2, blog7, features doc):
  one-model (MTP; EAGLE-3 with eagle3_one_model=True): in one model forward, target over B (1 + K)
             tokens -> GPU acceptance -> draft pass 1 over all 1 + K tokens per request -> K - 1
             one-token draft passes, "both the verification and draft stages can be captured in one
             graph"; only the KV rewind is outside [C/D]
  two-model  (DraftTarget): a separate draft engine whose ChainDrafter runs "the entire drafting
             process" as a single CUDA graph [C/D]; the handoff between the two engines goes through
             the host (1 sync) [I]
  NGram      a host-side pool (the earlier version; later a GPU kernel), "not compatible with
             overlap scheduler" [D]
  trees      chains only (blog2; dynamic trees came later, not for MLA or sliding window) [D]
  graphs     max_batch_size 128, CUDA-graph padding off: sizes 1..31, 32, 64, 128 and powers of two;
             a batch not captured runs eagerly [C]
  overlap    on by default: MTP and EAGLE-3 one-model (support_overlap_scheduler), off for NGram;
             the doc examples set disable_overlap_scheduler=True for DraftTarget [C/D]
  attention  chain verify: a causal mask on the generation (decode) kernel with K + 1 query tokens
             (blog2; FlashInfer PR #2105 / XQA) [D]
  draft TP   one-model: inside the target's forward, the target's TP [C]; two-model: the target's [I]
0.20 (`engine.version: "0.20"`, Jun 2025): EAGLE-3 ran as two models (the engine of TensorRT-LLM PR
  #4802's measurement): the draft engine's first forward without a CUDA graph (PR #4802; ChainDrafter
  graphed the whole loop later) [D], the overlap scheduler off for two-model drafting [D, the doc
  examples], one sync at the hand-off [I], and each draft step no shorter than PR #3035's 1.175 ms
  (two-model EAGLE-3, 4 drafts: generation step 9.3 -> 14.0 ms [M]; host.py)
"""
from __future__ import annotations

from ..speculation.drafters import DRAFT_MODEL, EAGLE3, MTP, NGRAM, DrafterSpec
from . import host as H
from .cuda_graphs import padded_size, trtllm_sizes
from .round import EngineDef, EngineLimits, Pass, graphed

MAX_BATCH_SIZE = 128
ONE_MODEL = (MTP, EAGLE3)


class TRTLLM(EngineDef):
    name = "trtllm"
    versions = ("1.1", "0.20")
    default_version = "1.1"
    methods = (MTP, EAGLE3, DRAFT_MODEL, NGRAM)
    trees = False
    release = {"1.1": "TensorRT-LLM 1.1 PyTorch backend",
               "0.20": "TensorRT-LLM 0.20 (Jun 2025) PyTorch backend, EAGLE-3 as two models"}

    def _one_model(self, spec: DrafterSpec) -> bool:
        return spec.method in ONE_MODEL and not (self.version == "0.20" and spec.method == EAGLE3)

    def defaults(self, speculating: bool, tp: int) -> dict:
        return {"max_num_seqs": MAX_BATCH_SIZE}

    def _pad(self, B: int, lim: EngineLimits) -> int | None:
        return padded_size(B, trtllm_sizes(lim.max_num_seqs), pad=False)

    def plain_pass(self, B: int, lim: EngineLimits) -> Pass:
        return graphed("decode", "target", B, 1, 1, "full", self._pad(B, lim))

    def passes(self, spec: DrafterSpec, B: int, k: int, width: int, lim: EngineLimits) -> list[Pass]:
        pb = self._pad(B, lim)
        one = self._one_model(spec)
        mode = "round" if one else "full"
        verify = graphed("verify", "target", B, width, width, mode, None if pb is None else pb * width)
        if spec.is_lookup:
            return [verify]
        eager_first = self.version == "0.20" and not one
        out = [verify, graphed("draft_1", "draft", B, width, 1, mode,
                               None if pb is None or eager_first else pb * width)]
        if k > 1:
            out.append(graphed("draft_2..K", "draft", B, 1, 1, mode, pb, count=k - 1))
        return out

    def syncs(self, spec: DrafterSpec) -> int:
        return 0 if self._one_model(spec) else 1

    def overlap(self, spec: DrafterSpec | None) -> bool:
        return spec is None or self._one_model(spec)

    def drafter_kv_transferred(self, spec: DrafterSpec) -> bool:
        """One-model (MTP, EAGLE-3 one-model): the draft layers sit in the target's KV cache manager
        (tensorrt_llm/_torch/speculative/utils.py get_num_spec_layers adds them to its layers), the
        only manager the cache transceiver is built over (tensorrt_llm/_torch/pyexecutor/_util.py:
        create_kv_cache_transceiver(mapping, dist, kv_cache_manager, ...)), so their KV crosses with
        the target's; TensorRT-LLM's disaggregated tests give the context server the same
        speculative_config (tests/integration/defs/accuracy/test_disaggregated_serving.py) [C].
        Two-model: the draft engine's KV is in its own manager, not transferred; ModelDrafter makes a
        context request over the prompt the first time it sees a request
        (tensorrt_llm/_torch/speculative/model_drafter.py _create_draft_request_for_request): the
        generation server rebuilds it [C/I: read from the code, not stated nor run]."""
        return self._one_model(spec)

    def draft_step_floor_s(self, spec: DrafterSpec) -> float:
        return H.TRTLLM_TWO_MODEL_DRAFT_STEP_S if self.version == "0.20" and not spec.is_lookup \
            and not self._one_model(spec) else 0.0

    def host(self, spec: DrafterSpec | None) -> H.HostModel:
        return H.TRTLLM_HOST

    def attention_class(self, spec: DrafterSpec) -> str:
        return "decode"
