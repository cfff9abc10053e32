"""Notebook 03's difficulty experiment: does SigLIP's independence from the batch show where many negatives are
false (issue 36)?

In a softmax over the batch (NT-Xent), a negative's weight in the gradient is its share of the row's softmax: a
false negative -- another scene's caption that describes this image almost as well -- scores high and takes weight
from every other negative, which are coupled through the normaliser. In SigLIP's sigmoid loss (Zhai et al., ICCV
2023) each pair is its own binary classification: a negative's weight is its own sigmoid, whatever the others
score. The hypothesis: SigLIP loses less than NT-Xent as a batch holds more near-duplicate false negatives.

The data's difficulty is notebook 12's experiment (b) (``lessons.LessonsSpec.difficulties``: 0, 0.5 and 1):
``make_shapes(difficulty=...)`` sets how much the scenes of a group share, measured on the test split by
``data.shapes.scene_overlap`` (:func:`overlaps`). Each loss (:data:`LOSSES`: ``info_nce`` at its default
temperature 0.1, ``siglip`` with its learned scale and bias) trains heads on the shapes data's frozen features at
the showdown's budget (``cells.spec_for("shapes", False, "features", difficulty=d)``: 1,000 images with 5 captions
each, 20 epochs, batch 128, Adam at lr 1e-3 decayed x0.1 after 10 epochs, 256-d linear heads) with five seeds
(:data:`SEEDS`: 0-4, shared by both losses, so differences are paired). Every run is read at its epoch of best
validation rsum, on the test split, as in the showdown. The test split differs between difficulties (harder data,
lower rsum for every loss), which is why the question is the paired *interaction*: SigLIP's advantage over NT-Xent
at the hardest difficulty minus at the easiest (:data:`FAMILY`, expected sign +1).

:data:`FAMILY` declares every comparison the chapter reads, before the record was made; the verdicts come from
``vlr_lib.stats.verdicts`` through ``paired.findings``. Records: the full-size run ships as
``vlr_lib/recorded/difficulty-shapes-features-full``; ``run(record=True)`` opens it, otherwise the cells are
trained (cached per cell under ``<runs>/difficulty-shapes-features-<fast|full>``, so an interrupted run resumes).
Fast mode (CI) trains the showdown's fast size (200 images, 4 epochs) with two seeds: seconds, and nothing to read
a finding from.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from .. import registry
from .._io import atomic_write_json, claim_run_folder
from ..paths import runs_dir
from ..train import rank_and_world
from . import cells as S
from . import paired
from . import record as R
from .grid_search import writing
from .lessons import LessonsSpec, overlap

LOSSES = ("info_nce", "siglip")
DIFFICULTIES: tuple[float, ...] = LessonsSpec().difficulties  # notebook 12's experiment (b): 0, 0.5, 1
EASIEST, HARDEST = min(DIFFICULTIES), max(DIFFICULTIES)
SEEDS = (0, 1, 2, 3, 4)  # seeds 8-15 belong to another experiment
FAST_SEEDS = (0, 1)
NAME = "difficulty-shapes-features-full"
META_FILE = "difficulty.json"
METRIC = "sel_rsum"  # test rsum at the epoch of best validation rsum

#: Every comparison the chapter reads, declared before the record was made: (name, a, b, expected sign of a - b or
#: None), each side a (loss, difficulty) cell or, for the interaction, a difference of two cells. Holm's correction
#: runs over all of them at once.
FAMILY: tuple[tuple[str, object, object, int | None], ...] = (
    *((f"SigLIP - NT-Xent at difficulty {d:g}", ("siglip", d), ("info_nce", d), None) for d in DIFFICULTIES),
    # the hypothesis: SigLIP gains (relative to NT-Xent) where many negatives are false
    (f"SigLIP's advantage at difficulty {HARDEST:g} - at {EASIEST:g}", (("siglip", HARDEST), ("info_nce", HARDEST)),
     (("siglip", EASIEST), ("info_nce", EASIEST)), 1),
)


def spec_for(difficulty: float, fast: bool = False) -> S.ShowdownSpec:
    """The showdown's features budget on the shapes data at `difficulty` (``cells.spec_for``), this experiment's
    seeds."""
    return S.spec_for("shapes", fast, "features", difficulty=float(difficulty), seeds=FAST_SEEDS if fast else SEEDS)


def contestants() -> list[dict]:
    return [{"loss": loss} for loss in LOSSES]


def out_dir(fast: bool = False) -> Path:
    return runs_dir() / f"difficulty-shapes-features-{'fast' if fast else 'full'}"


def record_key(fast: bool = False) -> dict:
    """The settings the record is found by: the budget at every difficulty, the contestants with every
    hyperparameter resolved, and the declared family."""
    return {"experiment": "difficulty", "specs": [spec_for(d, fast).key() for d in DIFFICULTIES],
            "configs": [registry.resolved_config(c) for c in contestants()],
            "family": [[name, a, b, expected] for name, a, b, expected in FAMILY], "metric": METRIC}


def table(cells: list[dict]) -> pd.DataFrame:
    """The runs table of cells tagged with their difficulty: the grid's columns and ``difficulty``."""
    return R.cell_table(cells).assign(difficulty=[float(c["difficulty"]) for c in cells])


def run(fast: bool = False, command: str = "", out: Path | None = None, record: bool = False,
        progress: bool = False) -> S.Showdown:
    """Every loss x difficulty x seed (default full size): with `record`, the shipped record when it matches, else
    trained now (finished cells are read from ``out/cells``; each difficulty's data gives its cells their own
    keys). ``$VLR_RECORD`` set: also kept as a record."""
    out = Path(out or out_dir(fast))
    key = record_key(fast)
    if record and (rec := R.read(out.name, key)) is not None:
        cells = R.cells_of(rec.tables)
        return S.Showdown(table(cells), rec.manifest["meta"], rec.path, reused=True, record=rec)
    claim_run_folder(out, mark=False)
    cells, metas, wall = [], {}, 0.0
    for d in DIFFICULTIES:
        spec = spec_for(d, fast)
        result, data, callback, seconds = S.train_cells(spec, contestants(), out, progress)
        cells += [{**c, "difficulty": d} for c in R.grid_cells(out, result.runs["key"])]
        metas[f"{d:g}"] = S.race_meta(spec, result, data, callback, seconds, "")
        wall += seconds
    meta = {"command": command or "vlr_lib.experiments.difficulty.run()", "wall_seconds": round(wall, 1),
            "overlap": {f"{d:g}": overlap(spec_for(d, fast)) for d in DIFFICULTIES}, "difficulties": metas}
    if rank_and_world()[0] == 0:
        with writing(out):
            atomic_write_json(out / META_FILE, meta)
        tables = R.cell_rows(cells)
        R.keep(out.name, key, tables, command=meta["command"], wall_seconds=wall, meta=meta,
               train_seconds=R.train_seconds(tables["epochs"]),
               title=f"the difficulty experiment (shapes, {'fast' if fast else 'full'} size)")
    return S.Showdown(table(cells), meta, out, reused=False)


#: The cell the record's check re-trains (``vlr_lib.experiments.recheck``): SigLIP at the hardest difficulty.
CHECKED = {"loss": "siglip", "difficulty": HARDEST}


def recorded_and_again(epochs: int | None = None, seed: int = 0) -> tuple[list[float], list[float]]:
    """The record's per-epoch validation rsums of :data:`CHECKED` (seed `seed`) and the same cell re-trained from
    scratch on the CPU (its first `epochs`; the learning rate still decays at the record's epoch)."""
    rec = R.read(NAME, record_key())
    if rec is None:
        raise FileNotFoundError(f"no record of the difficulty experiment matches the code: {R.REGENERATE}")
    cells = [c for c in R.cells_of(rec.tables) if float(c["difficulty"]) == CHECKED["difficulty"]]
    history = R.cell_history(cells, {"loss": CHECKED["loss"]}, seed)
    if epochs is not None:
        history = history[:epochs]
    spec = replace(spec_for(CHECKED["difficulty"]), device="cpu")
    again = S.retrain(replace(spec, epochs=epochs or spec.epochs), CHECKED["loss"], seed)
    return [r["rsum"] for r in history], [r["rsum"] for r in again.history]


# --------------------------------------------------------------------------- reading


def findings(runs: pd.DataFrame, metric: str = METRIC) -> pd.DataFrame:
    """:data:`FAMILY`, read (``paired.findings``): one row per comparison with ``stats.verdicts``' columns."""
    return paired.findings(runs, FAMILY, "difficulty", metric, "difficulty")


shown = paired.shown  # the chapter's table of the findings


def summary(race: S.Showdown, metric: str = METRIC) -> pd.DataFrame:
    """One row per difficulty: the test scenes' mean overlap (``lessons.overlap``) and each loss's `metric`,
    mean ± std over the seeds."""
    rows = []
    for d in DIFFICULTIES:
        row = {"difficulty": f"{d:g}", "scene overlap": round(race.meta["overlap"][f"{d:g}"], 3)}
        for loss in LOSSES:
            values = paired.by_seed(race.runs, loss, d, "difficulty", metric, "difficulty")
            row[registry.label(loss)] = f"{values.mean():.1f} ± {values.std(ddof=1):.1f}"
        rows.append(row)
    return pd.DataFrame(rows).set_index("difficulty")


def deltas(race: S.Showdown, found: pd.DataFrame, metric: str = METRIC) -> pd.DataFrame:
    """SigLIP - NT-Xent per difficulty as a table of ``report.lessons.lesson_table``'s shape, for
    ``viz.lessons.deltas_figure(table, "difficulty")``: the difference, the half-width of its uncorrected paired 95%
    interval, the Holm verdict of `found` (:func:`findings`), the smallest and largest per-seed difference, and the
    test scenes' overlap. No claimed sign (``expected`` None): the hypothesis is about the slope, the interaction."""
    rows = []
    for i, d in enumerate(DIFFICULTIES):
        name = f"SigLIP - NT-Xent at difficulty {d:g}"
        row = found.set_index("name").loc[name]
        per_seed = (paired.by_seed(race.runs, "siglip", d, "difficulty", metric, "difficulty")
                    - paired.by_seed(race.runs, "info_nce", d, "difficulty", metric, "difficulty"))
        rows.append({"experiment": "difficulty", "condition": f"difficulty {d:g}", "order": i,
                     "overlap": race.meta["overlap"][f"{d:g}"], "comparison": "SigLIP − NT-Xent",
                     "expected": None, "source": "no claimed sign", "delta": row["delta"],
                     "half": (row["high"] - row["low"]) / 2, "verdict": row["verdict"],
                     "seed_min": per_seed.min(), "seed_max": per_seed.max(), "metric": metric.removeprefix("sel_")})
    return pd.DataFrame(rows)


__all__ = ["CHECKED", "DIFFICULTIES", "EASIEST", "FAMILY", "FAST_SEEDS", "HARDEST", "LOSSES", "METRIC", "NAME",
           "SEEDS", "contestants", "deltas", "findings", "out_dir", "record_key", "recorded_and_again", "run", "shown",
           "spec_for", "summary", "table"]
