"""Atomic, weights-only checkpoints.

A checkpoint is written with ``vlr_lib._io.atomic_write`` (temporary file in the
destination folder, ``os.replace``), so a crash mid-write leaves the previous
checkpoint intact and loadable. Only tensors and primitive containers are
stored (state_dicts, optimizer state, the history as a JSON string), so loading
uses ``torch.load(weights_only=True)``: no pickled code runs on load. A
checkpoint that cannot be read (truncated by a full disk, damaged) is reported
with its path and the way out; a permission error is reported as such.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from .._io import atomic_write, read_back

CHECKPOINT_NAME = "last.pt"
#: What to do with a checkpoint that cannot be read (the CLIs' flag and fit's argument).
RESUME_FIX = "delete it, or start over with --no-resume (resume=False in Python)"


def checkpoint_path(checkpoint_dir: str | os.PathLike) -> Path:
    return Path(checkpoint_dir) / CHECKPOINT_NAME


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Atomically save `state` (tensors, numbers, strings, lists and dicts of them)."""
    atomic_write(path, lambda f: torch.save(state, f))


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Load a checkpoint to CPU with ``weights_only=True``; an unreadable file names itself and the fix."""

    def load(p: Path) -> dict[str, Any]:
        state = torch.load(p, map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or "epoch" not in state:
            raise TypeError("not a checkpoint written by vlr_lib.train")
        return state

    return read_back(path, load, "checkpoint", RESUME_FIX)
