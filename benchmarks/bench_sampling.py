"""Benchmark of the exact chain kernel (calibrate.sampling.verify_chain): time and bandwidth.

Scenario: one verify round of B sequences with K drafts over a V-token vocabulary, float32
probabilities already on the device. How close does the kernel come to the memory roof?

Covers: B in {1, 8, 64, 256}, K in {1, 3, 7}, V in {32000 (Llama-2), 128256 (Llama-3), 151936
(Qwen2/3)}. The CPU default leaves out B = 256 (about a minute on two cores); --quick runs four
configurations; --full runs the whole grid on any device.

Modes (calibrate/sampling_fast.py make_chain_verifier): eager = verify_chain itself; compiled =
the blocked two-level inverse CDF under torch.compile; graphed = compiled and replayed from a CUDA
graph (CUDA only). --modes picks some; --profile adds a torch.profiler table for one configuration.

Reported per configuration: the median time over repeats (device synchronised around each call,
warm-up calls left out), and the "nominal" bandwidth: the bytes of the inputs the issue counts,
4 * (B*(K+1)*V + B*K*V), divided by the time, also as a fraction of a copy bandwidth measured in
the same run (torch clone of a large tensor, bytes read + written / time). NOTE: the kernel reads
only the 2*B*K probabilities of the draft tokens and one p row and one q row per sequence (about
4 * 2*B*V bytes), so the nominal fraction can exceed 100 %: it answers "is sampling cheap next to
reading the logits once", not "how efficient are the kernel's own memory accesses".

Usage:
    python benchmarks/bench_sampling.py --device cpu --out benchmarks/results/sampling_cpu.md
    python benchmarks/bench_sampling.py --device cuda --out benchmarks/results/sampling_h200.md
"""
from __future__ import annotations

import argparse
import datetime
import itertools
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from calibrate.sampling_fast import make_chain_verifier  # noqa: E402

BATCHES = (1, 8, 64, 256)
DRAFTS = (1, 3, 7)
VOCABS = (32000, 128256, 151936)
QUICK = ((256, 7, 151936), (256, 3, 151936), (64, 3, 128256), (1, 3, 32000))
COPY_BYTES = {"cuda": 2 << 30, "cpu": 256 << 20}  # tensor cloned to measure copy bandwidth
MEMORY_HEADROOM = 0.6  # use at most this fraction of free memory for one configuration
SEED = 0


@dataclass(frozen=True)
class Config:
    batch: int
    k: int
    vocab: int

    @property
    def nominal_bytes(self) -> int:
        """float32 bytes of target_probs [B, K+1, V] and draft_probs [B, K, V]."""
        return 4 * (self.batch * (self.k + 1) * self.vocab + self.batch * self.k * self.vocab)

    @property
    def working_bytes(self) -> int:
        """Inputs plus the kernel's [B, V] temporaries (rows, weights, float64 cdf), generously."""
        return self.nominal_bytes + 48 * self.batch * self.vocab


@dataclass(frozen=True)
class Row:
    mode: str
    config: Config
    median_s: float

    def nominal_bandwidth(self) -> float:
        return self.config.nominal_bytes / self.median_s


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_time(fn, device: torch.device, repeats: int, warmup: int) -> float:
    """Median wall time of fn() in seconds, the device synchronised before and after each call."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def copy_bandwidth(device: torch.device, repeats: int) -> float:
    """Bytes read + written per second copying a COPY_BYTES float32 tensor: torch clone on CUDA
    (the caching allocator makes the allocation free); on CPU a copy_ into a preallocated tensor,
    since clone there times fresh pages from the OS (page faults), not memory bandwidth."""
    x = torch.ones(COPY_BYTES[device.type] // 4, dtype=torch.float32, device=device)
    if device.type == "cuda":
        seconds = median_time(lambda: x.clone(), device, repeats, warmup=2)
    else:
        out = torch.empty_like(x)
        seconds = median_time(lambda: out.copy_(x), device, repeats, warmup=2)
    return 2 * x.numel() * 4 / seconds


def free_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    with open("/proc/meminfo") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["MemAvailable"].split()[0]) * 1024


def make_inputs(config: Config, device: torch.device, generator: torch.Generator):
    """Normalised random probabilities and random draft tokens (the timing does not depend on
    the values: the kernel reads one row per sequence whatever is accepted)."""
    b, k, v = config.batch, config.k, config.vocab
    target = torch.rand(b, k + 1, v, device=device, generator=generator)  # [B, K+1, V]
    target /= target.sum(-1, keepdim=True)
    draft = torch.rand(b, k, v, device=device, generator=generator)  # [B, K, V]
    draft /= draft.sum(-1, keepdim=True)
    tokens = torch.randint(0, v, (b, k), device=device, generator=generator)  # [B, K]
    return target, draft, tokens


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    return f"{model} ({torch.get_num_threads()} torch threads)"


def configs(device: torch.device, quick: bool, full: bool) -> list[Config]:
    if quick:
        return [Config(*c) for c in QUICK]
    batches = BATCHES if (full or device.type == "cuda") else BATCHES[:-1]
    grid = [Config(b, k, v) for b, k, v in itertools.product(batches, DRAFTS, VOCABS)]
    # NOTE: largest first. The compiled modes use dynamic shapes, and Triton picks each kernel's
    # launch configuration at its first call: tuned on B=1 it ran the B=256 rows 2x slower.
    return sorted(grid, key=lambda c: -c.batch * c.k * c.vocab)


# mode -> make_chain_verifier arguments. eager: verify_chain (one [B, V] inverse CDF, eager ops);
# compiled: the blocked two-level path under torch.compile; graphed: that, replayed from CUDA graphs.
MODES = {"eager": {}, "compiled": {"compile": True}, "graphed": {"compile": True, "cuda_graph": True}}


def run(device: torch.device, grid: list[Config], modes: list[str], repeats: int,
        log=print) -> tuple[list[Row], list[str]]:
    """Time every (mode, config); returns the rows and the notes on what was skipped (memory,
    or a mode that failed: its error is logged and the mode dropped)."""
    verifiers = {mode: make_chain_verifier(**MODES[mode]) for mode in modes}
    generator = torch.Generator(device=device).manual_seed(SEED)
    rows, skipped = [], []
    for config in grid:
        if config.working_bytes > MEMORY_HEADROOM * free_bytes(device):
            skipped.append(f"B={config.batch} K={config.k} V={config.vocab} "
                           f"(needs ~{config.working_bytes / 2**30:.1f} GiB)")
            continue
        target, draft, tokens = make_inputs(config, device, generator)
        for mode in list(verifiers):
            verify = verifiers[mode]
            try:
                seconds = median_time(lambda verify=verify, target=target, draft=draft, tokens=tokens:
                                      verify(target, draft, tokens, generator=generator),
                                      device, repeats, warmup=3)
            except Exception as error:  # a torch.compile or CUDA-graph failure on this torch
                log(f"{mode} failed at B={config.batch} K={config.k} V={config.vocab}: {error!r}")
                skipped.append(f"mode {mode} from B={config.batch} K={config.k} V={config.vocab} on "
                               f"({type(error).__name__})")
                del verifiers[mode]
                continue
            rows.append(Row(mode, config, seconds))
            log(f"{mode:8s} B={config.batch:4d} K={config.k} V={config.vocab:6d}  {seconds * 1e6:10.1f} us")
        del target, draft, tokens
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows, skipped


def profile(device: torch.device, config: Config, modes: list[str], log=print) -> None:
    """torch.profiler summary of one call per mode: where the time goes (kernels, host)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    generator = torch.Generator(device=device).manual_seed(SEED)
    target, draft, tokens = make_inputs(config, device, generator)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    for mode in modes:
        verify = make_chain_verifier(**MODES[mode])
        for _ in range(3):
            verify(target, draft, tokens, generator=generator)
        synchronize(device)
        with torch_profile(activities=activities) as prof:
            for _ in range(5):
                verify(target, draft, tokens, generator=generator)
            synchronize(device)
        log(f"\n### profile: {mode}, B={config.batch} K={config.k} V={config.vocab}, 5 calls")
        sort = "cuda_time_total" if device.type == "cuda" else "cpu_time_total"
        log(prof.key_averages().table(sort_by=sort, row_limit=18, max_name_column_width=60))


def markdown(rows: list[Row], copy_bw: float, header: list[str], skipped: list[str]) -> str:
    lines = header + [
        "",
        f"Copy bandwidth (read + write; torch clone on CUDA, copy_ into a preallocated tensor on CPU): "
        f"{copy_bw / 1e9:.2f} GB/s.",
        "Nominal bytes = 4 * (B*(K+1)*V + B*K*V), float32; the kernel itself reads about 4 * 2*B*V "
        "(one p row and one q row per sequence), so the nominal fraction can exceed 100 %.",
        "Modes: eager = verify_chain (eager ops, one float64 inverse CDF over [B, V]); compiled = "
        "calibrate.sampling_fast blocked path under torch.compile; graphed = compiled, replayed from "
        "a CUDA graph.",
        "",
        "| mode | B | K | V | B*K*V | nominal MB | median us | nominal GB/s | nominal / copy BW |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    mode_order = {mode: i for i, mode in enumerate(MODES)}
    for r in sorted(rows, key=lambda r: (r.config.batch, r.config.k, r.config.vocab, mode_order[r.mode])):
        c = r.config
        lines.append(f"| {r.mode} | {c.batch} | {c.k} | {c.vocab} | {c.batch * c.k * c.vocab:.2e} | "
                     f"{c.nominal_bytes / 1e6:.1f} | {r.median_s * 1e6:.1f} | {r.nominal_bandwidth() / 1e9:.1f} | "
                     f"{100 * r.nominal_bandwidth() / copy_bw:.0f} % |")
    if skipped:
        lines += ["", "Skipped (memory): " + "; ".join(skipped)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--quick", action="store_true", help="four configurations only")
    parser.add_argument("--full", action="store_true", help="the whole grid, also on CPU (B = 256)")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per configuration "
                        "(default 20 on CUDA, 5 on CPU)")
    parser.add_argument("--modes", default=None, help="comma-separated, from " + ", ".join(MODES) +
                        " (default: all on CUDA, eager on CPU)")
    parser.add_argument("--profile", action="store_true",
                        help="also print a torch.profiler table for B=256 K=3 V=151936 (B=8 on CPU)")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown table here")
    args = parser.parse_args(argv)

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch.cuda.is_available() is False")
    device = torch.device(args.device)
    repeats = args.repeats or (20 if device.type == "cuda" else 5)
    modes = args.modes.split(",") if args.modes else (list(MODES) if device.type == "cuda" else ["eager"])
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"--modes: unknown {unknown}; choose from {list(MODES)}")

    header = [
        f"# verify_chain benchmark on {args.device}",
        "",
        f"- device: {device_name(device)}",
        f"- torch {torch.__version__}, Python {platform.python_version()}",
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- median of {repeats} timed calls after 3 warm-up calls; modes: {', '.join(modes)}",
    ]
    if device.type == "cpu":  # other processes share the cores: say how busy they were
        header.append("- load average at start (1, 5, 15 min): " +
                      ", ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs")
    print("\n".join(header), flush=True)
    copy_bw = copy_bandwidth(device, repeats)
    print(f"copy bandwidth: {copy_bw / 1e9:.2f} GB/s", flush=True)
    rows, skipped = run(device, configs(device, args.quick, args.full), modes, repeats,
                        log=lambda s: print(s, flush=True))
    table = markdown(rows, copy_bw, header, skipped)
    print(table)
    if args.profile:
        profile(device, Config(256 if device.type == "cuda" else 8, 3, 151936), modes)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
