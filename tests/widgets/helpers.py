"""Helpers shared by the widget-wiring tests (no browser: they drive the widgets directly)."""
from __future__ import annotations

import ipywidgets as W


def find(box: W.Widget, kind: type, description: str | None = None) -> W.Widget:
    """The first widget of `kind` (and `description`) in a container tree, depth first."""
    if isinstance(box, kind) and (description is None or getattr(box, "description", None) == description):
        return box
    for child in getattr(box, "children", ()):
        try:
            return find(child, kind, description)
        except LookupError:
            pass
    raise LookupError(f"no {kind.__name__} {description!r}")


class live:
    """The figure an explorer shows now: attribute access follows `box.figure` (index `i` of `box.figures`)
    as it is redrawn, so a test can hold it across control changes."""

    def __init__(self, box: W.Widget, i: int = 0) -> None:
        self._box, self._i = box, i

    def __getattr__(self, name: str):
        return getattr(self._box.figures[self._i], name)
