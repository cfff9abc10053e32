"""The numbers figures print in labels and titles: a slider's value as the slider shows it."""
from __future__ import annotations

import math

import pytest

from vlr_lib.viz.readout import fmt, readout


@pytest.mark.parametrize("value, spec, text", [
    (22.387211385683397, ".3~g", "22.4"), (60.0, ".3~g", "60"), (1e4, ".3~g", "1e+4"), (0.001, ".3~g", "0.001"),
    (0.12345, ".3~g", "0.123"), (0.25, ".2f", "0.25"), (3.0, ".1f", "3.0"), (1e-7, ".3~g", "1e-7"),
])
def test_readout_prints_a_value_as_its_slider_shows_it(value, spec, text):
    assert readout(value, spec) == text


def test_readout_rejects_an_unknown_format():
    with pytest.raises(ValueError, match="spec"):
        readout(1.0, "%.2f")


@pytest.mark.parametrize("value", [float("nan"), math.inf])
def test_readout_rejects_a_value_that_is_not_finite(value):
    with pytest.raises(ValueError, match="^value must be a finite number"):
        readout(value, ".2f")


def test_fmt_prints_numbers_with_g_and_anything_else_as_text():
    assert (fmt(0.1), fmt(60), fmt(True), fmt("linear")) == ("0.1", "60", "True", "linear")
