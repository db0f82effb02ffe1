"""A configuration search's tables and files: the text table, search.md, search.csv and the
cost-vs-TPOT-p99 Pareto plot search_pareto.png."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.common.atomic_files import out_folder, write_csv, write_text

from ..published.answer_intervals import csv_frame
from .outputs import _cell, _f, banded, serving_section
from .statuses import MEETS

if TYPE_CHECKING:
    from .search import PlanSearch

TABLE = (("rank ", "rank", "d", ">4"), ("configuration", "config", "", "<"), ("status", "status", "", "<18"),
         ("max QPS/replica", "max_qps_per_replica", ".3g", ">16"), ("replicas", "replicas", "d", ">9"),
         ("GPUs", "gpus", "d", ">6"), ("$/GPU-h", "price_per_gpu_hour", ".3f", ">9"),
         ("$/hour", "cost_per_hour_usd", ",.2f", ">10"),
         ("$/M out tok", "cost_per_million_output_tokens_usd", ".3f", ">12"),
         ("TPOT p99 ms at load", "tpot_ms_p99_at_load", ".1f", ">20"))


def format_table(rows: list[dict[str, Any]]) -> str:
    """The ranked table as text (each figure with its 80 % interval where a row has one); the
    configuration column as wide as its longest entry."""
    wide = f"<{max([len('configuration'), *(len(r['config']) for r in rows)])}"
    table = banded(rows, TABLE)
    align = [wide if a == "<" else a for _, _, _, a in table]
    lines = [" ".join(format(h, a) for (h, _, _, _), a in zip(table, align))]
    for r in rows:
        lines.append(" ".join(format(_cell(r, k, f), a) for (_, k, f, _), a in zip(table, align)))
    return "\n".join(lines)


def chosen_line(s: PlanSearch) -> str:
    c = s.chosen
    if c is None:
        return f"no configuration serves {s.target_qps:g} requests/s within the SLO"
    return (f"cheapest: {c['config']}: {c['replicas']} replica(s), {c['gpus']} GPUs, "
            f"${c['cost_per_hour_usd']:,.2f}/hour, "
            f"${c['cost_per_million_output_tokens_usd']:.3f} per million output tokens "
            f"(TPOT p99 {_f(c['tpot_ms_p99_at_load'], '.1f')} ms at {_f(c['qps_per_replica_at_load'], '.3g')} "
            f"requests/s per replica)")


def unserved_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per configuration that misses the SLO at every rate, does not fit or cannot run, with
    the reason."""
    return [f"{r['config']}: {r['status']}: {r['limited_by']}" for r in rows if r["status"] != MEETS]


def headline(s: PlanSearch) -> str:
    slo = s.slo
    return (f"# Configuration search: {s.meta['scenario']}\n\n{s.meta['hardware']} per replica (before the grid), "
            f"engine {s.meta['engine']}, drafter "
            f"{s.meta['drafter']}; grid over {', '.join(s.grid)}; target {s.target_qps:g} requests/s; SLO TPOT p99 "
            f"<= {_f(slo.tpot_ms_p99, 'g')} ms, TTFT p99 <= {_f(slo.ttft_ms_p99, 'g')} ms.")


def format_markdown(s: PlanSearch) -> str:
    heads = [h for h, _, _, _ in TABLE] + ["limited by", "price source"]
    lines = [headline(s), "", chosen_line(s) + ".", "", "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for r in s.rows:
        cells = [_cell(r, k, f) for _, k, f, _ in TABLE] + [r["limited_by"], r["price_source"]]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def write_outputs(s: PlanSearch, out: Path, serving: str | None = None) -> dict[str, str]:
    """search.csv, search.md (with `serving`, the chosen configuration's serving commands) and
    search_pareto.png under `out`."""
    from .search_plot import plot_pareto
    out = out_folder(out)
    csv = write_csv(csv_frame(s.frame), out / "search.csv")
    md = write_text(out / "search.md", format_markdown(s) + serving_section(serving))
    png = plot_pareto(s, out / "search_pareto.png")
    return {"csv": str(csv), "markdown": str(md), "plot": str(png)}
