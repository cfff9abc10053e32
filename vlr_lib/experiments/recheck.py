"""Each shipped record's check: one recorded run re-trained from scratch, its validation rsums beside the record's.

The records (``vlr_lib.experiments.record``) are checked, never trusted: notebooks 09-13 re-train one
recorded run in every mode, the tests do so in fast mode, and ``benchmarks/record_drift.py``
measures how far these re-trained runs land from the record under other CPU kernels and thread
counts -- the measurements that size each record's tolerance (``protocol.EXPERIMENTS``). One function per record gives
``(recorded, again)``: the record's per-epoch validation rsums and the re-trained run's, so the
notebooks, the tests and the measurement re-train exactly the same run.

- ``09_training-shapes-full``: notebook 09's Unified run (m 0.2, gamma 60), its first seed;
- ``11_hyperparameters-shapes-full``: notebook 11's Triplet-SH cell, its first seed;
- ``tuned-shapes-features-full``: notebook 11's tuned comparison, NT-Xent at temperature 0.05, seed 0;
- ``showdown-shapes-features-full`` / ``showdown-shapes-vsepp-full``: the showdown's Triplet-SH, seed 0;
- ``batch-size-shapes-features-full``: notebook 03's batch-size experiment, SigLIP at batch size 32, seed 0;
- ``difficulty-shapes-features-full``: notebook 03's difficulty experiment, SigLIP at difficulty 1, seed 0;
- ``lessons-shapes-full``: notebook 12's Triplet-SH on the pretrained encoder, seed 0 (the record keeps
  each run's last and best rsum, so those two are compared);
- ``replication-shapes-full``: notebook 13's NT-Xent final run on heads on features at its chosen point, seed 8.

Every check re-trains on the CPU, whatever device the caller trains on: the records are CPU runs, and
the same runs re-trained on a GPU (bf16 autocast, other reductions) land 7.5 to 36 rsum points away
(measured on an H200, docs/results.md), far beyond any CPU's drift.

``epochs`` cuts a run short (fast mode re-trains the first 3 epochs of 09 and 11 and the first 5 of a
showdown: the learning rate still decays at the record's epoch, so they are the record's first epochs).
"""
from __future__ import annotations

from collections.abc import Callable

from . import record as R

Pair = tuple[list[float], list[float]]


def _shipped(name: str) -> R.Record:
    rec = R.read(name, None)
    if rec is None:
        raise FileNotFoundError(f"no usable record {name} in {R.record_root()}: regenerate it with {R.REGENERATE}")
    return rec


def _features(made: dict):
    """The shapes train and validation features of a notebook record's settings (notebook.training_features)."""
    from ..data import make_shapes
    from ..train import shapes_features

    data = make_shapes(n_train=made["n_train"], n_val=made["n_val"], n_test=1, seed=made["seed"])
    feats = shapes_features(data, seed=made["seed"], splits=("train", "validation"))
    return feats["train"], feats["validation"]


def _heads_run(made: dict, loss: str, loss_kwargs: dict, epochs: int | None, **extra) -> list[float]:
    from ..train import fit

    train, val = _features(made)
    result = fit(*train, loss=loss, loss_kwargs=loss_kwargs, val=val, dim=made["dim"], epochs=epochs or made["epochs"],
                 lr_decay_epoch=made.get("lr_decay_epoch", made["epochs"] // 2),  # older records: halfway
                 batch_size=made["batch_size"], lr=made["lr"], seed=made["seeds"][0], progress=False, device="cpu",
                 **extra)
    return [r["rsum"] for r in result.history]


def training(epochs: int | None = None, loss: tuple[str, dict] | None = None, **changed) -> Pair:
    """Notebook 09: the record's Unified run of its first seed (epoch 0, the untrained heads, left out).

    `loss` ((name, parameters)) and `changed` (settings of the record, e.g. ``lr=``) re-train the
    same run with one thing changed: what the check exists to catch."""
    rec = _shipped("09_training-shapes-full")
    made = {**rec.manifest["settings"], **changed}
    name, kw = loss or made["losses"]["Unified"]
    again = _heads_run(made, name, kw, epochs, head=made["head"])
    recorded = R.histories_of(rec.tables["runs"])[f"usual/{made['seeds'][0]}/Unified"][1:]
    return [r["rsum"] for r in recorded][: len(again)], again


def training_mine(rec: R.Record, first: list[dict]) -> Pair:
    """Notebook 09's own check: the record's Unified run of its first seed beside `first`, the same run the notebook
    trained at the record's settings (its per-epoch history; epoch 0, the untrained heads, left out)."""
    seed = rec.manifest["settings"]["seeds"][0]
    recorded = R.histories_of(rec.tables["runs"])[f"usual/{seed}/Unified"][1:]
    return [r["rsum"] for r in recorded], [r["rsum"] for r in first[1:]]


def sweeps_mine(rec: R.Record, trained) -> Pair:
    """Notebook 11's own check: the record's Triplet-SH cell of its first seed beside the same cell of `trained`, the
    grid (``GridResult``) the notebook trained at the record's settings."""
    seed, config = rec.manifest["settings"]["seeds"][0], {"loss": "triplet_hardest"}
    mine = R.cell_history(R.grid_cells(trained.out, trained.runs["key"]), config, seed)
    return [r["rsum"] for r in R.cell_history(R.cells_of(rec.tables), config, seed)], [r["rsum"] for r in mine]


def sweeps(epochs: int | None = None) -> Pair:
    """Notebook 11: the record's Triplet-SH cell of its first seed."""
    rec = _shipped("11_hyperparameters-shapes-full")
    made = rec.manifest["settings"]
    again = _heads_run(made, "triplet_hardest", {}, epochs, probe_batch=0)
    recorded = R.cell_history(R.cells_of(rec.tables), {"loss": "triplet_hardest"}, made["seeds"][0])
    return [r["rsum"] for r in recorded][: len(again)], again


def tuned(epochs: int | None = None) -> Pair:
    """Notebook 11's tuned comparison: its NT-Xent cell at temperature 0.05, seed 0 (``tuned.CHECKED``)."""
    from . import tuned as T

    return T.recorded_and_again(epochs)


def batch_size(epochs: int | None = None) -> Pair:
    """Notebook 03's batch-size experiment: its SigLIP cell at batch size 32, seed 0 (``batch_size.CHECKED``)."""
    from . import batch_size as B

    return B.recorded_and_again(epochs)


def difficulty(epochs: int | None = None) -> Pair:
    """Notebook 03's difficulty experiment: its SigLIP cell at difficulty 1, seed 0 (``difficulty.CHECKED``)."""
    from . import difficulty as D

    return D.recorded_and_again(epochs)


def showdown(setting: str) -> Callable[..., Pair]:
    """The showdown of `setting` (notebook 10): Triplet-SH, seed 0. The pair's `loss` and `loss_kwargs`
    re-train the same cell with another loss or other parameters (what the check exists to catch)."""
    def pair(epochs: int | None = None, loss: str = "triplet_hardest", **loss_kwargs) -> Pair:
        from . import showdown as S
        from .cells import spec_for

        found = S.recorded_and_again(spec_for("shapes", False, setting), retrain_as=loss,
                                     loss_kwargs=loss_kwargs or None, epochs=epochs)
        if found is None:
            raise FileNotFoundError(f"no record of the {setting} showdown matches the code: {R.REGENERATE}")
        return found[1], found[2]
    return pair


def lessons(epochs: int | None = None) -> Pair:
    """Notebook 12: Triplet-SH on the pretrained encoder, seed 0; its last and best rsum."""
    from . import lessons as L

    found = L.recorded_and_again(L.LessonsSpec(device="cpu"))
    if found is None:
        raise FileNotFoundError(f"no record of notebook 12's experiments matches the code: {R.REGENERATE}")
    return found[1], found[2]


def replication(epochs: int | None = None) -> Pair:
    """Notebook 13: the replication's NT-Xent final run on heads on features at its chosen point, the first final
    seed (``replication.recorded_and_again``)."""
    from . import replication as X

    return X.recorded_and_again(epochs)


def optimizer(epochs: int | None = None) -> Pair:
    """Notebook 13: the optimizer experiment's run of VSE∞'s recipe (AdamW carried over, clipped) at 20 epochs, the
    first seed (``optimizer.recorded_and_again``)."""
    from . import optimizer as O

    return O.recorded_and_again(epochs)
