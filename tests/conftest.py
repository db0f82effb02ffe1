"""Test-session setup: keep torch's thread pool within the CPUs this process may actually use.

A CI container can report more cores than its CPU quota allows; torch then starts one OpenMP
thread per reported core, and spinning threads on an oversubscribed quota can slow a kernel by
orders of magnitude.
"""
from __future__ import annotations

import os
from pathlib import Path


def usable_cpus() -> int:
    """CPUs in this process's affinity mask, capped by a cgroup-v2 CPU quota if one is set."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def pytest_configure(config):
    try:
        import torch
    except ImportError:
        return
    n = usable_cpus()
    if torch.get_num_threads() > n:
        torch.set_num_threads(n)
