"""Point labels that never overlap: each label goes to the first of a few offsets around its point
where its box meets no text already on the axes and stays inside them; a label with no free place
is left out (its point is still drawn, and the neighbouring labels name the sequence).

Placement reads text sizes from the figure's renderer, so it runs after the data, the limits and
the layout are final (`place_labels` lays the figure out first)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.text import Annotation

# (dx, dy) in points from the point: right-below first (the plots' old place), then around the point
OFFSETS_PT = ((4, -11), (4, 4), (-4, 4), (-4, -11), (0, 9), (0, -16), (9, -4), (-9, -4),
              (12, -20), (12, 12), (-12, 12), (-12, -20))


def place_labels(ax: Axes, points: Sequence[tuple[float, float]], texts: Sequence[str], *, color: str = "black",
                 fontsize: float = 7, fontweight: str = "normal", gap: float = 1.0) -> list[Annotation]:
    """Annotate each (x, y) point with its text where it overlaps nothing; returns the labels placed.
    `gap` scales the offsets (a big marker needs its label further out)."""
    fig = ax.figure
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()          # type: ignore[attr-defined]
    frame = ax.get_window_extent(renderer)
    taken = [t.get_window_extent(renderer) for t in ax.texts if t.get_visible() and t.get_text()]
    placed = []
    for (x, y), text in zip(points, texts):
        for dx, dy in ((gap * dx, gap * dy) for dx, dy in OFFSETS_PT):
            ha = "right" if dx < 0 else ("center" if dx == 0 else "left")
            label = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=fontsize,
                                color=color, ha=ha, fontweight=fontweight)
            box = label.get_window_extent(renderer)
            inside = (box.x0 >= frame.x0 and box.x1 <= frame.x1 and box.y0 >= frame.y0 and box.y1 <= frame.y1)
            if inside and not any(box.overlaps(b) for b in taken):
                taken.append(box)
                placed.append(label)
                break
            label.remove()
    return placed
