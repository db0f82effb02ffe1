"""Read the result files engines' serving benchmarks write: one `BenchRun` per benchmark run.

vLLM, `vllm bench serve --save-result` (vllm/benchmarks/serve.py: `benchmark()` returns the result
dict, `main()` adds the run's settings and writes it with json.dump, one object per file):
  completed, total_input_tokens, total_output_tokens   requests done and their token totals
  request_throughput, output_throughput                 req/s, output tok/s
  mean_ttft_ms, mean_tpot_ms, median_tpot_ms, mean_itl_ms
  request_rate   the --request-rate (a number, or the string "inf")
  max_concurrency  the --max-concurrency (null when unset)
  spec_decode_acceptance_length  1 + accepted / drafts, from the server's spec-decode counters
                 (present only when the server speculates; with spec_decode_acceptance_rate,
                 spec_decode_num_drafts, spec_decode_draft_tokens, spec_decode_accepted_tokens)
SGLang, `python -m sglang.bench_serving --output-file F` (python/sglang/bench_serving.py: the result
dict is appended to F with json.dumps, one line per run: JSONL; docs/developer_guide/bench_serving.md):
  the same completed, total_input_tokens, total_output_tokens, request_throughput,
  output_throughput, mean_ttft_ms, median_ttft_ms, mean_tpot_ms, median_tpot_ms, mean_itl_ms,
  request_rate (a number; inf as JSON Infinity), max_concurrency (null when unset), and
  accept_length (the server's average accept length; null or absent without speculation).
A run is speculative when its acceptance length is present. Lengths are the means the totals give
(total / completed): the benchmark's per-request lengths are not in the summary.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.common.errors import SpecsightInputError
from simulator.common.input_files import parse_json, read_json_lines, read_text

ACCEPT_KEY = {"vllm": "spec_decode_acceptance_length", "sglang": "accept_length"}
FORMAT = {"vllm": "a `vllm bench serve --save-result` JSON object",
          "sglang": "`sglang.bench_serving --output-file` JSONL (one result object a line)"}
REQUIRED = ("completed", "total_input_tokens", "total_output_tokens", "mean_tpot_ms")


@dataclass(frozen=True)
class BenchRun:
    """One benchmark run: its load, lengths and measured figures."""
    file: str
    line: int                       # 1-based run index in the file
    completed: int
    prompt_len: int                 # mean input tokens per request
    output_len: int                 # mean output tokens per request
    max_concurrency: int | None
    request_rate: float             # requests/s; inf: all at once
    tpot_ms: float                  # mean TPOT
    ttft_ms: float | None
    output_throughput: float | None
    accept_length: float | None     # tokens per round incl. the bonus token; None: no speculation

    @property
    def speculative(self) -> bool:
        return self.accept_length is not None

    @property
    def label(self) -> str:
        return f"{Path(self.file).name}:{self.line}"


def _number(d: dict[str, Any], key: str, where: str, *, lo: float = 0.0, allow_inf: bool = False) -> float:
    v = d.get(key)
    if isinstance(v, str) and allow_inf and v.strip().lower() in ("inf", "infinity"):
        return math.inf
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or (math.isinf(v) and not allow_inf) \
            or v < lo:
        raise SpecsightInputError(f"{where}: {key}", v, f"a number >= {lo:g}" + (" or inf" if allow_inf else ""))
    return float(v)


def _optional(d: dict[str, Any], key: str, where: str, lo: float = 0.0) -> float | None:
    return None if d.get(key) is None else _number(d, key, where, lo=lo)


def run_from_result(d: Any, engine: str, file: str, line: int) -> BenchRun:
    """One result object in `engine`'s format."""
    where = f"{file}:{line}"
    if not isinstance(d, dict):
        raise SpecsightInputError(where, type(d).__name__, FORMAT[engine])
    missing = [k for k in REQUIRED if k not in d]
    if missing:
        raise SpecsightInputError(where, f"missing {', '.join(missing)}", FORMAT[engine])
    completed = int(_number(d, "completed", where, lo=1))
    conc = d.get("max_concurrency")
    if conc is not None:
        conc = int(_number(d, "max_concurrency", where, lo=1))
    rate = _number(d, "request_rate", where, lo=0.0, allow_inf=True) if d.get("request_rate") is not None else math.inf
    if rate == 0:
        raise SpecsightInputError(f"{where}: request_rate", 0, "a positive rate or inf")
    acc = _optional(d, ACCEPT_KEY[engine], where, lo=1.0)
    return BenchRun(file=file, line=line, completed=completed,
                    prompt_len=max(1, round(_number(d, "total_input_tokens", where) / completed)),
                    output_len=max(2, round(_number(d, "total_output_tokens", where) / completed)),
                    max_concurrency=conc, request_rate=rate,
                    tpot_ms=_number(d, "mean_tpot_ms", where, lo=1e-9), ttft_ms=_optional(d, "mean_ttft_ms", where),
                    output_throughput=_optional(d, "output_throughput", where), accept_length=acc)


def read_bench_file(path: str | Path, engine: str) -> list[BenchRun]:
    """Every run in one result file of `engine` ("vllm" or "sglang")."""
    if engine not in FORMAT:
        raise SpecsightInputError("--engine", engine,
                                  f"one of {', '.join(FORMAT)} (a benchmark format specsight reads)")
    p = Path(path)
    text = read_text(p, "--from-bench", "json")
    try:
        objs = [parse_json(text, "--from-bench", str(p))]
    except SpecsightInputError as e:
        if "malformed JSON" not in e.allowed:
            raise
        objs = [v for _, v in read_json_lines(p, "--from-bench", "json")]     # SGLang's JSONL
    if not objs:
        raise SpecsightInputError("--from-bench", str(path), f"{FORMAT[engine]}; the file is empty")
    return [run_from_result(o, engine, str(p), i) for i, o in enumerate(objs, 1)]


def read_bench_files(paths: list[str] | tuple[str, ...], engine: str) -> list[list[BenchRun]]:
    """The runs of each file, file by file (the held-out error leaves one file out at a time)."""
    if not paths:
        raise SpecsightInputError("--from-bench", None, "one or more benchmark result files")
    return [read_bench_file(p, engine) for p in paths]


def result_dict(engine: str, run: dict[str, float], accept_length: float | None) -> dict[str, Any]:
    """A result object in `engine`'s format from a simulated run's figures (tests; `run` holds
    completed, total_input_tokens, total_output_tokens, mean_tpot_ms, mean_ttft_ms,
    output_throughput, request_throughput, request_rate, max_concurrency)."""
    d: dict[str, Any] = {"date": "", "backend": engine, **run}
    if engine == "vllm":
        d["request_rate"] = "inf" if math.isinf(run["request_rate"]) else run["request_rate"]
        d["median_tpot_ms"] = d["mean_itl_ms"] = run["mean_tpot_ms"]
        if accept_length is not None:
            d["spec_decode_acceptance_length"] = accept_length
    else:
        d["median_ttft_ms"] = run["mean_ttft_ms"]
        d["median_tpot_ms"] = d["mean_itl_ms"] = run["mean_tpot_ms"]
        d["accept_length"] = accept_length
    return d
