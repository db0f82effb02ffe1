"""`acceptance: {model: kernel}`: calibrate's exact sampling kernel, handed to the simulator.

The simulator never imports calibrate (docs/layout.md), and the kernel imports torch. This module
gives the simulator a factory that imports calibrate.acceptance_source only when a kernel scenario
is loaded; specsight.cli, specsight.studies and the names of `specsight` import it, so every
specsight entry (and every worker process a study starts) can run a kernel scenario.
"""
from __future__ import annotations

from typing import Any

from simulator.speculation.acceptance import use_kernel_source


def kernel_source(vocab_size: int, k_max: int, seed: int = 0, **kw: Any) -> Any:  # noqa: ANN401
    """calibrate.acceptance_source.kernel_source, imported on first use (torch)."""
    from calibrate.acceptance_source import kernel_source as from_calibrate
    return from_calibrate(vocab_size, k_max, seed, **kw)


use_kernel_source(kernel_source)
