"""SGLang v0.5.x: the EAGLE v1 worker (the default, `engine.version: v0.5`) and the spec-v2 overlap
worker (`v0.5-spec-v2`, SGLANG_ENABLE_SPEC_V2=1); SGLang v0.4.4-v0.4.5 (`v0.4`, Mar-Apr 2025).

Facts from ../shared/reference/engines.md (sglang:python/sglang/srt/speculative/eagle_worker.py@00559eac,
cuda_graph_runner.py, server_args.py; PR #11398; issue #11762). S = speculative_num_steps (= K),
topk = speculative_eagle_topk (the drafter's tree_branches; 1 for a chain), N = the verify width:
  draft        S - 1 draft forwards of B topk tokens, all in one EAGLEDraftCudaGraphRunner graph [C]
  verify       target TARGET_VERIFY over B N tokens with a tree mask; graphs per batch size with
               num_tokens_per_bs = N [C]
  accept       on the GPU; accept_length_per_req_cpu is a host sync, and the draft step calls
               seq_lens.sum().item(): 2 syncs a round [C]
  draft extend forward_draft_extend_after_decode over B (S + 1) tokens padded to a fixed width,
               its own EAGLEDraftExtendCudaGraphRunner [C]; spec v2: fixed width N (DRAFT_EXTEND_V2) [C];
               logits of each request's last token only (LogitsProcessor prunes an extend to its last
               positions; capture_for_decode takes the top-k from that row) [C, sglang 0.5.2 wheel]
  spec v2      the same passes with the overlap scheduler on, topk = 1 only; one
               verify_done.synchronize() left (issue #11762) [C/D]
  overlap      the overlap scheduler is disabled for EAGLE/EAGLE3/STANDALONE unless spec v2, always
               for NGRAM; plain decoding keeps it (server_args _handle_speculative_decoding) [C]
  NGRAM        a C++ n-gram cache on the CPU; verify pass only [C]. MTP (NEXTN) runs as EAGLE,
               STANDALONE (a draft model) on the EAGLE worker path [C]
  draft TP     the draft worker takes the target's tp_rank: the target's TP degree [I, from code]
  attention    FlashInfer verify uses BatchPrefillWithPagedKVCacheWrapper with the tree's custom
               mask: a prefill-class kernel [C]
  defaults     max_running_requests 48 with speculation; cuda_graph_max_bs 256 at TP < 4, 512 at
               TP >= 4 on H100/H200 [C]
v0.4 (read in the sglang 0.4.5 wheel from PyPI, Apr 2025, sglang/srt/; 0.4.4.post1 has the same
  structure, without EAGLE3) [C]:
  draft        S - 1 forwards in one EAGLEDraftCudaGraphRunner graph (speculative/eagle_worker.py draft)
  verify       TARGET_VERIFY in the target's graphs (cuda_graph_runner.py: num_tokens_per_bs = N)
  draft extend forward_draft_extend_after_decode runs DRAFT_EXTEND, which ForwardMode.is_cuda_graph()
               excludes (model_executor/forward_batch_info.py), so model_runner.forward runs it eagerly
               (forward_extend); init_cuda_graphs: "Capture extend ... raise NotImplementedError()". Its
               tokens are each request's accept length + 1 (prepare_extend_after_decode), at most S + 1:
               priced at S + 1 [I]; the CUDA graph for it came with PR #6606 (May 2025) [D]
  syncs        7 a round (greedy): draft's torch.sum(seq_lens).item(); verify's accept_index.tolist(),
               predict.tolist(), accept_index[accept_index != -1] and out_cache_loc[evict_mask]
               (boolean masks: a nonzero the host waits for), accept_length.tolist()
               (speculative/eagle_utils.py verify); prepare_extend_after_decode's seq_lens.tolist()
  graph sizes  sglang_v04_sizes (cuda_graphs.py); methods EAGLE, EAGLE3, NEXTN (as EAGLE): no
               STANDALONE, no NGRAM (server_args --speculative-algorithm choices); overlap off with
               EAGLE/EAGLE3, max_running_requests 48 (server_args.py)
"""
from __future__ import annotations

from ..speculation.drafters import DRAFT_MODEL, EAGLE, EAGLE3, MTP, NGRAM, DrafterSpec
from . import host as H
from .cuda_graphs import padded_size, sglang_max_bs, sglang_sizes, sglang_v04_sizes
from .round import EngineDef, EngineLimits, Pass, graphed

SPEC_MAX_RUNNING_REQUESTS = 48
V04_METHODS = (EAGLE, EAGLE3, MTP)
V04_SYNCS = 7                       # the seven listed in the module docstring (sglang 0.4.5)


class SGLang(EngineDef):
    name = "sglang"
    versions = ("v0.5", "v0.5-spec-v2", "v0.4")
    default_version = "v0.5"
    methods = (EAGLE, EAGLE3, MTP, DRAFT_MODEL, NGRAM)
    release = {"v0.5": "SGLang v0.5.x, EAGLE v1 worker", "v0.5-spec-v2": "SGLang v0.5.x, spec-v2 overlap worker",
               "v0.4": "SGLang v0.4.4-v0.4.5 (Mar-Apr 2025), EAGLE worker"}

    @property
    def v2(self) -> bool:
        return self.version == "v0.5-spec-v2"

    @property
    def v04(self) -> bool:
        """v0.4.4-v0.4.5: the draft extend runs eagerly; seven syncs a round."""
        return self.version == "v0.4"

    def supported_methods(self) -> tuple[str, ...]:
        return V04_METHODS if self.v04 else self.methods

    def tree_ok(self) -> bool:
        return not self.v2

    def defaults(self, speculating: bool, tp: int) -> dict:
        return {"max_num_seqs": SPEC_MAX_RUNNING_REQUESTS} if speculating else {}

    def _pad(self, B: int, lim: EngineLimits, speculating: bool = True) -> int | None:
        if self.v04:
            return padded_size(B, sglang_v04_sizes(speculating, lim.max_num_seqs))
        return padded_size(B, sglang_sizes(sglang_max_bs(lim.tp)))

    def plain_pass(self, B: int, lim: EngineLimits) -> Pass:
        pb = self._pad(B, lim, speculating=False)
        return graphed("decode", "target", B, 1, 1, "full", None if pb is None else pb)

    def passes(self, spec: DrafterSpec, B: int, k: int, width: int, lim: EngineLimits) -> list[Pass]:
        pb = self._pad(B, lim)
        verify = graphed("verify", "target", B, width, width, "full", None if pb is None else pb * width)
        if spec.is_lookup:
            return [verify]
        topk = spec.branches
        out = []
        if k > 1:
            out.append(graphed("draft", "draft", B, topk, topk, "full", None if pb is None else pb * topk, count=k - 1))
        out.append(verify)
        if self.v04:                      # eager: its own tokens, the last one's logits per request
            out.append(Pass("draft_extend", "draft", B, k + 1, 1, "eager"))
            return out
        ext = width if self.v2 else k + 1
        out.append(graphed("draft_extend", "draft", B, ext, 1, "full", None if pb is None else pb * ext))
        return out

    def syncs(self, spec: DrafterSpec) -> int:
        if spec.is_lookup:
            return 1                      # the sampled tokens reach the CPU cache before drafting
        if self.v04:
            return V04_SYNCS
        return 1 if self.v2 else 2

    def overlap(self, spec: DrafterSpec | None) -> bool:
        if spec is None:
            return True
        return self.v2 and not spec.is_lookup

    def host(self, spec: DrafterSpec | None) -> H.HostModel:
        return H.SGLANG_HOST

    def attention_class(self, spec: DrafterSpec) -> str:
        return "prefill_tree"

    plan_s = H.SGLANG_FLASHINFER_PLAN_S

    def launch_waits(self, spec: DrafterSpec) -> tuple[str, ...]:
        """The v1 worker's graphs launched right after a sync: the draft graph after the draft's
        seq_lens .item(); at v0.5 the draft extend's after accept_length_per_req_cpu, at v0.4
        (FlashInfer) the verify's after its plan's host copy (the draft extend runs eagerly there).
        Spec v2 overlaps them."""
        if spec.is_lookup or self.v2:
            return ()
        return ("draft", "verify") if self.v04 else ("draft", "draft_extend")

    def host_plans(self, spec: DrafterSpec, k: int) -> int:
        """v0.4 (FlashInfer): one plan per draft step (S - 1) and one for the verify's mask."""
        return k if self.v04 and not spec.is_lookup else 0
