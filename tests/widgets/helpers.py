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
