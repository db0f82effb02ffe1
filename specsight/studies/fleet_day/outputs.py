"""A fleet day's tables and files: the text table, day.md, day.csv and windows.csv."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.common.atomic_files import out_folder, write_csv, write_text

from ..plan.outputs import _f, format_markdown, format_table

if TYPE_CHECKING:
    from .study import FleetDay

TABLE = (("config", "config", "", "<24"), ("replicas", "replicas", "d", ">9"), ("GPUs", "gpus", "d", ">6"),
         ("GPU-h/day", "gpu_hours_per_day", ",.0f", ">11"),
         ("worst TPOT p99 ms", "worst_window_tpot_ms_p99", ".1f", ">19"),
         ("worst TTFT p99 ms", "worst_window_ttft_ms_p99", ".0f", ">19"),
         ("mean batch", "mean_batch", ".1f", ">12"), ("mean K", "mean_k", ".2f", ">8"))


def table(day: FleetDay) -> str:
    """The settings as a text table (worst: the worst window at the answer's replica count)."""
    return format_table(day.rows, TABLE)


def headline(day: FleetDay) -> str:
    """The Markdown heading and its one-paragraph setting."""
    d, slo = day.schedule, day.slo
    return (f"# Fleet day: {day.meta['scenario']}\n\n{day.meta['hardware']} per replica, engine {day.meta['engine']}, "
            f"drafter {day.meta['drafter']}; "
            f"{d['windows']} windows over {d['period_h']:g} h (simulated {d['time_compression']:g}x faster), "
            f"peak {d['peak_qps']:g} requests/s, mean {d['mean_qps']:.3g} requests/s, {d['requests']:,} requests; "
            f"SLO in every window: TPOT p99 <= {_f(slo.tpot_ms_p99, 'g')} ms, "
            f"TTFT p99 <= {_f(slo.ttft_ms_p99, 'g')} ms.")


def windows_frame(day: FleetDay) -> Any:
    """One row per (setting, window) at each setting's answer: its start on the simulated clock (s)
    and on the real one (h), requests and p99 latencies."""
    import pandas as pd
    per_h = day.schedule["time_compression"] / 3600.0
    rows = [{"config": r["config"], "replicas": r["replicas"], "start_h": w["start_s"] * per_h, **w}
            for r in day.rows for w in r.get("windows", [])]
    return pd.DataFrame(rows, columns=["config", "replicas", "start_s", "start_h", "requests", "ttft_ms_p99",
                                       "tpot_ms_p99"])


def write_outputs(day: FleetDay, out: Path) -> dict[str, str]:
    """day.csv, day.md and windows.csv under `out`."""
    out = out_folder(out)
    csv = write_csv(day.frame, out / "day.csv")
    md = write_text(out / "day.md", format_markdown(day.rows, headline(day), TABLE))
    win = write_csv(windows_frame(day), out / "windows.csv")
    return {"csv": str(csv), "markdown": str(md), "windows": str(win)}
