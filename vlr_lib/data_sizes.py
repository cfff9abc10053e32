"""The shapes data's split sizes, in one place: who trains on how many images.

A module of its own, importing nothing, so that the command lines can print these defaults in their help without
loading the data layer (``datasets``, torch).
"""
from __future__ import annotations

#: Every split size of the shapes data the workbook uses, in one place (images per split), by who uses it:
#: ``make_shapes``' defaults (the full-size experiments: the showdown, the lessons); the command lines when no
#: ``--n-train`` / ``--n-val`` is given (``python -m vlr_lib train``, ``grid``); the training chapters (notebooks
#: 09 and 11, ``notebook.training_features``), as (fast, full); the showdown's fast (CI) size.
SIZES: dict[str, dict[str, object]] = {
    "default": {"n_train": 2000, "n_val": 200, "n_test": 200},
    "command line": {"n_train": 1000, "n_val": 200},
    "chapters": {"n_train": (400, 2000), "n_val": (100, 200)},
    "showdown fast": {"n_train": 200, "n_val": 100, "n_test": 100},
}
