"""Atomic, weights-only checkpoints.

A checkpoint is written to a temporary file in the destination folder and
moved into place with ``os.replace`` (atomic on POSIX and Windows when source and
target share a file system), so a crash mid-write leaves the previous
checkpoint intact and loadable. Only tensors and primitive containers are
stored (state_dicts, optimizer state, the history as a JSON string), so loading
uses ``torch.load(weights_only=True)``: no pickled code runs on load.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from .._io import atomic_write

CHECKPOINT_NAME = "last.pt"


def checkpoint_path(checkpoint_dir: str | os.PathLike) -> Path:
    return Path(checkpoint_dir) / CHECKPOINT_NAME


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Atomically save `state` (tensors, numbers, strings, lists and dicts of them)."""
    atomic_write(path, lambda f: torch.save(state, f))


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Load a checkpoint to CPU with ``weights_only=True``."""
    return torch.load(path, map_location="cpu", weights_only=True)


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """JSON twin of ``save_checkpoint`` (grid cells)."""
    data = json.dumps(obj, indent=1).encode()  # key order kept: it is the column order of tables
    atomic_write(path, lambda f: f.write(data))
