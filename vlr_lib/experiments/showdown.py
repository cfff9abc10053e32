"""The loss showdown of notebook 10: every loss, the same features, the same seeds and schedule.

One definition of the experiment, shared by notebook 10 (``from vlr_lib.experiments import showdown``) and the
command line ``python -m vlr_lib showdown`` (also ``data_scripts/run_showdown.py``), which parses its flags into
``cells.spec_for``, calls :func:`run` and prints ``vlr_lib.report.markdown.markdown_block``.

Contestants (:func:`configs`): the losses of :data:`CONTESTANTS` at their
paper defaults (``clip_learned`` and ``siglip`` at their papers' initial t' and b, learned with the heads and
reported per epoch in each run's history, ``"learned"``) plus the 15 GOAL combinations
(``vlr_lib.experiments.goal_grid``), 24 configurations, each trained with seeds 0, 1, 2 through
``vlr_lib.experiments.grid`` in one *setting* (``vlr_lib.train.inputs``): "features" (heads on frozen features,
the default), "vsepp" (a head on the frozen image features + a GRU text encoder from
scratch, the VSE++ setting) or "e2e" (shapes only: CNN + GRU from scratch), with
identical settings: same initialisation and batch order per seed, same epochs,
batch size, learning rate and decay. The spec, its data, the callback that measures the test split and COCOS,
and the training of the cells are the cell runner's (``vlr_lib.experiments.cells``), which the tuned
comparison and the lessons share; this module holds what is the showdown's own: its contestants, its stored
table and its record.

Caching: ``grid`` stores every (configuration, seed) cell under
``<runs>/showdown-<data>-<setting>-<fast|full>/cells`` (``vlr_lib.paths.runs_dir``: $VLR_RUNS, else the cache folder); the
finished showdown is ``showdown.json`` (the settings, command, data, hardware, date,
wall time and the keys of its cells) next to the folder's ``runs.csv`` (every cell of the
folder, for the user to read). A stored showdown whose settings match is reused: its table is rebuilt from
its cells, never read back from runs.csv (an edited CSV is never shown); an interrupted run resumes cell by cell. The full-size showdowns of the shapes data also ship with the workbook
as records (``vlr_lib.experiments.record``, ``vlr_lib/recorded/showdown-shapes-<setting>-full``):
``run(spec, record=True)`` (notebook 10 in full mode) opens them in seconds.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pandas as pd

from .. import registry
from ..report.labels import config_label
from .._io import atomic_write_json, claim_run_folder, read_json
from . import record as R
from ..train import rank_and_world
from .cells import Showdown, ShowdownSpec, from_cells, opened, race_meta, retrain, train_cells
from .grid_search import goal_grid, writing

META_FILE = "showdown.json"
STORED_FIX = "rerun with --force (force=True) to rebuild the table from the cached cells"

#: T^cir's tau in the showdown, chosen on validation from {1, 2, 3, 5, 10} (docs/results.md, run 7). GOAL's
#: default tau = 10 comes from the paper's figures (Figs. 2-3), not a training recipe: on cosines its T^cir
#: weights are ~0.004 and the (cir, .) runs were still rising after 20 epochs.
CIR_TAU = 2.0


#: The closed-form contestants, listed here: a loss registered later joins the race only when it is added here
#: (and the records are made again), never silently.
CONTESTANTS = ("triplet_all", "triplet_hardest", "info_nce", "unified", "sampled_softmax", "cross_example_softmax",
               "smooth_ap", "clip_learned", "siglip")


def configs() -> list[dict]:
    """The 24 contestants: :data:`CONTESTANTS` at their defaults, then the 3 x 5 GOAL grid (T^cir at
    :data:`CIR_TAU`)."""
    goal = [dict(c, tau=CIR_TAU) if c["loss"].startswith("goal:cir,") else c for c in goal_grid()]
    return [{"loss": name} for name in CONTESTANTS] + goal


def stored(spec: ShowdownSpec, out: Path | None = None) -> Showdown | None:
    """The stored showdown of `spec` when its settings match and all its cells are under ``out/cells``, else None.

    The table is rebuilt from those cells (:func:`from_cells`), never read from runs.csv: a CSV is easy to edit by
    hand, and an edited number would be shown as a result. An unreadable showdown.json or cell is an error that
    names the file and the fix (``--force``).
    """
    out = Path(out or spec.out)
    meta_path = out / META_FILE
    if not meta_path.exists():
        return None
    meta = read_json(meta_path, "showdown metadata", STORED_FIX)
    if meta.get("spec") != spec.key():
        return None
    runs = from_cells(out, meta.get("keys"))
    return None if runs is None else Showdown(runs, meta, out, reused=True)


def record_key(spec: ShowdownSpec) -> dict:
    """The settings a record of the showdown is found by: the spec and the contestants."""
    return {"experiment": "showdown", "spec": spec.key(), "configs": [registry.resolved_config(c) for c in configs()]}


def recorded(spec: ShowdownSpec) -> Showdown | None:
    """The showdown of `spec` from the records that ship with the workbook (``vlr_lib.experiments.record``), else None."""
    rec = R.read(spec.out.name, record_key(spec))
    if rec is None:
        return None
    return opened(rec)


def recorded_and_again(spec: ShowdownSpec, loss: str = "triplet_hardest", seed: int = 0, *,
                       retrain_as: str | None = None, loss_kwargs: dict | None = None,
                       epochs: int | None = None) -> tuple[str, list[float], list[float]] | None:
    """(record name, its per-epoch validation rsums, those of the same cell re-trained from scratch) for `spec`'s
    record, or None when no record matches `spec`. The cell re-trains on the CPU, as the records were made
    (on a GPU it lands far from them: ``vlr_lib.experiments.recheck``); `retrain_as` (another loss) and `loss_kwargs`
    re-train it with one thing changed, what the check exists to catch. `epochs` re-trains only the first
    epochs: the learning rate still decays at the record's epoch, so they are the record's first epochs."""
    spec = replace(spec, device="cpu")
    race = recorded(spec)
    if race is None:
        return None
    history = R.cell_history(R.cells_of(race.record.tables), {"loss": loss}, seed)
    if epochs is not None:
        decay = spec.lr_decay_epoch if spec.lr_decay_epoch is not None else max(1, spec.epochs // 2)
        spec, history = replace(spec, epochs=epochs, lr_decay_epoch=decay), history[:epochs]
    again = retrain(spec, retrain_as or loss, seed, loss_kwargs=loss_kwargs)
    return race.record.name, [r["rsum"] for r in history], [r["rsum"] for r in again.history]


def run(spec: ShowdownSpec, command: str = "", out: Path | None = None, force: bool = False,
        progress: bool = False, record: bool = False) -> Showdown:
    """The showdown table of `spec`: with `record`, the shipped record when one matches; else the stored
    one when it matches (unless `force`), else trained now.

    Training goes through ``vlr_lib.experiments.grid`` (:func:`train_cells`: cells cached individually,
    so a re-run trains only missing cells). Where ``$VLR_RECORD`` is set (``make record``) the
    result is also written as a record.
    """
    out = Path(out or spec.out)
    if record and not force and (found := recorded(spec)) is not None:
        return found
    claim_run_folder(out, mark=False)  # never a folder of other files; grid marks and locks it when it trains
    if not force and (found := stored(spec, out)) is not None:
        return _recorded_now(spec, found)
    result, data, callback, wall = train_cells(spec, configs(), out, progress)
    meta = race_meta(spec, result, data, callback, wall, command or "vlr_lib.experiments.showdown.run(spec_for(...))")
    if rank_and_world()[0] == 0:
        with writing(out):
            atomic_write_json(out / META_FILE, meta)
    return _recorded_now(spec, Showdown(result.runs, meta, out, reused=False))


def histories(race: Showdown, seed: int) -> dict[str, list[dict]]:
    """{configuration label: per-epoch history} of every run of `race` with `seed`, from its record or its cells."""
    if seed not in set(race.runs["seed"]):
        raise ValueError(f"seed must be one of the race's seeds {sorted(set(race.runs['seed']))}, got {seed!r}")
    cells = R.cells_of(race.record.tables) if race.record else R.grid_cells(race.out, race.runs["key"])
    return {config_label(c["config"]): c["history"] for c in cells if c["seed"] == seed}


#: The learned parameters in the units the chapters read: (loss, parameter as stored) -> (name, its value from the
#: stored one). CLIP's model holds t' = log(1/tau), SigLIP's t' = log t and b (``vlr_lib.losses``).
LEARNED_UNITS = {("clip_learned", "logit_scale"): ("CLIP τ", lambda v: math.exp(-v)),
                 ("siglip", "logit_scale"): ("SigLIP t", math.exp),
                 ("siglip", "logit_bias"): ("SigLIP b", float)}


def learned_paths(race: Showdown) -> pd.DataFrame:
    """Every learned parameter of `race` at the end of each epoch (each run's history, ``"learned"``): one row per
    (loss, seed, epoch, parameter) with its stored ``value`` and, under ``name``, its ``shown`` value in the units
    of :data:`LEARNED_UNITS` (CLIP's tau = e^{-t'}, SigLIP's t = e^{t'} and b)."""
    cells = R.cells_of(race.record.tables) if race.record else R.grid_cells(race.out, race.runs["key"])
    rows = []
    for c in cells:
        for epoch, record in enumerate(c["history"], 1):
            for param, value in (record.get("learned") or {}).items():
                name, unit = LEARNED_UNITS[(c["config"]["loss"], param)]
                rows.append({"loss": c["config"]["loss"], "seed": c["seed"], "epoch": epoch, "parameter": param,
                             "value": float(value), "name": name, "shown": unit(float(value))})
    return pd.DataFrame(rows, columns=["loss", "seed", "epoch", "parameter", "value", "name", "shown"])


def learned_histories(paths: Mapping[str, pd.DataFrame]) -> dict[str, list[dict]]:
    """{run name: per-epoch history} of the learned parameters for ``viz.training.curves_figure``: one history per
    entry of `paths` ({name, e.g. the setting: :func:`learned_paths`}), each parameter shown (:data:`LEARNED_UNITS`)
    as its mean over the seeds, one metric per parameter."""
    out = {}
    for label, frame in paths.items():
        if frame.empty:
            raise ValueError(f"paths[{label!r}] holds no learned parameter: a race without clip_learned or siglip")
        means = frame.groupby(["epoch", "name"])["shown"].mean().unstack("name")
        out[label] = [{"epoch": int(e), **row.to_dict()} for e, row in means.iterrows()]
    return out


def _recorded_now(spec: ShowdownSpec, race: Showdown) -> Showdown:
    """Write `race` as a record where ``$VLR_RECORD`` asks for one (rank 0); `race` unchanged."""
    if rank_and_world()[0] == 0:
        R.keep_grid(spec.out.name, record_key(spec), race.runs, race.out, command=race.meta["command"],
                    title=f"the loss showdown ({race.meta['setting']}, {spec.data}, {'fast' if spec.fast else 'full'} size)",
                    wall_seconds=race.meta["wall_seconds"], meta=race.meta)
    return race
