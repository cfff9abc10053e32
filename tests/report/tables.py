"""Synthetic results tables whose numbers are known by construction (shared by the report, viz and widgets tests)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from vlr_lib import registry
from vlr_lib.report.labels import TABLE1_COLUMNS
from vlr_lib.experiments.showdown import CONTESTANTS
from vlr_lib.goal import GOAL_PAIRS, GOAL_TRIPLETS

GOAL = [f"goal:{t},{p}" for t in GOAL_TRIPLETS for p in GOAL_PAIRS]
LOSS_NAMES = list(CONTESTANTS) + GOAL  # the showdown's 24
RULES = ("triplet", "triplet_sh", "nt_xent", "smooth_ap")


def arr(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def synthetic_runs(seeds=(0, 1, 2), losses_=None, seed: int = 0) -> pd.DataFrame:
    """A showdown table: per config a base level, per seed noise; every column the figures read."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, loss in enumerate(losses_ or LOSS_NAMES):
        level = 100 + 7 * ((k * 5) % 11)  # distinct, shuffled levels
        for s in seeds:
            row = {"config": loss, "loss": loss, "seed": s, "sel_epoch": 1 + (k + s) % 3, "epoch": 3}
            for prefix, shift in (("sel_", 0.0), ("test_", -5.0)):
                rec = {f"{d}_r{r}": (level + shift) / 6 + rng.normal(0, 1.5) for d in ("i2t", "t2i") for r in (1, 5, 10)}
                rec["rsum"] = sum(rec.values())
                rec["map5"] = min(1.0, level / 400 + rng.normal(0, 0.01))
                rec["pr_auc"] = min(1.0, level / 500 + rng.normal(0, 0.01))
                row.update({prefix + key: v for key, v in rec.items()})
            for rule, d in itertools.product(RULES, ("i2t", "t2i")):
                row[f"sel_cocos_{rule}_{d}_C_q"] = 1.0 if rule == "triplet_sh" else 1 + k + s + rng.random()
                row[f"sel_cocos_{rule}_{d}_C_0"] = float((k + s) % 5)
                row[f"sel_cocos_{rule}_{d}_W_neg"] = 0.3 if rule == "nt_xent" else math.nan
                row[f"sel_cocos_{rule}_{d}_W_pos"] = 0.4 + 0.01 * k if rule == "nt_xent" else math.nan
            rows.append(row)
    return pd.DataFrame(rows)


def hand_summary(means: dict[str, float], stds: dict[str, float], metric: str = "rsum") -> pd.DataFrame:
    """A summary with chosen mean/std of one metric (others copied) for the reading tests."""
    rows = []
    for loss in means:
        row = {"config": loss, "loss": loss, "name": registry.label(loss) if loss in registry.names() or registry.is_goal(loss) else loss, "hyper": "", "n_seeds": 3}
        for m in TABLE1_COLUMNS:
            row[f"{m}_mean"], row[f"{m}_std"] = means[loss], stds[loss]
        rows.append(row)
    return pd.DataFrame(rows)



# --------------------------------------------------------------------------- histories and sweeps

EPOCHS = 5


def make_history(loss0: float, rate: float, start_epoch: int = 1) -> list[dict]:
    """A history as `fit` records it (nested COCOS included); epoch 0 has no loss when start_epoch == 0."""
    out = []
    for e in range(start_epoch, EPOCHS + 1):
        rec = {
            "epoch": e,
            "loss": loss0 * math.exp(-rate * e) if e > 0 else math.nan,
            "rsum": 30 + 200 * (1 - math.exp(-rate * e)),
            "i2t_r1": 5.0 + e,
            "pos_sim": 0.1 + rate * e / 10,
            "hardneg_sim": 0.3 - rate * e / 20,
        }
        if e > 0:
            rec["cocos"] = {"i2t": {"n_queries": 16, "C_0": e}, "t2i": {"n_queries": 16, "C_0": 0}}
        out.append(rec)
    return out



MARGINS = [0.0, 0.1, 0.2, 0.4]
GAMMAS = [10.0, 30.0, 60.0, 100.0]
TEMPS = [0.05, 0.1, 0.2]
SEEDS = [0, 1, 2]


def rsum_of(m: float, g: float, seed: int) -> float:
    return 200.0 - (g - 40.0) ** 2 / 50.0 + 40.0 * m - 80 * m * m + 3.0 * seed


def sweep_table() -> pd.DataFrame:
    """A grid's runs table (the columns `grid` writes), with a known rsum per cell."""
    rows = []
    for s in SEEDS:
        for m in MARGINS:
            for g in GAMMAS:
                rows.append({"config": f"unified(gamma={g}, margin={m})", "loss": "unified", "gamma": g, "margin": m,
                             "seed": s, "rsum": rsum_of(m, g, s), "i2t_r1": 10.0 * m + g / 10 + s, "epochs": 5})
        for t in TEMPS:
            rows.append({"config": f"info_nce(temperature={t})", "loss": "info_nce", "temperature": t, "seed": s,
                         "rsum": 250.0 - 100 * abs(t - 0.1) + s, "i2t_r1": 3.0, "epochs": 5})
        rows.append({"config": "triplet_hardest", "loss": "triplet_hardest", "seed": s, "rsum": 150.0 + s,
                     "i2t_r1": 1.0, "epochs": 5})
    return pd.DataFrame(rows)



# --------------------------------------------------------------------------- the lessons (notebook 12)

#: sel_rsum of each (experiment, condition, role) at seed 0; seed s adds s * spread (per role) -- known by design.
LESSON_MEANS = {
    ("features", "random encoder"): {"triplet_all": 100.0, "triplet_hardest": 80.0, "unified": 90.0, "info_nce": 81.0},
    ("features", "pretrained encoder"): {"triplet_all": 200.0, "triplet_hardest": 230.0, "unified": 228.0,
                                        "info_nce": 200.0},
    ("warmup", "no warm-up"): {"triplet_all": 200.0, "triplet_hardest": 230.0, "unified": 240.0, "info_nce": 200.0},
}
LESSON_SPREAD = {"triplet_all": 1.0, "triplet_hardest": 2.0, "unified": 10.0, "info_nce": 0.5}
LESSON_SEEDS = (0, 1, 2)


def lesson_runs() -> pd.DataFrame:
    """A lessons table (the columns lessons.run writes that the report reads) with known differences."""
    rows = []
    for order, ((exp, cond), means) in enumerate(LESSON_MEANS.items()):
        for role, mean in means.items():
            for s in LESSON_SEEDS:
                loss = "warmup:triplet_all:1:triplet_hardest" if role == "triplet_hardest" and exp == "warmup" else role
                rows.append({"experiment": exp, "condition": cond, "order": order % 2, "overlap": 0.5, "role": role,
                             "loss": loss, "seed": s, "sel_rsum": mean + s * LESSON_SPREAD[role]})
    return pd.DataFrame(rows)
