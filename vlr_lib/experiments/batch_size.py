"""Notebook 03's batch-size experiment: NT-Xent at a fixed temperature, SigLIP and CLIP's learned temperature at
batch sizes 32, 128 and 512, paired over seeds.

Zhai et al. (*Sigmoid Loss for Language Image Pre-Training*, ICCV 2023) argue that the sigmoid loss needs no large
batch: each pair is its own binary classification, so no softmax over the batch has to be estimated from the
batch's negatives. Here each loss (:data:`LOSSES`: ``info_nce`` at its default temperature 0.1, ``siglip`` with its
learned scale and bias, ``clip_learned`` with its learned temperature) trains heads on the shapes data's frozen
features at the showdown's budget (``cells.spec_for("shapes", False, "features")``: 1,000 images with 5 captions
each, 20 epochs, Adam at lr 1e-3 decayed x0.1 after 10 epochs, 256-d linear heads), with only the batch size
changed, and five seeds (:data:`SEEDS`: 0-4; each seed is one initialisation and batch order shared by every
loss, so differences are paired). Every run is read at its epoch of best validation rsum, on the test split, as
in the showdown.

**Epochs, not steps, are held fixed.** Every run makes the same 20 passes over the 5,000 training captions: the
same examples seen and about the same compute, so a batch of 512 takes 16 times fewer (and larger) steps than
one of 32. Holding steps fixed instead would give the batch of 512 sixteen times the data of the batch of 32 (and
cost sixteen times as much), mixing "more negatives per step" with "more data". Either way the number of steps
or of examples moves with the batch size for every loss alike, which is why the question is read as a paired
*interaction*: does NT-Xent gain more from going from 32 to 512 than SigLIP does (:data:`FAMILY`)?

:data:`FAMILY` declares every comparison the chapter reads, before the record was made; the verdicts come from
``vlr_lib.stats.verdicts`` (paired 95% t intervals over the seeds, Holm-corrected over the family). The learned
parameters' trajectories (t' = log(1/tau), SigLIP's t' and b, per epoch) are in each cell's history
(``"learned"``; :func:`learned_paths`).

Records: the full-size run ships as ``vlr_lib/recorded/batch-size-shapes-features-full``; ``run(record=True)``
opens it, otherwise the cells are trained (cached per cell under ``<runs>/batch-size-shapes-features-<fast|full>``,
so an interrupted run resumes). Fast mode (CI) trains 200 images for 4 epochs at batch sizes 8, 32 and 128 with
two seeds: seconds, and nothing to read a finding from. The record: 45 runs, 15.7 minutes of training (the
epochs' own wall time, one torch thread, on a 2-core machine shared with other jobs: an upper bound).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from .. import registry
from .._io import atomic_write_json, claim_run_folder
from ..paths import runs_dir
from ..train import rank_and_world
from . import record as R
from . import cells as S
from . import paired
from .grid_search import writing

LOSSES = ("info_nce", "siglip", "clip_learned")
BATCH_SIZES = (32, 128, 512)
FAST_BATCH_SIZES = (8, 32, 128)  # fast mode's 200 training images: the same factor 4 between sizes
SEEDS = (0, 1, 2, 3, 4)  # seeds 8-15 belong to another experiment
FAST_SEEDS = (0, 1)
NAME = "batch-size-shapes-features-full"
META_FILE = "batch_size.json"
METRIC = "sel_rsum"  # test rsum at the epoch of best validation rsum

#: Every comparison the chapter reads, declared before the record was made: (name, a, b, expected sign of a - b or
#: None), each side a (loss, batch size) cell or, for the interaction, a difference of two cells. Holm's
#: correction runs over all of them at once.
FAMILY: tuple[tuple[str, object, object, int | None], ...] = (
    *((f"SigLIP - NT-Xent at batch {b}", ("siglip", b), ("info_nce", b), None) for b in BATCH_SIZES),
    *((f"CLIP learned tau - NT-Xent at batch {b}", ("clip_learned", b), ("info_nce", b), None) for b in BATCH_SIZES),
    ("NT-Xent: batch 512 - batch 32", ("info_nce", 512), ("info_nce", 32), None),
    ("SigLIP: batch 512 - batch 32", ("siglip", 512), ("siglip", 32), None),
    # Zhai et al.'s argument: the softmax loss gains more from a large batch than the sigmoid loss
    ("NT-Xent's gain from 32 to 512 - SigLIP's", (("info_nce", 512), ("info_nce", 32)),
     (("siglip", 512), ("siglip", 32)), 1),
)


def spec_for(fast: bool = False) -> S.ShowdownSpec:
    """The showdown's features budget on the shapes data (``cells.spec_for``) with this experiment's seeds; the
    batch size is each cell's own (:func:`contestants`)."""
    return S.spec_for("shapes", fast, "features", seeds=FAST_SEEDS if fast else SEEDS)


def batch_sizes(spec: S.ShowdownSpec) -> tuple[int, ...]:
    return FAST_BATCH_SIZES if spec.fast else BATCH_SIZES


def contestants(spec: S.ShowdownSpec) -> list[dict]:
    """One grid configuration per (loss, batch size): ``{"loss": "siglip", "batch_size": 32}``."""
    return [{"loss": loss, "batch_size": b} for loss in LOSSES for b in batch_sizes(spec)]


def out_dir(spec: S.ShowdownSpec) -> Path:
    return runs_dir() / f"batch-size-{spec.data}-{spec.setting}-{'fast' if spec.fast else 'full'}"


def record_key(spec: S.ShowdownSpec) -> dict:
    """The settings the record is found by: the budget (the spec), the contestants with every hyperparameter
    resolved, and the declared family."""
    return {"experiment": "batch-size", "spec": spec.key(),
            "configs": [registry.resolved_config(c) for c in contestants(spec)],
            "family": [[name, a, b, expected] for name, a, b, expected in FAMILY], "metric": METRIC}


def run(spec: S.ShowdownSpec | None = None, command: str = "", out: Path | None = None, record: bool = False,
        progress: bool = False) -> S.Showdown:
    """Every (loss, batch size) x seed at `spec`'s budget (default the full-size one): with `record`, the shipped
    record when it matches, else trained now (finished cells are read from ``out/cells``). ``$VLR_RECORD`` set:
    also kept as a record."""
    spec = spec or spec_for()
    out = Path(out or out_dir(spec))
    key = record_key(spec)
    if record and (rec := R.read(out.name, key)) is not None:
        return S.opened(rec)
    claim_run_folder(out, mark=False)
    result, data, callback, wall = S.train_cells(spec, contestants(spec), out, progress)
    meta = S.race_meta(spec, result, data, callback, wall, command or "vlr_lib.experiments.batch_size.run()")
    if rank_and_world()[0] == 0:
        with writing(out):
            atomic_write_json(out / META_FILE, meta)
        R.keep_grid(out.name, key, result.runs, out, command=meta["command"], wall_seconds=meta["wall_seconds"],
                    title=f"the batch-size experiment ({spec.data}, {'fast' if spec.fast else 'full'} size)",
                    meta=meta)
    return S.Showdown(result.runs, meta, out, reused=False)


#: The cell the record's check re-trains (``vlr_lib.experiments.recheck``): SigLIP at the smallest batch, whose
#: learned scale and bias every other record lacks.
CHECKED = {"loss": "siglip", "batch_size": BATCH_SIZES[0]}


def recorded_and_again(epochs: int | None = None, seed: int = 0) -> tuple[list[float], list[float]]:
    """The record's per-epoch validation rsums of :data:`CHECKED` (seed `seed`) and the same cell re-trained from
    scratch on the CPU (its first `epochs`; the learning rate still decays at the record's epoch)."""
    spec = replace(spec_for(), device="cpu")
    rec = R.read(NAME, record_key(spec))
    if rec is None:
        raise FileNotFoundError(f"no record of the batch-size experiment matches the code: {R.REGENERATE}")
    history = R.cell_history(R.cells_of(rec.tables), CHECKED, seed)
    if epochs is not None:
        history = history[:epochs]
    again = S.retrain(replace(spec, epochs=epochs or spec.epochs, batch_size=CHECKED["batch_size"]),
                      CHECKED["loss"], seed)
    return [r["rsum"] for r in history], [r["rsum"] for r in again.history]


# --------------------------------------------------------------------------- reading


def by_seed(runs: pd.DataFrame, loss: str, batch: int, metric: str = METRIC) -> pd.Series:
    """`metric` of the (loss, batch size) cell per seed, sorted by seed; a KeyError when the table lacks it."""
    return paired.by_seed(runs, loss, batch, "batch_size", metric, "batch size")


def findings(runs: pd.DataFrame, metric: str = METRIC) -> pd.DataFrame:
    """:data:`FAMILY`, read (``paired.findings``): one row per comparison with ``stats.verdicts``' columns (delta,
    the uncorrected interval, p, p_holm, verdict, ...). Only the full-size batch sizes have a family."""
    return paired.findings(runs, FAMILY, "batch_size", metric, "batch size")


def summary(runs: pd.DataFrame, sizes: tuple[int, ...], metric: str = METRIC) -> pd.DataFrame:
    """Mean and std over seeds of `metric`: one row per loss, one column pair per batch size."""
    rows = []
    for loss in LOSSES:
        row = {"loss": registry.label(loss)}
        for b in sizes:
            values = by_seed(runs, loss, b, metric)
            row[f"batch {b}"] = f"{values.mean():.1f} ± {values.std(ddof=1):.1f}"
        rows.append(row)
    return pd.DataFrame(rows).set_index("loss")


shown = paired.shown  # the chapter's table of the findings


def learned_paths(race: S.Showdown) -> pd.DataFrame:
    """The learned parameters per epoch: one row per (loss, batch size, seed, epoch, parameter) with its value at
    the end of that epoch (``clip_learned``: logit_scale = log(1/tau); ``siglip``: logit_scale = log t and
    logit_bias b)."""
    cells = R.cells_of(race.record.tables) if race.record else R.grid_cells(race.out, race.runs["key"])
    rows = []
    for c in cells:
        for i, epoch in enumerate(c["history"], 1):
            for name, value in (epoch.get("learned") or {}).items():
                rows.append({"loss": c["config"]["loss"], "batch_size": c["config"]["batch_size"], "seed": c["seed"],
                             "epoch": i, "parameter": name, "value": float(value)})
    return pd.DataFrame(rows, columns=["loss", "batch_size", "seed", "epoch", "parameter", "value"])


def learned_table(paths: pd.DataFrame, epochs: tuple[int, ...] = (1, 5, 10, 15, 20)) -> pd.DataFrame:
    """The learned parameters at `epochs`, mean over the seeds, in the units the chapter reads: CLIP's temperature
    tau = e^{-t'}, SigLIP's scale t = e^{t'} and bias b. One row per (loss, parameter, batch size)."""
    frame = paths[paths["epoch"].isin(epochs)].copy()
    clip = frame["loss"] == "clip_learned"
    scale = frame["parameter"] == "logit_scale"
    frame.loc[clip & scale, "value"] = np.exp(-frame.loc[clip & scale, "value"])
    frame.loc[~clip & scale, "value"] = np.exp(frame.loc[~clip & scale, "value"])
    names = {("clip_learned", "logit_scale"): "CLIP: tau", ("siglip", "logit_scale"): "SigLIP: t",
             ("siglip", "logit_bias"): "SigLIP: b"}
    frame["learned"] = [names[(loss, p)] for loss, p in zip(frame["loss"], frame["parameter"])]
    table = frame.groupby(["learned", "batch_size", "epoch"])["value"].mean().unstack("epoch").round(3)
    table.columns = [f"epoch {e}" for e in table.columns]
    return table


__all__ = ["BATCH_SIZES", "CHECKED", "FAMILY", "FAST_BATCH_SIZES", "FAST_SEEDS", "LOSSES", "METRIC", "NAME", "SEEDS",
           "batch_sizes", "by_seed", "contestants", "findings", "learned_paths", "learned_table", "out_dir",
           "record_key", "recorded_and_again", "run", "shown", "spec_for", "summary"]
