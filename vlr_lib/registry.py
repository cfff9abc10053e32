"""The loss registry: every loss is one entry, and every loss name is read here.

A loss name takes one of three forms, and this module parses all three for everyone (the trainer, the grid,
the experiments, the command lines, the report and the figures):

- ``"<loss>"``: a closed-form loss, one :class:`~vlr_lib.loss_entry.LossEntry` of ``vlr_lib.losses.REGISTERED``
  ("triplet_hardest", "info_nce", ...);
- ``"goal:<triplet>,<pair>"``: a GOAL combination (Xuan & Chen; ``vlr_lib.goal``), an entry built from the name;
- ``"warmup:<first>:<epochs>:<then>"``: a loss schedule (``vlr_lib.train.objective``): `first` for the first
  `epochs` epochs, then `then`, as VSE∞ trains.

:func:`entry` gives a name's entry, :func:`label` its display name, :func:`parameters` the keyword parameters it
takes, :func:`resolved` every hyperparameter value a run of it trains with (defaults filled in: what record and
cache keys hold, so that a changed default makes them stale), :func:`glossary` the names the papers use. An unknown
name is one ``ValueError`` that lists the near matches, wherever it was typed.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import NamedTuple

from . import goal, losses
from .loss_entry import LossEntry

GOAL_PREFIX = "goal:"
WARMUP_PREFIX = "warmup:"
_FORMS = "'goal:<triplet>,<pair>' or 'warmup:<first>:<epochs>:<then>'"
#: The closed-form losses by name, in the order of ``losses.REGISTERED``.
_ENTRIES: dict[str, LossEntry] = {e.name: e for e in losses.REGISTERED}


class Schedule(NamedTuple):
    """A loss schedule "warmup:<first>:<epochs>:<then>": `first` for `epochs` epochs, then `then`."""

    first: str
    epochs: int
    then: str


def names() -> tuple[str, ...]:
    """Every closed-form loss name (GOAL combinations and schedules come on top)."""
    return tuple(_ENTRIES)


def goal_names() -> tuple[str, ...]:
    """The 15 GOAL combinations' names, triplet weights outer: "goal:con,con", "goal:con,lin", ..."""
    return tuple(f"{GOAL_PREFIX}{t},{p}" for t in goal.GOAL_TRIPLETS for p in goal.GOAL_PAIRS)


def is_goal(name: object) -> bool:
    return isinstance(name, str) and name.startswith(GOAL_PREFIX)


def is_schedule(name: object) -> bool:
    return isinstance(name, str) and name.startswith(WARMUP_PREFIX)


def _unknown(name: object, what: str = "loss") -> ValueError:
    """One error for a name that is no loss, with the near matches."""
    known = [*_ENTRIES, *goal_names()]
    near = difflib.get_close_matches(str(name), known, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
    return ValueError(f"{what} {name!r} is not a registered loss{hint} The losses are {', '.join(_ENTRIES)}, "
                      f"{_FORMS}")


def entry(name: str) -> LossEntry:
    """The entry of a closed-form loss or a GOAL combination ("goal:cir,sig-ms"); a schedule has none."""
    if not isinstance(name, str):
        raise TypeError(f"loss must be a loss name, got {type(name).__name__}")
    if name in _ENTRIES:
        return _ENTRIES[name]
    if is_goal(name):
        try:
            return _goal_entry(*goal.parse_goal_name(name))
        except ValueError as err:
            raise ValueError(f"loss {name!r} is not a GOAL combination: {err}") from None
    if is_schedule(name):
        raise ValueError(f"loss {name!r} is a loss schedule, not one loss: read it with registry.schedule")
    raise _unknown(name)


@lru_cache(maxsize=None)
def _goal_entry(triplet: str, pair: str) -> LossEntry:
    config = goal.GoalConfig(triplet, pair)
    known = goal.TABLE1[(triplet, pair)]
    return LossEntry(config.name, goal.goal_objective, config.label, () if known == "New" else (known,),
                     {name: goal.HYPER[name] for name in config.params()},
                     fixed={"triplet": triplet, "pair": pair})


def _phases(text: str) -> list[str]:
    """The colon-separated fields of a schedule, "goal" joined to its combination ("goal:cir,sig-ms")."""
    out: list[str] = []
    for part in text.split(":"):
        if out and out[-1].strip() == GOAL_PREFIX[:-1]:
            out[-1] = f"{GOAL_PREFIX}{part}"
        else:
            out.append(part)
    return out


def schedule(name: str) -> Schedule:
    """Split "warmup:<first>:<epochs>:<then>" into its phases; each phase a closed-form loss or a GOAL combination,
    `epochs` an integer >= 1."""
    parts = _phases(name[len(WARMUP_PREFIX):]) if is_schedule(name) else []
    if len(parts) != 3 or not parts[1].isdigit() or int(parts[1]) < 1:
        raise ValueError(f"a loss schedule must look like 'warmup:<first>:<epochs>:<then>' with epochs >= 1, "
                         f"e.g. 'warmup:triplet_all:1:triplet_hardest', got {name!r}")
    first, epochs, then = parts[0].strip(), int(parts[1]), parts[2].strip()
    for phase in (first, then):
        if is_schedule(phase):
            raise ValueError(f"the phases of {name!r} must be losses, not schedules, got {phase!r}")
        entry(phase)  # an unknown phase: the registry's error, with the near matches
    return Schedule(first, epochs, then)


def check(name: str) -> str:
    """`name` if it is a loss name of any form, else the registry's error."""
    schedule(name) if is_schedule(name) else entry(name)
    return name


def parameters(name: str) -> tuple[str, ...]:
    """The keyword parameters a loss name takes, e.g. ('margin', 'gamma', 'reduction'). A GOAL combination takes
    every GOAL parameter (its weights use some: :func:`hyperparameters`); a schedule what either phase takes."""
    if is_schedule(name):
        first, _, then = schedule(name)
        return tuple(dict.fromkeys([*parameters(first), *parameters(then)]))
    e = entry(name)
    return tuple(goal.HYPER) if is_goal(name) else tuple(e.hyper)


def hyperparameters(name: str) -> tuple[str, ...]:
    """The hyperparameters a loss's value depends on: a GOAL combination's own weights' (``GoalConfig.params``)."""
    if is_schedule(name):
        first, _, then = schedule(name)
        return tuple(dict.fromkeys([*hyperparameters(first), *hyperparameters(then)]))
    return tuple(entry(name).hyper)


def phase_kwargs(name: str, kwargs: Mapping) -> dict:
    """The part of a run's loss keywords that loss `name` takes (each phase of a schedule gets its own)."""
    return {k: v for k, v in kwargs.items() if k in parameters(name)}


def resolved(name: str, kwargs: Mapping | None = None) -> dict:
    """Every hyperparameter value a run of `name` trains with: the defaults, overridden by `kwargs`.

    What record and cached-run keys hold: a changed default changes them, so a record made under the old
    default is stale. A schedule resolves each phase with the keywords it takes ({"phases": [first, then]}).
    """
    kwargs = dict(kwargs or {})
    if is_schedule(name):
        first, _, then = schedule(name)
        return {"phases": [resolved(p, phase_kwargs(p, kwargs)) for p in (first, then)]}
    return {**entry(name).defaults(), **kwargs}


def resolved_config(config: Mapping) -> dict:
    """A grid configuration ({"loss": name, **parameters}) with every hyperparameter of its loss resolved; a
    configuration whose loss is no registered name (a custom callable's) is returned as it is."""
    name = config.get("loss")
    try:
        check(name)
    except (TypeError, ValueError):
        return dict(config)
    return {**config, **resolved(name, phase_kwargs(name, config))}


def label(name: str) -> str:
    """The one display name of a loss: "Triplet-SH", "GOAL (cir, sig-ms)", "Triplet → Triplet-SH after 1 epoch"."""
    if is_schedule(name):
        first, epochs, then = schedule(name)
        return f"{label(first)} → {label(then)} after {epochs} epoch{'s' if epochs > 1 else ''}"
    return entry(name).label


def split_names(text: str) -> list[str]:
    """Comma-separated loss names, a GOAL combination's own comma kept:
    "goal:cir,sig-ms,info_nce" -> ["goal:cir,sig-ms", "info_nce"] (also as a warm-up's phase)."""
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if out and re.search(r"(^|:)goal:[^,:]*$", out[-1]):  # "goal:<triplet>" still waits for its pair
            out[-1] += f",{part}"
        elif part:
            out.append(part)
    return out


def cocos_rules() -> dict[str, str]:
    """The COCOS counting rule of each loss that has one (Bleeker & de Rijke eqs. 9-13): name -> rule."""
    return {e.name: e.cocos for e in _ENTRIES.values() if e.cocos}


def command_line_parameters() -> dict[str, str]:
    """Every numeric hyperparameter a command line can set, with its kind ("float" or "topk"): the union over
    the losses and GOAL (a choice such as `reduction` is not set from the command line: training needs a scalar)."""
    out: dict[str, str] = {}
    for hyper in [*(h for e in _ENTRIES.values() for h in e.hyper.items()), *goal.HYPER.items()]:
        name, h = hyper
        if h.kind != "choice":
            out.setdefault(name, h.kind)
    return out


def glossary() -> list[dict[str, str]]:
    """One row per closed-form loss, then one for GOAL: the workbook's name, the function, the papers' names, its
    hyperparameters with their defaults and the notebook that derives it."""
    rows = [{"name": e.label, "function": f"losses.{e.fn.__name__}", "also called": "; ".join(e.aliases),
             "hyperparameters": ", ".join(f"{k}={v}" for k, v in e.defaults().items()), "notebook": e.notebook or ""}
            for e in _ENTRIES.values()]
    rows.append({"name": "GOAL (t, p)", "function": "goal.goal_objective, trainer name 'goal:t,p'",
                 "also called": "the 15 combinations of Xuan & Chen; Table 1 (goal.TABLE1) names the five that "
                                "reproduce a known loss",
                 "hyperparameters": "those of its two weights (goal.TRIPLET_PARAMS, goal.PAIR_PARAMS)",
                 "notebook": entry("goal:con,con").notebook or ""})
    return rows
