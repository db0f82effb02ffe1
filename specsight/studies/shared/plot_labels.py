"""Point labels that never overlap: each label goes to the nearest of a set of places around its
point where its rendered box, widened by a gap, meets no other text (labels, legend, titles inside
the axes), contains no plotted marker's centre, comes no nearer than LINE_PAD_PX to a plotted
line and stays inside the axes. Where every place touches a line, the nearest place free of text
and markers is taken; a label with no such place is left out (its point is still drawn, and the callers name the value
elsewhere, e.g. in the legend).

Everything is measured in display pixels with the figure's own renderer: text boxes from
`Text.get_window_extent(renderer)`, markers from each line's and scatter's data through its
transform, lines sampled every LINE_STEP_PX along their display path. Placement runs after the
data, the limits, the legend and the layout are final: `place_labels` lays the figure out first
and marks its labels (gid PLACED), and `figure_file.save_figure` then leaves the layout as it is."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.backend_bases import RendererBase
    from matplotlib.figure import Figure
    from matplotlib.text import Annotation
    from matplotlib.transforms import Bbox

PLACED = "specsight-placed-label"
GAP_PX = 3.0            # clear space kept between a label and any other text
MARKER_PAD_PX = 3.0     # a marker centre this close to a label's box counts as covered
LINE_STEP_PX = 2.0      # lines are sampled this finely in display space
LINE_PAD_PX = 3.0       # a line this close to a label's box counts as crossing it
RINGS_PT = (5, 9, 14, 20, 28, 38, 50)      # distances from the point tried, nearest first (points)
DIRECTIONS = 16                            # directions tried on each ring


def has_placed_labels(fig: Figure) -> bool:
    """Whether place_labels has laid out and labelled this figure (its layout is then final)."""
    return any(t.get_gid() == PLACED for ax in fig.axes for t in ax.texts)


def marker_centres_px(ax: Axes) -> np.ndarray:
    """Display coordinates (n, 2) of every marker drawn on the axes: lines with a marker, scatters."""
    out = [np.empty((0, 2))]
    for line in ax.lines:
        if not line.get_visible() or str(line.get_marker()).lower() in ("none", "", " "):
            continue
        xy = np.asarray(line.get_xydata(), dtype=float).reshape(-1, 2)
        out.append(line.get_transform().transform(xy))
    for coll in ax.collections:
        offsets = np.asarray(coll.get_offsets(), dtype=float).reshape(-1, 2)
        if coll.get_visible() and len(offsets):
            out.append(coll.get_offset_transform().transform(offsets))
    pts = np.concatenate(out)
    return pts[np.isfinite(pts).all(axis=1)]


def line_samples_px(ax: Axes) -> np.ndarray:
    """Points (n, 2) every LINE_STEP_PX along each drawn line of the axes, in display coordinates."""
    out = [np.empty((0, 2))]
    for line in ax.lines:
        if not line.get_visible() or str(line.get_linestyle()).lower() in ("none", "", " "):
            continue
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float).reshape(-1, 2))
        for a, b in zip(xy[:-1], xy[1:]):
            if not (np.isfinite(a).all() and np.isfinite(b).all()):
                continue
            n = max(2, int(math.ceil(float(np.hypot(*(b - a))) / LINE_STEP_PX)) + 1)
            out.append(a + np.linspace(0.0, 1.0, n)[:, None] * (b - a))
    return np.concatenate(out)


def text_boxes_px(ax: Axes, renderer: RendererBase) -> list[Bbox]:
    """Window extents of the visible text on the axes and of its legend."""
    boxes = [t.get_window_extent(renderer) for t in ax.texts if t.get_visible() and t.get_text()]
    legend = ax.get_legend()
    if legend is not None and legend.get_visible():
        boxes.append(legend.get_window_extent(renderer))
    return boxes


def _any_inside(pts: np.ndarray, x0: float, y0: float, x1: float, y1: float) -> bool:
    return bool(np.any((pts[:, 0] >= x0) & (pts[:, 0] <= x1) & (pts[:, 1] >= y0) & (pts[:, 1] <= y1)))


def _candidates(w_px: float, h_px: float, px_per_pt: float):
    """(dx_pt, dy_pt, ha, va, box offset from the point in px: x0, y0) nearest first."""
    for r in RINGS_PT:
        for i in range(DIRECTIONS):
            theta = 2 * math.pi * i / DIRECTIONS - math.pi / 4          # start right-below
            c, s = math.cos(theta), math.sin(theta)
            dx, dy = r * c, r * s
            ha = "left" if c > 0.3 else ("right" if c < -0.3 else "center")
            va = "bottom" if s > 0.3 else ("top" if s < -0.3 else "center")
            x0 = dx * px_per_pt - {"left": 0.0, "center": w_px / 2, "right": w_px}[ha]
            y0 = dy * px_per_pt - {"bottom": 0.0, "center": h_px / 2, "top": h_px}[va]
            yield dx, dy, ha, va, x0, y0


def place_labels(ax: Axes, points: Sequence[tuple[float, float]], texts: Sequence[str], *, color: str = "black",
                 fontsize: float = 7, fontweight: str = "normal", gap_px: float = GAP_PX) -> list[Annotation]:
    """Annotate each (x, y) data point with its text at the nearest free place (module docstring);
    returns the labels placed, in order (a label with no free place is left out)."""
    fig = ax.figure
    if not has_placed_labels(fig):
        fig.tight_layout()
    renderer = fig.canvas.get_renderer()          # type: ignore[attr-defined]
    frame = ax.get_window_extent(renderer)
    taken = text_boxes_px(ax, renderer)
    markers = marker_centres_px(ax)
    lines = line_samples_px(ax)
    px_per_pt = fig.dpi / 72.0
    placed = []
    for (x, y), text in zip(points, texts):
        probe = ax.text(0, 0, text, fontsize=fontsize, fontweight=fontweight)
        box = probe.get_window_extent(renderer)
        probe.remove()
        w, h = box.width, box.height
        px, py = ax.transData.transform((x, y))
        free_of_text, chosen = None, None
        for dx, dy, ha, va, ox, oy in _candidates(w, h, px_per_pt):
            x0, y0, x1, y1 = px + ox, py + oy, px + ox + w, py + oy + h
            if x0 < frame.x0 or x1 > frame.x1 or y0 < frame.y0 or y1 > frame.y1:
                continue
            if any(x0 - gap_px < b.x1 and b.x0 < x1 + gap_px and y0 - gap_px < b.y1 and b.y0 < y1 + gap_px
                   for b in taken):
                continue
            if _any_inside(markers, x0 - MARKER_PAD_PX, y0 - MARKER_PAD_PX, x1 + MARKER_PAD_PX, y1 + MARKER_PAD_PX):
                continue
            if free_of_text is None:
                free_of_text = (dx, dy, ha, va)
            if not _any_inside(lines, x0 - LINE_PAD_PX, y0 - LINE_PAD_PX, x1 + LINE_PAD_PX, y1 + LINE_PAD_PX):
                chosen = (dx, dy, ha, va)
                break
        chosen = chosen or free_of_text
        if chosen is None:
            continue
        dx, dy, ha, va = chosen
        label = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=fontsize,
                            color=color, ha=ha, va=va, fontweight=fontweight, gid=PLACED, zorder=7)
        taken.append(label.get_window_extent(renderer))
        placed.append(label)
    return placed
