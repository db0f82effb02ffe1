"""Test-session setup: keep torch's thread pool within the CPUs this process may actually use.

A CI container can report more cores than its CPU quota allows; torch then starts one OpenMP
thread per reported core, and spinning threads on an oversubscribed quota can slow a kernel by
orders of magnitude.
"""
from __future__ import annotations

from simulator.cpus import usable_cpus


def pytest_configure(config):
    try:
        import torch
    except ImportError:
        return
    n = usable_cpus()
    if torch.get_num_threads() > n:
        torch.set_num_threads(n)
