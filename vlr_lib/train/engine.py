"""The training loop shared by every mode: heads on cached features and end-to-end encoders.

One step (VSE++ recipe, Faghri et al.; Li et al. sec. 4.1): a batch of captions
with their images, embeddings from the two models, S = img @ txt.T, the
objective on S with repeated images masked as false negatives, the gradient's
norm clipped when ``grad_clip`` is set (VSE++ and VSE∞ clip at 2), Adam (or AdamW, as VSE∞). The
learning rate is multiplied by 0.1 from epoch ``lr_decay_epoch`` on (the
papers decay once, halfway). At a loss schedule's switch the new loss gets a fresh
optimizer unless ``optimizer_at_switch="carry"`` (``settings.TrainSettings``). Each epoch's
record holds ``grad_norm``, the mean norm of the (unclipped) gradient over its steps: the
scale each loss hands the optimizer. Everything the loop needs lives on the device;
batches are index tensors drawn on the device (``sampling.epoch_batches``).

No step waits for the device (no host synchronisation; tests/train/test_sync.py counts them):
the inputs are validated once per fit (``fit`` / ``fit_end_to_end``), the positives of the
batches that repeat an image are worked out on the host once per epoch
(``sampling.epoch_positives``), the losses run inside ``vlr_lib._checks.validated`` (no
per-call checks of tensor values), and each step records on the device whether its
embeddings and loss are finite. Every :data:`CHECK_EVERY` steps and at the end of the epoch
the loop reads those flags once (and the running loss for the progress bar): a NaN or inf
raises :class:`TrainingDivergedError` naming the first bad step, before the epoch's
checkpoint, so the last good checkpoint is kept. Mixed precision: bf16 autocast where
``evaluate.autocast_dtype`` allows it (CUDA with native bf16, no recurrent layer).

Callbacks (``fit(..., callbacks=...)``): after every epoch each callback is
called as ``cb(record, result)``, in order, with the epoch's history record (a
dict, already appended to ``result.history``) and the :class:`FitResult` (its
models are the trained heads of that epoch, ``result.history`` all records so
far). A callback may add keys to ``record``; their values must be
JSON-serialisable (numbers, strings, lists, dicts), because the record is what
``result.history`` holds, what ``grid`` stores in its cell files and what the
checkpoint stores: the epoch's checkpoint is written after the callbacks, so
it holds their keys and a resumed run sees them in the restored history. A
callback that raises (e.g. KeyboardInterrupt to stop early) stops training;
that epoch's checkpoint is still written. Callbacks must not change the
models or the existing keys (epoch, loss, rsum, ...). Example: the showdown's
``vlr_lib.experiments.cells.ShowdownMetrics`` adds ``test``, ``probe_cocos`` and
``sel`` (the test metrics of the best validation epoch so far).
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from .._checks import validated
from ..report.labels import flatten_record
from ..similarity import positive_mask
from . import distributed as D
from .checkpoint import checkpoint_path, load_checkpoint, save_checkpoint
from .evaluate import autocast, autocast_dtype, evaluate, probe_cocos, probe_indices
from .objective import LearnedParameters, Objective
from .sampling import Pairs, epoch_batches, epoch_positives
from .settings import TrainSettings

CHECKPOINT_FORMAT = 1
#: Steps between two reads of the device-side divergence flags (one host synchronisation each).
CHECK_EVERY = 50


class TrainingDivergedError(RuntimeError):
    """The loss (or the embeddings) became NaN or infinite; training stopped, the last good checkpoint is kept."""


@dataclass
class Split:
    """Inputs of one split on the device: image inputs, caption inputs, caption -> image index."""

    img: Tensor
    txt: Tensor
    caption_to_image: Tensor
    n_images: int


@dataclass
class FitResult:
    """Trained models (outputs L2-normalised), one history dict per epoch, the run's configuration."""

    img_head: nn.Module
    txt_head: nn.Module
    history: list[dict]
    config: dict
    checkpoint: str | None = None
    extras: dict = field(default_factory=dict)

    def frame(self):
        """History as a pandas DataFrame, COCOS flattened to columns ``cocos_<direction>_<count>``."""
        import pandas as pd

        return pd.DataFrame([flatten_record(r) for r in self.history])

    @property
    def final(self) -> dict:
        """The last epoch's record (flattened)."""
        return flatten_record(self.history[-1]) if self.history else {}

    @torch.no_grad()
    def similarity(self, img_inputs: Tensor, txt_inputs: Tensor) -> Tensor:
        """S [n_images, n_captions] of new inputs under the trained models (on the models' device)."""
        from .evaluate import embed

        dev = next(self.img_head.parameters()).device
        return embed(self.img_head, img_inputs.to(dev)) @ embed(self.txt_head, txt_inputs.to(dev)).T


@dataclass
class Plan:
    """Everything that defines a run: the objective, the resolved settings, the config fingerprinted in checkpoints."""

    objective: Objective
    settings: TrainSettings
    config: dict


# --------------------------------------------------------------------------- one epoch


def _diverged(plan: Plan, epoch: int, step: int, what: str, last_good: int) -> TrainingDivergedError:
    where = f"epoch {epoch + 1}, batch {step + 1}" if step >= 0 else f"the end of epoch {epoch + 1}"
    if plan.settings.checkpoint_dir is None:
        kept = "no checkpoint_dir was given, so nothing was saved"
    elif last_good == 0:
        kept = "no epoch had finished, so no checkpoint was written"
    else:
        kept = f"the last good checkpoint (epoch {last_good}) is kept at {checkpoint_path(plan.settings.checkpoint_dir)}"
    return TrainingDivergedError(
        f"training diverged: {what} at {where} (loss {plan.objective.describe()}, lr {plan.settings.lr}); "
        f"{kept}. Try a smaller lr or a smaller gamma/scale."
    )


def _step(models, learned: LearnedParameters, opt, split: Split, local: Tensor, global_idx: Tensor,
          pairs: Pairs | None, objective: Objective, amp: tuple, grad_clip: float | None
          ) -> tuple[Tensor, Tensor, Tensor]:
    """One optimisation step, without a host synchronisation: (detached loss, [2] bool flags, gradient norm),
    all on the device.

    Local embeddings (each under its model's autocast dtype, `amp`), gathered over ranks with
    gradients, S, the epoch's objective with the batch's pos_mask when an image repeats (`pairs`: its
    positives, from ``sampling.epoch_positives``), backward, gradient averaging, the gradient's
    norm (clipped to `grad_clip` when set), Adam, then the objective's own parameters (`learned`, if it has any)
    clamped into their range. The flags say whether the embeddings (S) and the loss are finite.
    """
    img_model, txt_model = models
    with autocast(amp[0]):
        img_e = img_model(split.img[split.caption_to_image[local]])
    with autocast(amp[1]):
        txt_e = txt_model(split.txt[local])
    img_e, txt_e = D.gather_with_grad(img_e.float()), D.gather_with_grad(txt_e.float())
    S = img_e @ txt_e.T
    mask = None if pairs is None else positive_mask(split.caption_to_image[global_idx])
    with validated(mask, pairs, pairs):  # the mask is symmetric: its transpose has the same pairs
        loss = objective(S, mask, learned.as_kwargs())
    opt.zero_grad(set_to_none=True)
    loss.backward()
    D.average_gradients([*models, learned])
    params = _params(models, learned)
    norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
    if grad_clip is not None:
        torch.nn.utils.clip_grads_with_norm_(params, grad_clip, norm)
    opt.step()
    learned.clamp_()
    loss = loss.detach()
    return loss, torch.stack([torch.isfinite(S.detach()).all(), torch.isfinite(loss)]), norm.detach()


def _check_finite(flags: Tensor, plan: Plan, epoch: int, last_good: int) -> None:
    """Read the flags of the steps so far (one synchronisation); raise at the first step that was not finite."""
    if bool(flags.all()):
        return
    bad = flags.cpu()
    step = int((~bad.all(dim=1)).nonzero()[0])
    what = "the embeddings contain NaN or inf" if not bad[step, 0] else "the loss is NaN or inf"
    raise _diverged(plan, epoch, step, what, last_good)


def _train_epoch(models, learned: LearnedParameters, opt, split: Split, plan: Plan, epoch: int,
                 last_good: int) -> tuple[float, float, int]:
    """One pass over the epoch's batches; returns (mean loss, mean gradient norm, number of steps)."""
    from tqdm.auto import tqdm

    rank, world = D.rank_and_world()
    s = plan.settings
    batches = epoch_batches(split.caption_to_image, split.n_images, s.batch_size, s.seed, epoch, s.sampling)
    positives = epoch_positives(split.caption_to_image, batches)
    per_rank = s.batch_size // world
    local = batches[:, rank * per_rank : (rank + 1) * per_rank]
    amp = tuple(autocast_dtype(split.txt.device, m) for m in models)
    objective = plan.objective.at_epoch(epoch)  # a loss schedule's phase of this epoch
    steps = batches.shape[0]
    total = torch.zeros((), device=split.txt.device)
    norms = torch.zeros((), device=split.txt.device)
    flags = torch.ones(steps, 2, dtype=torch.bool, device=split.txt.device)
    bar = tqdm(range(steps), desc=f"epoch {epoch + 1}", leave=False, disable=not s.progress or rank)
    for step in bar:
        try:
            loss, flags[step], norm = _step(models, learned, opt, split, local[step], batches[step],
                                            positives[step], objective, amp, s.grad_clip)
        except FloatingPointError as err:  # a custom loss's own check
            raise _diverged(plan, epoch, step, f"the loss is not finite ({err})", last_good) from None
        total += loss
        norms += norm
        if (step + 1) % CHECK_EVERY == 0 or step + 1 == steps:
            _check_finite(flags[: step + 1], plan, epoch, last_good)
            if not bar.disable:
                bar.set_postfix(loss=f"{float(total) / (step + 1):.4f}")
    bar.close()
    if not steps:
        return math.nan, math.nan, 0
    return float(total) / steps, float(norms) / steps, steps


# --------------------------------------------------------------------------- checkpoints


def _state(models, learned: LearnedParameters, opt, epoch: int, history: list, plan: Plan) -> dict:
    return {
        "format": CHECKPOINT_FORMAT,
        "epoch": epoch,
        "config": json.dumps(plan.config, sort_keys=True),
        "history": json.dumps(history),
        "img_head": models[0].state_dict(),
        "txt_head": models[1].state_dict(),
        "optimizer": opt.state_dict(),
        "objective": learned.state_dict(),
    }


def _restore(models, learned: LearnedParameters, opt, plan: Plan) -> tuple[int, list]:
    """Load the run's checkpoint if there is one (and resume is on): (epochs done, history)."""
    s = plan.settings
    if s.checkpoint_dir is None or not s.resume:
        return 0, []
    path = checkpoint_path(s.checkpoint_dir)
    if not path.exists():
        return 0, []
    state = load_checkpoint(path)
    stored, wanted = json.loads(state["config"]), json.loads(json.dumps(plan.config, sort_keys=True))
    if stored != wanted:
        diff = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
        raise ValueError(
            f"checkpoint_dir {s.checkpoint_dir} holds a run with a different configuration (differs in {diff}); "
            "use another checkpoint_dir, or start over with resume=False (--no-resume)"
        )
    if state["epoch"] > s.epochs:
        raise ValueError(f"epochs is {s.epochs} but the checkpoint in {s.checkpoint_dir} has {state['epoch']} epochs")
    missing = sorted(set(learned.state_dict()) - set(state.get("objective", {})))
    if missing:
        raise ValueError(f"the checkpoint in {s.checkpoint_dir} lacks the learned parameters of "
                         f"{plan.objective.name!r} ({', '.join(m.rsplit('.', 1)[-1] for m in missing)}): it was not "
                         "written by this run; use another checkpoint_dir, or start over with resume=False (--no-resume)")
    models[0].load_state_dict(state["img_head"])
    models[1].load_state_dict(state["txt_head"])
    learned.load_state_dict(state.get("objective", {}))
    opt.load_state_dict(state["optimizer"])
    return state["epoch"], json.loads(state["history"])


def _params(models, learned: LearnedParameters) -> list[nn.Parameter]:
    """Everything the optimiser trains: the two models' parameters and the objective's own."""
    return [p for m in (*models, learned) for p in m.parameters()]


def _check_params(models, learned: LearnedParameters, plan: Plan, epoch: int, last_good: int) -> None:
    """After an epoch: parameters still finite (the last step may have broken them); one synchronisation."""
    params = _params(models, learned)
    if params and not bool(torch.stack([torch.isfinite(p).all() for p in params]).all()):
        raise _diverged(plan, epoch, -1, "a parameter became NaN or inf", last_good)


# --------------------------------------------------------------------------- the run


def _lr(plan: Plan, epoch: int) -> float:
    s = plan.settings
    return s.lr * (0.1 if epoch >= s.lr_decay_epoch else 1.0)


def _record(models, learned, split, val, plan, probe, epoch, loss, grad_norm, steps, t_train, t0) -> dict:
    rec: dict = {"epoch": epoch + 1, "loss": loss, "grad_norm": grad_norm, "lr": _lr(plan, epoch), "steps": steps}
    if learned.bounds:  # the objective's own parameters at the end of the epoch (a learned temperature's path)
        rec["learned"] = learned.readout()
    if val is not None:
        rec.update(evaluate(*models, val.img, val.txt, val.caption_to_image))
    if probe is not None:
        rec["cocos"] = probe_cocos(
            *models, split.img, split.txt, split.caption_to_image, probe, plan.objective.name, plan.objective.kwargs
        )
    rec["train_seconds"] = t_train
    rec["seconds"] = time.perf_counter() - t0
    return rec


def _run_callbacks(plan: Plan, record: dict, result: FitResult) -> None:
    """The callback contract of the module docstring: cb(record, result), which may add JSON-able keys."""
    for cb in plan.settings.callbacks:
        cb(record, result)


def make_optimizer(params, s: TrainSettings) -> torch.optim.Optimizer:
    """The run's optimizer over `params` at ``s.lr``: Adam, or AdamW (``s.optimizer``), with ``s.weight_decay``
    (Adam: an L2 term in the gradient; AdamW: decoupled, as VSE∞ trains). ``batched`` builds its own with it."""
    kind = torch.optim.AdamW if s.optimizer == "adamw" else torch.optim.Adam
    return kind(params, lr=s.lr, weight_decay=s.weight_decay)


def _optimizer(models, learned: LearnedParameters, s: TrainSettings) -> torch.optim.Optimizer:
    return make_optimizer(_params(models, learned), s)


def train_models(models: tuple[nn.Module, nn.Module], split: Split, val: Split | None, plan: Plan) -> FitResult:
    """Train (img_model, txt_model) on `split` under `plan`, resuming from a checkpoint when there is one.

    Under torch.distributed every rank trains its shard of each batch; rank 0 alone
    evaluates, runs the callbacks and writes the checkpoint, and hands the epoch's
    record to the other ranks, so every rank returns the same history.
    """
    from tqdm.auto import tqdm

    rank, _ = D.rank_and_world()
    s = plan.settings
    learned = plan.objective.parameters_module().to(split.txt.device)
    opt = _optimizer(models, learned, s)
    start, history = _restore(models, learned, opt, plan)
    D.broadcast_modules([*models, learned])
    probe = None
    if s.probe_batch > 0:
        probe = probe_indices(split.caption_to_image, split.n_images, s.probe_batch, s.seed)
    ckpt = str(checkpoint_path(s.checkpoint_dir)) if s.checkpoint_dir else None
    result = FitResult(models[0], models[1], history, plan.config, ckpt)
    bar = tqdm(range(start, s.epochs), desc=plan.objective.describe(), disable=not s.progress or rank)
    for epoch in bar:
        t0 = time.perf_counter()
        if epoch in plan.objective.switches() and s.optimizer_at_switch == "fresh":
            opt = _optimizer(models, learned, s)  # the new loss must not inherit the old one's moments
        for group in opt.param_groups:
            group["lr"] = _lr(plan, epoch)
        loss, grad_norm, steps = _train_epoch(models, learned, opt, split, plan, epoch, last_good=epoch)
        _check_params(models, learned, plan, epoch, last_good=epoch)
        record = None
        if rank == 0:
            record = _record(models, learned, split, val, plan, probe, epoch, loss, grad_norm, steps,
                             time.perf_counter() - t0, t0)
            history.append(record)
            try:
                _run_callbacks(plan, record, result)  # before the save: the keys they add are checkpointed too
            finally:  # a callback that stops the run still leaves this epoch's checkpoint
                if ckpt:
                    save_checkpoint(ckpt, _state(models, learned, opt, epoch + 1, history, plan))
        record = D.broadcast_object(record)
        if rank != 0:
            history.append(record)
        bar.set_postfix({k: round(record[k], 3) for k in ("loss", "rsum") if k in record})
    bar.close()
    return result


def data_fingerprint(*tensors: Tensor) -> list:
    """Shape, dtype and a hash of ~100k evenly strided elements of each input.

    A resumed run must train on the same data. Hashing a strided sample (not a
    float sum, whose bits depend on the reduction order and thread count) is
    exact, cheap for Flickr30K-sized features, and catches any other dataset.
    """
    out = []
    for t in tensors:
        flat = t.detach().reshape(-1)
        sample = flat[:: max(1, flat.numel() // 100_000)].contiguous().cpu()
        digest = hashlib.sha256(sample.view(torch.uint8).numpy().tobytes()).hexdigest()[:16]
        out.append([list(t.shape), str(t.dtype), digest])
    return out
