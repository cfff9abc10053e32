"""Where the workbook keeps what it produces: one place, never the working directory or the install tree.

- :func:`cache_root` -- everything that can be rebuilt: ``$VLR_CACHE``, else
  ``$XDG_CACHE_HOME/vlr-workbook``, else ``~/.cache/vlr-workbook``;
- :func:`feature_cache_root` -- frozen-backbone feature caches, ``<cache root>/features``;
- :func:`runs_dir` -- trained grids, showdowns and sweeps: ``$VLR_RUNS``, else ``<cache root>/runs``;
- :func:`repo_root` -- the checkout holding ``vlr_lib`` (for files that ship with it, never for output).

The command lines, the showdown, the data scripts and the notebooks all resolve their defaults
here, so a notebook finds what ``vlr-grid`` or ``data_scripts/extract_features.py`` wrote,
wherever each was started from, and a read-only install (a shared course server) works: nothing is
written next to the package. Environment paths must be absolute: a relative one would silently
depend on the folder a notebook or command happens to start in.
"""
from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The checkout holding vlr_lib (its parent folder)."""
    return Path(__file__).resolve().parents[1]


def _absolute_env(name: str) -> Path | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_absolute():
        raise ValueError(f"{name} must be an absolute path, got {value!r}")
    return path


def cache_root() -> Path:
    """$VLR_CACHE, else $XDG_CACHE_HOME/vlr-workbook, else ~/.cache/vlr-workbook (a relative XDG_CACHE_HOME
    is ignored, as the XDG specification says; a relative VLR_CACHE is an error)."""
    explicit = _absolute_env("VLR_CACHE")
    if explicit is not None:
        return explicit
    xdg = Path(os.environ.get("XDG_CACHE_HOME", "") or "~/.cache").expanduser()
    return (xdg if xdg.is_absolute() else Path("~/.cache").expanduser()) / "vlr-workbook"


def feature_cache_root() -> Path:
    """Cached frozen-backbone features: ``<cache_root()>/features``."""
    return cache_root() / "features"


def runs_dir() -> Path:
    """Results of training runs: $VLR_RUNS, else ``<cache_root()>/runs``."""
    explicit = _absolute_env("VLR_RUNS")
    return explicit if explicit is not None else cache_root() / "runs"
