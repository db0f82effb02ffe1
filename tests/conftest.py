"""Test-session setup: keep torch's thread pool within the CPUs this process may actually use.

A CI container can report more cores than its CPU quota allows; torch then starts one OpenMP
thread per reported core, and spinning threads on an oversubscribed quota can slow a kernel by
orders of magnitude.
"""
from __future__ import annotations

import os
import sys

import pytest

from simulator.common.cpus import usable_cpus


def pytest_configure(config):
    n = usable_cpus()
    # torch sizes its pool from OMP_NUM_THREADS when it is first imported (by the tests that need
    # it: importing it here would cost every run ~1.5 s); if something imported it already, set it.
    omp = os.environ.get("OMP_NUM_THREADS", "")
    if not omp.isdigit() or int(omp) > n:
        os.environ["OMP_NUM_THREADS"] = str(n)
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() > n:
        torch.set_num_threads(n)


@pytest.fixture
def saved_figures(monkeypatch):
    """Every figure the plotting code saves, kept open for measuring (figure_file.save_figure closes
    it through plt.close)."""
    import matplotlib.pyplot as plt
    figs = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figs.append(fig))
    yield figs
    monkeypatch.undo()
    for fig in figs:
        plt.close(fig)
