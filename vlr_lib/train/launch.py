"""What ``fit``, ``fit_vsepp`` and ``fit_end_to_end`` share around the engine: settings, objective, device, the run.

Each of them checks its own inputs and builds its two models; :func:`prepare` resolves the
settings for the data and builds the objective (``objective.build_objective``: checked on one batch
before any training) unless the caller passed one it built, and :func:`launch`
moves models and inputs to the device and hands them to ``engine.train_models`` with the
run's recorded configuration.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from torch import Tensor, nn

from . import distributed as D
from .device import default_device
from .engine import FitResult, Plan, Split, train_models
from .objective import LossFn, Objective, build_objective
from .settings import TrainSettings, settings_for

Inputs = tuple[Tensor, Tensor, Tensor]  # image inputs, caption inputs, caption_to_image


def prepare(settings: TrainSettings | None, overrides: dict, n_images: int, loss: str | LossFn | Objective,
            loss_kwargs: Mapping | None, end_to_end: bool = False) -> tuple[TrainSettings, Objective]:
    """The run's settings (mode defaults, overrides, resolved for `n_images` training images) and its objective:
    `loss` itself when it is an :class:`Objective` (built and checked where the call was read), else built and
    checked here, once, before training."""
    settings = settings_for(settings, overrides, end_to_end=end_to_end)
    settings = settings.resolve(n_images, D.rank_and_world()[1])
    if isinstance(loss, Objective):
        if loss_kwargs:
            raise TypeError(f"loss_kwargs must be empty when loss is an Objective (it holds its own: {loss.describe()})")
        return settings, loss
    return settings, build_objective(loss, loss_kwargs, batch_size=settings.batch_size, epochs=settings.epochs)


def _split(inputs: Inputs, device) -> Split:
    img, txt, c2i = (t.to(device) for t in inputs)
    as_float = lambda t: t.float() if t.is_floating_point() else t  # noqa: E731 - ids and uint8 images stay
    return Split(as_float(img), as_float(txt), c2i, img.shape[0])


def run_config(config: dict, settings: TrainSettings, world: int) -> dict:
    """The configuration a run records: the setting's `config`, the experiment's settings (but the epochs: a longer
    run resumes a shorter one) and the number of processes."""
    return {**config, **{k: v for k, v in settings.experiment().items() if k != "epochs"}, "world_size": world}


def launch(models: tuple[nn.Module, nn.Module], train: Inputs, val: Inputs | None, objective: Objective,
           settings: TrainSettings, config: dict) -> FitResult:
    """Train `models` on `train` (evaluating on `val`) on the settings' device; `config` is recorded with the
    experiment's settings and the number of processes (checkpoints resume only the same configuration)."""
    rank, world = D.rank_and_world()
    config = run_config(config, settings, world)
    dev = default_device(settings.device)
    plan = Plan(objective, replace(settings, progress=settings.progress and rank == 0), config)
    models = (models[0].to(dev), models[1].to(dev))
    return train_models(models, _split(train, dev), _split(val, dev) if val is not None else None, plan)
