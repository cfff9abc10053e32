"""Where the workbook keeps what it produces: one place, never the working directory or the install tree.

- :func:`cache_root` -- everything that can be rebuilt: ``$VLR_CACHE``, else
  ``$XDG_CACHE_HOME/vlr-workbook``, else ``~/.cache/vlr-workbook``;
- :func:`feature_cache_root` -- frozen-backbone feature caches, ``<cache root>/features``;
- :func:`runs_dir` -- trained grids, showdowns and sweeps: ``$VLR_RUNS``, else ``<cache root>/runs``;
- :func:`flickr30k_dir` -- where ``data_scripts/prepare_flickr30k.py`` saves Flickr30K by default,
  ``<cache root>/data/flickr30k``; :func:`flickr30k_path` -- the local copy every entry point reads
  when none is given: ``$VLR_DATA_PATH``, else that folder when it holds a saved copy (else the Hub);
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

from . import env


def repo_root() -> Path:
    """The checkout holding vlr_lib (its parent folder)."""
    return Path(__file__).resolve().parents[1]


def cache_root() -> Path:
    """$VLR_CACHE, else $XDG_CACHE_HOME/vlr-workbook, else ~/.cache/vlr-workbook (a relative XDG_CACHE_HOME
    is ignored, as the XDG specification says; a relative VLR_CACHE is an error)."""
    explicit = env.path("VLR_CACHE")
    if explicit is not None:
        return explicit
    xdg = Path(os.environ.get("XDG_CACHE_HOME", "") or "~/.cache").expanduser()
    return (xdg if xdg.is_absolute() else Path("~/.cache").expanduser()) / "vlr-workbook"


def feature_cache_root() -> Path:
    """Cached frozen-backbone features: ``<cache_root()>/features``."""
    return cache_root() / "features"


def runs_dir() -> Path:
    """Results of training runs: $VLR_RUNS, else ``<cache_root()>/runs``."""
    explicit = env.path("VLR_RUNS")
    return explicit if explicit is not None else cache_root() / "runs"


def flickr30k_dir() -> Path:
    """Where data_scripts/prepare_flickr30k.py saves Flickr30K by default: ``<cache_root()>/data/flickr30k``."""
    return cache_root() / "data" / "flickr30k"


def flickr30k_path() -> Path | None:
    """The local Flickr30K copy read when no path is given: $VLR_DATA_PATH (which must exist), else
    :func:`flickr30k_dir` when it holds a saved copy, else None (the Hub)."""
    explicit = env.path("VLR_DATA_PATH")
    if explicit is not None:
        if not explicit.exists():
            raise FileNotFoundError(f"VLR_DATA_PATH is {str(explicit)!r}, which does not exist; point it at a "
                                    "Flickr30K copy (data_scripts/prepare_flickr30k.py writes one) or unset it")
        return explicit
    default = flickr30k_dir()
    return default if (default / "dataset_dict.json").is_file() else None
