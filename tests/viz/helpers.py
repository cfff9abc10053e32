"""Small readers of built figures, shared by the figure and explorer tests."""
from __future__ import annotations

import plotly.graph_objects as go


def title(fig: go.Figure) -> str:
    """The whole title a reader sees: the title and its subtitle."""
    t = fig.layout.title
    return " | ".join(x for x in (t.text, t.subtitle.text) if x)


def outlines(traces) -> list:
    """The outlines of marked cells (matrix.mark_traces), without their white halos."""
    return [t for t in traces if t.type == "scatter" and not (t.hoverinfo == "skip" and t.showlegend is False
                                                             and t.marker.color == "white")]
