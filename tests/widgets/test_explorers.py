"""Every explorer the notebooks build (tests/widgets/cases.py): it carries its CSS class, shows each figure as
plotly output with the re-run hint, and the control the benchmark moves changes what it shows
(traces, or the layout: a threshold line is a shape)."""
from __future__ import annotations

import pytest

from tests.widgets.cases import cases
from vlr_lib.widgets._core import HINT, PLOTLY_MIME


@pytest.mark.parametrize("case", cases(), ids=lambda c: f"{c.notebook}-{c.name}")
def test_explorer_moves_and_redraws(case):
    box = case.build()
    assert f"vlr-explorer-{case.name}" in box._dom_classes
    assert HINT in box.children[-1].value
    before = [out.outputs[0]["data"][PLOTLY_MIME] for out in box._outputs]
    assert len(before) == len(box.figures) >= 1
    control = box.controls[case.control]
    assert not control.disabled and control.value != case.value
    control.value = case.value
    after = [out.outputs[0]["data"][PLOTLY_MIME] for out in box._outputs]
    assert after != before, "moving the control changed nothing the browser draws"
