"""What the browser needs to redraw the closed-form curves itself (assets/closed_form.js) as the K
and alpha sliders move, sent once per setting of the other controls.

The curves are speedup(B, K, alpha) = E[tokens](K, alpha) x t_plain(B) / t_spec(B, K, alpha)
(priced.Priced.speedup); the browser does that arithmetic, from tables of its three factors:
t_plain at each batch (the curve's BATCHES and, last, the batch the pictures are drawn at),
E[tokens] at each K (1..K_MAX) and alpha, t_spec at each K and batch. The alphas are those the page
can ask for: the alpha slider's values and the alpha curve's (in preset and file mode, each K's
alpha from the scenario's acceptance model and the alpha curve's); an alpha outside them is drawn
by the server. t_spec depends on alpha only under `engine.kind: ideal` with a drafter that ingests
the tokens emitted last round before it drafts (its first pass is B E[tokens] tokens): it is
tabled at each alpha then, once otherwise (`spec_alpha_free`). The tables travel as base64
float64 (little-endian; t_spec as [K, alpha, batch], E[tokens] as [K, alpha]): exact, and a
third of the size of their JSON.
"""
from __future__ import annotations

import base64
from typing import Any

import numpy as np

from .figures import CURVE_AXES, K_COLORS, speedup_layout
from .priced import ALPHAS, BATCHES, K_AXIS, K_MAX, Priced

ALPHA_STEP = 0.01                                         # the alpha slider's step (app.py)
ALPHA_GRID = np.round(np.arange(0, 100) * ALPHA_STEP, 2)  # its values, 0.00..0.99


def _b64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f8").tobytes()).decode("ascii")


def closed_form_data(p: Priced, batch: float, alpha_mode: bool) -> dict[str, Any]:
    """The tables and parameters for the browser's redraw of the scenario priced as `p` at the
    chosen `batch`; `alpha_mode`: the alpha control sets every K's alpha (else each K's alpha is
    the scenario's acceptance model's, `alpha_by_k`)."""
    ks = list(range(1, K_MAX + 1))
    cols = np.append(BATCHES, float(batch))
    alpha_by_k = None if alpha_mode else {str(k): float(p.alpha(k)) for k in ks}
    wanted = set(ALPHAS.tolist()) | (set(ALPHA_GRID.tolist()) if alpha_mode else set(alpha_by_k.values()))
    alphas = np.array(sorted(wanted))
    spec = np.stack([p.spec_table(cols, k, alphas) for k in ks])          # [K, alpha, batch]
    etok = np.array([[p.expected_tokens(k, float(a)) for a in alphas] for k in ks])
    alpha_free = bool(np.all(spec == spec[:, :1, :]))
    if alpha_free:
        spec = spec[:, :1, :]
    kv = [float(p.kv_batch_limit(k)) for k in ks]
    return {"ks": ks, "k_axis": list(K_AXIS), "batches": BATCHES.tolist(), "batch": float(batch),
            "batch_label": f"{float(batch):g}", "alpha_axis": ALPHAS.tolist(),
            "plain": _b64(p.plain_s(cols)), "spec": _b64(spec), "spec_alpha_free": alpha_free,
            "etok": _b64(etok), "alphas": alphas.tolist(), "alpha_by_k": alpha_by_k,
            "alpha_label_by_k": None if alpha_by_k is None else {k: f"{a:.2f}" for k, a in alpha_by_k.items()},
            "kv_limit": [v if np.isfinite(v) and v >= 1 else None for v in kv],
            "layouts": {name: speedup_layout("", *axes) for name, axes in CURVE_AXES.items()},
            "k_colors": list(K_COLORS)}
