"""Many runs of the features setting trained together: ``fit_many``, R heads stacked along a leading run dimension.

On a GPU a step of a linear head on 512-d features at batch 128 is launch overhead (~3 ms, far more than its
arithmetic), so the showdown's 72 runs x 15 epochs x 1,132 steps wait on the host. ``fit_many`` trains R runs that
share their data, schedule and model but differ in seed and loss in one loop: each head's parameters are stacked
(``torch.func.stack_module_state``) and applied to R batches in one call (``vmap`` over ``functional_call``), S is
one batched matmul [R, B, B], and one Adam steps every run's parameters at once. Each run is still the run ``fit``
trains alone:

- the same heads (``build_heads`` from its seed) and the same batches (``sampling.epoch_batches`` from its seed);
- its own objective on its own S slice: the losses are custom autograd Functions, so they are called once per run
  (a loop over R, not a vmap); the gradient of the sum of the R losses reaches each run's parameters from its own
  loss only;
- its own gradient norm and clipping (per-run norms of the stacked gradients);
- Adam is elementwise, so one Adam over stacked tensors is R Adams (all runs take the same number of steps, so the
  bias corrections agree); a loss schedule's fresh Adam at its switch restarts every run's, so a group's schedules
  must switch at the same epochs (or carry the optimizer);
- its own history record per epoch (``engine._record``: the same keys as ``fit``'s; ``train_seconds`` and
  ``seconds`` are the group's), callbacks and ``FitResult``.

On the CPU the result equals the sequential runs' up to float rounding (batched matmuls sum in another order;
tests/train/test_batched.py). A member that cannot join -- a different data size or data, a different setting,
model or device, a loss schedule that switches elsewhere, a checkpoint_dir (batched runs keep none), a custom pair
of head modules -- is a one-line ValueError naming the run and the reason, before anything trains. A group that runs
out of device memory is split in halves and retrained, with a warning that says so (:func:`fit_many`).
"""
from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap

from .._checks import check_int, validated
from ..models import HEADS
from ..similarity import positive_mask
from . import distributed as D
from .device import default_device
from .engine import (CHECK_EVERY, FitResult, Plan, Split, _diverged, _lr, _record, _run_callbacks,
                     TrainingDivergedError, make_optimizer)
from .evaluate import autocast, autocast_dtype, probe_indices
from .fit_features import _check_val_dims, _features, build_heads, features_config
from .launch import _split, prepare, run_config
from .objective import LearnedParameters
from .sampling import epoch_batches, epoch_positives
from .settings import EXPERIMENT_FIELDS, RUN, TrainSettings


@dataclass
class _Member:
    """One run, resolved as ``fit`` resolves it: its plan (objective, settings with its seed, config) and heads."""

    plan: Plan
    head: str
    dim: int


class _Stacked:
    """R copies of one head architecture as stacked parameters [R, ...], applied to R inputs by vmap."""

    def __init__(self, modules: Sequence[nn.Module]) -> None:
        self.modules = list(modules)
        params, buffers = stack_module_state(self.modules)
        self.params = {k: v.detach().requires_grad_() for k, v in params.items()}
        self.buffers = buffers
        base = copy.deepcopy(self.modules[0]).to("meta")
        self._apply = vmap(lambda p, b, x: functional_call(base, (p, b), (x,)))

    def __call__(self, x: Tensor) -> Tensor:
        return self._apply(self.params, self.buffers, x)

    def tensors(self) -> list[Tensor]:
        return list(self.params.values())

    @torch.no_grad()
    def write_back(self) -> None:
        """Copy each run's slice into its own module (what its FitResult, evaluation and callbacks see)."""
        for r, module in enumerate(self.modules):
            for name, p in module.named_parameters():
                p.copy_(self.params[name][r])


# --------------------------------------------------------------------------- checks before training


def _members(runs: Sequence[Mapping], shared: Mapping) -> tuple[list[_Member], tuple, tuple | None]:
    """Each run's arguments (a ``fit`` call's, over `shared`) resolved; every member checked against run 0."""
    if isinstance(runs, Mapping) or not isinstance(runs, Sequence) or not runs:
        raise ValueError("runs must be a non-empty list of dicts of fit's arguments (train=, loss=, seed=, ...)")
    if D.rank_and_world()[1] > 1:
        raise ValueError("fit_many trains on one process; under torchrun train the runs one by one with fit")
    resolved = [_resolve(i, {**shared, **run}) for i, run in enumerate(runs)]
    (train0, val0, m0), out = resolved[0], [resolved[0][2]]
    for i, (train, val, m) in enumerate(resolved[1:], 1):
        _same_data(i, "train", train0, train)
        _same_data(i, "val", val0, val)
        _same_setting(i, m0, m)
        out.append(m)
    return out, train0, val0


def _resolve(i: int, args: dict) -> tuple[tuple, tuple | None, _Member]:
    unknown = sorted(set(args) - {"train", "val", "loss", "loss_kwargs", "head", "dim", "settings", "seed",
                                   *TrainSettings.__dataclass_fields__})
    if unknown:
        raise ValueError(f"run {i}: fit_many takes fit's arguments, not {unknown}")
    if "train" not in args:
        raise ValueError(f"run {i}: no train=(img_feats, txt_feats, caption_to_image)")
    head, dim = args.get("head", "linear"), check_int("dim", args.get("dim", RUN["features"]["dim"]), 1)
    if not isinstance(head, str):
        raise ValueError(f"run {i} cannot join a batched run: its head is a pair of modules; batched runs build "
                         f"their heads by name {tuple(HEADS)} from their seeds")
    if head not in HEADS:
        raise ValueError(f"run {i}: head must be one of {tuple(HEADS)}, got {head!r}")
    train = _features("", args["train"])
    val = _features("val", args["val"]) if args.get("val") is not None else None
    if val is not None:
        _check_val_dims(train, val)
    overrides = {k: v for k, v in args.items() if k in TrainSettings.__dataclass_fields__}
    settings, objective = prepare(args.get("settings"), overrides, train[0].shape[0], args.get("loss", "unified"),
                                  args.get("loss_kwargs"))
    if settings.checkpoint_dir is not None:
        raise ValueError(f"run {i} cannot join a batched run: it has a checkpoint_dir ({settings.checkpoint_dir}); "
                         "batched runs keep no checkpoints")
    config = run_config(features_config(objective, head, dim, train, val), settings, 1)
    return train, val, _Member(Plan(objective, settings, config), head, dim)


def _same_data(i: int, what: str, a: tuple | None, b: tuple | None) -> None:
    if (a is None) != (b is None):
        raise ValueError(f"run {i} cannot join a batched run: it has {'no ' if b is None else ''}{what} split and "
                         f"run 0 has {'none' if a is None else 'one'}")
    if a is None:
        return
    for name, x, y in zip(("img_feats", "txt_feats", "caption_to_image"), a, b):
        if x.shape != y.shape:
            raise ValueError(f"run {i} cannot join a batched run: a different data size ({what} {name} "
                             f"{tuple(y.shape)}, run 0's {tuple(x.shape)}); batched runs share their data")
        if x is not y and not torch.equal(x, y.to(x.device, x.dtype)):
            raise ValueError(f"run {i} cannot join a batched run: different {what} data ({name} differs from "
                             "run 0's); batched runs share their data")


def _same_setting(i: int, m0: _Member, m: _Member) -> None:
    s0, s = m0.plan.settings, m.plan.settings
    fields = [k for k in EXPERIMENT_FIELDS if k != "seed"] + ["device"]
    for k in fields:
        if getattr(s, k) != getattr(s0, k):
            raise ValueError(f"run {i} cannot join a batched run: a different setting ({k} {getattr(s, k)!r}, "
                             f"run 0's {getattr(s0, k)!r}); batched runs share their schedule")
    for k in ("head", "dim"):
        if getattr(m, k) != getattr(m0, k):
            raise ValueError(f"run {i} cannot join a batched run: a different model ({k} {getattr(m, k)!r}, "
                             f"run 0's {getattr(m0, k)!r})")
    sw0, sw = m0.plan.objective.switches(), m.plan.objective.switches()
    if s.optimizer_at_switch == "fresh" and sw != sw0:
        raise ValueError(f"run {i} cannot join a batched run: its loss {m.plan.objective.name!r} has no batched "
                         f"form beside run 0's ({m0.plan.objective.name!r}): they switch loss at epochs {list(sw)} "
                         f"and {list(sw0)}, and one Adam over stacked heads restarts for all runs at once "
                         "(optimizer_at_switch='carry' lifts this)")


def _check_batches(caption_to_image: Tensor, settings: TrainSettings) -> None:
    """Every run must take the same number of steps: no batch may be dropped for holding one image only."""
    most = int(torch.bincount(caption_to_image).max())
    if settings.sampling == "captions" and settings.batch_size <= most:
        raise ValueError(f"batched runs need batch_size > the most captions of one image ({most}), got "
                         f"{settings.batch_size}: otherwise a seed's epoch may drop a batch and take fewer steps")


# --------------------------------------------------------------------------- training


def _group_step(heads, learned, opt, split, idx, positives, objectives, amp, grad_clip):
    """One step of every run: (losses [R], finite flags [R, 2], unclipped gradient norms [R]), on the device."""
    with autocast(amp[0]):
        img_e = heads[0](split.img[split.caption_to_image[idx]])
    with autocast(amp[1]):
        txt_e = heads[1](split.txt[idx])
    S = torch.bmm(img_e.float(), txt_e.float().transpose(1, 2))
    losses = []
    for r, (objective, pairs) in enumerate(zip(objectives, positives)):
        mask = None if pairs is None else positive_mask(split.caption_to_image[idx[r]])
        with validated(mask, pairs, pairs):
            losses.append(objective(S[r], mask, learned[r].as_kwargs()))
    losses = torch.stack(losses)
    opt.zero_grad(set_to_none=True)
    losses.sum().backward()  # each run's parameters get their own loss's gradient only
    norms = _clip(heads, learned, grad_clip)
    opt.step()
    for lp in learned:
        lp.clamp_()
    flags = torch.stack([torch.isfinite(S.detach()).flatten(1).all(dim=1), torch.isfinite(losses.detach())], dim=1)
    return losses.detach(), flags, norms


def _clip(heads, learned: list[LearnedParameters], grad_clip: float | None) -> Tensor:
    """Per-run gradient norms [R] (the norm of the per-tensor norms, as ``get_total_norm``), clipped per run."""
    stacked = [t for h in heads for t in h.tensors() if t.grad is not None]
    R = len(learned)
    per_tensor = [t.grad.reshape(R, -1).norm(dim=1) for t in stacked]
    own = [[p.grad.norm() for p in lp.parameters() if p.grad is not None] for lp in learned]
    if any(own):
        zero = per_tensor[0].new_zeros(())
        width = max(len(o) for o in own)
        per_tensor += list(torch.stack([torch.stack(o + [zero] * (width - len(o))) for o in own]).T)
    norms = torch.stack(per_tensor, dim=1).norm(dim=1)
    if grad_clip is not None:
        coef = (grad_clip / (norms + 1e-6)).clamp(max=1.0)  # as torch.nn.utils.clip_grads_with_norm_
        for t in stacked:
            t.grad.mul_(coef.view(R, *[1] * (t.dim() - 1)))
        for r, lp in enumerate(learned):
            for p in lp.parameters():
                if p.grad is not None:
                    p.grad.mul_(coef[r])
    return norms.detach()


def _optimizer(heads, learned: list[LearnedParameters], s: TrainSettings) -> torch.optim.Optimizer:
    """The runs' optimizer over the stacked heads: Adam's and AdamW's updates (decay included) are element-wise,
    so each run's slice steps as it would alone."""
    return make_optimizer([*heads[0].tensors(), *heads[1].tensors(), *(p for lp in learned for p in lp.parameters())],
                          s)


def _check_finite(flags: Tensor, members: list[_Member], epoch: int) -> None:
    if bool(flags.all()):
        return
    bad = flags.cpu()
    step, r = (~bad.all(dim=2)).nonzero()[0].tolist()
    what = "the embeddings contain NaN or inf" if not bad[step, r, 0] else "the loss is NaN or inf"
    err = _diverged(members[r].plan, epoch, step, what, 0)
    raise TrainingDivergedError(f"run {r}: {err}")


def _train_epoch(heads, learned, opt, split: Split, members: list[_Member], epoch: int) -> tuple[Tensor, Tensor, int]:
    """One epoch of every run: (summed losses [R], summed gradient norms [R], steps)."""
    s = members[0].plan.settings
    batches = [epoch_batches(split.caption_to_image, split.n_images, s.batch_size, m.plan.settings.seed, epoch,
                             s.sampling) for m in members]
    positives = [epoch_positives(split.caption_to_image, b) for b in batches]
    idx = torch.stack(batches, dim=1)  # [steps, R, B]
    amp = tuple(autocast_dtype(split.txt.device, h.modules[0]) for h in heads)
    objectives = [m.plan.objective.at_epoch(epoch) for m in members]
    steps, R = idx.shape[0], len(members)
    total = torch.zeros(R, device=split.txt.device)
    norms = torch.zeros(R, device=split.txt.device)
    flags = torch.ones(steps, R, 2, dtype=torch.bool, device=split.txt.device)
    for step in range(steps):
        try:
            loss, flags[step], norm = _group_step(heads, learned, opt, split, idx[step],
                                                  [p[step] for p in positives], objectives, amp, s.grad_clip)
        except FloatingPointError as err:
            raise TrainingDivergedError(f"training diverged at epoch {epoch + 1}, batch {step + 1}: the loss of one "
                                        f"of the batched runs is not finite ({err})") from None
        total += loss
        norms += norm
        if (step + 1) % CHECK_EVERY == 0 or step + 1 == steps:
            _check_finite(flags[: step + 1], members, epoch)
    return total, norms, steps


def _train_group(members: list[_Member], train: tuple, val: tuple | None) -> list[FitResult]:
    """Train one group of members together (module docstring); their FitResults in order."""
    s = members[0].plan.settings
    dev = default_device(s.device)
    split = _split(train, dev)
    val_split = _split(val, dev) if val is not None else None
    pairs = [build_heads(m.head, train[0].shape[1], train[1].shape[1], m.dim, m.plan.settings.seed) for m in members]
    heads = tuple(_Stacked([p[k].to(dev) for p in pairs]) for k in (0, 1))
    learned = [m.plan.objective.parameters_module().to(dev) for m in members]
    opt = _optimizer(heads, learned, s)
    probes = [probe_indices(split.caption_to_image, split.n_images, s.probe_batch, m.plan.settings.seed)
              if s.probe_batch > 0 else None for m in members]
    results = [FitResult(heads[0].modules[r], heads[1].modules[r], [], m.plan.config) for r, m in enumerate(members)]
    for epoch in range(s.epochs):
        t0 = time.perf_counter()
        if epoch in members[0].plan.objective.switches() and s.optimizer_at_switch == "fresh":
            opt = _optimizer(heads, learned, s)
        for group in opt.param_groups:
            group["lr"] = _lr(members[0].plan, epoch)
        loss, grad_norm, steps = _train_epoch(heads, learned, opt, split, members, epoch)
        t_train = time.perf_counter() - t0
        for h in heads:
            h.write_back()
        loss, grad_norm = _means(loss, steps), _means(grad_norm, steps)
        for r, (m, res) in enumerate(zip(members, results)):
            _check_params(res, learned[r], m, epoch, r)
            record = _record((res.img_head, res.txt_head), learned[r], split, val_split, m.plan, probes[r], epoch,
                             loss[r], grad_norm[r], steps, t_train, t0)
            res.history.append(record)
            _run_callbacks(m.plan, record, res)
    return results


def _means(sums: Tensor, steps: int) -> list[float]:
    """Per-run means over the epoch's steps, divided on the host as ``engine._train_epoch`` divides (NaN: no step)."""
    return [v / steps if steps else float("nan") for v in sums.tolist()]


def _check_params(res: FitResult, learned: LearnedParameters, m: _Member, epoch: int, r: int) -> None:
    params = [*res.img_head.parameters(), *res.txt_head.parameters(), *learned.parameters()]
    if not bool(torch.stack([torch.isfinite(p).all() for p in params]).all()):
        raise TrainingDivergedError(f"run {r}: {_diverged(m.plan, epoch, -1, 'a parameter became NaN or inf', 0)}")


# --------------------------------------------------------------------------- the entry point


def _out_of_memory(err: BaseException) -> bool:
    return isinstance(err, torch.cuda.OutOfMemoryError) or (isinstance(err, RuntimeError)
                                                             and "out of memory" in str(err))


def _train_groups(members: list[_Member], train: tuple, val: tuple | None, size: int) -> list[FitResult]:
    """Train `members` in groups of `size`; a group that runs out of memory is split in halves and retrained."""
    out: list[FitResult] = []
    for start in range(0, len(members), size):
        group = members[start : start + size]
        try:
            out += _train_group(group, train, val)
            continue
        except Exception as err:
            if not _out_of_memory(err) or len(group) == 1:
                raise
        # retried outside the except block: its traceback would keep the failed group's tensors alive
        half = (len(group) + 1) // 2
        # a RuntimeWarning, not a ResourceWarning: Python's default filters hide those
        warnings.warn(f"fit_many: out of memory training {len(group)} runs together; retrying in groups of {half}",
                      RuntimeWarning, stacklevel=3)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        out += _train_groups(group, train, val, half)
    return out


def fit_many(runs: Sequence[Mapping], *, group_size: int | None = None, **shared) -> list[FitResult]:
    """Train several runs of :func:`~vlr_lib.train.fit` together, their heads stacked; one FitResult per run, in order.

    Each element of `runs` is a dict of ``fit``'s arguments (``train=(img_feats, txt_feats, caption_to_image)``,
    ``loss``, ``loss_kwargs``, ``val``, ``head``, ``dim``, ``settings`` and TrainSettings fields such as ``seed``);
    `shared` holds the arguments common to all (``fit_many(runs, train=..., val=..., epochs=3)``). Run i's result
    equals ``fit(**{**shared, **runs[i]})``'s (module docstring). Every run must share the data, the schedule
    (every TrainSettings experiment field but the seed), the device and the model; a run that cannot join is a
    one-line ValueError before training. ``group_size``: at most this many runs at once (None: all); a group that
    runs out of device memory is retrained in halves, with a RuntimeWarning saying so.

    On the CPU ``fit`` one run after the other is as fast or faster (docs/benchmarks.md, bench_batched); this is
    for a GPU, where a head's step is launch overhead.
    """
    members, train, val = _members(runs, shared)
    _check_batches(train[2], members[0].plan.settings)
    if group_size is not None and (not isinstance(group_size, int) or isinstance(group_size, bool) or group_size < 1):
        raise ValueError(f"group_size must be a positive int or None, got {group_size!r}")
    members = [replace(m, plan=replace(m.plan, settings=replace(m.plan.settings, progress=False))) for m in members]
    return _train_groups(members, train, val, group_size or len(members))
