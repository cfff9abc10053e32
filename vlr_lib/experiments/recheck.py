"""Each shipped record's check: one recorded run re-trained from scratch, its validation rsums beside the record's.

The records (``vlr_lib.experiments.record``) are checked, never trusted: notebooks 09-12 re-train one
recorded run in every mode, the tests do so in fast mode, and ``benchmarks/record_drift.py``
measures how far these re-trained runs land from the record under other CPU kernels and thread
counts -- the measurements that size ``record.TOLERANCES``. One function per record gives
``(recorded, again)``: the record's per-epoch validation rsums and the re-trained run's, so the
notebooks, the tests and the measurement re-train exactly the same run.

- ``09_training-shapes-full``: notebook 09's Unified run (m 0.2, gamma 60), its first seed;
- ``11_hyperparameters-shapes-full``: notebook 11's Triplet-SH cell, its first seed;
- ``tuned-shapes-features-full``: notebook 11's tuned comparison, NT-Xent at temperature 0.05, seed 0;
- ``showdown-shapes-features-full`` / ``showdown-shapes-vsepp-full``: the showdown's Triplet-SH, seed 0;
- ``lessons-shapes-full``: notebook 12's Triplet-SH on the pretrained encoder, seed 0 (the record keeps
  each run's last and best rsum, so those two are compared).

Every check re-trains on the CPU, whatever device the caller trains on: the records are CPU runs, and
the same runs re-trained on a GPU (bf16 autocast, other reductions) land 7.5 to 36 rsum points away
(measured on an H200, docs/results.md), far beyond any CPU's drift.

``epochs`` cuts a run short (fast mode re-trains the first 3 epochs of 09 and 11 and the first 5 of a
showdown: the learning rate still decays at the record's epoch, so they are the record's first epochs).
"""
from __future__ import annotations

from collections.abc import Callable

from . import record as R

NAMES = ("09_training-shapes-full", "11_hyperparameters-shapes-full", "tuned-shapes-features-full",
         "showdown-shapes-features-full", "showdown-shapes-vsepp-full", "lessons-shapes-full")
Pair = tuple[list[float], list[float]]
#: The first epochs a check re-trains when the notebook's settings are not the record's (fast mode).
CHECK_EPOCHS = 3


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


def _against(name: str, label: str, what: str, here: Callable[[R.Record], Pair | None], again: Callable[[int | None], Pair],
             on_cpu: bool, epochs: int | None) -> str:
    """A notebook's record check in one call: the sentence to print.

    `here(rec)` gives (recorded, trained) when the notebook trained the record's checked run at the record's
    settings, else None; on the CPU (as the records were made) those are compared. Otherwise `again` re-trains
    the record's run at its own settings on the CPU: its first `epochs` (default :data:`CHECK_EPOCHS`; the
    learning rate still decays at the record's epoch), or all of it for the record's settings on a GPU.
    Beyond the record's tolerance: an error under the tests and the book, a warning in full mode."""
    rec = R.read(name, None)  # integrity checked, any settings
    if rec is None:
        return f"no usable record {name} in {R.record_root()}: nothing to check ({R.REGENERATE} makes it)"
    pair = here(rec)
    if pair is not None and on_cpu:
        (recorded, run), how = pair, "trained here"
    else:
        recorded, run = again(None if pair is not None else (epochs or CHECK_EPOCHS))
        how = f"re-trained at the record's settings on the CPU ({len(run)} epochs)"
    gap = R.check_reproduced(recorded[: len(run)], run, label, name=name)
    return f"the record's {what}, {how}: validation rsum within {gap:.2f} of the record at every epoch"


def training_against(settings: dict, here: list[float], on_cpu: bool = True,
                     epochs: int | None = None) -> str:
    """Notebook 09's record check in one call, whatever the mode: the sentence to print.

    `here`: the validation rsums (epochs 1..) of the notebook's Unified run of seed 0, trained now with
    `settings`. When those are the record's settings (their sha256 is the manifest's) the run is compared
    with the record's; otherwise the record's run is re-trained (:func:`_against`)."""
    def trained_here(rec: R.Record) -> Pair | None:
        if R.settings_hash(settings) != rec.manifest["settings_sha256"]:
            return None
        seed = rec.manifest["settings"]["seeds"][0]
        return [r["rsum"] for r in R.histories_of(rec.tables["runs"])[f"usual/{seed}/Unified"][1:]], here

    return _against("09_training-shapes-full", "notebook 09's record", "Unified run, seed 0", trained_here, training,
                    on_cpu, epochs)


def sweeps_against(trained=None, on_cpu: bool = True, epochs: int | None = None) -> str:
    """Notebook 11's record check in one call, whatever the mode: the sentence to print.

    `trained`: the grid result (``GridResult``) in which the notebook, having opened the record, trained
    the record's Triplet-SH cell of its first seed at the record's settings; that cell is compared with the
    record's. None (fast mode, other settings): the record's cell is re-trained (:func:`_against`)."""
    def trained_here(rec: R.Record) -> Pair | None:
        if trained is None:
            return None
        seed, config = rec.manifest["settings"]["seeds"][0], {"loss": "triplet_hardest"}
        mine = R.cell_history(R.grid_cells(trained.out, trained.runs["key"]), config, seed)
        return ([r["rsum"] for r in R.cell_history(R.cells_of(rec.tables), config, seed)],
                [r["rsum"] for r in mine])

    return _against("11_hyperparameters-shapes-full", "notebook 11's record", "Triplet-SH cell, seed 0", trained_here,
                    sweeps, on_cpu, epochs)


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


def showdown(setting: str) -> Callable[..., Pair]:
    """The showdown of `setting` (notebook 10): Triplet-SH, seed 0. The pair's `loss` and `loss_kwargs`
    re-train the same cell with another loss or other parameters (what the check exists to catch)."""
    def pair(epochs: int | None = None, loss: str = "triplet_hardest", **loss_kwargs) -> Pair:
        from . import showdown as S

        found = S.recorded_and_again(S.spec_for("shapes", False, setting), retrain_as=loss,
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


CHECKS: dict[str, Callable[[int | None], Pair]] = {
    "09_training-shapes-full": training, "11_hyperparameters-shapes-full": sweeps,
    "tuned-shapes-features-full": tuned,
    "showdown-shapes-features-full": showdown("features"), "showdown-shapes-vsepp-full": showdown("vsepp"),
    "lessons-shapes-full": lessons,
}


def check(name: str, epochs: int | None = None, strict: bool | None = None) -> float:
    """Re-train the record `name`'s checked run and compare it (``record.check_reproduced``); the largest gap."""
    recorded, again = CHECKS[name](epochs)
    return R.check_reproduced(recorded, again, f"the record {name}", name=name, strict=strict)
