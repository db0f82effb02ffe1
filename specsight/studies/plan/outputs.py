"""A capacity plan's tables and files: the text table, plan.md, plan.csv and plan.png."""
from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.common.atomic_files import out_folder, write_csv, write_text

from ..published.answer_intervals import SUFFIX, csv_frame, format_interval, group_note, has_interval, scenario_group
from .statuses import no_rate_meets

if TYPE_CHECKING:
    from .study import CapacityPlan


def _f(v: Any, fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


TABLE = (("config", "config", "", "<24"), ("max QPS/replica", "max_qps_per_replica", ".2f", ">16"),
         ("vs off", "capacity_vs_off", ".2f", ">8"), ("TPOT p99 ms", "tpot_ms_p99_at_max", ".1f", ">13"),
         ("TTFT p99 ms", "ttft_ms_p99_at_max", ".0f", ">13"), ("replicas", "replicas", "d", ">9"),
         ("GPUs", "gpus", "d", ">6"), ("$/hour", "cost_per_hour_usd", ",.2f", ">10"),
         ("$/M out tok", "cost_per_million_output_tokens_usd", ".3f", ">13"))


def _cell(r: dict[str, Any], key: str, fmt: str) -> str:
    """A cell, with the value's 80 % interval beside it where the row carries one."""
    txt = str(r[key]) if not fmt else _f(r[key], fmt)
    band = format_interval(r.get(key + SUFFIX), fmt.lstrip(","))
    return f"{txt} {band}" if band else txt


def banded(rows: list[dict[str, Any]], table: tuple = TABLE) -> tuple:
    """`table` with each column that has an interval in some row widened to hold it."""
    return tuple((h, k, f, a[0] + str(int(a[1:]) + 14)) if any(r.get(k + SUFFIX) for r in rows) and a[1:].isdigit()
                 else (h, k, f, a) for h, k, f, a in table)


def format_table(rows: list[dict[str, Any]], table: tuple = TABLE) -> str:
    """A text table of `rows`; `table`: (heading, key, format, alignment) per column."""
    table = banded(rows, table)
    lines = ["".join(format(h, a) for h, _, _, a in table)]
    for r in rows:
        lines.append("".join(format(_cell(r, k, f), a) for _, k, f, a in table))
    return "\n".join(lines)


def unserved_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per configuration with no rate that meets the SLO, with the reason."""
    return [no_rate_meets(r["config"], r["limited_by"]) for r in rows if r["max_qps_per_replica"] is None]


def format_markdown(rows: list[dict[str, Any]], head: str, table: tuple = TABLE) -> str:
    """`head`, then a Markdown table of `rows` (the columns of `table`, then `limited_by`)."""
    lines = [head, "", "| " + " | ".join(h for h, _, _, _ in table) + " | limited by |",
             "|" + "---|" * (len(table) + 1)]
    for r in rows:
        lines.append("| " + " | ".join(_cell(r, k, f) for _, k, f, _ in table) + f" | {r['limited_by']} |")
    return "\n".join(lines) + "\n"


def headline(p: CapacityPlan) -> str:
    """The plan's Markdown heading and its one-paragraph setting."""
    slo = p.slo
    return (f"# Capacity plan: {p.meta['scenario']}\n\n{p.meta['hardware']} per replica, engine {p.meta['engine']}, "
            f"drafter {p.meta['drafter']}; "
            f"target {p.target_qps:g} requests/s; SLO TPOT p99 <= {_f(slo.tpot_ms_p99, 'g')} ms, "
            f"TTFT p99 <= {_f(slo.ttft_ms_p99, 'g')} ms; {price_words(p.price_per_gpu_hour, p.price_source)}."
            + f"\n\n{interval_note(p)}")


def price_words(usd: float, where: str) -> str:
    """`$3.348 per GPU-hour (profile h100-sxm)`; pools priced apart (price.py): their mean per GPU
    and each pool's price."""
    if where.startswith("prefill ("):     # "prefill (1 GPUs at $4.464): source; decode (...): source"
        pre, dec = where.split("; decode (", 1)
        return f"${usd:.4g} per GPU-hour on average ({pre.split(':')[0]}, decode ({dec.split(':')[0]})"
    return f"${usd:g} per GPU-hour" + (f" ({where.split(':')[0]})" if where else "")


def interval_note(p: CapacityPlan) -> str:
    """What the brackets are (how a capacity gets the speedup's interval), or that ideal has none."""
    engine, method = scenario_group(p.source or {})
    note = group_note(engine, method)
    return note if not has_interval(engine) else (
        note + "; a speculative configuration's max QPS takes its capacity speedup's interval, plain decoding's "
        "capacity held right, and its replicas follow from the ends")


def serving_section(serving: str | None) -> str:
    """plan.md's (and search.md's) closing section: the chosen configuration's serving commands as
    `specsight plan` prints them (deploy.PlanDeployment.text()); empty without them."""
    if not serving:
        return ""
    return ("\n## Serving commands\n\nFlags and fields with their sources: docs/deploy.md.\n\n"
            f"```\n{serving.rstrip()}\n```\n")


def write_outputs(p: CapacityPlan, out: Path, serving: str | None = None) -> dict[str, str]:
    """plan.csv, plan.md (with `serving`, the chosen configuration's serving commands) and plan.png
    under `out`."""
    from .probes_plot import plot_plan_probes
    out = out_folder(out)
    csv = write_csv(csv_frame(p.frame), out / "plan.csv")
    md = write_text(out / "plan.md", format_markdown(p.rows, headline(p)) + serving_section(serving))
    png = plot_plan_probes(p.rows, slo_tpot_ms=p.slo.tpot_ms_p99, slo_ttft_ms=p.slo.ttft_ms_p99, path=out / "plan.png",
                           title=f"{p.meta['scenario']}, engine {p.meta['engine']}: p99 latency vs offered load "
                                 f"per replica (search probes)")
    return {"csv": str(csv), "markdown": str(md), "plot": str(png)}
