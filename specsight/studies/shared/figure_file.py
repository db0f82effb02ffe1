"""Figures on matplotlib's Agg backend (no display), each written whole and then freed."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from simulator.common.atomic_files import replacing  # noqa: E402

from .plot_labels import has_placed_labels  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plt", "save_figure"]


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Lay the figure out (unless place_labels did: its labels are placed for that layout), write
    it to `path` and free it."""
    if not has_placed_labels(fig):
        fig.tight_layout()
    path = Path(path)
    try:
        with replacing(path) as tmp:          # whole or not at all (simulator/common/atomic_files.py)
            fig.savefig(tmp)
    finally:
        plt.close(fig)
    return path
