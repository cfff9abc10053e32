"""Command lines: ``vlr-train``, ``vlr-grid`` and ``python -m vlr_lib train|grid|showdown|lessons|check``.

One implementation per command (``cli.train``, ``cli.grid``, ``cli.showdown``, ``cli.lessons``), one parser
module (``cli.args``: argument types, one-line errors, Ctrl-C, ``--debug``) also used by the
scripts of ``data_scripts/``, and the flags train and grid share (``cli.common``). ``cli.check``
is the dry run of a Flickr30K run (``python -m vlr_lib check --data flickr30k``).
"""
from __future__ import annotations

from collections.abc import Sequence

from . import check, grid, train
from .args import exit_quietly


def train_main(argv: Sequence[str] | None = None) -> int:
    """``vlr-train``."""
    return exit_quietly(lambda: train.main(argv))


def grid_main(argv: Sequence[str] | None = None) -> int:
    """``vlr-grid``."""
    return exit_quietly(lambda: grid.main(argv))



def check_main(argv: Sequence[str] | None = None) -> int:
    """``python -m vlr_lib check``."""
    return exit_quietly(lambda: check.main(argv))
