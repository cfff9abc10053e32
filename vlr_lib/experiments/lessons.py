"""When do the papers' lessons hold? The controlled experiments of notebook 12.

The papers report orderings of losses measured in one setting: VSE++ (Faghri et al.) and
Bleeker & de Rijke (Table 1) find the hardest-negative triplet (Triplet-SH) far ahead of the
triplet over all negatives and ahead of NT-Xent; Li et al. (Tables 1, 7) find their unified
loss ahead of Triplet-SH. All of them train on *pretrained* image features with real captions.
Each experiment here changes one condition and re-measures the three orderings, with the four
losses of those claims (:data:`ROLES`) trained through ``vlr_lib.experiments.grid`` exactly as the
showdown trains them (the cell runner, ``vlr_lib.experiments.cells``: same seeds, schedule, selection on validation,
report on test, cells cached under ``paths.runs_dir()``):

- ``features`` (a): image features from the random vs the pretrained shapes encoder;
- ``difficulty`` (b): how much the scenes of a group share (``make_shapes(difficulty=...)``),
  i.e. how many near-duplicates -- false negatives for a caption -- a batch holds; measured by
  ``data.shapes.scene_overlap``;
- ``warmup`` (c): Triplet-SH without and with a warm-up on Triplet (all) for the first epoch(s)
  (the loss schedule "warmup:triplet_all:<k>:triplet_hardest", ``vlr_lib.train.objective``), as
  VSE∞ trains; the warmed-up run takes Triplet-SH's place in the three orderings;
- ``setting`` (d): heads on frozen features vs the VSE++ setting vs end to end
  (``vlr_lib.train.inputs``), each at its showdown schedule (``cells.spec_for``);
- ``optimizer`` (e): the warm-up run of (c) with Adam's state fresh at the switch (the default) or
  carried over from Triplet (all) (``TrainSettings.optimizer_at_switch``), each with and without
  clipping the gradient's norm at 2 (VSE++'s and VSE∞'s ``grad_clip``). An ordering that moves
  here belongs to the optimizer, not to the losses.

Every difference between two losses is paired by seed (same initialisation and batches), with its
95% paired t interval, and its verdict is read from the paired t test Holm-corrected over the
chapter's comparisons (``vlr_lib.stats``, ``report.lessons.lesson_table``).

:func:`run` returns one row per (experiment, condition, loss, seed) with the showdown's columns
(``sel_rsum``: test rsum at the best validation epoch, ...) plus ``experiment``, ``condition``,
``order``, ``role`` and ``overlap``; ``vlr_lib.report.lessons.lesson_table`` and ``lesson_reading`` turn it
into the differences, their intervals, the corrected verdicts and the reading.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import torch
from .. import registry

from .._checks import check_int
from .._io import atomic_write, atomic_write_json, claim_run_folder, read_back, read_json
from ..paths import runs_dir
from ..train import check_setting, default_device, rank_and_world
from . import record as R
from .grid_search import check_seeds, writing
from .cells import Showdown, ShowdownSpec, from_cells, hardware, retrain, spec_for, train_cells

#: The four losses of the papers' orderings, by the role they play (the warm-up experiment swaps Triplet-SH's loss).
ROLES = ("triplet_all", "triplet_hardest", "unified", "info_nce")
EXPERIMENTS = {
    "features": "(a) feature quality",
    "difficulty": "(b) false negatives",
    "warmup": "(c) hardest-negative warm-up",
    "setting": "(d) the setting",
    "optimizer": "(e) the optimizer",
}
#: The lessons' seeds: five, so that a paired 95% interval has four degrees of freedom.
LESSON_SEEDS = (0, 1, 2, 3, 4)
#: Short names of the settings for the conditions of experiment (d).
SETTING_NAMES = {"features": "heads on features", "vsepp": "VSE++ setting", "e2e": "end to end"}
META_FILE, TABLE_FILE = "lessons.json", "lessons.csv"
STORED_FIX = "rerun with force=True to rebuild the table from the cached cells"


@dataclass(frozen=True)
class LessonsSpec:
    """Everything that defines the chapter's experiments (all of it is compared before a stored table is reused)."""

    fast: bool = False
    seeds: tuple[int, ...] = LESSON_SEEDS
    difficulty: float = 0.5  # of every condition but the difficulty sweep's
    difficulties: tuple[float, ...] = (0.0, 0.5, 1.0)
    warmup_epochs: tuple[int, ...] = (1, 2)
    settings: tuple[str, ...] = ("features", "vsepp", "e2e")
    #: Showdown spec fields every condition overrides, e.g. {"epochs": 2} (sorted pairs once made).
    showdown: tuple[tuple[str, object], ...] = ()
    device: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        pairs = dict(self.showdown)
        unknown = sorted(set(pairs) - set(ShowdownSpec.__dataclass_fields__))
        if unknown:
            raise ValueError(f"showdown has {unknown}, which are not fields of ShowdownSpec")
        owned = sorted(set(pairs) & {"data", "fast", "setting", "seeds", "difficulty", "image_encoder", "device"})
        if owned:
            raise ValueError(f"showdown sets {owned}, which the experiments set themselves (use the LessonsSpec fields)")
        object.__setattr__(self, "showdown", tuple(sorted(pairs.items())))
        for name in ("seeds", "difficulties", "warmup_epochs", "settings"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        check_seeds(self.seeds)
        for d in (self.difficulty, *self.difficulties):
            if isinstance(d, bool) or not isinstance(d, (int, float)) or not 0.0 <= d <= 1.0:
                raise ValueError(f"difficulty and difficulties must be numbers in [0, 1], got {d!r}")
        for k in self.warmup_epochs:
            check_int("warmup_epochs", k, 1)
        for s in self.settings:
            check_setting(s, "settings")

    def key(self) -> dict:
        d = asdict(self)
        d.pop("device")
        return json.loads(json.dumps(d))

    @property
    def out(self) -> Path:
        return runs_dir() / f"lessons-shapes-{'fast' if self.fast else 'full'}"


@dataclass(frozen=True)
class Condition:
    """One condition of one experiment: the showdown spec that trains it and the loss in Triplet-SH's role."""

    experiment: str
    label: str
    order: int
    spec: ShowdownSpec
    hardest: str = "triplet_hardest"

    def losses(self) -> dict[str, str]:
        """{role: trained loss}."""
        return {role: self.hardest if role == "triplet_hardest" else role for role in ROLES}


def conditions(spec: LessonsSpec) -> list[Condition]:
    """Every condition of the four experiments, in order; conditions that share a spec share their cells."""
    def showdown(setting: str = "features", **kw) -> ShowdownSpec:
        return spec_for("shapes", spec.fast, setting, seeds=spec.seeds, device=spec.device,
                        **{"difficulty": spec.difficulty, **dict(spec.showdown), **kw})

    out = [Condition("features", f"{encoder} encoder", i, showdown(image_encoder=encoder))
           for i, encoder in enumerate(("random", "pretrained"))]
    out += [Condition("difficulty", f"difficulty {d:g}", i, showdown(difficulty=float(d)))
            for i, d in enumerate(spec.difficulties)]
    out.append(Condition("warmup", "no warm-up", 0, showdown()))
    out += [Condition("warmup", f"{k} epoch{'s' if k > 1 else ''} of Triplet first", i + 1, showdown(),
                      hardest=f"warmup:triplet_all:{k}:triplet_hardest") for i, k in enumerate(spec.warmup_epochs)]
    out += [Condition("setting", SETTING_NAMES[s], i, showdown(s)) for i, s in enumerate(spec.settings)]
    return out + _optimizer_conditions(spec, showdown)


def _optimizer_conditions(spec: LessonsSpec, showdown) -> list[Condition]:
    """Experiment (e): the first warm-up of (c) under each optimizer handling (Adam fresh or carried over at the
    switch, the gradient's norm clipped at 2 or not); none without a warm-up to train."""
    if not spec.warmup_epochs:
        return []
    warm = f"warmup:triplet_all:{spec.warmup_epochs[0]}:triplet_hardest"
    handlings = (("fresh Adam at the switch", {}), ("Adam carried over", {"optimizer_at_switch": "carry"}),
                 ("carried over, clipped at 2", {"optimizer_at_switch": "carry", "grad_clip": 2.0}),
                 ("fresh, clipped at 2", {"grad_clip": 2.0}))
    return [Condition("optimizer", label, i, showdown(**kw), hardest=warm) for i, (label, kw) in enumerate(handlings)]


def overlap(spec: ShowdownSpec) -> float:
    """Mean over the test scenes of ``scene_overlap`` (what a scene shares with its most similar other scene)."""
    from ..data.shapes import scene_overlap, split_scenes

    scenes = split_scenes(spec.n_train, spec.n_val, spec.n_test, spec.difficulty, spec.data_seed)["test"]
    return float(scene_overlap(scenes).mean())


#: The chapter's runs (one row per experiment, condition, loss and seed) and how they were made: the showdown's
#: result type (table, meta, folder, reused, record).
Lessons = Showdown


def stored(spec: LessonsSpec, out: Path | None = None) -> Lessons | None:
    """The stored table of `spec` when its settings match, else None (an unreadable file names itself and the fix)."""
    out = Path(out or spec.out)
    meta_path, table_path = out / META_FILE, out / TABLE_FILE
    if not (meta_path.exists() and table_path.exists()):
        return None
    meta = read_json(meta_path, "lessons metadata", STORED_FIX)
    if meta.get("spec") != spec.key():
        return None
    table = read_back(table_path, pd.read_csv, "lessons table", STORED_FIX)
    runs = _rebuilt(spec, table, lambda keys: from_cells(out, keys))
    return None if runs is None else Lessons(runs, meta, out, reused=True)


#: The columns run() puts before a cell's runs-table row: which experiment, condition and role the run is.
LABELS = ("experiment", "condition", "order", "overlap", "role")


def _rebuilt(spec: LessonsSpec, table: pd.DataFrame,
             cell_rows: Callable[[list[str]], pd.DataFrame | None]) -> pd.DataFrame | None:
    """A stored table rebuilt from what it was made of, so that a hand-edited table is never shown: each run's
    numbers from its cell (``cell_rows(keys)``: the runs-table rows of those cells, None when one is missing), its
    labels and overlap from the conditions of `spec`. The table only says which cell is which run; None when that
    does not fit `spec`."""
    if "key" not in table or not set(LABELS) <= set(table):
        return None
    cells = cell_rows([str(k) for k in table["key"]])
    if cells is None:
        return None
    expected = {(c.experiment, c.label, role): (c, loss) for c in conditions(spec) for role, loss in c.losses().items()}
    found = list(zip(table["experiment"], table["condition"], table["role"]))
    runs = sorted(map(str, zip(found, cells["seed"])))  # every run of every condition once, and no other
    if runs != sorted(str((k, s)) for k in expected for s in spec.seeds):
        return None
    if any(expected[k][1] != loss for k, loss in zip(found, cells["loss"])):  # each run's cell trained its loss
        return None
    overlaps = {spec_: overlap(spec_) for spec_ in {c.spec for c, _ in expected.values()}}
    labels = pd.DataFrame([{"experiment": e, "condition": label, "order": expected[(e, label, r)][0].order,
                            "overlap": overlaps[expected[(e, label, r)][0].spec], "role": r} for e, label, r in found])
    rebuilt = pd.concat([labels, cells], axis=1)
    return rebuilt[list(table.columns)] if set(rebuilt) == set(table) else rebuilt  # the stored column order


def record_key(spec: LessonsSpec) -> dict:
    """The settings a record of the chapter is found by: the spec and every condition's showdown spec and losses."""
    return {"experiment": "lessons", "spec": spec.key(),
            "conditions": [[c.experiment, c.label, c.spec.key(), c.losses(),
                            {loss: registry.resolved(loss) for loss in c.losses().values()}] for c in conditions(spec)]}


def recorded(spec: LessonsSpec) -> Lessons | None:
    """The chapter's table from the records that ship with the workbook (``vlr_lib.experiments.record``), else None."""
    rec = R.read(spec.out.name, record_key(spec))
    if rec is None:
        return None
    by_key = R.cell_table(R.cells_of({"runs": rec.tables["cells"], "epochs": rec.tables["epochs"]})).set_index("key")
    in_record = lambda keys: by_key.loc[keys].reset_index() if set(keys) <= set(by_key.index) else None  # noqa: E731
    runs = _rebuilt(spec, pd.DataFrame(rec.tables["runs"]), in_record)  # its numbers from its cells, as a folder's
    if runs is None:
        R.warn_damaged(rec.path, "its runs table does not fit its cells and the chapter's conditions")
        return None
    return Lessons(runs, rec.manifest["meta"], rec.path, reused=True, record=rec)


def recorded_and_again(spec: LessonsSpec, experiment: str = "features", condition: str = "pretrained encoder",
                       role: str = "triplet_hardest", seed: int = 0) -> tuple[str, list[float], list[float]] | None:
    """(record name, [last, best] validation rsum of one recorded run, the same of that run re-trained from
    scratch), or None when no record matches `spec`. The run re-trains on the CPU, as the records were made."""
    spec = replace(spec, device="cpu")
    done = recorded(spec)
    if done is None:
        return None
    cond = next(c for c in conditions(spec) if (c.experiment, c.label) == (experiment, condition))
    row = done.runs[(done.runs["experiment"] == experiment) & (done.runs["condition"] == cond.label)
                    & (done.runs["role"] == role) & (done.runs["seed"] == seed)].iloc[0]
    again = [r["rsum"] for r in retrain(cond.spec, cond.losses()[role], seed).history]
    return done.record.name, [float(row["rsum"]), float(row["best_rsum"])], [again[-1], max(again)]


def run(spec: LessonsSpec, out: Path | None = None, force: bool = False, progress: bool = False,
        command: str = "", record: bool = False) -> Lessons:
    """Train (or read from the cell cache) every condition of `spec`; the stored table when it matches; with
    `record`, the shipped record when one matches. Where ``$VLR_RECORD`` is set (``make record``) the table is
    also written as a record."""
    out = Path(out or spec.out)
    if record and not force and (found := recorded(spec)) is not None:
        return found
    claim_run_folder(out, mark=False)  # never a folder of other files; grid marks and locks it when it trains
    if not force and (found := stored(spec, out)) is not None:
        return _recorded_now(spec, found)
    every = conditions(spec)
    by_spec: dict[ShowdownSpec, list[Condition]] = {}
    for cond in every:
        by_spec.setdefault(cond.spec, []).append(cond)
    t0, trained, parts = time.perf_counter(), 0, []
    for showdown_spec, conds in by_spec.items():
        losses = list(dict.fromkeys(loss for c in conds for loss in c.losses().values()))
        result, _, callback, _ = train_cells(showdown_spec, [{"loss": loss} for loss in losses], out, progress)
        trained += callback.trained
        measured = overlap(showdown_spec)
        for cond in conds:
            role_of = {loss: role for role, loss in cond.losses().items()}
            rows = result.runs[result.runs["loss"].isin(role_of)].copy()
            rows.insert(0, "role", rows["loss"].map(role_of))
            for name, value in (("overlap", measured), ("order", cond.order), ("condition", cond.label),
                                ("experiment", cond.experiment)):
                rows.insert(0, name, value)
            parts.append(rows)
    order = {name: i for i, name in enumerate(EXPERIMENTS)}
    runs = pd.concat(parts, ignore_index=True)
    runs = runs.sort_values(["experiment", "order", "role", "seed"], key=lambda c: c.map(order) if c.name ==
                            "experiment" else c, kind="stable", ignore_index=True)
    device = default_device(spec.device)
    meta = {"spec": spec.key(), "command": command or "vlr_lib.experiments.lessons.run(LessonsSpec(...))",
            "n_runs": int(runs[["experiment", "condition", "role", "seed"]].drop_duplicates().shape[0]),
            "n_cells": int(runs["key"].nunique()), "epochs_trained_now": trained, "hardware": hardware(device),
            "wall_seconds": round(time.perf_counter() - t0, 1),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "torch": torch.__version__}
    if rank_and_world()[0] == 0:
        with writing(out):
            atomic_write(out / TABLE_FILE, lambda f: f.write(runs.to_csv(index=False).encode()))
            atomic_write_json(out / META_FILE, meta)
    return _recorded_now(spec, Lessons(runs, meta, out, reused=False))


def _recorded_now(spec: LessonsSpec, done: Lessons) -> Lessons:
    """Write `done` as a record where ``$VLR_RECORD`` asks for one (rank 0); `done` unchanged."""
    if R.destination() is None or rank_and_world()[0] != 0:
        return done
    cells = R.cell_rows(R.grid_cells(done.out, done.runs["key"].unique()))  # every run's per-epoch history
    epochs = cells["epochs"]
    R.write(spec.out.name, record_key(spec), {"runs": R.frame_rows(done.runs), "cells": cells["runs"],
                                              "epochs": epochs}, command=done.meta["command"],
            title=f"when do the papers' lessons hold? ({'fast' if spec.fast else 'full'} size)",
            wall_seconds=done.meta["wall_seconds"], train_seconds=R.train_seconds(epochs), meta=done.meta)
    return done


__all__ = ["ROLES", "EXPERIMENTS", "LESSON_SEEDS", "SETTING_NAMES", "LessonsSpec", "Condition", "conditions", "overlap", "Lessons", "stored", "run",
           "recorded"]
