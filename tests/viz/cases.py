"""Every figure the notebooks draw, on inputs shaped like the notebooks' own (fast mode).

`static_cases()`: the figures the notebooks show directly (``viz.<topic>.<builder>(...)`` cells);
`explorer_figures(case)`: an explorer's figures with each slider at both ends of its range (the
positions CI never reaches in the notebooks). The figure-layout test renders all of them in
Chromium at 900 and 1,600 px; tests/viz/test_style.py checks their layouts in Python.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go
import torch

from tests.report.tables import sweep_table, synthetic_runs
from tests.widgets.cases import Case, batch_S, calibration_results, stored_histories
from vlr_lib import goal, similarity, viz
from vlr_lib.report.summary import summarize
from vlr_lib.data import make_shapes
from vlr_lib.demo import demo_retrieval_batch

Figure = Callable[[], go.Figure]


def _gallery() -> go.Figure:
    data = make_shapes(n_train=16, n_val=8, n_test=8, seed=0)["test"].select(range(4))
    images = [np.asarray(im.convert("RGB")) for im in data["image"]]
    return viz.evaluation.image_gallery(images, data["caption"], [f"img_id {i}" for i in data["img_id"]])


def cocos_histories() -> dict[str, list[dict]]:
    out = {}
    for k, name in enumerate(("Triplet", "Triplet-SH", "NT-Xent")):
        history = []
        for e in range(7):
            cocos = {d: {"C_q_mean_active": 5.0 - k - 0.3 * e, "C_0": 2 * e + k, "n_queries": 64}
                     for d in ("i2t", "t2i")}
            history.append({"epoch": e, "rsum": 60.0 + 20 * e + 5 * k, "cocos": cocos if e else None})
        out[name] = history
    return out


def static_cases() -> dict[str, Figure]:
    """name -> a zero-argument function drawing one of the notebooks' own figures."""
    S8, S10, S12 = batch_S(8, 0.8), batch_S(10, 1.2), batch_S(12, 1.5)
    eye8 = torch.eye(8, dtype=torch.bool)
    img, txt, c2i = demo_retrieval_batch(10, 5, 8, 1.5, seed=0)
    S_ret = similarity.similarity(img, txt)
    table5 = {(t, p): 58.0 + i + 0.7 * j for i, p in enumerate(goal.GOAL_PAIRS) for j, t in enumerate(goal.GOAL_TRIPLETS)}
    return {
        "00 image_gallery": _gallery,
        "01 similarity_figure": lambda: viz.evaluation.similarity_figure(
            S_ret, c2i, title="S of a toy batch: 10 images x 50 captions"),
        "03 similarity_heatmap": lambda: viz.matrix.similarity_heatmap(S8, marks={"positive": eye8}),
        "03 temperature_sweep": lambda: viz.contrastive.temperature_sweep(S8, np.logspace(-3, 1, 17), query=0),
        "03 gradient_heatmap": lambda: viz.contrastive.gradient_heatmap(S8, 0.1),
        "04 gamma_limit_figure": lambda: viz.unified.gamma_limit_figure(S8, 0.2, gammas=np.logspace(0, 4, 9)),
        "05 similarity_heatmap": lambda: viz.matrix.similarity_heatmap(S10, marks={"positive": torch.eye(10) > 0}),
        "05 pr_figure": lambda: viz.softmax.pr_figure(calibration_results()),
        "05 neighbor_count_figure": lambda: viz.softmax.neighbor_count_figure(calibration_results(), "t2i"),
        "06 ranking_figure": lambda: viz.smooth_ap.ranking_figure(
            [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2], [True, False, True, False, False, True, False, False],
            title="Eight candidates, three positives"),
        "07 triplet_diagrams": lambda: viz.goal.triplet_diagrams(margin=0.2, tau=10.0),
        "07 pair_weight_curves": lambda: viz.goal.pair_weight_curves(alpha=2.0, beta=10.0, lam=0.5, rel=0.1),
        "07 table1_grid": lambda: viz.goal.table1_grid(),
        "07 table1_grid values": lambda: viz.goal.table1_grid(
            values=table5, highlight=("cir", "sig-ms"), value_label="R@1",
            title="Xuan & Chen Table 5: VSE∞ (BUTD), image → text R@1 on MS-COCO 5K"),
        "07 similarity_heatmap marks": lambda: viz.matrix.similarity_heatmap(S8, marks=viz.matrix.batch_marks(S8)),
        "07 gradient_heatmap": lambda: viz.matrix.gradient_heatmap(
            goal.goal_gradient(S8, config=goal.GoalConfig("cir", "sig-ms")), {"positive": eye8},
            title="S.grad after goal_objective(S, 'cir', 'sig-ms').backward()"),
        "08 similarity_heatmap": lambda: viz.matrix.similarity_heatmap(S12, marks={"positive": torch.eye(12) > 0}),
        "08 cocos_history_figure i2t": lambda: viz.cocos.cocos_history_figure(cocos_histories(), "i2t"),
        "09 curves_figure": lambda: viz.training.curves_figure(
            {k: v for k, v in stored_histories().items() if "collapsed" not in k}, metrics=("loss", "rsum"), chance=30.0),
        "09 similarity_figure": lambda: viz.training.similarity_figure(
            {k: v for k, v in stored_histories().items() if "collapsed" not in k}),
        "09 curves_figure collapsed": lambda: viz.training.curves_figure(
            {k: v for k, v in stored_histories().items() if "collapsed" in k}, metrics=("rsum", "sim_gap"), chance=30.0),
        "10 goal_heatmaps": lambda: viz.showdown.goal_heatmaps(summarize(synthetic_runs(), prefix="sel_"), "r1"),
        "10 metric_errorbars": lambda: viz.showdown.metric_errorbars(summarize(synthetic_runs(), prefix="sel_"), "rsum",
                                                                      chance=30.0),
        "11 sweep_figure margin": lambda: viz.training.sweep_figure(
            sweep_table(), "unified", "margin", {"gamma": 60.0}, references=["triplet_hardest"], chance=30.0),
        "11 sweep_figure gamma": lambda: viz.training.sweep_figure(
            sweep_table(), "unified", "gamma", {"margin": 0.2}, references=["triplet_hardest"], chance=30.0),
        "11 sweep_heatmap": lambda: viz.training.sweep_heatmap(sweep_table(), "unified", "gamma", "margin"),
    }


def _ends(control: W.Widget) -> list:
    """The two ends of a control's range (options for the choosers), from the current value outwards."""
    if isinstance(control, (W.FloatLogSlider,)):
        return [control.base ** control.min, control.base ** control.max]
    if hasattr(control, "min") and hasattr(control, "max"):
        return [control.min, control.max]
    options = [o[1] if isinstance(o, tuple) else o for o in getattr(control, "options", ())]
    if isinstance(control, W.SelectMultiple):
        return [tuple(options[:1]), tuple(options)]
    return options if options else [not control.value] if isinstance(control.value, bool) else []


def explorer_figures(case: Case) -> Iterator[tuple[str, go.Figure]]:
    """The explorer's figures at its start, then with each enabled control at each end (the others reset)."""
    box = case.build()
    yield f"{case.name} start", box.figures
    for key, control in box.controls.items():
        start = control.value
        for value in _ends(control):
            if control.disabled or value == control.value:
                continue
            control.value = value
            yield f"{case.name} {key}={value!r}", box.figures
        if control.value != start:
            control.value = start
