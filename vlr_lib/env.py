"""The workbook's environment switches, each read one way by the notebooks, the library and the command lines.

An empty value is an unset one: ``VLR_FAST=`` (as a shell script or CI matrix writes an unset
variable) takes the default, like ``VLR_DATA=`` does. A value that is set but not understood is an
error naming the variable, never silently the default. ``vlr_lib.notebook`` documents what each
variable does; the command lines turn these errors into usage errors (``cli.args.env``).
"""
from __future__ import annotations

import os
from pathlib import Path

ON, OFF = ("1", "true", "yes"), ("0", "false", "no")
#: On while `make book` executes the notebooks (``vlr_lib.book``): figures and explorers show their book versions.
BOOK = "VLR_BOOK"


def _value(name: str) -> str:
    """The variable's value, stripped and lower-cased; "" when unset or empty."""
    return os.environ.get(name, "").strip().lower()


def flag(name: str, default: bool = False) -> bool:
    """An on/off variable (VLR_FAST, VLR_RERUN, VLR_BOOK): 1/true/yes or 0/false/no; unset or empty: `default`."""
    value = _value(name)
    if not value:
        return default
    if value not in ON + OFF:
        raise ValueError(f"{name} must be 0 or 1, got {value!r}")
    return value in ON


def book_mode() -> bool:
    """True while `make book` executes the notebooks (VLR_BOOK=1)."""
    return flag(BOOK)


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    """`value` when it is one of `choices`, else a ValueError naming `name` (here, not in ``_checks``, which
    imports torch: writing a notebook, ``vlr_lib.book``, needs this and no torch)."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def choice(name: str, choices: tuple[str, ...], default: str) -> str:
    """One of `choices` (VLR_DATA), case-insensitive; unset or empty: `default`."""
    return check_choice(name, _value(name) or default, choices)


def text(name: str) -> str:
    """A free-text variable (VLR_DEVICE, VLR_EDITION, VLR_FLICKR_REPO, ...), stripped, case kept; "" when unset."""
    return os.environ.get(name, "").strip()


def path(name: str) -> Path | None:
    """An absolute path variable (VLR_CACHE, VLR_RUNS, VLR_RECORD); None when unset or empty, a relative one is an
    error naming the variable (a relative path would move with the working directory)."""
    value = text(name)
    if not value:
        return None
    found = Path(value).expanduser()
    if not found.is_absolute():
        raise ValueError(f"{name} must be an absolute path, got {value!r}")
    return found
