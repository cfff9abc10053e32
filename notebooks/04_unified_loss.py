# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · The unified loss: a margin, a scale, and two classic losses as its limits
#
# Li et al. ("Unified Loss of Pair Similarity Optimization for Vision-Language Retrieval")
# put the two workhorses of image–text retrieval into one formula. Triplet-SH (notebook 02;
# Li et al. call it Triplet-HN) keeps a **margin** $m$ but looks only at the hardest negative;
# NT-Xent (notebook 03; their VLC) looks at every negative through a softmax with **scale**
# $\gamma = 1/\tau$ but has no margin. The unified loss has both knobs.
#
# **Learning goals.** After this notebook you can
# 1. compute the unified loss (Li et al., eq. 5) by hand and recognise it as an
#    additive-margin softmax over the batch;
# 2. derive the weight $D_{ij} / (1 + \sum_k D_{ik})$ with which each negative is pushed
#    (eqs. 14–16);
# 3. read how $m$ shifts and $\gamma$ sharpens that weight, on a curve, a surface and a live batch;
# 4. check both limits: $\gamma \to \infty$ gives Triplet-SH (eq. 6, with an explicit error
#    bound), $m = 0$ gives NT-Xent (eq. 7);
# 5. use the weighted and adaptive-margin variants (eqs. 24–27).

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

import numpy as np
import torch

from vlr_lib import analysis, grading, losses, similarity, viz, widgets
from vlr_lib.demo import demo_embeddings
from vlr_lib.notebook import setup

cfg = setup(seed=0)
N = cfg.pick(8, 16)  # batch size of the live batch
M, GAMMA = 0.2, 60.0  # Li et al.'s setting for VSE++ (BUTD), appendix B.1

# %% [markdown]
# ## A hard live batch
#
# With `noise=1.5` each caption is a rather loose description of its image, so a good share
# of the queries (at least a quarter, checked below) have a negative within the margin of
# their positive — a batch in which the losses disagree.

# %%
img, txt = demo_embeddings(n=N, dim=16, noise=1.5, seed=cfg.seed)
S = similarity.similarity(img, txt)
eye = torch.eye(N, dtype=torch.bool)
off = ~eye
P = N  # positive pairs (the diagonal)
violated = (similarity.hardest_negatives(S, off).values - S.diagonal() + M) > 0
print(f"{int(violated.sum())} of {N} image queries violate the margin m = {M}")
assert violated.sum() >= N / 4

# %% [markdown]
# ## The loss (Li et al., eq. 5)
#
# $$\mathcal L_{\text{Unified}} = \frac{1}{\gamma}\sum_{i=1}^{N}\Big[
#   \log\Big(1 + \sum_{j\ne i} e^{\gamma(s_{ij} - s_{ii} + m)}\Big)
# + \log\Big(1 + \sum_{j\ne i} e^{\gamma(s_{ji} - s_{ii} + m)}\Big)\Big].$$
#
# The first log is image $i$ as a query (row $i$), the second caption $i$ (column $i$). Each
# term is a *soft maximum* of the margin violations $s_{ij} - s_{ii} + m$ and 0.


# %%
def unified_by_hand(S: torch.Tensor, m, gamma: float) -> torch.Tensor:
    """Li et al. eq. 5 written out; `m` a number or one margin per pair (eq. 26)."""
    m = torch.as_tensor(m, dtype=S.dtype)
    m_row, m_col = (m[:, None], m[None, :]) if m.dim() else (m, m)
    rows = torch.log1p(
        (torch.exp(gamma * (S - S.diagonal()[:, None] + m_row)) * off).sum(dim=1)
    )
    cols = torch.log1p(
        (torch.exp(gamma * (S - S.diagonal()[None, :] + m_col)) * off).sum(dim=0)
    )
    return (rows.sum() + cols.sum()) / gamma


torch.testing.assert_close(unified_by_hand(S, M, GAMMA), losses.unified(S, M, GAMMA))
print(f"unified loss of the batch: {float(losses.unified(S, M, GAMMA)):.4f}")

# %% [markdown]
# Move $e^{\gamma(s_{ii} - m)}$ back into a softmax and each term is the cross-entropy of
# $\gamma\,(S - mI)$ — an **additive-margin softmax** (as in CosFace) whose classes are the
# other captions of the batch: the margin is subtracted from the positive's logit only.
# In the library's terms, the row half is `sampled_softmax(S - m I, scale=γ) / γ`:

# %%
am_softmax = (
    losses.sampled_softmax(S - M * torch.eye(N, dtype=S.dtype), GAMMA, reduction="sum")
    + losses.sampled_softmax(
        S.T - M * torch.eye(N, dtype=S.dtype), GAMMA, reduction="sum"
    )
) / GAMMA
torch.testing.assert_close(am_softmax, losses.unified(S, M, GAMMA))

# %% [markdown]
# ## The weight of each negative (Li et al., eqs. 14–16)
#
# Write $D_{ij} = e^{\gamma(s_{ij} - s_{ii} + m)}$ for row $i$. Differentiating
# $\frac{1}{\gamma}\log(1 + \sum_k D_{ik})$, the chain rule's $\gamma$ cancels the $\frac1\gamma$:
#
# $$\frac{\partial}{\partial s_{ij}} = \frac{D_{ij}}{1 + \sum_{k \ne i} D_{ik}} \quad (j \ne i),
# \qquad \frac{\partial}{\partial s_{ii}} = -\frac{\sum_{k\ne i} D_{ik}}{1 + \sum_{k \ne i} D_{ik}}.$$
#
# The column term of caption $j$ contributes the same with $E_{ij} = e^{\gamma(s_{ij} - s_{jj} + m)}$
# normalised over column $j$. (Li et al. print eq. 15 with $1 + D(t_j)$ in the denominator;
# that is the case of a single negative — with several, the sum of eq. 14 is the right
# one, and the check below would fail with the single $D$.)
#
# So every negative is weighted by a softmax-like share of the *margin violations*. The
# violations decide who gets pushed; $\gamma$ decides how sharply.

# %%
Dr = torch.exp(GAMMA * (S - S.diagonal()[:, None] + M)) * off  # row (image-query) terms
# column (caption-query) terms
Dc = torch.exp(GAMMA * (S - S.diagonal()[None, :] + M)) * off
w_row = Dr / (1 + Dr.sum(dim=1, keepdim=True))
w_col = Dc / (1 + Dc.sum(dim=0, keepdim=True))
grad_by_hand = w_row + w_col - torch.diag(w_row.sum(dim=1) + w_col.sum(dim=0))
torch.testing.assert_close(
    grad_by_hand, analysis.loss_gradient(S, lambda X: losses.unified(X, M, GAMMA))
)
# what the explorer plots
torch.testing.assert_close(w_row, analysis.unified_weights(S, M, GAMMA))
torch.testing.assert_close(w_col, analysis.unified_weights(S.T, M, GAMMA).T)
# eq. 15 as printed (one D) is not it here
assert not torch.allclose(Dr / (1 + Dr), w_row)

# %% [markdown]
# ## Explorer: margin and scale
#
# Left: the weight of a negative against its gap $x = s_{ij} - s_{ii}$. The thick curve is
# a query with a single negative, $D/(1+D) = \sigma(\gamma(x + m))$: a sigmoid centred at
# $x = -m$ with width $\sim 1/\gamma$. The dotted curve is NT-Xent ($m = 0$) at the same $\gamma$;
# the dashed step is Triplet-SH ($\gamma \to \infty$). Grey dots are the negatives of the
# live batch with their real weights $D/(1+\sum D)$ — on or below the curve, because
# the other negatives of the query share the weight. Right: $\partial\mathcal L/\partial S$
# of the batch.
#
# Try: raise $m$ and watch the curve slide left (negatives further below the positive are
# still pushed) and the heatmap light up; raise $\gamma$ to $10^3$ and see the red collapse
# onto the hardest negatives — one per row and one per column, and only for the queries
# that violate the margin.

# %%
widgets.unified.unified_explorer(S, margin=M, gamma=GAMMA)

# %% [markdown]
# The curves are `analysis.unified_one_negative_loss` and `_weight`, and they are the loss itself:
# with one negative per query (a batch of two pairs whose negatives sit at gap $x$), the loss per
# query term and the weight equal `losses.unified` and its gradient. And the sigmoid's centre is
# $-m$ for every $\gamma$.

# %%
for x in (-0.5, -0.2, 0.1):
    for gamma in (5.0, 60.0, 1e3):
        # four query terms, one negative each
        S2 = torch.tensor([[0.0, x], [x, 0.0]], dtype=torch.float64)
        loss, grad = (
            losses.unified(S2, M, gamma),
            analysis.loss_gradient(S2, lambda X: losses.unified(X, M, gamma)),
        )
        assert math.isclose(
            analysis.unified_one_negative_loss(x, M, gamma),
            float(loss) / 4,
            rel_tol=1e-9,
            abs_tol=1e-12,
        )
        assert math.isclose(
            analysis.unified_one_negative_weight(x, M, gamma),
            float(grad[0, 1]) / 2,
            rel_tol=1e-9,
            abs_tol=1e-12,
        )
assert all(
    float(analysis.unified_one_negative_weight(-m, m, g)) == 0.5
    for m in (0.0, 0.2, 0.4)
    for g in (1.0, 60.0, 1e4)
)

# %% [markdown]
# ### The whole picture: surfaces over gap and scale
#
# The loss and the weight of one negative over $(x, \log_{10}\gamma)$. At small $\gamma$ the
# weight is a gentle ramp: every negative is pushed a little (NT-Xent-like). At large $\gamma$ the
# loss folds into the hinge $[x + m]_+$ and the weight into a step: Triplet-SH. The slider
# moves the margin.

# %%
widgets.unified.surface_explorer(margin=M, n=cfg.pick(30, 60))

# %%
x = torch.linspace(-1.0, 0.6, 161, dtype=torch.float64)
hinge = (x + M).clamp_min(0.0)
# large γ
assert torch.all(
    (analysis.unified_one_negative_loss(x, M, 1e3) - hinge).abs() <= math.log(2) / 1e3
)
# small γ: a ramp ...
assert torch.all(torch.diff(analysis.unified_one_negative_weight(x, M, 1.0)) > 0)
# ... that still pushes a negative 1.0 below
assert analysis.unified_one_negative_weight(-1.0, M, 1.0) > 0.3

# %% [markdown]
# ## Limit 1: $\gamma \to \infty$ gives Triplet-SH (eq. 6)
#
# For the violations $x_j = s_{ij} - s_{ii} + m$ of one query, with $x^* = \max(0, \max_j x_j)$,
#
# $$\gamma x^* \;\le\; \log\Big(1 + \sum_{j\ne i} e^{\gamma x_j}\Big) \;\le\; \gamma x^* + \log N,$$
#
# because the sum inside has $N$ terms ($1$ and $N - 1$ exponentials), each at most
# $e^{\gamma x^*}$. Divide by $\gamma$ and add the $2P$ query terms:
#
# $$0 \;\le\; \mathcal L_{\text{Unified}}(m, \gamma) - \mathcal L_{\text{Triplet-SH}}(m)
#   \;\le\; \frac{2P\log N}{\gamma}.$$


# %%
def within_bound(gap: float, gamma: float) -> bool:
    """0 <= gap <= 2 P log N / gamma, up to float64 rounding."""
    return -1e-12 <= gap <= 2 * P * math.log(N) / gamma


hn = losses.triplet_hardest(S, M)
gammas = (10.0, 100.0, 1e3, 1e4)
gaps = [float(losses.unified(S, M, gamma) - hn) for gamma in gammas]
assert all(within_bound(gap, gamma) for gap, gamma in zip(gaps, gammas)), gaps
# the figure draws analysis.unified_limit: the same gaps and bounds
limit = analysis.unified_limit(S, M, gammas)
assert np.allclose(limit.gap, gaps, rtol=0, atol=1e-12)
assert np.allclose(limit.bound, [2 * P * math.log(N) / g for g in gammas])
print(
    f"Triplet-SH {float(hn):.5f}  vs  unified at γ = 1e4: "
    f"{float(losses.unified(S, M, 1e4)):.5f}"
)
viz.unified.gamma_limit_figure(S, M, gammas=np.logspace(0, 4, 9))

# %% [markdown]
# The gradient follows. Triplet-SH's gradient (through `max`) is nonzero only at the positive
# and the hardest negative of each query whose hinge is active (`similarity.hardest_negative_mask`,
# the one the losses pick); at $\gamma = 10^4$ the unified loss's gradient is the same matrix.


# %%
def grad_of(loss_fn) -> torch.Tensor:
    return analysis.loss_gradient(S, loss_fn)


g_hn, g_uni = (
    grad_of(lambda X: losses.triplet_hardest(X, M)),
    grad_of(lambda X: losses.unified(X, M, 1e4)),
)
hardest = similarity.hardest_negative_mask(
    S, None, "i2t"
) | similarity.hardest_negative_mask(S, None, "t2i")
assert torch.all(g_hn[off & ~hardest] == 0)  # only the hardest negatives get gradient
assert torch.any(g_hn[off] != 0)  # ... and some of them do in this batch
torch.testing.assert_close(g_uni, g_hn, atol=1e-6, rtol=0)

# %% [markdown]
# The same limit on the sphere (notebook 02, Li et al. eqs. 8–12). With one negative, the unified
# loss's gradient is the hinge's geometry times the weight $D/(1 + D)$,
# $D = e^{\gamma(\cos\theta^- - \cos\theta^+ + m)}$ (eqs. 14–16), and so are its tangent norms
# (eqs. 17–18, `analysis.unified_tangent_norm`). Where the hinge is active they reach Triplet-SH's
# as $\gamma$ grows; where it is not, Triplet-SH's are 0 and the unified loss's are small but not 0
# at a moderate $\gamma$: a ramp where the hinge is a cliff. (At $m = 3$ every hinge is active, so
# `triplet_hn_tangent_norm` there gives the geometry alone.)

# %%
for deg_pos, deg_neg in ((3.0, 2.0), (30.0, 25.0), (60.0, 80.0)):
    tp, tn = math.radians(deg_pos), math.radians(deg_neg)
    violation = math.cos(tn) - math.cos(tp) + M  # the hinge's argument
    geometry = analysis.triplet_hn_tangent_norm(tp, tn, math.pi, margin=3.0)
    hinge_norms = analysis.triplet_hn_tangent_norm(tp, tn, math.pi, margin=M)
    for gamma in (1.0, GAMMA, 1e4):
        # D / (1 + D)
        weight = float(
            torch.sigmoid(torch.tensor(gamma * violation, dtype=torch.float64))
        )
        uni = analysis.unified_tangent_norm(tp, tn, math.pi, margin=M, gamma=gamma)
        for u, raw in zip(uni, geometry):
            assert math.isclose(float(u), weight * float(raw), rel_tol=1e-9)
    for u, h in zip(uni, hinge_norms):  # gamma = 1e4: Triplet-SH's norms
        assert math.isclose(float(u), float(h), abs_tol=1e-12)
    print(
        f"theta+ {deg_pos:2.0f}, theta- {deg_neg:2.0f}: hinge "
        f"{'active' if violation > 0 else 'inactive'}, |g(v)| Triplet-SH "
        f"{float(hinge_norms.anchor):.3f}, unified at gamma = {GAMMA:g} "
        f"{float(analysis.unified_tangent_norm(tp, tn, math.pi, M, GAMMA).anchor):.3g}"
    )

# %% [markdown]
# ## Limit 2: $m = 0$ gives NT-Xent (eq. 7)
#
# Set $m = 0$ and multiply by $\gamma$: every term is $\log(1 + \sum_j e^{\gamma(s_{ij}-s_{ii})})$,
# the pair-similarity form of NT-Xent at temperature $1/\gamma$ (notebook 03; Li et al., eq. 4).

# %%
for gamma in (1.0, 10.0, 60.0):
    torch.testing.assert_close(
        gamma * losses.unified(S, 0.0, gamma), losses.info_nce(S, 1 / gamma, "sum")
    )

# %% [markdown]
# What does the margin buy? With $m = 0$ a query stops being pushed as soon as its positive
# beats the negatives by a few $1/\gamma$; with $m = 0.2$ it keeps being pushed until the lead
# is $0.2$. On this batch the margin multiplies the total gradient several times over:

# %%
push_nt = float(grad_of(lambda X: losses.unified(X, 0.0, GAMMA)).abs().sum())
push_uni = float(grad_of(lambda X: losses.unified(X, M, GAMMA)).abs().sum())
print(f"sum |dL/dS|: m = 0 -> {push_nt:.3f},  m = {M} -> {push_uni:.3f}")
assert push_uni > 2 * push_nt

# %% [markdown]
# ## Variants (Li et al., appendix A.4)
#
# **Weighted unified loss (eq. 24).** Many weighting schemes multiply each similarity by a
# weight $w_{ij}$ before the loss; `losses.unified(..., weights=W)` replaces every $s_{ij}$ by
# $w_{ij} s_{ij}$, positives included ($w_{ii} s_{ii}$):
#
# $$\frac{1}{\gamma}\sum_i\Big[\log\Big(1 + \sum_{j\ne i} e^{\gamma(w_{ij}s_{ij} - w_{ii}s_{ii} + m)}\Big)
#  + \log\Big(1 + \sum_{j\ne i} e^{\gamma(w_{ji}s_{ji} - w_{ii}s_{ii} + m)}\Big)\Big].$$
#
# Its $\gamma \to \infty$ limit is Triplet-SH on the weighted similarities (RSP, eq. 25, is of
# this kind with a polynomial weight).

# %%
g = torch.Generator().manual_seed(cfg.seed)
W = 0.5 + torch.rand(N, N, generator=g, dtype=S.dtype)  # weights in [0.5, 1.5)
torch.testing.assert_close(
    losses.unified(S, M, GAMMA, weights=W), unified_by_hand(W * S, M, GAMMA)
)
torch.testing.assert_close(
    losses.unified(S, M, GAMMA, weights=torch.ones_like(S)), losses.unified(S, M, GAMMA)
)
gap = float(losses.unified(S, M, 1e4, weights=W) - losses.triplet_hardest(W * S, M))
assert within_bound(gap, 1e4), gap

# %% [markdown]
# **Adaptive margin (eq. 26).** Methods for noisy correspondences give each pair its own
# margin $m_i$, shared by its two query terms; pass one margin per positive pair. As
# $\gamma \to \infty$ it becomes NCR's loss (eq. 27): Triplet-SH with per-pair margins,
# `losses.triplet_hardest(S, margins)` — within the same bound.

# %%
# e.g. smaller margins for doubtful pairs
margins = torch.linspace(0.05, 0.35, N, dtype=S.dtype)
torch.testing.assert_close(
    losses.unified(S, margins, GAMMA), unified_by_hand(S, margins, GAMMA)
)
for gamma in (100.0, 1e3, 1e4):
    gap = float(losses.unified(S, margins, gamma) - losses.triplet_hardest(S, margins))
    assert within_bound(gap, gamma), (gamma, gap)
# a constant margin vector is the plain loss
torch.testing.assert_close(
    losses.unified(S, torch.full((N,), M, dtype=S.dtype), GAMMA),
    losses.unified(S, M, GAMMA),
)

# %% [markdown]
# ## Summary
#
# - The unified loss (Li et al., eq. 5) is a soft maximum of margin violations
#   $s_{ij} - s_{ii} + m$ over each query, i.e. an additive-margin softmax over the batch.
# - Each negative is pushed with weight $D_{ij} / (1 + \sum_k D_{ik})$ (eqs. 14–16):
#   a sigmoid-like ramp centred at gap $-m$ whose sharpness is $\gamma$.
# - $\gamma \to \infty$ gives Triplet-SH (eq. 6) with error at most $2P\log N/\gamma$, and the
#   gradient collapses onto the hardest negatives; $m = 0$ gives NT-Xent $/\gamma$ (eq. 7).
# - Weights on the similarities (eq. 24) and per-pair margins (eq. 26, NCR as eq. 27's
#   limit) fit in the same formula.
# - Li et al. train with $m = 0.2$ and $\gamma = 50$–$60$. On Flickr30K (their Fig. 5), with
#   $\gamma = 60$ fixed, $m = 0.2$ gave the best RSUM and every $m > 0$ beat NT-Xent; with $m = 0.2$
#   fixed, RSUM first rises and then falls as $\gamma$ grows: mining hard negatives helps,
#   mining only the hardest one (Triplet-SH) loses performance.
#
# ## Exercises
#
# 1. Show numerically that the unified loss *decreases* monotonically in $\gamma$ towards
#    Triplet-SH (hint: $\frac{d}{d\gamma}\frac{1}{\gamma}\log\sum_j e^{\gamma x_j}
#    = -H(p)/\gamma^2 \le 0$, $p$ the softmax of $\gamma x$).
# 2. A COCOS-style count (Bleeker & de Rijke, Sec. 4): how many negatives per image query
#    have weight $> 0.01$ at $\gamma = 10, 60, 1000$?
# 3. Give the pairs whose positive similarity is the lowest in the batch a margin of 0
#    (as a noise-robust method would) and compare their gradient with the plain loss.

# %% [markdown] jupyter={"source_hidden": true} tags=["solution"]
# **Solution 1, the derivation.** One query's term is $f(\gamma) = \frac{1}{\gamma}\log\sum_{j} e^{\gamma x_j}$
# with $x_0 = 0$ (the "1 +" of the positive) and $x_n = s_{in} - s_{ii} + m$ for each negative $n$. With
# $p_j = e^{\gamma x_j} / \sum_k e^{\gamma x_k}$, the softmax of $\gamma x$,
#
# $$ f'(\gamma) = -\frac{1}{\gamma^2}\log\sum_k e^{\gamma x_k} + \frac{1}{\gamma}\sum_j p_j x_j
# = \frac{1}{\gamma^2}\sum_j p_j\Big(\gamma x_j - \log\sum_k e^{\gamma x_k}\Big)
# = \frac{1}{\gamma^2}\sum_j p_j \log p_j = -\frac{H(p)}{\gamma^2} \le 0, $$
#
# using $\sum_j p_j = 1$; it is 0 only when $p$ is one-hot. So every term, and the loss (their sum), is
# non-increasing in $\gamma$. Where it goes: $e^{\gamma \max_j x_j} \le \sum_j e^{\gamma x_j} \le N e^{\gamma \max_j x_j}$ gives
#
# $$ \max_j x_j \le f(\gamma) \le \max_j x_j + \frac{\log N}{\gamma}, $$
#
# and $\max_j x_j = \max(0, \max_n x_n) = [m + \max_n s_{in} - s_{ii}]_+$ is the query's Triplet-SH term. The
# check below: the loss on a log grid of $\gamma$ never increases and ends at Triplet-SH.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 1.
gammas = np.logspace(0, 4, 30)
values = [float(losses.unified(S, M, g)) for g in gammas]
print(
    [round(v, 4) for v in values[::6]],
    "-> Triplet-SH",
    round(float(losses.triplet_hardest(S, M)), 4),
)
assert all(a >= b - 1e-12 for a, b in zip(values, values[1:]))
# equal up to rounding at gamma = 1e4
assert values[-1] >= float(losses.triplet_hardest(S, M)) - 1e-12

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 2.
# The larger gamma, the fewer negatives carry weight: gamma -> infinity keeps only the
# hardest one.
counts = {}
for gamma in (10.0, 60.0, 1e3):
    counts[gamma] = (analysis.unified_weights(S, M, gamma) > 0.01).sum(dim=1)
    print(gamma, counts[gamma].tolist())
assert (counts[10.0] >= counts[60.0]).all() and (counts[60.0] >= counts[1e3]).all()
assert (counts[1e3] <= 1).all()

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 3.
# With a margin of 0 a doubtful positive needs less to satisfy its hinge-like terms, so
# it is pulled less hard (its diagonal gradient is smaller in magnitude).
doubtful = S.diagonal() < S.diagonal().quantile(0.25)
margins = torch.where(doubtful, 0.0, M).to(S.dtype)
g_plain = grad_of(lambda X: losses.unified(X, M, GAMMA)).diagonal()
g_adapt = grad_of(lambda X: losses.unified(X, margins, GAMMA)).diagonal()
print(torch.stack([g_plain, g_adapt])[:, doubtful])
assert (g_adapt[doubtful].abs() < g_plain[doubtful].abs()).all(), (
    "a smaller pull on the doubtful positives"
)

# %% [markdown]
# 4. **Graded (5 points): implement the weight of each negative.** Fill in `unified_weights(S, margin, gamma)`
#    in the next cell: for every image query $i$ (row $i$) and negative $n \ne i$ the weight
#    $D_{in}/(1 + \sum_{k \ne i} D_{ik})$ with $D_{in} = e^{\gamma(s_{in} - s_{ii} + m)}$ (Li et al. eqs. 14–16),
#    0 on the diagonal, as an $N \times N$ tensor; without calling `analysis.unified_weights`, and finite in
#    float32 at $\gamma = 60$ (where $D_{in}$ itself overflows). The cell after it checks it on 10 hidden
#    batches and prints your score (0 while the stub raises).


# %% tags=["answer"]
def unified_weights(S: torch.Tensor, margin: float, gamma: float) -> torch.Tensor:
    """The weight of every negative in its image query's unified term, 0 at the
    positives.
    """
    raise NotImplementedError("implement the unified loss's weights here")


# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 4.
def unified_weights(S: torch.Tensor, margin: float, gamma: float) -> torch.Tensor:
    """The weight of every negative in its image query's unified term, 0 at the
    positives.
    """
    log_d = gamma * (S - S.diagonal()[:, None] + margin)  # log D_in
    # no D at the positive
    log_d = log_d.masked_fill(torch.eye(len(S), dtype=torch.bool), -math.inf)
    # log(1 + sum_k D_ik)
    log_z = torch.logaddexp(
        torch.logsumexp(log_d, dim=1, keepdim=True), S.new_zeros(())
    )
    return torch.exp(log_d - log_z)  # in log space: e^{60 x} would overflow


assert grading.grade("04_unified_weights", unified_weights).full_marks

# %%
score = grading.check("04_unified_weights", unified_weights)

# %% [markdown]
# ## References
#
# - Faghri, Fleet, Kiros, Fidler. *VSE++: Improving Visual-Semantic Embeddings with Hard Negatives.* BMVC 2018. [arXiv:1707.05612](https://arxiv.org/abs/1707.05612)
# - Veit, Wilber. *Improving Calibration in Deep Metric Learning With Cross-Example Softmax.* 2020. [arXiv:2011.08824](https://arxiv.org/abs/2011.08824)
# - Bleeker, de Rijke. *Do Lessons from Metric Learning Generalize to Image-Caption Retrieval?* ECIR 2022. [arXiv:2202.07474](https://arxiv.org/abs/2202.07474)
# - Li, Guo, Wang, Feng, Hwang, Du. *Unified Loss of Pair Similarity Optimization for Vision-Language Retrieval.* 2022. [arXiv:2209.13869](https://arxiv.org/abs/2209.13869)
# - Xuan, Chen. *Dissecting Deep Metric Learning Losses for Image-Text Retrieval* (GOAL). 2022. [arXiv:2210.13188](https://arxiv.org/abs/2210.13188)
