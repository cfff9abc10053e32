"""Loss names: what the trainer, the grid, the command lines and the tables call a loss.

One home for parsing a name and for what it takes:

- a closed-form loss of ``vlr_lib.losses.LOSSES`` ("triplet_hardest", "info_nce", ...);
- a GOAL combination "goal:<triplet>,<pair>" (Xuan & Chen; ``vlr_lib.goal.parse_goal_name``);
- a loss schedule "warmup:<first>:<epochs>:<then>" (``vlr_lib.train.objective``: `first` for the
  first `epochs` epochs, then `then`, as VSE∞ trains).

:func:`loss_parameters` says which keyword parameters a name takes, :func:`loss_name` how tables
and figures label it, :func:`split_loss_names` splits a comma-separated list (a GOAL combination
keeps its own comma). It reads the losses and GOAL only, so the trainer and the report both use it.
"""
from __future__ import annotations

import inspect
import re

from . import goal, losses

GOAL_PREFIX = "goal:"
WARMUP_PREFIX = "warmup:"


def split_loss_names(text: str) -> list[str]:
    """Comma-separated loss names, a GOAL combination's own comma kept:
    "goal:cir,sig-ms,info_nce" -> ["goal:cir,sig-ms", "info_nce"] (also as a warm-up's phase)."""
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if out and _awaits_pair(out[-1]):
            out[-1] += f",{part}"
        elif part:
            out.append(part)
    return out


def _awaits_pair(name: str) -> bool:
    """`name` ends in "goal:<triplet>" without its ",<pair>" yet."""
    return re.search(r"(^|:)goal:[^,:]*$", name) is not None


def _phases(text: str) -> list[str]:
    """The colon-separated fields of a schedule, "goal" joined to its combination ("goal:cir,sig-ms")."""
    out: list[str] = []
    for part in text.split(":"):
        if out and out[-1].strip() == GOAL_PREFIX[:-1]:
            out[-1] = f"{GOAL_PREFIX}{part}"
        else:
            out.append(part)
    return out


def parse_warmup_name(name: str) -> tuple[str, int, str]:
    """Split "warmup:<first>:<epochs>:<then>" into (first, epochs, then); the two phases are loss names
    of ``vlr_lib.losses.LOSSES`` or GOAL combinations ("warmup:triplet_all:1:goal:cir,sig-ms"),
    `epochs` an integer >= 1."""
    parts = _phases(name[len(WARMUP_PREFIX):]) if name.startswith(WARMUP_PREFIX) else []
    if len(parts) != 3 or not parts[1].isdigit() or int(parts[1]) < 1:
        raise ValueError(f"a loss schedule must look like 'warmup:<first>:<epochs>:<then>' with epochs >= 1, "
                         f"e.g. 'warmup:triplet_all:1:triplet_hardest', got {name!r}")
    first, epochs, then = parts[0].strip(), int(parts[1]), parts[2].strip()
    for phase in (first, then):
        if phase.startswith(WARMUP_PREFIX) or not (phase in losses.LOSSES or phase.startswith(GOAL_PREFIX)):
            raise ValueError(f"the phases of {name!r} must be loss names of {tuple(losses.LOSSES)} or "
                             f"'goal:<triplet>,<pair>', got {phase!r}")
    return first, epochs, then


def loss_parameters(loss: str) -> tuple[str, ...]:
    """The keyword parameters a loss name (or "goal:T,P") takes, e.g. ('margin', 'gamma', 'reduction')."""
    if not isinstance(loss, str):
        raise TypeError(f"loss must be a loss name, got {type(loss).__name__}")
    if loss.startswith(WARMUP_PREFIX):  # a loss schedule takes what either of its phases takes
        first, _, then = parse_warmup_name(loss)
        return tuple(dict.fromkeys([*loss_parameters(first), *loss_parameters(then)]))
    if loss.startswith(GOAL_PREFIX):
        goal.parse_goal_name(loss)
        fn, fixed = goal.goal_objective, ("triplet", "pair")
    elif loss in losses.LOSSES:
        fn, fixed = losses.LOSSES[loss], ()
    else:
        raise ValueError(f"loss must be one of {tuple(losses.LOSSES)}, 'goal:<triplet>,<pair>' or "
                         f"'warmup:<first>:<epochs>:<then>', got {loss!r}")
    return tuple(p for p in inspect.signature(fn).parameters if p not in ("S", "pos_mask", *fixed))


def loss_name(loss: str) -> str:
    """The display name of a trained loss: ``losses.loss_label``, or "Triplet → Triplet-SH after 1 epoch"
    for the loss schedule "warmup:triplet_all:1:triplet_hardest"."""
    if isinstance(loss, str) and loss.startswith(WARMUP_PREFIX):
        first, epochs, then = parse_warmup_name(loss)
        return f"{loss_name(first)} → {loss_name(then)} after {epochs} epoch{'s' if epochs > 1 else ''}"
    return losses.loss_label(loss)
