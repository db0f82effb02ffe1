"""What the engine models lack, by group of rows of the published table, with the sources that
bound it (docs/validation.md, "What the model lacks, by group of rows")."""
from __future__ import annotations

from typing import Any

from .study import PublishedCatalog

STEP_ROWS = ("vllm-v1-llama3.1-8b-h100-eagle3-k4", "vllm-v1-llama3.1-8b-h100-eagle1-k4")


def draft_step_ms(row: Any, cat: PublishedCatalog) -> tuple[float, float]:
    """(one draft step 2..K as the row's engine prices it, its eager launches alone), in ms, at the
    row's prompt length of context."""
    from simulator.engines.host import EAGER_LAUNCH_S
    from simulator.scenario.engine_defaults import with_engine_defaults
    from simulator.scenario.resolve import resolve_deployment
    from simulator.scenario.scenario import load_scenario

    from .study import scenario_for
    c = resolve_deployment(with_engine_defaults(load_scenario(scenario_for(row, cat.datasets, row.engine)))).step_cost
    step = next(p for p in c.round_passes(1, int(row.drafter["k"])) if p.name == "draft_2..K")
    ctx = float(cat.datasets[row.setup["dataset"]]["prompt_tokens"])
    return 1e3 * c.pass_s(step, ctx) / step.count, 1e3 * step.eager_launches * EAGER_LAUNCH_S


def lacks_lines(cat: PublishedCatalog) -> list[str]:
    """What the engine models lack, by group of rows, with the sources that bound it."""
    rows = {r.name: r for r in cat.rows}
    (e3, e3_launch), (e1, _) = (draft_step_ms(rows[n], cat) for n in STEP_ROWS)
    return [
        "### What the model lacks, by group of rows",
        "",
        "Each miss's last clause names it; the sources that bound it (none of them a row here):",
        "",
        f"- **vLLM V1, EAGLE-3 (#4)**: the published rounds (TPOT x accept length) grow by about 1.0 ms per "
        f"draft token (engines.md §4 #5: 8.35 + 1.02 K ms; EAGLE-1 7.69 + 0.74 K). The model prices an EAGLE-3 "
        f"draft step at {e3:.2f} ms (one decoder layer and a 32k-token LM head on the GPU; its 21 eager launches, "
        f"{e3_launch:.2f} ms, overlap that) and an EAGLE-1 step at {e1:.2f} ms (it reads the target's "
        "128k-token LM head), so the EAGLE-1 rows meet their goal and the EAGLE-3 rows miss by the rest of a "
        "millisecond per step: the published EAGLE-3 step costs more than the EAGLE-1 step though it reads "
        "less, which GPU work cannot explain. Nor does the engine's code of the time: issue #20780 "
        "(2025-07-10) leaves its environment blank; in vLLM v0.9.0 and v0.9.2 (the PyPI sdists, May and Jul "
        "2025) both drafters run compiled in PIECEWISE CUDA graphs (`@support_torch_compile` on the LlamaModel "
        "of llama_eagle.py and of llama_eagle3.py, EAGLE-3's since PR #17504, merged May 2025; one use_cuda_graph "
        "rule for every method in v1/spec_decode/eagle.py; gpu_model_runner's _dummy_run captures the drafter "
        "for every use_eagle() method), the propose loop is one code path, and an EAGLE-3 step adds only the 4 "
        "launches of compute_logits' widening to the target vocabulary (arange, add, new_full, an index_put "
        "with a long index: no sync); its fc over the three target hidden states runs once a round, before "
        "draft 1. The model prices that code's syncs (3 a round: the sampled tokens' .cpu() in "
        "RejectionSampler.parse_output and propose's two .item(), marked 'FIXME(woosuk): The below two ops "
        "cause synchronization') and its launches. The propose loop is host-bound: vLLM PR #20078 (Jun 2025) "
        "found \"the GPU was idling on kernel-launch latency more than it was computing\" between draft steps, "
        "and PR #17504's torch-profiler trace of an EAGLE-3 propose at K = 3, batch 1 took about 6 ms with "
        "CUDA graphs (16 ms without); a profiler inflates host time, so no per-step constant follows from it. "
        "The plain step is priced with the V1 host work that v0.9.x does not overlap (0.97 ms, vLLM PR "
        "#25872's ITL with and without async scheduling) and meets its goal.",
        "- **SGLang plain decoding (#1, #3)**: SGLang overlaps plain decoding's host work, so the priced step is "
        "the GPU pass at the datasheet profile's weight-read efficiency (efficiency.memory 0.8; decode GEMVs "
        "were measured at about 78 % of HBM peak on an H200, pegainfer issue #582). Row #1 takes 6.41 ms for "
        "Llama-2-7B (13.5 GB of weights: 63 % of the H100's 3.35 TB/s) and its benchmark script times one "
        "whole request, prefill included; row #3 adds 80 layers of TP-8 all-reduces. Neither gap has an "
        "independent source.",
        "- **SGLang tree drafting (#2, #3)**: top-k 4-8 per depth, and the verify covers B x N tree tokens. "
        "Both rows ran SGLang before the draft extend's CUDA graph (PR #6606, May 2025): PR #4716 is of Mar "
        "2025, and SGLang issue #5502 cites the docs' table on 2025-04-17 ('approximately 2.5x' for EAGLE-3; "
        "the row's 373.25 / 158.34 is 2.36x: the same table, inferred). They run `engine.version: v0.4`, "
        "read in the sglang 0.4.5 wheel (PyPI, Apr 2025; 0.4.4.post1 has the same structure without EAGLE3): "
        "the S - 1 draft steps replay one graph and the verify the target's, the draft extend runs eagerly "
        "(ForwardMode.is_cuda_graph() excludes DRAFT_EXTEND), and a round syncs 7 times (the draft's "
        "seq_lens sum .item(); verify's two .tolist(), two boolean-mask indexings and accept_length.tolist(); "
        "the draft extend's seq_lens.tolist()); all priced, with SGLang's host work per round (1.1 ms, PR "
        "#11398). Not priced, in v0.4 as in v0.5: the eager kernels between those syncs (the tree build, "
        "build_tree_kernel_efficient: cat, topk, sort, gather, fills and the tree kernel; verify's argmax, "
        "cumprod, masks and gathers; the draft extend's softmax and top-k), which no source times. Row #3's "
        "miss gives the round published and priced.",
        "- **Loaded runs (#6)**: acceptance assumed (the nearest published chain preset), and the loaded run's "
        "host work per iteration at batch 8.",
    ]
