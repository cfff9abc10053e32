"""What a registered loss is: a :class:`LossEntry` and its :class:`Hyper` parameters.

A loss is one entry, written beside its function (``vlr_lib.losses.REGISTERED``); ``vlr_lib.registry``
collects the entries and answers every question about a loss name. This module holds only the two records,
with no import of the library, so that the losses can declare their entries and the registry can read them
without an import circle.
"""
from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

#: The kinds of hyperparameter value: a finite real number, a top-k count or fraction
#: (docs/architecture.md, "topk"), or one of a few named choices (a reduction, a reading of an equation).
KINDS = ("float", "topk", "choice")
_DERIVED_IN = re.compile(r"Derived in (notebooks/\d\d_\w+\.py)")


@dataclass(frozen=True)
class Hyper:
    """One hyperparameter of a loss: its kind, the range its value makes sense in, and whether it is learned.

    `low` / `high`: the closed range of sensible values (None: unbounded), which a tuning grid must stay in.
    `learned`: the objective owns it as a trained parameter and the value a run is given is its initial one,
    clamped to [`low`, `high`] after every step (open_clip's ``logit_scale``). `choices`: the values of a
    "choice". The default value is the loss function's own keyword default (one home: its signature), or
    `init` for a learned parameter, which the function takes as a tensor without a default.
    """

    kind: str = "float"
    low: float | None = None
    high: float | None = None
    learned: bool = False
    init: float | None = None
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.learned and self.init is None:
            raise ValueError("a learned hyperparameter needs its initial value, init")


REDUCTION = Hyper("choice", choices=("mean", "sum"))


@dataclass(frozen=True)
class LossEntry:
    """One loss: the function of S, how the workbook names it, its hyperparameters and where it is derived.

    `fn(S, **hyperparameters, pos_mask=...)` is the loss; `label` its one display name and `aliases` the names
    the papers give it (the glossary); `hyper` every parameter besides S and pos_mask; `cocos` its COCOS counting
    rule (``vlr_lib.analysis``), if it has one; `row_wise`: defined over the rows of S only, so the trainer applies
    it in both directions; `fixed`: arguments the name implies (GOAL's triplet and pair weights). The notebook
    that derives it is read from the function's docstring ("Derived in notebooks/NN_topic.py.").
    """

    name: str
    fn: Callable
    label: str
    aliases: tuple[str, ...]
    hyper: Mapping[str, Hyper]
    cocos: str | None = None
    row_wise: bool = False
    fixed: Mapping[str, object] = field(default_factory=dict)

    @property
    def notebook(self) -> str | None:
        """The notebook that derives the loss, from the last "Derived in ..." of its function's docstring."""
        found = _DERIVED_IN.findall(self.fn.__doc__ or "")
        return found[-1] if found else None

    def defaults(self) -> dict[str, object]:
        """Every hyperparameter's default: the function's keyword default, or a learned one's initial value."""
        signature = inspect.signature(self.fn).parameters
        out = {}
        for name, hyper in self.hyper.items():
            if hyper.learned:
                out[name] = hyper.init
            else:
                out[name] = signature[name].default
        return out

    def learned(self) -> dict[str, Hyper]:
        """The hyperparameters the objective owns and trains."""
        return {name: h for name, h in self.hyper.items() if h.learned}
