"""The configuration search's Pareto plot: USD per million output tokens against TPOT p99 at the
fleet's load, one point per configuration that meets the SLO; the Pareto front joined and
labelled (a single-point front as a marker alone), the cheapest configuration starred, the TPOT SLO
drawn; labels placed where they cover no text, marker or line (plot_labels.py)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..shared.figure_file import plt, save_figure
from ..shared.plot_labels import place_labels
from .statuses import MEETS
from .study import speculates

if TYPE_CHECKING:
    from .search import PlanSearch


def plot_pareto(s: PlanSearch, path: str | Path) -> Path:
    ok = [r for r in s.rows if r["status"] == MEETS and r["tpot_ms_p99_at_load"] is not None]
    fig, ax = plt.subplots(figsize=(11, 5.5), dpi=110)
    others = [r for r in ok if not r["pareto"]]
    front = sorted((r for r in ok if r["pareto"]), key=lambda r: r["tpot_ms_p99_at_load"])
    plain = [r for r in others if not speculates(r.get("overrides") or {})]
    spec = [r for r in others if speculates(r.get("overrides") or {})]
    ax.scatter([r["tpot_ms_p99_at_load"] for r in spec], [r["cost_per_million_output_tokens_usd"] for r in spec],
               color="0.6", s=28, label="meets the SLO")
    ax.scatter([r["tpot_ms_p99_at_load"] for r in plain], [r["cost_per_million_output_tokens_usd"] for r in plain],
               color="black", marker="s", s=30, label="meets the SLO, without speculation (labelled)")
    one = len(front) == 1                       # a single point is the front: a marker, no line
    ax.plot([r["tpot_ms_p99_at_load"] for r in front], [r["cost_per_million_output_tokens_usd"] for r in front],
            color="C0", marker="o", lw=1.5, ls="none" if one else "-", ms=7,
            label="Pareto front: one configuration, cheaper and faster than every other" if one
            else "Pareto front (cheaper or faster than every other)")
    chosen = s.chosen
    if chosen is not None and chosen["tpot_ms_p99_at_load"] is not None:
        ax.scatter([chosen["tpot_ms_p99_at_load"]], [chosen["cost_per_million_output_tokens_usd"]], marker="*",
                   s=260, color="C3", zorder=5, label="cheapest")
    if s.slo.tpot_ms_p99 is not None:
        ax.axvline(s.slo.tpot_ms_p99, color="red", ls="--", lw=1.2, label=f"TPOT SLO {s.slo.tpot_ms_p99:g} ms")
    left_out = len(s.rows) - len(ok)
    ax.set_xlabel("TPOT p99 at the fleet's load (ms per output token; one replica at target / replicas)")
    ax.set_ylabel("USD per million output tokens")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),     # outside: labels never meet it
              title=f"{left_out} more miss the SLO or cannot run:\nsee search.md" if left_out else None,
              title_fontsize=7)
    engines = sorted({str(r.get("engine", s.meta["engine"])) for r in s.rows}) or [s.meta["engine"]]
    ax.set_title(f"{s.meta['scenario']}, engine{'s' if len(engines) > 1 else ''} {', '.join(engines)}: "
                 f"cost against latency at {s.target_qps:g} requests/s", fontsize=10)
    shown = front + sorted(plain, key=lambda r: r["cost_per_million_output_tokens_usd"])
    place_labels(ax, [(r["tpot_ms_p99_at_load"], r["cost_per_million_output_tokens_usd"]) for r in shown],
                 [label_of(r) for r in shown], fontsize=7)
    return save_figure(fig, path)


def label_of(row: dict) -> str:
    """A configuration's label on the plot: its grid point and setting, 'no speculation' for off."""
    return str(row["config"]).replace("off (no speculation)", "no speculation")
