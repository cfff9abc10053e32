# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 · SmoothAP: optimising average precision through a sigmoid
#
# Retrieval is judged by *rankings* (R@K, mAP), but a ranking is a step function of the
# scores: its gradient is zero almost everywhere. **SmoothAP** (Brown et al., 2020; in ICR
# studied by Bleeker & de Rijke, eqs. 5–8) replaces each step by a sigmoid and trains on
# $1 - \text{AP}$ directly.
#
# **Learning goals.** After this notebook you can
# 1. compute the average precision (AP) of a ranking by hand (Bleeker & de Rijke, eqs. 5–6);
# 2. write its sigmoid relaxation (eq. 7) and read the temperature $\tau$ as sharpness;
# 3. handle one positive per query (text→image) and five (image→text) with a `pos_mask`;
# 4. check that a small $\tau$ recovers the exact AP, and see where the gradient goes;
# 5. state what Bleeker & de Rijke found when they trained ICR models with it.

# %%
try:  # opened without the workbook installed (Colab, a JupyterHub, a copied notebook)?
    import vlr_lib  # noqa: F401
except ModuleNotFoundError:
    raise ModuleNotFoundError(
        "vlr_lib is not installed: in a cell run `%pip install -e "
        "/path/to/vlr-workbook` "
        "(the folder holding pyproject.toml), then restart the kernel"
    ) from None

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import torch

from vlr_lib import grading, losses, metrics, similarity, viz, widgets
from vlr_lib.demo import demo_embeddings
from vlr_lib.notebook import setup

cfg = setup(seed=0)
N_IMG = cfg.pick(6, 16)  # images in the live batch, 5 captions each
TAU = 0.01  # Bleeker & de Rijke's SmoothAP temperature (Table 1)

# %% [markdown]
# ## AP of a ranking, by hand (eqs. 5–6)
#
# A query $q$ scores every candidate of its set $\Omega$; $\mathcal P \subset \Omega$ are its
# positives. The rank of candidate $i$ within a set $X$ counts who scores above it (eq. 6):
#
# $$\mathcal R(i, X) = 1 + \sum_{j \in X,\, j \ne i} \mathbb 1\{s_j - s_i > 0\},
# \qquad \text{AP}_q = \frac{1}{|\mathcal P|}\sum_{i \in \mathcal P}
#   \frac{\mathcal R(i, \mathcal P)}{\mathcal R(i, \Omega)} \quad\text{(eq. 5)}.$$
#
# $\mathcal R(i,\mathcal P)/\mathcal R(i,\Omega)$ is the precision at the position of positive $i$.
# (Ties are not an issue in this notebook's real-valued scores; the library's
# `metrics.average_precision` counts a negative tied with a positive as above it, notebook 01.)
# Take eight candidates with the positives at ranks 1, 3 and 6:
# $\text{AP} = \frac13\big(\frac11 + \frac23 + \frac36\big) = \frac{13}{18}$.

# %%
scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2])
is_pos = np.array([True, False, True, False, False, True, False, False])


def ap_by_hand(scores, is_pos) -> Fraction:
    """Eqs. 5-6 with plain loops and exact fractions."""
    positives = [i for i in range(len(scores)) if is_pos[i]]
    total = Fraction(0)
    for i in positives:
        rank_in_p = 1 + sum(scores[j] > scores[i] for j in positives if j != i)
        rank_in_all = 1 + sum(
            scores[j] > scores[i] for j in range(len(scores)) if j != i
        )
        total += Fraction(rank_in_p, rank_in_all)
    return total / len(positives)


assert ap_by_hand(scores, is_pos) == Fraction(13, 18)
assert math.isclose(metrics.average_precision(scores, is_pos), 13 / 18)
viz.smooth_ap.ranking_figure(scores, is_pos, title="Eight candidates, three positives")

# %% [markdown]
# ## The sigmoid relaxation (eq. 7)
#
# Replace every indicator $\mathbb 1\{x > 0\}$ by
#
# $$\mathcal G(x; \tau) = \frac{1}{1 + e^{-x/\tau}}$$
#
# (`losses.smooth_step`),
#
# which counts a candidate *fractionally* when its score is within a few $\tau$ of the
# positive's. This gives SmoothAP (Bleeker & de Rijke, the display after eq. 7),
#
# $$\text{AP}_q \approx \frac{1}{|\mathcal P|}\sum_{i\in\mathcal P}
# \frac{1 + \sum_{j \in \mathcal P, j\ne i} \mathcal G(s_j - s_i; \tau)}
#      {1 + \sum_{j \in \Omega, j\ne i} \mathcal G(s_j - s_i; \tau)},
# \qquad \mathcal L_{AP} = \frac{1}{|\mathcal B|}\sum_q (1 - \text{AP}_q) \quad\text{(eq. 8)}.$$
#
# **A note on the sign.** The extraction of the paper writes $D_{ij} = s_i - s_j$ and
# $\mathcal G(D_{ij})$, which would count the candidates *below* $i$. Eq. 6 counts those above,
# so the argument must be $s_j - s_i$ (as in Brown et al.); `losses.smooth_ap` uses that reading.
# The check below computes both: only $s_j - s_i$ turns into the exact AP as $\tau \to 0$.


# %%
def smooth_ap_by_hand(scores, is_pos, tau: float, flip: bool = False) -> float:
    """The relaxed eq. 5 with plain loops; flip=True uses G(s_i - s_j), the literal
    D_ij.
    """

    def G(x):
        return 1.0 / (1.0 + math.exp(-x / tau))

    positives = [i for i in range(len(scores)) if is_pos[i]]
    total = 0.0
    for i in positives:
        diff = [
            (scores[i] - scores[j]) if flip else (scores[j] - scores[i])
            for j in range(len(scores))
        ]
        above_p = 1 + sum(G(diff[j]) for j in positives if j != i)
        above_all = 1 + sum(G(diff[j]) for j in range(len(scores)) if j != i)
        total += above_p / above_all
    return total / len(positives)


# SmoothAP of one query: 1 - the library loss on that single row
smoothed_ap = metrics.smooth_average_precision


for tau in (0.3, TAU, 1e-3):
    assert math.isclose(
        smooth_ap_by_hand(scores, is_pos, tau),
        smoothed_ap(scores, is_pos, tau),
        rel_tol=1e-12,
    )
x = torch.linspace(-0.1, 0.1, 9, dtype=torch.float64)
# G of eq. 7
torch.testing.assert_close(losses.smooth_step(x, TAU), 1 / (1 + torch.exp(-x / TAU)))

# tau -> 0 recovers the exact AP (scores here are 0.1 apart, so tau = 1e-3 is already
# sharp) ...
assert abs(smooth_ap_by_hand(scores, is_pos, 1e-3) - 13 / 18) < 1e-12
# ... while the literal sign counts the wrong candidates
assert abs(smooth_ap_by_hand(scores, is_pos, 1e-3, flip=True) - 13 / 18) > 0.1
# tau -> inf: every G -> 1/2, each positive's ratio -> (1 + (|P|-1)/2) / (1 +
# (|Omega|-1)/2)
assert math.isclose(
    smooth_ap_by_hand(scores, is_pos, 1e4), (1 + 2 / 2) / (1 + 7 / 2), rel_tol=1e-3
)

# %% [markdown]
# ## A live batch: five captions per image
#
# As in Flickr30K, each image has five captions: caption $c$ describes image $c \,//\, 5$.
# $S$ is $N_{img} \times 5N_{img}$ and `positive_mask` marks the pairs.
#
# - **image → text** (rows of $S$): each query has **five** positives;
# - **text → image** (rows of $S^\top$): each query has **one** positive.

# %%
img, _ = demo_embeddings(n=N_IMG, dim=16, noise=0.0, seed=cfg.seed)
g = torch.Generator().manual_seed(cfg.seed)
c2i = torch.arange(5 * N_IMG) // 5  # caption -> its image
txt = similarity.l2_normalize(
    img[c2i] + 1.0 * torch.randn(5 * N_IMG, 16, generator=g, dtype=img.dtype)
)
S = similarity.similarity(img, txt)
# [N_IMG, 5 N_IMG], five True per row
pos_i2t = similarity.positive_mask(torch.arange(N_IMG), c2i)
pos_t2i = pos_i2t.T  # one True per row
assert (pos_i2t.sum(dim=1) == 5).all() and (pos_t2i.sum(dim=1) == 1).all()

# %% [markdown]
# **Explorer.** Pick an image query and move $\tau$. Left: $\mathcal G(x;\tau)$ against the step,
# with a dot for every (positive $i$, other candidate $j$) pair of the query at
# $x = s_j - s_i$ — only the dots on the slope are counted fractionally. Right: SmoothAP
# of the query across $\tau$, the exact AP, and the current $\tau$. Try $\tau = 10^{-3}$,
# $0.01$ and $0.3$.

# %%
widgets.smooth_ap.smooth_ap_explorer(S, pos_i2t, tau=TAU, query=0)

# %% [markdown]
# ### Exact AP of the batch, and the library's metrics agree
#
# `metrics.average_precision` is the AP of one query's ranking. With every candidate ranked,
# mean AP over image queries is `metrics.map_at_k` at full depth; with one positive, AP is
# $1/\text{rank}$, so mean AP over caption queries is the mean reciprocal rank of
# `metrics.ranks_t2i`.

# %%
ap_i2t = np.array([metrics.average_precision(S[q], pos_i2t[q]) for q in range(N_IMG)])
ap_t2i = np.array(
    [metrics.average_precision(S.T[c], pos_t2i[c]) for c in range(5 * N_IMG)]
)
assert math.isclose(ap_i2t.mean(), metrics.map_at_k(S, c2i, k=5 * N_IMG))
np.testing.assert_allclose(ap_t2i, 1.0 / metrics.ranks_t2i(S, c2i).double().numpy())
print(f"mean AP: image->text {ap_i2t.mean():.4f}, text->image {ap_t2i.mean():.4f}")

# %% [markdown]
# ### One positive: SmoothAP is a smoothed reciprocal rank
#
# With $|\mathcal P| = 1$ the numerator of eq. 5 is 1 and the only sum left is over the
# negatives: $\text{AP}_q \approx 1 / \big(1 + \sum_{n} \mathcal G(s_n - s_+;\tau)\big)$.

# %%
s_pos = S.T[pos_t2i]  # each caption's own image score, in caption order
G_neg = losses.smooth_step(S.T - s_pos[:, None], TAU).masked_fill(pos_t2i, 0.0)
torch.testing.assert_close(
    1 - losses.smooth_ap(S.T, TAU, pos_mask=pos_t2i, reduction="none"),
    1 / (1 + G_neg.sum(dim=1)),
)

# %% [markdown]
# ### Small $\tau$ recovers the exact AP, in both directions
#
# Each $\mathcal G$ is within $\sigma(-\delta/\tau)$ of its indicator when the two scores are
# $\delta$ apart. Take $\tau$ forty times below the smallest gap between two scores of the
# same query and the error is below $e^{-40}$ per pair — the smoothed AP *is* the exact AP.
# At Bleeker's $\tau = 0.01$ it is close but not equal.


# %%
def smallest_gap(X: torch.Tensor) -> float:
    srt = X.sort(dim=1).values
    return float((srt[:, 1:] - srt[:, :-1]).min())


rows_of = {"image->text": (S, pos_i2t, ap_i2t), "text->image": (S.T, pos_t2i, ap_t2i)}
for name, (X, mask, exact) in rows_of.items():
    sharp = smallest_gap(X) / 40
    smooth = 1 - losses.smooth_ap(X, sharp, pos_mask=mask, reduction="none").numpy()
    np.testing.assert_allclose(smooth, exact, atol=1e-12)
    at_tau = 1 - losses.smooth_ap(X, TAU, pos_mask=mask, reduction="none").numpy()
    print(
        f"{name}: exact mAP {exact.mean():.4f}, SmoothAP at tau = {TAU}: "
        f"{at_tau.mean():.4f}, "
        f"at tau = {sharp:.1e}: {smooth.mean():.4f}"
    )

# %% [markdown]
# ## Where SmoothAP's gradient goes
#
# The derivative of $\mathcal G$ is $\mathcal G(1-\mathcal G)/\tau$: a bump of width $\sim\tau$
# around $x = 0$ (Bleeker & de Rijke call it $sim(D_{ij})$, eq. 12). So only candidates whose
# score is within a few $\tau$ of a positive's score receive gradient; with $\tau = 0.01$,
# a candidate $0.2$ away from every positive of its query gets (almost) none. Bleeker &
# de Rijke's COCOS analysis (Sec. 5, Table 4) finds that at convergence SmoothAP's
# gradient rests on about one triplet per query.

# %%
S_leaf = S.clone().requires_grad_()
losses.smooth_ap(S_leaf, TAU, pos_mask=pos_i2t).backward()
grad = S_leaf.grad.abs()
# distance from each candidate's score to the nearest positive score of the same query
pos_scores = S.masked_fill(~pos_i2t, torch.inf)
dist = (S[:, :, None] - pos_scores[:, None, :]).abs().min(dim=2).values
far = (dist > 0.2) & ~pos_i2t
assert far.any() and float(grad[far].max()) < 1e-6
print(
    f"{int((grad > 1e-3).sum())} of {grad.numel()} entries of S get a gradient above "
    "1e-3"
)

# %% [markdown]
# ## What Bleeker & de Rijke found
#
# In metric learning, SmoothAP beat the Triplet loss with hard negatives (Brown et al.).
# Bleeker & de Rijke ("Do Lessons from Metric Learning Generalize to Image-Caption
# Retrieval?", ECIR 2022, Table 1) trained VSE++ and VSRN on Flickr30K and MS-COCO with
# Triplet, Triplet-SH ($\alpha = 0.2$), NT-Xent ($\tau = 0.1$) and SmoothAP ($\tau = 0.01$), five
# runs each. Their rsum and image→text mAP@5, transcribed from the paper:

# %%
table1 = pd.DataFrame(
    [  # (dataset, method, loss, rsum, i2t mAP@5) -- Bleeker & de Rijke, Table 1
        ("Flickr30k", "VSE++", "Triplet", 309.4, 0.41),
        ("Flickr30k", "VSE++", "Triplet-SH", 353.8, 0.50),
        ("Flickr30k", "VSE++", "NT-Xent", 337.1, 0.47),
        ("Flickr30k", "VSE++", "SmoothAP", 350.4, 0.50),
        ("Flickr30k", "VSRN", "Triplet", 430.7, 0.63),
        ("Flickr30k", "VSRN", "Triplet-SH", 466.6, 0.73),
        ("Flickr30k", "VSRN", "NT-Xent", 410.6, 0.59),
        ("Flickr30k", "VSRN", "SmoothAP", 444.0, 0.69),
        ("MS-COCO", "VSE++", "Triplet", 240.0, 0.30),
        ("MS-COCO", "VSE++", "Triplet-SH", 298.8, 0.41),
        ("MS-COCO", "VSE++", "NT-Xent", 263.0, 0.34),
        ("MS-COCO", "VSE++", "SmoothAP", 291.5, 0.40),
        ("MS-COCO", "VSRN", "Triplet", 377.8, 0.52),
        ("MS-COCO", "VSRN", "Triplet-SH", 399.0, 0.57),
        ("MS-COCO", "VSRN", "NT-Xent", 352.3, 0.47),
        ("MS-COCO", "VSRN", "SmoothAP", 382.0, 0.54),
    ],
    columns=["dataset", "method", "loss", "rsum", "i2t mAP@5"],
)
rsum = table1.pivot_table(index=["dataset", "method"], columns="loss", values="rsum")
mAP = table1.pivot_table(
    index=["dataset", "method"], columns="loss", values="i2t mAP@5"
)
# SmoothAP never beats Triplet-SH -- in rsum, nor in i2t mAP@5, the reported metric
# closest to the AP it optimises -- though it beats NT-Xent, which in turn trails
# Triplet-SH everywhere
assert (rsum["SmoothAP"] < rsum["Triplet-SH"]).all() and (
    mAP["SmoothAP"] <= mAP["Triplet-SH"]
).all()
assert (rsum["SmoothAP"] > rsum["NT-Xent"]).all() and (
    rsum["NT-Xent"] < rsum["Triplet-SH"]
).all()
pd.concat({"rsum": rsum, "i2t mAP@5": mAP}, axis=1)

# %% [markdown]
# In their words: "Optimizing an ICR method with a smooth approximation of a ranking metric
# (SmoothAP) does not result in better Recall@k scores", and the Triplet loss with hard
# negatives "should still be the de facto choice" (Sec. 3, Upshot). The gap is small for
# VSE++ (350.4 vs 353.8 rsum on Flickr30K) and larger for VSRN (444.0 vs 466.6). No training
# is needed to see why it does not help more: near convergence the sigmoid's slope sees
# only the few candidates right next to a positive — hard-negative mining by another route.
#
# ## Summary
#
# - AP averages, over the positives, the precision at each positive's rank (eqs. 5–6).
# - SmoothAP replaces the rank indicator by $\mathcal G(s_j - s_i;\tau)$ (eq. 7) and minimises
#   $1 - \text{AP}$ (eq. 8); the extraction's $D_{ij} = s_i - s_j$ has the sign flipped.
# - Small $\tau$ recovers the exact AP; large $\tau$ flattens every comparison to $\frac12$.
# - One positive (text→image) makes it a smoothed reciprocal rank; five (image→text)
#   make it a true AP — one `pos_mask` handles both.
# - Its gradient only reaches candidates within a few $\tau$ of a positive; in ICR it did not
#   beat Triplet-SH (Bleeker & de Rijke, Table 1).
#
# ## Exercises
#
# 1. AP depends only on the order of the scores. Show that multiplying all scores by 10
#    leaves the exact AP unchanged but changes SmoothAP at fixed $\tau$. What $\tau$ undoes it?
# 2. For image query 0, find the largest $\tau$ (on a log grid) at which SmoothAP is within
#    0.01 of the exact AP.
# 3. Compute Bleeker's metric, i2t mAP@5, for the live batch with `metrics.map_at_k` and
#    compare it with the full-depth mAP.

# %% [markdown] jupyter={"source_hidden": true} tags=["solution"]
# **Solution 1, the derivation.** The exact AP uses the scores only through indicators: positive $i$ sits at
# $R(i, \Omega) = 1 + \sum_{j \ne i} \mathbb{1}[s_j \ge s_i]$ (ties against it), and
# $\mathbb{1}[10 s_j \ge 10 s_i] = \mathbb{1}[s_j \ge s_i]$, so every position, and AP, is unchanged (the same holds
# for any strictly increasing map of the scores). SmoothAP replaces each indicator by
# $G(s_j - s_i; \tau) = \sigma\big((s_j - s_i)/\tau\big)$ (Bleeker & de Rijke eq. 7), which sees the *differences*:
#
# $$ G(10 s_j - 10 s_i;\ \tau) = \sigma\Big(\frac{s_j - s_i}{\tau / 10}\Big) = G(s_j - s_i;\ \tau/10), $$
#
# so scaling the scores by 10 sharpens every sigmoid like dividing $\tau$ by 10, and SmoothAP changes.
# $\tau \times 10$ undoes it: $G(10 s_j - 10 s_i;\ 10\tau) = G(s_j - s_i;\ \tau)$.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 1.
assert metrics.average_precision(10 * scores, is_pos) == metrics.average_precision(
    scores, is_pos
)
print(smoothed_ap(scores, is_pos, 0.05), smoothed_ap(10 * scores, is_pos, 0.05))
assert smoothed_ap(10 * scores, is_pos, 0.05) != smoothed_ap(scores, is_pos, 0.05)
# tau x 10
assert math.isclose(
    smoothed_ap(10 * scores, is_pos, 0.5), smoothed_ap(scores, is_pos, 0.05)
)

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 2.
exact = metrics.average_precision(S[0], pos_i2t[0])
ok = [
    t
    for t in np.logspace(-4, 0, 41)
    if abs(smoothed_ap(S[0], pos_i2t[0], t) - exact) < 0.01
]
print(f"largest tau within 0.01 of the exact AP {exact:.3f}: {max(ok):.3g}")
assert ok and min(ok) == 1e-4  # a small enough tau always recovers the exact AP

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 3.
# mAP@5 stops counting after rank 5: a positive caption ranked lower adds nothing, so it
# is at most the full-depth mAP (k = every caption).
at5, full = metrics.map_at_k(S, c2i, k=5), metrics.map_at_k(S, c2i, k=5 * N_IMG)
print(f"i2t mAP@5 {at5:.3f}, full-depth mAP {full:.3f}")
assert at5 <= full + 1e-12

# %% [markdown]
# 4. **Graded (5 points): implement average precision.** Fill in `average_precision(scores, is_pos)` in the
#    next cell: the exact AP of one query (Bleeker & de Rijke eqs. 5–6), the mean over its positives of the
#    precision at each positive's position, as a Python float. Ties count against the positive, as in
#    `metrics.average_precision`: a negative scoring *equal* to a positive is ranked above it, and tied
#    positives take consecutive positions. Do not call `metrics`. The cell after it checks it on 10 hidden
#    queries (some with ties) and prints your score (0 while the stub raises).


# %% tags=["answer"]
def average_precision(scores: torch.Tensor, is_pos: torch.Tensor) -> float:
    """Exact AP of one query: scores [M], is_pos bool [M] with at least one positive."""
    raise NotImplementedError("implement average precision here")


# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 4.
def average_precision(scores: torch.Tensor, is_pos: torch.Tensor) -> float:
    """Exact AP of one query: scores [M], is_pos bool [M] with at least one positive."""
    negatives = scores[~is_pos]
    precisions = []
    # b positives ranked before p
    for b, p in enumerate(sorted(scores[is_pos].tolist(), reverse=True)):
        position = 1 + int((negatives >= p).sum()) + b  # a tied negative sits above p
        precisions.append((b + 1) / position)
    return sum(precisions) / len(precisions)


assert grading.grade("06_average_precision", average_precision).full_marks

# %%
score = grading.check("06_average_precision", average_precision)

# %% [markdown]
# ## References
#
# - Faghri, Fleet, Kiros, Fidler. *VSE++: Improving Visual-Semantic Embeddings with Hard Negatives.* BMVC 2018. [arXiv:1707.05612](https://arxiv.org/abs/1707.05612)
# - Wang, Han, Huang, Dong, Scott. *Multi-Similarity Loss with General Pair Weighting for Deep Metric Learning.* CVPR 2019. [arXiv:1904.06627](https://arxiv.org/abs/1904.06627)
# - Brown, Xie, Kalogeiton, Zisserman. *Smooth-AP: Smoothing the Path Towards Large-Scale Image Retrieval.* ECCV 2020. [arXiv:2007.12163](https://arxiv.org/abs/2007.12163)
# - Veit, Wilber. *Improving Calibration in Deep Metric Learning With Cross-Example Softmax.* 2020. [arXiv:2011.08824](https://arxiv.org/abs/2011.08824)
# - Bleeker, de Rijke. *Do Lessons from Metric Learning Generalize to Image-Caption Retrieval?* ECIR 2022. [arXiv:2202.07474](https://arxiv.org/abs/2202.07474)
# - Li, Guo, Wang, Feng, Hwang, Du. *Unified Loss of Pair Similarity Optimization for Vision-Language Retrieval.* 2022. [arXiv:2209.13869](https://arxiv.org/abs/2209.13869)
# - Xuan, Chen. *Dissecting Deep Metric Learning Losses for Image-Text Retrieval* (GOAL). 2022. [arXiv:2210.13188](https://arxiv.org/abs/2210.13188)
