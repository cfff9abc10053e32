"""Which torch device a run uses: one parser for the trainer, the command lines and the notebooks' VLR_DEVICE."""
from __future__ import annotations

import os

import torch

DEVICE_FORMS = "cpu, cuda, cuda:N or mps"


def parse_device(value: str | torch.device, what: str = "device") -> torch.device:
    """`value` as a torch.device that exists on this machine, or a ValueError that says why not.

    Accepted: ``cpu``, ``cuda``, ``cuda:N`` (N below the number of GPUs) and ``mps``;
    a CUDA or MPS device on a machine without one is an error here, not deep inside training.
    `what` names the setting in the message ("--device", "VLR_DEVICE").
    """
    if isinstance(value, torch.device):
        device = value
    else:
        text = str(value).strip().lower()
        try:
            device = torch.device(text)
        except (RuntimeError, ValueError):
            raise ValueError(f"{what} must be {DEVICE_FORMS}, got {value!r}") from None
    if device.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise ValueError(f"{what} is {str(value)!r} but no CUDA device is available here; use cpu")
        if device.index is not None and device.index >= n:
            raise ValueError(f"{what} is {str(value)!r} but this machine has {n} CUDA device(s) (cuda:0..cuda:{n - 1})")
    elif device.type == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(f"{what} is {str(value)!r} but MPS is not available here; use cpu")
    elif device.type != "cpu":
        raise ValueError(f"{what} must be {DEVICE_FORMS}, got {value!r}")
    return device


def default_device(device: str | torch.device | None = None) -> torch.device:
    """`device` checked by :func:`parse_device`; None: this rank's GPU (LOCAL_RANK under torchrun), else cpu."""
    if device is not None:
        return parse_device(device)
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    return torch.device("cpu")
