"""A day's windows: per schedule window (each row's span, every period a run covers), the
requests that arrived in it and their p99 TTFT and TPOT. The point store records them with every
`schedule` point (points.py); fleet_day judges a fleet by its worst window."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.serving.metrics import per_request_latencies

if TYPE_CHECKING:
    import pandas as pd

    from simulator.workload.rate_schedule import RateSchedule


def window_stats(requests: pd.DataFrame, schedule: RateSchedule) -> dict[str, Any]:
    """Per window of the schedule (each row's span, every period the run covers) the requests that
    arrived in it and their p99 TTFT and TPOT (ms; TTFT infinite where a request never got its
    first token); and the worst window of each."""
    lat = per_request_latencies(requests)
    t = requests["arrival_s"].to_numpy()
    starts = np.asarray(schedule.start_s)
    cycle = np.floor(t / schedule.period_s)
    piece = np.clip(np.searchsorted(starts, t - cycle * schedule.period_s, side="right") - 1, 0, len(starts) - 1)
    win = (cycle * len(starts) + piece).astype(np.int64)
    windows = []
    for w in np.unique(win):
        m = win == w
        ttft, tpot = lat["ttft"][m] * 1e3, lat["tpot"][m] * 1e3
        tpot = tpot[np.isfinite(tpot)]
        c, p = divmod(int(w), len(starts))
        windows.append({"start_s": c * schedule.period_s + float(starts[p]), "requests": int(m.sum()),
                        "ttft_ms_p99": math.inf if np.isnan(ttft).any() else float(np.percentile(ttft, 99)),
                        "tpot_ms_p99": float(np.percentile(tpot, 99)) if tpot.size else math.nan})

    def worst(key: str) -> float:
        vals = [w[key] for w in windows if not math.isnan(w[key])]
        return max(vals) if vals else math.nan
    return {"windows": windows, "window_ttft_ms_p99_max": worst("ttft_ms_p99"),
            "window_tpot_ms_p99_max": worst("tpot_ms_p99")}
