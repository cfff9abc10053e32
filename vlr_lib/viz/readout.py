"""Numbers in figure labels and titles: a parameter value (:func:`fmt`) and a slider's value exactly as the slider
shows it (:func:`readout`), so that a title never disagrees with the control beside it."""
from __future__ import annotations

import re

import numpy as np

from .._checks import check_finite


def fmt(value) -> str:
    """A parameter value for labels: numbers with %g, anything else as str."""
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return f"{float(value):g}"
    return str(value)


#: How a log-scale slider shows its value (d3-format), and so how figure titles print it (:func:`readout`).
LOG_READOUT = ".3~g"


def readout(value: float, spec: str = LOG_READOUT) -> str:
    """`value` exactly as a slider with readout format `spec` shows it (d3-format ".Nf" or ".N~g"), for titles.

    ".N~g" is JavaScript's toPrecision(N) with trailing zeros trimmed: exponent notation only below 1e-6 or from 10^N
    up (60 -> "60", 22.387 -> "22.4", 1e4 -> "1e+4").
    """
    check_finite("value", value)
    match = re.fullmatch(r"\.(\d+)(~?)([fg])", spec)
    if match is None:
        raise ValueError(f"spec must be a d3 format like '.2f' or '.3~g', got {spec!r}")
    digits, trim, kind = int(match.group(1)), bool(match.group(2)), match.group(3)
    if kind == "f":
        return f"{value:.{digits}f}"
    mantissa, exponent = f"{value:.{max(digits, 1) - 1}e}".split("e")
    e = int(exponent)
    text = f"{mantissa}e{e:+d}" if (e < -6 or e >= digits) else f"{value:.{max(digits - 1 - e, 0)}f}"
    if trim:
        head, sep, tail = text.partition("e")
        head = head.rstrip("0").rstrip(".") if "." in head else head
        text = head + sep + tail
    return text

