"""The training objective: a loss name (or GOAL combination) turned into ``S, pos_mask -> scalar``.

Every loss of the workbook is a function of the batch similarity matrix S
(the S contract of docs/architecture.md). Three of them are defined by their papers over the *rows* of S
only -- sampled softmax and cross-example softmax (Veit & Wilber eqs. 2-6:
queries are rows) and SmoothAP (Bleeker & de Rijke eq. 8: one AP per query).
Retrieval runs both ways, so the trainer applies them in both directions,
``loss(S, pos_mask) + loss(S.T, pos_mask.T)``: image queries over captions plus
caption queries over images, exactly as the symmetric losses (triplet, InfoNCE,
unified, GOAL) already do internally. Bleeker & de Rijke train SmoothAP this
way (i2t + t2i); Veit & Wilber's eq. 5 is written for one direction.

Loss schedules. "warmup:<first>:<epochs>:<then>" trains with the loss `first` for the first
`epochs` epochs and with `then` afterwards, e.g. "warmup:triplet_all:1:triplet_hardest": the sum
over all negatives while the embeddings are still random, then the hardest negative, as VSE∞
(Chen et al., "Learning the Best Pooling Strategy for Visual Semantic Embedding") trains: its code
sums the hinge over every negative for a first warm-up epoch and clips the gradient's norm at 2
throughout (here ``TrainSettings.grad_clip``). At the switch the second loss gets a fresh Adam
by default (``TrainSettings.optimizer_at_switch``). Bleeker & de Rijke (sec. 5)
explain why: at the start every negative violates the margin, so the all-negatives gradient is
dominated by uninformative negatives, while the hardest negative alone is noisy on random
embeddings. The engine asks the objective for the epoch's loss (:meth:`Objective.at_epoch`);
the name and its loss_kwargs (each phase takes the ones it accepts) key grid cells like any loss.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from .. import registry

LossFn = Callable[..., Tensor]


@dataclass(frozen=True)
class Objective:
    """A named, fully configured objective; call it with (S, pos_mask)."""

    name: str
    kwargs: dict = field(default_factory=dict)
    fn: LossFn | None = None
    both_directions: bool = False
    fixed: dict = field(default_factory=dict)  # arguments implied by the name (GOAL's triplet and pair)
    #: A loss schedule: ((first epoch, objective), ...) in order, the first from epoch 0; empty for one loss.
    phases: tuple[tuple[int, "Objective"], ...] = ()

    def at_epoch(self, epoch: int) -> "Objective":
        """The objective that trains epoch `epoch` (0-based): itself, or the schedule's phase of that epoch."""
        if not self.phases:
            return self
        return [obj for start, obj in self.phases if start <= epoch][-1]

    def switches(self) -> tuple[int, ...]:
        """The epochs (0-based) at which a loss schedule changes its loss; () for one loss."""
        return tuple(start for start, _ in self.phases[1:])

    def learned(self) -> dict[str, tuple[float, float | None, float | None]]:
        """The parameters this objective owns and trains with the models (its registry entry's learned
        hyperparameters: a temperature, a bias): name -> (initial value, lowest, highest). The initial value is the
        run's loss keyword when given, else the entry's; a schedule owns those of both phases."""
        if self.phases:
            return {k: v for _, phase in self.phases for k, v in phase.learned().items()}
        if self.fn is None or self.name.startswith("custom:"):
            return {}
        out = {}
        for k, h in registry.entry(self.name).learned().items():
            init = float(self.kwargs.get(k, h.init))
            if not (h.low is None or h.low <= init) or not (h.high is None or init <= h.high):
                raise ValueError(f"{k} must start within its clamp [{h.low}, {h.high}], got {init}")
            out[k] = (init, h.low, h.high)
        return out

    def parameters_module(self) -> "LearnedParameters":
        """A module holding :meth:`learned` as trainable parameters at their initial values (empty for most losses):
        the engine optimises it with the models, clamps it after every step, checkpoints and reports it."""
        return LearnedParameters(self.learned())

    def __call__(self, S: Tensor, pos_mask: Tensor | None = None, learned: Mapping[str, Tensor] | None = None) -> Tensor:
        """The loss of one batch. `learned`: the current values of the objective's own parameters
        (``LearnedParameters.as_kwargs()``); without it they take their initial values (a check, a figure)."""
        if self.phases:
            raise TypeError(f"{self.name} is a loss schedule: its loss depends on the epoch; "
                            "call objective.at_epoch(epoch)(S, pos_mask)")
        kw = {**self.fixed, **self.kwargs}
        for name, (init, _, _) in self.learned().items():
            kw[name] = learned[name] if learned is not None else torch.tensor(init, dtype=S.dtype, device=S.device)
        if self.both_directions:
            t_mask = None if pos_mask is None else pos_mask.T
            return self.fn(S, pos_mask=pos_mask, **kw) + self.fn(S.T, pos_mask=t_mask, **kw)
        return self.fn(S, pos_mask=pos_mask, **kw)

    def check(self, batch_size: int) -> None:
        """Evaluate once on a random batch of `batch_size` pairs, so that a bad parameter value fails now.

        The losses check their parameters when called (``vlr_lib._checks``); calling once
        before training turns "temperature must be > 0" into an error at the start of a
        run (or of a grid) instead of at its first step. Errors name the parameter.
        A custom callable is not called here (it may count its calls); its first step checks it.
        """
        if self.name.startswith("custom:"):
            return
        for _, phase in self.phases:
            phase.check(batch_size)
        if self.phases:
            return
        g = torch.Generator().manual_seed(0)
        img = torch.randn(batch_size, 8, generator=g)
        txt = img + torch.randn(batch_size, 8, generator=g)
        norm = torch.nn.functional.normalize
        self(norm(img, dim=1) @ norm(txt, dim=1).T)

    def describe(self) -> str:
        """A short label: "unified(gamma=60, margin=0.2)"."""
        args = ", ".join(f"{k}={v}" for k, v in sorted(self.kwargs.items()))
        return f"{self.name}({args})" if args else self.name


class LearnedParameters(nn.Module):
    """The parameters an objective owns (open_clip's learned ``logit_scale``, SigLIP's bias), trained with the models.

    Each is a 0-dim parameter at its initial value, clamped into its [lowest, highest] after every optimiser step as
    open_clip clamps ``logit_scale`` (``clamp_``); ``readout`` gives their values for the epoch's history.
    """

    def __init__(self, specs: Mapping[str, tuple[float, float | None, float | None]]) -> None:
        super().__init__()
        self.bounds = {name: (low, high) for name, (_, low, high) in specs.items()}
        self.values = nn.ParameterDict({name: nn.Parameter(torch.tensor(float(init))) for name, (init, _, _)
                                        in specs.items()})

    def as_kwargs(self) -> dict[str, Tensor]:
        return dict(self.values.items())

    @torch.no_grad()
    def clamp_(self) -> None:
        for name, p in self.values.items():
            low, high = self.bounds[name]
            if low is not None or high is not None:
                p.clamp_(low, high)

    def readout(self) -> dict[str, float]:
        """{name: value} (one host synchronisation for all of them; empty when the objective owns none)."""
        if not self.bounds:
            return {}
        values = torch.stack([p.detach().float() for p in self.values.values()]).cpu().tolist()
        return dict(zip(self.values.keys(), values))


def _warmup(name: str, kwargs: dict) -> Objective:
    """A loss schedule: each phase gets the loss_kwargs it takes (the name's parameters are their union)."""
    first, epochs, then = registry.schedule(name)
    kwargs = _check_kwargs(name, kwargs)
    phase = lambda loss: make_objective(loss, registry.phase_kwargs(loss, kwargs))  # noqa: E731
    return Objective(name=name, kwargs=kwargs, phases=((0, phase(first)), (epochs, phase(then))))


def _check_kwargs(name: str, kwargs: Mapping) -> dict:
    """Reject parameters the loss does not take, naming them (a typo must not be silently ignored)."""
    allowed = list(registry.parameters(name))
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise ValueError(f"loss_kwargs has {unknown} which loss {name!r} does not take; it takes {allowed}")
    if kwargs.get("reduction", "mean") not in ("mean", "sum"):  # "none" gives a vector; the trainer needs a scalar
        raise ValueError(f"loss_kwargs reduction must be 'mean' or 'sum' for training (a scalar loss), "
                         f"got {kwargs['reduction']!r}")
    out = dict(kwargs)
    try:
        json.dumps(out)  # configs are stored in checkpoints and grid caches
    except TypeError:
        raise TypeError(f"loss_kwargs must hold numbers, strings, lists or None (they are stored as JSON), got {out}")
    return out


def make_objective(loss: str | LossFn, loss_kwargs: Mapping | None = None) -> Objective:
    """Resolve `loss` -- a loss name of ``vlr_lib.registry`` (a closed-form loss, "goal:T,P", a loss schedule
    "warmup:<first>:<epochs>:<then>", module docstring), or a callable (S, pos_mask=...) -> scalar.

    A callable is used as given (one direction as written; it is the hook for
    students' own losses and for tests).
    """
    kwargs = dict(loss_kwargs or {})
    if callable(loss):
        name = getattr(loss, "__qualname__", type(loss).__name__)
        return Objective(name=f"custom:{name}", kwargs=kwargs, fn=loss)
    if not isinstance(loss, str):
        raise TypeError(f"loss must be a loss name or a callable, got {type(loss).__name__}")
    if registry.is_schedule(loss):
        return _warmup(loss, kwargs)
    entry = registry.entry(loss)
    return Objective(name=loss, kwargs=_check_kwargs(loss, kwargs), fn=entry.fn, both_directions=entry.row_wise,
                     fixed=dict(entry.fixed))


def build_objective(loss: str | LossFn, loss_kwargs: Mapping | None = None, *, batch_size: int,
                    epochs: int) -> Objective:
    """A run's objective, built and checked once: :func:`make_objective` (the name and which parameters it takes),
    evaluated on one random batch of `batch_size` pairs (a bad value fails now, naming its parameter), and a loss
    schedule that switches inside the run's `epochs`.

    Build it where the command line or the call is read and pass it down (``fit(..., loss=objective)``): the
    trainer takes an :class:`Objective` as it is and checks it no more.
    """
    objective = make_objective(loss, loss_kwargs)
    objective.check(batch_size)
    check_schedule(objective, epochs)
    return objective


def check_schedule(objective: Objective, epochs: int) -> None:
    """A loss schedule must switch inside the run: a first phase of `epochs` or more would never train the second loss."""
    late = [k for k in objective.switches() if k >= epochs]
    if late:
        raise ValueError(f"epochs is {epochs} but the loss schedule {objective.name!r} switches after {late[0]} "
                         f"epoch(s): its second loss would never train; give more epochs or a shorter first phase")
