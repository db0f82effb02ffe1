"""The capacity plan's probes (specsight plan): TPOT p99 and TTFT p99 against the offered rate,
one colour per configuration, the SLO and each configuration's largest passing rate drawn."""
from __future__ import annotations

from pathlib import Path

from ..shared.figure_file import plt, save_figure
from ..shared.plot_axes import log_label, plain_log_ticks


def plot_plan_probes(rows: list, *, slo_tpot_ms: float | None, slo_ttft_ms: float | None, path: str | Path,
                     title: str) -> Path:
    """The search's probes: TPOT p99 (left) and TTFT p99 (right) against the offered rate, one colour
    per configuration; filled = within the SLO, hollow = not; the SLO as a red line; each
    configuration's largest passing rate as a dotted vertical line."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.0), dpi=110)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = "osD^v<>"                         # one shape and size per configuration: identical searches stay visible
    for ax, key, slo, name in ((axes[0], "tpot_ms_p99", slo_tpot_ms, "TPOT p99 (ms per output token)"),
                               (axes[1], "ttft_ms_p99", slo_ttft_ms, "TTFT p99 (ms)")):
        for i, r in enumerate(rows):
            c = colors[i % len(colors)]
            pr = sorted((p for p in r["probes"] if p.get(key) is not None), key=lambda p: p["qps"])
            if not pr:
                continue
            ax.plot([p["qps"] for p in pr], [p[key] for p in pr], color=c, lw=1.0, alpha=0.6)
            ok = [p for p in pr if p["pass"]]
            bad = [p for p in pr if not p["pass"]]
            m, size = markers[i % len(markers)], 60 - 12 * (i % 4)
            label = (f"{r['config']}: max {r['max_qps_per_replica']:.3g}/s" if r["max_qps_per_replica"]
                     else f"{r['config']}: none")
            ax.scatter([p["qps"] for p in ok], [p[key] for p in ok], color=c, s=size, marker=m, zorder=4 + i,
                       label=label)
            ax.scatter([p["qps"] for p in bad], [p[key] for p in bad], facecolors="none", edgecolors=c, s=size,
                       marker=m, zorder=4 + i)
            if r["max_qps_per_replica"]:
                ax.axvline(r["max_qps_per_replica"], color=c, ls=":", lw=1.2)
        if slo is not None:
            ax.axhline(slo, color="red", lw=1.5, ls="--", label=f"SLO: {name.split(' (')[0]} {slo:g} ms")
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain_log_ticks(ax)
        ax.set_xlabel(log_label("offered load per replica (requests/s, Poisson)"))
        ax.set_ylabel(log_label(name))
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8, loc="best", title="filled: passes the SLO and is stable", title_fontsize=8)
    handles, labels = axes[1].get_legend_handles_labels()
    if any(lab.startswith("SLO") for lab in labels):     # the TTFT panel names the limit it draws
        axes[1].legend(handles=[h for h, lab in zip(handles, labels) if lab.startswith("SLO")], fontsize=8,
                       loc="best")
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)
