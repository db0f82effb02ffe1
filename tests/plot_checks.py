"""Test helper: the geometric label checks, measured on rendered figures (conftest's
`saved_figures` keeps them open): `assert_labels_clear`: no two text boxes of an axes (labels,
notes, legend) intersect, and no placed label's box contains a plotted marker's centre."""
from __future__ import annotations

from specsight.studies.shared.plot_labels import PLACED, marker_centres_px


def renderer_of(fig):
    return fig.canvas.get_renderer()


def _text_boxes(ax, renderer) -> list:
    boxes = [t.get_window_extent(renderer) for t in ax.texts if t.get_visible() and t.get_text()]
    if ax.get_legend() is not None:
        boxes.append(ax.get_legend().get_window_extent(renderer))
    return boxes


def _placed(ax):
    return [t for t in ax.texts if t.get_gid() == PLACED]


def assert_labels_clear(fig) -> int:
    """No two text boxes of an axes intersect; no placed label contains a marker centre. Returns
    the number of placed labels."""
    r = renderer_of(fig)
    n = 0
    for ax in fig.axes:
        boxes = _text_boxes(ax, r)
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert not a.overlaps(b), f"text boxes {a} and {b} intersect"
        centres = marker_centres_px(ax)
        for t in _placed(ax):
            box = t.get_window_extent(r)
            inside = ((centres[:, 0] >= box.x0) & (centres[:, 0] <= box.x1)
                      & (centres[:, 1] >= box.y0) & (centres[:, 1] <= box.y1))
            assert not inside.any(), f"label {t.get_text()!r} covers a marker at {centres[inside][0]}"
            n += 1
    return n
