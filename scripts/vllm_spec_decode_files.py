"""Write tests/data/vllm/: a /metrics scrape and a `vllm bench serve` result JSON of a speculating
vLLM server, made by vLLM's own code (run with an interpreter that has vLLM installed):

    /work/wt/vllm-gt/.venv-vllm/bin/python scripts/vllm_spec_decode_files.py tests/data/vllm

The rounds are seeded draws (K = 3, per-token acceptance 0.7, two engines): each round's
accepted count goes through vLLM's SpecDecodingStats.observe_draft and SpecDecodingProm.observe
(vllm/v1/spec_decode/metrics.py) and prometheus_client writes the exposition the server's
/metrics returns. The bench JSON holds what vllm/benchmarks/serve.py computes from a scrape
before (a fresh server: no series) and after the run: drafts, draft and accepted tokens, the
acceptance length and rate, and per position accepted / drafts. accepted.json keeps the draws.
"""
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import prometheus_client
from vllm.v1.spec_decode.metrics import SpecDecodingProm, SpecDecodingStats

K, ALPHA, ROUNDS, SEED = 3, 0.7, 4000, 26


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model = "meta-llama/Llama-3.1-8B-Instruct"
    prom = SpecDecodingProm(SimpleNamespace(num_speculative_tokens=K), ["model_name", "engine"],
                            {0: [model, "0"], 1: [model, "1"]})
    rng = np.random.default_rng(SEED)
    accepted = []
    for engine in (0, 1):
        stats = SpecDecodingStats.new(K)
        for _ in range(ROUNDS // 2):
            ok = rng.random(K) < ALPHA                  # i.i.d. per position; accepted = the prefix of successes
            a = int(np.argmin(ok)) if not ok.all() else K
            stats.observe_draft(K, a)
            accepted.append(a)
        prom.observe(stats, engine)
    text = prometheus_client.generate_latest().decode()
    (out / "metrics_spec_decode.txt").write_text(text)
    # vllm/benchmarks/serve.py: the counters' change over the run (the scrape before: no series)
    drafts = len(accepted)
    per_pos = [sum(1 for a in accepted if a > i) for i in range(K)]
    acc = sum(accepted)
    result = {"spec_decode_acceptance_rate": acc / (drafts * K) * 100,
              "spec_decode_acceptance_length": 1 + acc / drafts,
              "spec_decode_num_drafts": drafts, "spec_decode_draft_tokens": drafts * K,
              "spec_decode_accepted_tokens": acc,
              "spec_decode_per_position_acceptance_rates": [p / drafts for p in per_pos]}
    (out / "bench_serve_result.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "accepted.json").write_text(json.dumps({"k": K, "accepted": accepted}) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
