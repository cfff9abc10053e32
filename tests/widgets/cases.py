"""Every explorer of the notebooks, built on inputs shaped like the notebooks' own (fast mode).

Shared by the explorer tests (tests/widgets/test_explorers.py), the figure-layout test in Chromium
(tests/browser/test_figure_layout.py) and `make bench-widgets` (benchmarks/bench_widgets.py). Each
case names the explorer by its CSS class (``vlr-explorer-<name>``), the notebook that shows it, how
to build it, and the one control move the benchmark times. Trained results (histories, showdown and
sweep tables) are the synthetic tables of tests/report/tables.py, of the notebooks' sizes: an
explorer only browses them, so their numbers do not change its cost.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import torch

from tests.report.tables import lesson_runs, make_history, sweep_table, synthetic_runs
from vlr_lib import similarity, widgets
from vlr_lib.analysis import CocosSettings
from vlr_lib.goal import GoalConfig
from vlr_lib.demo import demo_embeddings, demo_retrieval_batch
from vlr_lib.report.lessons import lesson_table
from vlr_lib.widgets._core import Explorer


@dataclass(frozen=True)
class Case:
    name: str  # the explorer's CSS class, vlr-explorer-<name>
    notebook: str
    build: Callable[[], Explorer]
    control: str  # the control the benchmark moves ...
    value: object  # ... to this value (from the notebook's default)


def batch_S(n: int, noise: float) -> torch.Tensor:
    return similarity.similarity(*demo_embeddings(n=n, dim=16, noise=noise, seed=0))


def smooth_ap_batch(n_img: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    """Notebook 06's batch: n_img images, five noisy captions each."""
    img, _ = demo_embeddings(n=n_img, dim=16, noise=0.0, seed=0)
    c2i = torch.arange(5 * n_img) // 5
    g = torch.Generator().manual_seed(0)
    txt = similarity.l2_normalize(img[c2i] + torch.randn(5 * n_img, 16, generator=g, dtype=img.dtype))
    return similarity.similarity(img, txt), similarity.positive_mask(torch.arange(n_img), c2i)


def calibration_results() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Notebook 05's two models on its validation split (100 images x 5 captions in fast mode)."""
    out = {}
    for name, noise in (("sampled_softmax", 1.2), ("cross_example_softmax", 1.0)):
        img, txt, c2i = demo_retrieval_batch(100, 5, 16, noise, seed=0)
        out[name] = (similarity.similarity(img, txt), c2i)
    return out


def stored_histories() -> dict[str, list[dict]]:
    """Notebook 09's stored runs: three losses from the usual and from a collapsed start."""
    runs = {}
    for k, name in enumerate(("Triplet-SH", "NT-Xent", "Unified")):
        runs[f"{name} (seed 0)"] = make_history(50.0 + 10 * k, 0.3 + 0.1 * k)
        runs[f"{name}, collapsed start (seed 0)"] = make_history(40.0 + 10 * k, 0.1 + 0.1 * k)
    return runs


METRICS = ("loss", "rsum", "i2t_r1", "pos_sim", "hardneg_sim", "sim_gap")


@cache
def cases() -> tuple[Case, ...]:
    """The explorers in notebook order."""
    S8, S10 = batch_S(8, 0.8), batch_S(10, 1.2)
    return (
        Case("shapes-browser", "00", lambda: widgets.evaluation.shapes_browser(n_groups=3, seed=0), "group", 1),
        Case("retrieval", "01", lambda: widgets.evaluation.retrieval_explorer(8, 5, 8, 1.5, 0), "noise", 2.0),
        Case("triplet-gradient", "02", lambda: widgets.triplet.gradient_explorer(8, 16, 2.0, 0, 0.2), "margin", 0.3),
        Case("triplet-tangent", "02", lambda: widgets.triplet.tangent_explorer(5.0, 5.0, "opposite", 0.2),
             "theta_pos", 60.0),
        Case("contrastive", "03", lambda: widgets.contrastive.temperature_explorer(S8, 0.1, 0), "temperature", 0.5),
        Case("sigmoid", "03", lambda: widgets.contrastive.sigmoid_explorer(), "logit_bias", -5.0),
        Case("unified", "04", lambda: widgets.unified.unified_explorer(S8, 0.2, 60.0), "margin", 0.3),
        Case("unified-surfaces", "04", lambda: widgets.unified.surface_explorer(0.2, n=30), "margin", 0.3),
        Case("softmax", "05", lambda: widgets.softmax.partition_explorer(S10, 0, 3, 0.5, 20.0), "scale", 10.0),
        Case("softmax-threshold", "05",
             lambda: widgets.softmax.threshold_explorer(calibration_results(), 0.2, 12, "t2i"), "threshold", 0.4),
        Case("smooth-ap", "06", lambda: widgets.smooth_ap.smooth_ap_explorer(*smooth_ap_batch(), tau=0.01),
             "tau", 0.1),
        Case("goal-triplet", "07", lambda: widgets.goal.triplet_explorer(), "margin", 0.3),
        Case("goal-pair", "07", lambda: widgets.goal.pair_weight_explorer(), "alpha", 4.0),
        Case("goal", "07", lambda: widgets.goal.goal_composer(batch_S(8, 1.2), config=GoalConfig("cir", "sig-ms")),
             "tau", 20.0),
        Case("cocos", "08", lambda: widgets.cocos.cocos_explorer(settings=CocosSettings(), n=12, dim=16, noise=1.5),
             "eps", 0.1),
        Case("training", "09", lambda: widgets.training.training_explorer(
            stored_histories(), metrics=METRICS, shown=("loss", "rsum"), chance=30.0), "run:Triplet-SH (seed 0)", False),
        Case("showdown", "10", lambda: widgets.showdown.showdown_explorer(synthetic_runs(), chance=30.0),
             "metric", "i2t_r1"),
        Case("showdown-goal", "10", lambda: widgets.showdown.goal_explorer(synthetic_runs()), "color", "delta"),
        Case("showdown-cocos", "10", lambda: widgets.showdown.cocos_explorer(synthetic_runs()), "stat", "C_0"),
        Case("sweep", "11", lambda: widgets.training.sweep_explorer(
            sweep_table(), references=["triplet_hardest"], chance=30.0, loss="unified"), "metric", "i2t_r1"),
        Case("paired", "12", lambda: widgets.lessons.paired_explorer(
            lesson_runs(), lesson_table(lesson_runs()), {"features": "(a) feature quality"}),
             "comparison", "NT-Xent − Triplet-SH"),
    )
