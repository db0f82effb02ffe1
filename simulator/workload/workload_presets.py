"""Workload presets: the prompt and output length distributions of the datasets engines publish on.

A scenario names one as `workload.preset: <name>`; the preset fills `prompt_len` and `output_len`
unless the scenario sets them (the scenario's own keys win). Arrivals and the request count still
come from the scenario. Every distribution is fitted to published statistics (docs/simulator_models.md,
"Workload presets", shows the arithmetic); nothing is downloaded at run time.

Fits, per preset (z90 = 1.2816, the standard normal's 90th percentile):
  lognormal from a median and a P90:    sigma = ln(P90 / median) / z90
  lognormal from a median and a log-sd: sigma = the standard deviation of ln(length), as published
  only a mean published:                fixed at that mean (no spread is invented)
Characters become tokens at 4.58694 characters per Llama-3 token (English text; shisa-ai/shisa-v2,
eval/tokenizer-efficiency/tokenizer-eval-en.md, row "Llama 3", NousResearch/Meta-Llama-3-8B).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..common.errors import SpecsightInputError, closest_names

Z90 = 1.2815515655446004            # Phi^-1(0.90)
LLAMA3_CHARS_PER_TOKEN = 4.58694    # shisa-ai/shisa-v2 tokenizer-eval-en.md, "Llama 3" row


@dataclass(frozen=True)
class Published:
    """One published figure a distribution was fitted to: `side` (prompt | output), the statistic
    (median | mean | p90), its value in the preset's tokens, and the tolerance the fit keeps."""
    side: str
    stat: str
    value: float
    rel_tol: float
    cite: str


@dataclass(frozen=True)
class WorkloadPreset:
    """A dataset's length distributions, in a scenario's own length syntax (simulator/workload/length_dist.py)."""
    name: str
    prompt: tuple[tuple[str, Any], ...]             # e.g. (("dist", "lognormal"), ("median", 1730), ...)
    output: tuple[tuple[str, Any], ...] | None      # None: the dataset has no outputs; the scenario sets them
    tokenizer: str
    source: str
    notes: str
    published: tuple[Published, ...]

    def length(self, side: str) -> dict[str, Any] | None:
        """The `prompt_len` or `output_len` mapping this preset gives (None: it gives none)."""
        pairs = self.prompt if side == "prompt" else self.output
        return None if pairs is None else dict(pairs)


def _lognormal_p90(median: float, p90: float) -> float:
    """sigma of a lognormal with this median and 90th percentile."""
    return math.log(p90 / median) / Z90


def _tokens(chars: float) -> float:
    """Characters of English text as Llama-3 tokens."""
    return chars / LLAMA3_CHARS_PER_TOKEN


SARATHI = ("microsoft/sarathi-serve data/processed_traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv (commit "
           "72339db, 30,731 requests; openchat_sharegpt4 as the Sarathi-Serve paper, arXiv 2403.02310, and Vidur use "
           "it): prompt median 1730, P90 5696; output median 415, P90 834")
MT_BENCH_FILE = "lm-sys/FastChat fastchat/llm_judge/data/mt_bench/question.jsonl (commit 0e6d3e4), 80 first turns"
SPEC_BENCH_FILE = "hemingkx/Spec-Bench data/spec_bench/question.jsonl (commit fd2c1cd)"
GSM8K_FILE = "openai/grade-school-math grade_school_math/data/test.jsonl (commit 3101c7d), 1,319 problems"

PRESETS: dict[str, WorkloadPreset] = {p.name: p for p in (
    WorkloadPreset(
        name="sharegpt",
        prompt=(("dist", "lognormal"), ("median", 1730.0), ("sigma", round(_lognormal_p90(1730, 5696), 4)),
                ("max", 8192)),
        output=(("dist", "lognormal"), ("median", 415.0), ("sigma", round(_lognormal_p90(415, 834), 4)),
                ("max", 1024)),
        tokenizer="Llama-2 (meta-llama/Llama-2-7b-hf, 32k vocabulary)",
        source=SARATHI,
        notes="ShareGPT-4 conversations with the history in the prompt, filtered to 8k tokens (the trace's "
              "longest prompt is 8,141 and longest output 1,024, hence the clips; about 5 % of draws sit at each "
              "clip). Trace means 2,340 / 439; the clipped fit's means are about 2,442 / 468 (+4 % / +7 %).",
        published=(Published("prompt", "median", 1730, 0.001, SARATHI),
                   Published("prompt", "p90", 5696, 0.001, SARATHI),
                   Published("output", "median", 415, 0.001, SARATHI),
                   Published("output", "p90", 834, 0.001, SARATHI))),
    WorkloadPreset(
        name="mtbench",
        prompt=(("dist", "lognormal"), ("median", round(_tokens(184.5), 2)), ("sigma", 0.8129),
                ("min", 8), ("max", 358)),
        output=(("dist", "fixed"), ("value", 256)),
        tokenizer="Llama-3 (prompt: characters / 4.58694); output: max_tokens, tokenizer-independent",
        source=f"prompt: {MT_BENCH_FILE} (median 184.5 characters, sd of ln 0.8129, range 38-1,642); output: "
               "vLLM vllm/benchmarks/datasets.py MTBenchDataset.DEFAULT_OUTPUT_LEN = 256 (\"avg len used in SD "
               "bench in vLLM\"; `vllm bench serve --dataset-name hf --dataset-path philschmid/mt-bench`, "
               "vLLM PR #17202)",
        notes="Single-turn MT-Bench as vLLM's speculative-decoding benchmarks send it (first turn only, the chat "
              "template's own tokens not counted: Llama-3.1's adds about 25-30). Output 256 is vLLM's max_tokens; "
              "SGLang's benchmark/mtbench/bench_sglang_eagle.py asks for max_new_tokens 2048 and both turns, so "
              "set output_len (e.g. 2048) to model SGLang's runs.",
        published=(Published("prompt", "median", _tokens(184.5), 0.001, MT_BENCH_FILE),
                   Published("output", "median", 256, 0.0, "vLLM MTBenchDataset.DEFAULT_OUTPUT_LEN"))),
    WorkloadPreset(
        name="cnn_dailymail",
        prompt=(("dist", "lognormal"), ("median", round(_tokens(2990.5), 2)), ("sigma", 0.4987),
                ("min", 151), ("max", 1493)),
        output=(("dist", "fixed"), ("value", 256)),
        tokenizer="Llama-3 (prompt: characters / 4.58694); output: max_tokens, tokenizer-independent",
        source=f"prompt: {SPEC_BENCH_FILE}, category summarization (80 CNN/DailyMail articles after "
               "\"Summarize: \"): median 2,990.5 characters, sd of ln 0.4987, range 692-6,847; output: vLLM "
               "`vllm bench serve --dataset-name spec_bench` default --spec-bench-output-len 256",
        notes="CNN/DailyMail as speculative-decoding benchmarks send it (Spec-Bench's summarization task, which "
              "vLLM's spec_bench dataset replays). The dataset card's means are 781 article and 56 highlight PTB "
              "word tokens (abisee/cnn_dailymail card, \"Mean Token Count\"; See et al., ACL 2017). Output 256 is "
              "vLLM's cap; Spec-Bench's own runs cap at 1024 (evaluation/inference_baseline.py "
              "--max-new-tokens), and a summary that stops at EOS is shorter: set output_len for those.",
        published=(Published("prompt", "median", _tokens(2990.5), 0.001, SPEC_BENCH_FILE),
                   Published("output", "median", 256, 0.0, "vLLM --spec-bench-output-len default"))),
    WorkloadPreset(
        name="gsm8k",
        prompt=(("dist", "lognormal"), ("median", round(_tokens(222), 2)), ("sigma", 0.3894),
                ("min", 16), ("max", 185)),
        output=(("dist", "lognormal"), ("median", round(_tokens(270), 2)), ("sigma", 0.4842),
                ("min", 10), ("max", 233)),
        tokenizer="Llama-3 (characters / 4.58694)",
        source=f"{GSM8K_FILE}: question median 222 characters (sd of ln 0.3894, range 73-848), reference "
               "solution median 270 (sd of ln 0.4842, range 48-1,070)",
        notes="Zero-shot: the prompt is the question alone and the output the reference solution's length "
              "(calculator annotations included). Engine runs add few-shot examples (SGLang's benchmark/gsm8k "
              "uses 5-shot; evalscope's 4-shot prompt averages 1,967 characters, about 429 tokens) and cap the "
              "output (256 in TensorRT-LLM PR #4802): set prompt_len / output_len for those.",
        published=(Published("prompt", "median", _tokens(222), 0.001, GSM8K_FILE),
                   Published("output", "median", _tokens(270), 0.001, GSM8K_FILE))),
    WorkloadPreset(
        name="pg19",
        prompt=(("dist", "fixed"), ("value", round(_tokens(40_482_864 / 100)))),
        output=None,
        tokenizer="Llama-3 (characters / 4.58694)",
        source="pg19 dataset card (huggingface.co/datasets/pg19, dataset_info): test split 100 books, "
               "40,482,864 bytes; Rae et al., ICLR 2020 (Compressive Transformer), PG-19",
        notes="A whole test book as the prompt (mean 404,829 bytes, about 88,257 tokens); only the mean is "
              "published, so it is fixed. PG-19 has no outputs: the scenario must set output_len, and "
              "long-context studies truncate the book to the model's window (set prompt_len, e.g. 32768).",
        published=(Published("prompt", "mean", _tokens(40_482_864 / 100), 0.001, "pg19 card"),)),
)}


def get_preset(name: str, field: str = "workload.preset") -> WorkloadPreset:
    """The preset called `name`; an unknown name is one SpecsightInputError with did-you-mean."""
    if name not in PRESETS:
        raise SpecsightInputError(field, name, closest_names(str(name), PRESETS))
    return PRESETS[name]


def preset_lengths(name: str, raw: Mapping[str, Any], where: str = "workload") -> dict[str, Any]:
    """`prompt_len` and `output_len` for a workload mapping: the scenario's own keys, else the preset's."""
    p = get_preset(name, f"{where}.preset")
    out: dict[str, Any] = {}
    for side in ("prompt", "output"):
        key = f"{side}_len"
        out[key] = raw[key] if raw.get(key) is not None else p.length(side)
    return out
