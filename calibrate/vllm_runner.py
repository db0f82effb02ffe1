"""One vLLM engine session: time plain and speculative decoding of one model, interleaved.

Runs inside .venv-vllm (`.venv-vllm/bin/python -m calibrate.vllm_runner SPEC.json`); the CLI in
specsight's own venv launches it (calibrate.vllm_launch) and reads the JSON lines it prints on
stdout, one per finished run (record fields: notes/vllm-interface.md, calibrate.vllm_results).
Progress goes to stderr.

Within a session the plain engine stays up while each speculative engine is started in turn; for
every batch size the two are timed alternately, `repeats` times, so each speculative repeat has a
plain baseline measured in the same stretch of machine time (separate engine processes of one
configuration differed by up to 1.7x in an earlier try on this machine).

A repeat is one closed-loop batch: `batch` requests submitted together (the engine's
max_num_seqs is the grid's largest batch, so all of them run in one decode batch), greedy,
ignore_eos, `output_len` tokens each, driven step by step through LLMEngine.step() so every
request's token arrivals are timestamped. TPOT per request = (last token time - first token time) /
(output tokens - 1); ITL = time between successive outputs of one request (a speculative step may
deliver several tokens at once, as in vLLM's serving benchmark).
"""
from __future__ import annotations

import gc
import json
import os
import platform
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "auto")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")

from calibrate import vllm_checkpoints as ckpt  # noqa: E402
from calibrate.vllm_grid import Session  # noqa: E402

if TYPE_CHECKING:
    from vllm import LLM

ALL_CPUS = sorted(os.sched_getaffinity(0))      # the runner's CPUs as started (an engine's processes inherit them)
WAKE_TOKENS = 8          # untimed decode steps before each timed repeat (calibrate.vllm_runner.wake)
SPEC_COUNTERS = {"vllm:spec_decode_num_drafts": "num_drafts",
                 "vllm:spec_decode_num_draft_tokens": "num_draft_tokens",
                 "vllm:spec_decode_num_accepted_tokens": "num_accepted_tokens"}


def say(msg: str) -> None:
    print(f"vllm-runner: {msg}", file=sys.stderr, flush=True)


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def _percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    pos = q / 100 * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def environment(session: Session) -> dict:
    import torch
    import vllm
    return {"vllm": vllm.__version__, "torch": torch.__version__, "python": platform.python_version(),
            "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
            "omp_threads": os.environ.get("VLLM_CPU_OMP_THREADS_BIND"),
            "kvcache_space_gib": float(os.environ["VLLM_CPU_KVCACHE_SPACE"]),
            "enforce_eager": session.enforce_eager, "dtype": session.dtype, "autogroup": autogroup(),
            "settle_s": session.settle_s, "pin_host": session.pin_host,
            "realtime": session.realtime}


def autogroup() -> str | None:
    """This process's scheduler autogroup and its nice ("/autogroup-6 nice -10"): with autogroup
    scheduling on, nice acts only within a session, so a shared machine's other sessions compete
    with the engine as equals unless this group's nice is lowered (docs/calibration.md)."""
    try:
        return Path("/proc/self/autogroup").read_text().strip()
    except OSError:
        return None


def spec_counters(llm: LLM) -> dict:
    """vLLM's cumulative speculative-decoding counters (zeros for a plain engine)."""
    out = {v: 0 for v in SPEC_COUNTERS.values()}
    out["accepted_per_pos"] = []
    for m in llm.get_metrics():
        if m.name in SPEC_COUNTERS:
            out[SPEC_COUNTERS[m.name]] += int(m.value)
        elif m.name == "vllm:spec_decode_num_accepted_tokens_per_pos":
            out["accepted_per_pos"] = [int(v) for v in m.values]
    return out


def counter_delta(after: dict, before: dict) -> dict:
    d = {k: after[k] - before[k] for k in SPEC_COUNTERS.values()}
    b = before["accepted_per_pos"] or [0] * len(after["accepted_per_pos"])
    d["accepted_per_pos"] = [a - x for a, x in zip(after["accepted_per_pos"], b)]
    return d


def time_batch(llm: LLM, prompts: list[list[int]], output_len: int, tag: str) -> dict:
    """One closed-loop repeat: all prompts submitted at once, stepped to completion."""
    from vllm import SamplingParams
    params = SamplingParams(temperature=0.0, max_tokens=output_len, ignore_eos=True, detokenize=False)
    engine = llm.llm_engine
    load = os.getloadavg()[0]
    cpu0 = cpu_snapshot()
    arrivals: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    tokens: dict[str, list[int]] = {}
    t0 = time.perf_counter()
    for i, p in enumerate(prompts):
        rid = f"{tag}-{i}"
        engine.add_request(rid, {"prompt_token_ids": p}, params)
        arrivals[rid], counts[rid] = [], 0
    while engine.has_unfinished_requests():
        outs = engine.step()
        now = time.perf_counter()
        for o in outs:
            n = len(o.outputs[0].token_ids)
            if n > counts[o.request_id]:
                arrivals[o.request_id].append(now)
                counts[o.request_id] = n
            if o.finished:
                tokens[o.request_id] = list(o.outputs[0].token_ids)
    wall = time.perf_counter() - t0
    cpu = cpu_delta(cpu0, cpu_snapshot(), id(llm))
    tpots, itls = [], []
    for rid, ts in arrivals.items():
        if counts[rid] > 1 and len(ts) > 1:
            tpots.append((ts[-1] - ts[0]) / (counts[rid] - 1) * 1e3)
            itls.extend((b - a) * 1e3 for a, b in zip(ts, ts[1:]))
    total = sum(counts.values())
    rep = {"wall_s": wall, "output_tokens": total, "tpot_ms": statistics.median(tpots),
           "output_tokens_per_s": total / wall, "load_1m": load, "cpu_ms": cpu}
    for q in (50, 90, 99):
        rep[f"tpot_ms_p{q}"] = _percentile(tpots, q)
        rep[f"itl_ms_p{q}"] = _percentile(itls, q) if itls else None
    rep["_tokens"] = [tokens[f"{tag}-{i}"] for i in range(len(prompts))]
    return rep


def make_llm(session: Session, target: Path, spec: dict | None) -> LLM:
    from vllm import LLM
    kw = dict(model=str(target), skip_tokenizer_init=True, dtype=session.dtype,
              enforce_eager=session.enforce_eager, max_num_seqs=max(session.batches),
              max_model_len=session.max_model_len, disable_log_stats=False, seed=0)
    if spec is not None:
        kw["speculative_config"] = spec
    if session.pin_host:               # a new engine's processes inherit the runner's CPUs: all of them
        _set_cpus(os.getpid(), ALL_CPUS)
    if session.realtime:               # ... and its scheduling policy: start up at normal priority
        _set_policy(os.getpid(), os.SCHED_OTHER, 0)
    t0 = time.perf_counter()
    llm = LLM(**kw)
    say(f"engine up in {time.perf_counter() - t0:.1f} s ({spec['method'] if spec else 'plain'})")
    _engine_pids(llm)
    if session.pin_host:
        pin_host(llm)
    if session.realtime:
        realtime(llm)
    return llm


def realtime(llm: LLM) -> None:
    """This engine's processes and the frontend at SCHED_FIFO priority 1 (root): vLLM's worker and
    EngineCore wait for each other by spinning with sched_yield, and a yield hands the core to any
    other runnable job, whose time slice the step then waits out; a real-time spinner yields only
    to real-time tasks. Start-up stays at normal priority (it does not spin)."""
    for pid in [os.getpid()] + ENGINES[id(llm)]["core"] + ENGINES[id(llm)]["worker"]:
        _set_policy(pid, os.SCHED_FIFO, 1)
    say("engine processes at SCHED_FIFO 1")


def _threads(pid: int) -> list[int]:
    """The thread ids of process `pid` (none once it has exited)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def _set_policy(pid: int, policy: int, priority: int) -> None:
    """Every thread of process `pid` to a scheduling policy (sched_setscheduler sets one thread)."""
    for tid in _threads(pid):
        try:
            os.sched_setscheduler(tid, policy, os.sched_param(priority))
        except ProcessLookupError:
            continue
        except OSError as e:
            raise RuntimeError(f"realtime: cannot set the scheduling policy of thread {tid} ({e}); "
                               "run as root or without realtime") from None


def _set_cpus(pid: int, cpus: list[int]) -> None:
    """Every thread of process `pid` onto `cpus` (sched_setaffinity binds one thread)."""
    for tid in _threads(pid):
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass


ENGINES: dict[int, dict[str, list[int]]] = {}        # id(llm) -> {"core": pids, "worker": pids}
TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")


def _cpu_ms(pid: int) -> float:
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) * TICK_MS
    except OSError:
        return 0.0


def _engine_pids(llm: LLM) -> None:
    import psutil
    known = {p for e in ENGINES.values() for v in e.values() for p in v}
    new = [p for p in psutil.Process().children(recursive=True) if p.pid not in known]
    ENGINES[id(llm)] = {"worker": [p.pid for p in new if "Worker" in " ".join(p.cmdline())],
                        "core": [p.pid for p in new if "Worker" not in " ".join(p.cmdline())]}


def cpu_snapshot() -> dict:
    out = {"frontend": _cpu_ms(os.getpid())}
    for key, e in ENGINES.items():
        for role, pids in e.items():
            out[(key, role)] = sum(_cpu_ms(p) for p in pids)
    return out


def cpu_delta(before: dict, after: dict, active: int) -> dict:
    """CPU ms each part used during a repeat: this engine's core and worker, the other engines', the frontend."""
    d = {"frontend": after["frontend"] - before["frontend"], "core": 0.0, "worker": 0.0, "other_engines": 0.0}
    for k in after:
        if k == "frontend":
            continue
        v = after[k] - before.get(k, after[k])
        if k[0] == active:
            d[k[1]] += v
        else:
            d["other_engines"] += v
    return {k: round(v, 1) for k, v in d.items()}


def pin_host(llm: LLM) -> None:
    """The frontend (this process) and every engine's EngineCore onto the CPUs no worker is bound
    to: vLLM binds its CPU worker's OpenMP threads and reserves the other core for the scheduler
    process (vllm/utils/ompmultiprocessing.py, reserve_cpu_num [C]) but leaves that process, and
    the frontend, free to run on the worker's core, where each takes the worker's time."""
    bound: set[int] = set()
    for e in ENGINES.values():
        for w in e["worker"]:
            try:
                bound |= os.sched_getaffinity(w)
            except OSError:
                pass
    host = sorted(set(ALL_CPUS) - bound) or ALL_CPUS
    for pid in [os.getpid()] + [p for e in ENGINES.values() for p in e["core"]]:
        _set_cpus(pid, host)
    say(f"frontend and EngineCore on CPUs {host}, workers on {sorted(bound)}")


def speculative_config(run: dict, session: Session, cache: Path, target: Path) -> dict:
    spec = {"method": run["method"], "num_speculative_tokens": run["k"]}
    if run["method"] == "ngram":
        spec.update(prompt_lookup_min=session.ngram_min, prompt_lookup_max=session.ngram_max)
        return spec
    if run["draft"] == session.model:                       # self-draft: the target checkpoint itself
        spec["model"] = str(target)
    else:
        spec["model"] = str(ckpt.build(run["draft"], run["design"], cache, target=session.model))
    if run["method"] == "draft_model":
        spec["max_model_len"] = session.max_model_len
    return spec


def wake(llm: LLM, prompts: list[list[int]], tag: str, settle_s: float) -> None:
    """A pause, then a few untimed tokens at the timed batch. The pause (settle_s, longer than
    vLLM's 1 s idle spin, calibrate.vllm_grid.SPIN_S) lets the other engine's worker and
    EngineCore stop polling, which otherwise take the timed engine's cores. The tokens: seen here
    without them, the first repeat at a new batch ran 3-5x slower (the kernels of new shapes are
    set up on first use), and an engine left idle while the other ran answered its first steps 2x
    slowly."""
    time.sleep(settle_s)
    time_batch(llm, prompts, WAKE_TOKENS, f"{tag}-wake")


def measure_pair(plain: LLM, spec_llm: LLM, prompts: list[list[int]], session: Session,
                 name: str) -> tuple[list, list, dict]:
    """`repeats` alternating plain / speculative repeats at one batch; greedy outputs must agree.
    Returns both repeat lists and vLLM's counters summed over the timed speculative repeats."""
    plain_reps, spec_reps, acc = [], [], None
    for r in range(session.repeats):
        wake(plain, prompts, f"{name}-p{r}", session.settle_s)
        p = time_batch(plain, prompts, session.output_len, f"{name}-p{r}")
        wake(spec_llm, prompts, f"{name}-s{r}", session.settle_s)
        before = spec_counters(spec_llm)
        s = time_batch(spec_llm, prompts, session.output_len, f"{name}-s{r}")
        delta = counter_delta(spec_counters(spec_llm), before)
        acc = delta if acc is None else {k: ([a + b for a, b in zip(acc[k], delta[k])] if k == "accepted_per_pos"
                                             else acc[k] + delta[k]) for k in acc}
        if s.pop("_tokens") != p.pop("_tokens"):
            raise RuntimeError(f"{name}: greedy speculative output differs from plain output")
        p["process"] = s["process"] = session.process
        plain_reps.append(p)
        spec_reps.append(s)
    return plain_reps, spec_reps, acc


def main(spec_path: str) -> int:
    session = Session.from_json(json.loads(Path(spec_path).read_text()))
    cache = Path(session.cache)
    target = ckpt.build(session.model, "target", cache)
    env = environment(session)
    emit({"kind": "env", "env": env, "pid": os.getpid()})
    prompts = ckpt.prompts(session.model, max(session.batches), session.prompt_len, session.ngram_span)
    plain = make_llm(session, target, None)
    time_batch(plain, prompts[:1], 4, "warm")
    plain_reps: dict[int, list[dict]] = {b: [] for b in session.batches}
    for run in session.runs:
        spec_llm = make_llm(session, target, speculative_config(run, session, cache, target))
        time_batch(spec_llm, prompts[:1], 4, "warm")
        for b, name in sorted(run["names"].items()):
            p_reps, s_reps, acc = measure_pair(plain, spec_llm, prompts[:b], session, name)
            plain_reps[b].extend(p_reps)
            ratios = [p["tpot_ms"] / s["tpot_ms"] for p, s in zip(p_reps, s_reps)]
            emit({"kind": "run", "name": name, "method": run["method"], "k": run["k"], "batch": b,
                  "design": run["design"], "draft": run["draft"], "repeats": s_reps,
                  "baseline_repeats": p_reps, "acceptance": acc})
            say(f"{name}: speedup {statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}], "
                f"accepted {acc['num_accepted_tokens']}/{acc['num_draft_tokens']}, load {s_reps[-1]['load_1m']:.2f}")
        del spec_llm
        gc.collect()
    for b, name in sorted(session.plain_names.items()):
        reps = plain_reps.get(b) or []
        if not reps:                                        # no speculative run at this batch: time plain alone
            for r in range(session.repeats):
                wake(plain, prompts[:b], f"{name}-p{r}", session.settle_s)
                p = time_batch(plain, prompts[:b], session.output_len, f"{name}-p{r}")
                p.pop("_tokens")
                p["process"] = session.process
                reps.append(p)
        emit({"kind": "run", "name": name, "method": "plain", "k": 0, "batch": b, "design": None,
              "draft": None, "repeats": reps, "acceptance": None})
        say(f"{name}: TPOT {statistics.median(r['tpot_ms'] for r in reps):.2f} ms over {len(reps)} repeats")
    say("session done")
    return 0


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)      # unwinds so vLLM's exit handlers stop its engine processes


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stop)
    sys.exit(main(sys.argv[1]))
