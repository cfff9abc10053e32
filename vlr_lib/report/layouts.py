"""The papers' table layouts: Bleeker & de Rijke's Table 1 and Xuan & Chen's 3 x 5 GOAL grid."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from .. import goal
from .labels import METRIC_LABELS, TABLE1_COLUMNS, check_metric, mean_std

def table1(summary: pd.DataFrame) -> pd.DataFrame:
    """Bleeker & de Rijke's Table 1 layout as strings "mean ± std", plus PR-AUC (Veit & Wilber).

    Columns: loss, hyper-param, then i2t R@1/5/10, i2t mAP@5, t2i R@1/5/10,
    rsum, PR-AUC (recalls percent; mAP@5 and PR-AUC fractions as in the papers,
    with three decimals where Bleeker & de Rijke print two: ours differ in the third).
    """
    out = pd.DataFrame({"loss": summary["name"], "hyper-param": summary["hyper"]})
    for m in TABLE1_COLUMNS:
        out[METRIC_LABELS[m]] = [mean_std(a, b, m) for a, b in zip(summary[f"{m}_mean"], summary[f"{m}_std"])]
    return out.reset_index(drop=True)


def goal_matrix(summary: pd.DataFrame, metric: str = "rsum") -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) of `metric` as [5 pair weights, 3 triplet weights] arrays (NaN where a cell is missing)."""
    metric = check_metric(metric)
    mean = np.full((len(goal.GOAL_PAIRS), len(goal.GOAL_TRIPLETS)), np.nan)
    std = mean.copy()
    by_loss = summary.drop_duplicates("loss").set_index("loss")
    for (i, p), (j, t) in itertools.product(enumerate(goal.GOAL_PAIRS), enumerate(goal.GOAL_TRIPLETS)):
        key = f"goal:{t},{p}"
        if key in by_loss.index:
            mean[i, j] = by_loss.at[key, f"{metric}_mean"]
            std[i, j] = by_loss.at[key, f"{metric}_std"]
    return mean, std


def goal_table(summary: pd.DataFrame, metric: str = "rsum") -> pd.DataFrame:
    """The GOAL grid as strings, rows P^pair, columns T^triplet (Xuan & Chen Tables 3-5)."""
    mean, std = goal_matrix(summary, metric)
    cells = [[mean_std(a, b, metric) if np.isfinite(a) else "" for a, b in zip(ra, rs)] for ra, rs in zip(mean, std)]
    return pd.DataFrame(cells, index=[f"P^{p}" for p in goal.GOAL_PAIRS],
                        columns=[f"T^{t}" for t in goal.GOAL_TRIPLETS])
