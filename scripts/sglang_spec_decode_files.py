"""Write tests/data/sglang/: a /metrics scrape of a speculating SGLang server, its speculative
series named and labelled as SGLang 0.5.23 declares them (sglang/srt/observability/
metrics_collector.py: TokenizerMetricsCollector's counters sglang:generation_tokens_total
{is_streaming}, sglang:spec_verify_calls_total, sglang:num_requests_total, added to once per
finished request in observe_one_finished_request; SchedulerMetricsCollector's gauges
sglang:spec_num_steps, sglang:spec_num_draft_tokens, sglang:spec_accept_length). prometheus_client
writes the exposition (run with an interpreter that has it, e.g. the vLLM environment):

    .venv-vllm/bin/python scripts/sglang_spec_decode_files.py tests/data/sglang

The rounds are seeded draws (K = 3 chain drafts, per-token acceptance 0.7): a request's first
token comes from its prefill, then each verify round commits the accepted drafts and the bonus
token (batch_result_processor: req.spec_verify_ct += 1 per round). rounds.json keeps how many
rounds accepted 0, 1, ..., K drafts.
"""
import json
import sys
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

K, ALPHA, REQUESTS, SEED = 3, 0.7, 300, 26


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    reg = CollectorRegistry()
    labels = {"model_name": "meta-llama/Llama-3.1-8B-Instruct", "engine_type": "unified"}
    gen = Counter("sglang:generation_tokens_total", "Number of generation tokens processed.",
                  [*labels, "is_streaming"], registry=reg)
    verify = Counter("sglang:spec_verify_calls_total", "Number of speculative decoding verification calls.",
                     list(labels), registry=reg)
    reqs = Counter("sglang:num_requests_total", "Number of requests processed.", list(labels), registry=reg)
    steps = Gauge("sglang:spec_num_steps", "Currently active speculative_num_steps.", list(labels), registry=reg)
    drafts = Gauge("sglang:spec_num_draft_tokens", "Currently active speculative_num_draft_tokens.", list(labels),
                   registry=reg)
    window = Gauge("sglang:spec_accept_length", "Mean acceptance length of speculative decoding.", list(labels),
                   registry=reg)
    rng = np.random.default_rng(SEED)
    accepted = []
    for i in range(REQUESTS):
        rounds = int(rng.integers(20, 200))
        ok = rng.random((rounds, K)) < ALPHA              # i.i.d. per position; accepted = the prefix of successes
        a = np.where(ok.all(axis=1), K, np.argmin(ok, axis=1))
        accepted += a.tolist()
        gen.labels(**labels, is_streaming="true" if i % 2 else "false").inc(1 + int((a + 1).sum()))
        verify.labels(**labels).inc(rounds)
        reqs.labels(**labels).inc(1)
        window.labels(**labels).set(float((a[-10:] + 1).mean()))   # the last window's figure: not read
    steps.labels(**labels).set(K)
    drafts.labels(**labels).set(K + 1)
    (out / "metrics_spec_decode.txt").write_text(generate_latest(reg).decode())
    (out / "rounds.json").write_text(json.dumps({"k": K, "alpha": ALPHA, "seed": SEED, "requests": REQUESTS,
                                                 "rounds_accepting": np.bincount(accepted, minlength=K + 1).tolist()})
                                     + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
