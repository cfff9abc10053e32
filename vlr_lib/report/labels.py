"""Names, labels and number formats of the results tables: metric labels, column sets, a configuration's
label and hyperparameters, "mean ± std" with the metric's decimals."""
from __future__ import annotations

import json
from collections.abc import Mapping

from .. import goal, registry
from .._checks import check_finite, check_nonnegative

#: Metric key -> label. Recalls and rsum are percent; mAP@5 and PR-AUC fractions; similarities cosines.
METRIC_LABELS: dict[str, str] = {
    "i2t_r1": "i2t R@1",
    "i2t_r5": "i2t R@5",
    "i2t_r10": "i2t R@10",
    "map5": "i2t mAP@5",
    "t2i_r1": "t2i R@1",
    "t2i_r5": "t2i R@5",
    "t2i_r10": "t2i R@10",
    "rsum": "rsum",
    "pr_auc": "PR-AUC",
    "loss": "training loss",
    "grad_norm": "gradient norm (mean per epoch)",
    "pos_sim": "mean positive similarity",
    "hardneg_sim": "mean hardest-negative similarity",
    "sim_gap": "positive − hardest negative",
    "best_rsum": "best validation rsum",
    "train_loss": "final training loss",
}
#: Bleeker & de Rijke's Table 1 order (i2t block with mAP@5, t2i block, rsum), then PR-AUC.
TABLE1_COLUMNS: tuple[str, ...] = ("i2t_r1", "i2t_r5", "i2t_r10", "map5", "t2i_r1", "t2i_r5", "t2i_r10", "rsum",
                                   "pr_auc")
#: Metrics summarised per configuration (``vlr_lib.train.evaluate``), then the grid's derived ones.
SUMMARY_METRICS: tuple[str, ...] = (*TABLE1_COLUMNS, "pos_sim", "hardneg_sim", "best_rsum", "train_loss")
FRACTIONS = ("map5", "pr_auc")
GROUPS = ("all", "closed-form", "GOAL")
COCOS_RULES = {"triplet": "Triplet", "triplet_sh": "Triplet-SH", "nt_xent": "NT-Xent", "smooth_ap": "SmoothAP"}
COCOS_STATS = ("C_q", "C_0", "W_neg", "W_pos")
#: Columns that tell runs of different data or schedules apart (never averaged together).
SETUP_COLUMNS = ("data_id", "settings")
#: Columns of a grid's runs table that hold training settings (``vlr_lib.experiments.grid_search.FIT_KEYS``).
SETTING_COLUMNS = ("epochs", "batch_size", "lr", "lr_decay_epoch", "sampling", "probe_batch", "grad_clip",
                   "optimizer_at_switch", "optimizer", "weight_decay", "head", "dim",
                   "text_encoder", "width", "word_dim", "hidden", "min_count")
#: Xuan & Chen's Table 1 names the hardest-negative triplet "Triplet"; ours is Triplet-SH.
_TABLE1_NAMES = {"Triplet": "Triplet-SH"}




def flatten_record(record: Mapping) -> dict:
    """{"cocos": {"i2t": {"C_q": 3}}} -> {"cocos_i2t_C_q": 3}; other keys unchanged (a history record as a row)."""
    out: dict = {}
    for key, value in record.items():
        if isinstance(value, Mapping):
            for sub, v in flatten_record(value).items():
                out[f"{key}_{sub}"] = v
        else:
            out[key] = value
    return out


def metric_label(metric: str) -> str:
    return METRIC_LABELS.get(metric, metric)


def check_metric(metric: str) -> str:
    """`metric` when it is a key of :data:`TABLE1_COLUMNS`, else a ValueError naming it."""
    if metric not in TABLE1_COLUMNS:
        raise ValueError(f"metric must be one of {TABLE1_COLUMNS}, got {metric!r}")
    return metric


def table1_name(triplet: str, pair: str) -> str:
    """The existing loss a GOAL cell reproduces (Xuan & Chen Table 1, in our names), or "New"."""
    known = goal.TABLE1.get((triplet, pair), "New")
    return _TABLE1_NAMES.get(known, known)


def hyperparameters(loss: str, overrides: Mapping | None = None) -> str:
    """The parameters a configuration trains with, e.g. 'margin=0.2, gamma=60.0' (library defaults + `overrides`).

    The numeric hyperparameters of the registry's entry (``registry.resolved``): for GOAL only those its two
    weights use, for a loss schedule those of its two phases; choices such as the reduction are left out.
    """
    phases = registry.schedule(loss)[::2] if registry.is_schedule(loss) else (loss,)
    values: dict = {}
    for name in phases:
        kinds = registry.entry(name).hyper
        values.update({k: v for k, v in registry.resolved(name).items() if kinds[k].kind != "choice"})
    values.update({k: v for k, v in (overrides or {}).items() if k in values})
    return ", ".join(f"{k}={v}" for k, v in values.items() if v is not None)


def _digits(metric: str) -> int:
    """Decimals shown: 1 for percentages, 3 for fractions (our PR-AUCs differ in the third decimal)."""
    return 3 if metric in FRACTIONS else 1


def mean_std(mean: float, std: float, metric: str) -> str:
    """'71.3 ± 1.2' (percentages) or '0.712 ± 0.012' (fractions); a NaN or inf is an error, never printed."""
    check_finite("mean", mean)
    check_nonnegative("std", check_finite("std", std))
    digits = _digits(metric)
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def config_label(config: Mapping) -> str:
    """"unified(gamma=60, margin=0.2)": a configuration without its seed."""
    rest = ", ".join(f"{k}={config[k]}" for k in sorted(config) if k != "loss")
    return f"{config['loss']}({rest})" if rest else str(config["loss"])



def settings_json(settings: Mapping) -> str:
    """The canonical text of a grid's training settings (the ``settings`` column of its runs table)."""
    return json.dumps(dict(settings), sort_keys=True)
