"""Where the workbook keeps what it produces: one place, never relative to the working directory.

- :func:`repo_root` -- the checkout that holds ``vlr_lib`` (an editable install, as ``make``
  sets up); ``runs/`` and ``cache/`` live there, git-ignored;
- :func:`runs_dir` -- trained grids and showdowns (``runs/`` under the root);
- :func:`feature_cache_root` -- frozen-backbone feature caches (``cache/features`` under the root).

The command lines, the showdown and the notebooks all resolve their defaults here, so a
notebook finds what ``vlr-grid`` or ``data_scripts/extract_features.py`` wrote, wherever each
was started from.
"""
from __future__ import annotations

from pathlib import Path


def repo_root() -> Path:
    """The checkout holding vlr_lib (its parent folder)."""
    return Path(__file__).resolve().parents[1]


def runs_dir(root: Path | None = None) -> Path:
    """Results of training runs: ``<root>/runs`` (root: the checkout)."""
    return (root or repo_root()) / "runs"


def feature_cache_root(root: Path | None = None) -> Path:
    """Cached frozen-backbone features: ``<root>/cache/features`` (root: the checkout)."""
    return (root or repo_root()) / "cache" / "features"
