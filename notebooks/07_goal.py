# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · GOAL: designing gradients instead of losses
#
# Every loss so far was a formula whose *gradient* autograd worked out for us. Xuan & Chen
# ("Dissecting Deep Metric Learning Losses for Image-Text Retrieval", WACV 2023) turn this
# around: what actually moves the embeddings is the gradient, so why not **write the gradient
# directly** and skip the loss? Their framework, GOAL (Gradient-based Objective AnaLysis),
# splits the gradient of every triplet-style loss into a *triplet weight* T times a *pair
# weight* P, and then trains any combination of them, including combinations that are the
# gradient of no loss at all.
#
# **After this notebook you can**
# - explain why a model can be trained from a designed $\partial L/\partial S$ alone (Xuan & Chen, eqs. 1–3);
# - read triplet-weight diagrams of $T^{con}, T^{nca}, T^{cir}$ (eqs. 5, 7, 8; Fig. 2) and
#   pair-weight curves of $P^{con}, P^{lin}, P^{sig}, P^{lin\text{-}ms}, P^{sig\text{-}ms}$ (eqs. 9–13; Fig. 3);
# - place the 15 combinations in Table 1 and test which of them are the gradient of some loss;
# - compose a gradient with the widgets and watch $\partial L/\partial S$ on a live batch;
# - explain how `vlr_lib.goal.goal_objective` hands a designed gradient to autograd
#   (a custom `torch.autograd.Function`), and check it against Triplet-SH and NCA;
# - say why the MS pair weight needs MS loss's own normalisation to stay bounded (eq. 12 as printed
#   can give $|\partial L/\partial S| \sim 10^{10}$).
#
# Paper: Xuan & Chen, sec. 3 (eqs. 1–13), Table 1, Figs. 2–3, Tables 2–5. Library:
# `vlr_lib.goal` (its docstrings record how we read the MS sets $\mathcal{P}$, $\mathcal{N}$ and the clamps).

# %%
try:  # opened without the workbook installed (Colab, a JupyterHub, a copied notebook)?
    import vlr_lib  # noqa: F401
except ModuleNotFoundError:
    raise ModuleNotFoundError(
        "vlr_lib is not installed: in a cell run `%pip install -e "
        "/path/to/vlr-workbook` "
        "(the folder holding pyproject.toml), then restart the kernel"
    ) from None

import itertools

import torch
import torch.nn.functional as F

from vlr_lib import goal, grading, losses, similarity, viz, widgets
from vlr_lib.demo import demo_embeddings
from vlr_lib.notebook import setup

cfg = setup(seed=0)
N = cfg.pick(8, 12)  # batch size of the live batch (both small: every matrix is shown)

# %% [markdown]
# ## 1. An optimiser only needs the gradient
#
# Training updates the image and text encoders with $\theta \leftarrow \theta - \eta\,
# \frac{\partial l}{\partial \mathbf{x}} \frac{\partial \mathbf{x}}{\partial \theta}$ (Xuan & Chen, eq. 2).
# The loss *value* $l$ never enters the update; only $\partial l / \partial \mathbf{x}$ does. With
# unit embeddings and $S_{\mathbf{x},\mathbf{y}} = \mathbf{x}^\top \mathbf{y}$, the chain rule
# through the similarity matrix gives (eq. 3, written for a whole batch)
#
# $$\frac{\partial l}{\partial \mathbf{x}_i} = \sum_j \frac{\partial l}{\partial S_{ij}}\, \mathbf{y}_j,
# \qquad \frac{\partial l}{\partial \mathbf{y}_j} = \sum_i \frac{\partial l}{\partial S_{ij}}\, \mathbf{x}_i .$$
#
# So whoever supplies the matrix $G = \partial l / \partial S$ has said everything the encoders will ever
# hear. PyTorch lets us supply it directly: `S.backward(G)` runs backpropagation from $S$ with $G$
# in place of "the gradient of a loss". Let us hand it an arbitrary $G$ — no loss anywhere — and check
# eq. 3.

# %%
# unit vectors, caption i describes image i
img, txt = demo_embeddings(n=N, dim=16, noise=1.2, seed=0)
img.requires_grad_()
txt.requires_grad_()
S = img @ txt.T  # cosine similarities, rows = images, columns = captions

G_any = torch.randn(N, N, dtype=S.dtype)  # *any* designed dL/dS
S.backward(G_any)

# eq. 3: each image is pushed along the captions, weighted by the designed scalars
torch.testing.assert_close(img.grad, G_any @ txt.detach())
torch.testing.assert_close(txt.grad, G_any.T @ img.detach())
print("eq. 3 holds: the encoders see dL/dS only through  dL/dx_i = sum_j G_ij y_j")

# %% [markdown]
# GOAL designs $G$ one *triplet* at a time. For the image query $\mathbf{x}$ with its caption
# $\mathbf{y}$ and its hardest negative caption $\mathbf{y}'$ (the highest-scoring wrong caption in the
# batch), each triplet-style loss the paper dissects has a gradient of the form
#
# $$\frac{\partial L}{\partial S_{\mathbf{x},\mathbf{y}}} = -\,T \cdot P_+ , \qquad
#   \frac{\partial L}{\partial S_{\mathbf{x},\mathbf{y}'}} = +\,T \cdot P_- ,$$
#
# a **triplet weight** $T$ that depends on both similarities and a **pair weight** $P_\pm$ that depends
# on one of them (sec. 3.1). The same holds with the roles of images and captions swapped
# (query $\mathbf{y}$, positive $\mathbf{x}$, hardest negative image $\mathbf{x}'$), and the two
# directions add up. All other entries of $G$ are zero.
#
# ## 2. Triplet weights (eqs. 5, 7, 8; Fig. 2)
#
# - **Constant** (the triplet loss, eqs. 4–5): $T^{con} = \delta(m + S_{\mathbf{x},\mathbf{y}'} - S_{\mathbf{x},\mathbf{y}})$,
#   the Heaviside step: 1 for a triplet that violates the margin $m$, else 0.
# - **NCA** (hard-negative NCA, which Table 1 calls NT-Xent, eqs. 6–7): $T^{nca} = \dfrac{1}{1 + e^{\tau(S_{\mathbf{x},\mathbf{y}} - S_{\mathbf{x},\mathbf{y}'})}}$,
#   a soft step in the gap $S_{pos} - S_{neg}$.
# - **Circle** (Circle loss, eq. 8): $T^{cir} = \dfrac{1}{1 + e^{\tau(S_{\mathbf{x},\mathbf{y}}(2 - S_{\mathbf{x},\mathbf{y}}) - S_{\mathbf{x},\mathbf{y}'}^2)}}$.
#
# Fig. 2 of the paper draws each $T$ over the square of all triplets, $S_{pos}$ on the x-axis and
# $S_{neg}$ on the y-axis, with $m = 0.2$ and $\tau = 10$. Good triplets (positive close, negative far)
# sit bottom right.

# %%
viz.goal.triplet_diagrams(margin=0.2, tau=10.0)

# %% [markdown]
# The iso-lines tell the story. $T^{con}$ is a cliff along the line $S_{neg} = S_{pos} - m$.
# $T^{nca}$ is a smooth ramp whose iso-lines are straight lines $S_{pos} - S_{neg} = \text{const}$:
# it only looks at the *gap*. Completing the square in eq. 8,
# $S_{neg}^2 - S_{pos}(2 - S_{pos}) = (S_{pos} - 1)^2 + S_{neg}^2 - 1$, so
#
# $$T^{cir} = \sigma\!\left(\tau\left[(S_{pos} - 1)^2 + S_{neg}^2 - 1\right]\right),$$
#
# with $\sigma(z) = 1/(1 + e^{-z})$ the logistic sigmoid: the iso-lines of $T^{cir}$ are circles around the ideal triplet $(S_{pos}, S_{neg}) = (1, 0)$,
# and $T^{cir} = 1/2$ on the unit circle. Two triplets with the same gap get the same $T^{nca}$ but
# different $T^{cir}$: the Circle weight also asks *where* the triplet sits. Each of these statements
# is checked below.

# %%
s = torch.linspace(-1, 1, 41, dtype=torch.float64)
# s_pos varies along columns, s_neg along rows
s_pos, s_neg = torch.meshgrid(s, s, indexing="xy")
T = {
    name: goal.triplet_weight(name, s_pos, s_neg, margin=0.2, tau=10.0)
    for name in goal.GOAL_TRIPLETS
}

# T^con is 1 exactly on the triplets that violate the margin
assert torch.equal(T["con"].bool(), 0.2 + s_neg - s_pos > 0)

# T^nca = 1/2 on the diagonal S_pos = S_neg, and constant on every line S_pos - S_neg =
# const
torch.testing.assert_close(
    T["nca"].diagonal(), torch.full((41,), 0.5, dtype=torch.float64)
)
for k in range(-40, 41):
    line = T["nca"].diagonal(offset=k)
    torch.testing.assert_close(line, line[:1].expand_as(line))

# T^cir: the completed square, and constant on circles (S_pos - 1)^2 + S_neg^2 = r^2
torch.testing.assert_close(
    T["cir"], torch.sigmoid(10.0 * ((s_pos - 1) ** 2 + s_neg**2 - 1))
)
# the half inside the square
theta = torch.linspace(torch.pi / 2, 3 * torch.pi / 2, 25, dtype=torch.float64)
for r in (0.3, 0.7, 1.0):
    on_circle = goal.triplet_weight(
        "cir", 1 + r * torch.cos(theta), r * torch.sin(theta), tau=10.0
    )
    expected = torch.sigmoid(torch.tensor(10.0 * (r**2 - 1), dtype=torch.float64))
    torch.testing.assert_close(on_circle, expected.expand_as(on_circle))
    if r == 1.0:
        torch.testing.assert_close(on_circle, torch.full_like(on_circle, 0.5))

# same gap S_pos - S_neg = 0.1, two places in the square
both_high, both_low = (0.9, 0.8), (-0.5, -0.6)
t_nca = [
    float(goal.triplet_weight("nca", *torch.tensor(p, dtype=torch.float64)))
    for p in (both_high, both_low)
]
t_cir = [
    float(goal.triplet_weight("cir", *torch.tensor(p, dtype=torch.float64)))
    for p in (both_high, both_low)
]
print(f"T^nca: both high {t_nca[0]:.3f}, both low {t_nca[1]:.3f}")
print(f"T^cir: both high {t_cir[0]:.3f}, both low {t_cir[1]:.3f}")
assert abs(t_nca[0] - t_nca[1]) < 1e-12 and t_cir[1] > 0.99 > 0.05 > t_cir[0]

# %% [markdown]
# With $\tau = 10$, $T^{cir}$ almost ignores a triplet whose positive is already close to 1 (top right)
# and gives full weight to one whose positive is still far (bottom left), though both have the same
# gap. Move the knobs: a larger $\tau$ sharpens both soft steps; the margin moves the cliff of $T^{con}$.

# %%
widgets.goal.triplet_explorer()

# %% [markdown]
# ## 3. Pair weights (eqs. 9–13; Fig. 3)
#
# A pair weight looks at one pair only: $P_+$ at the positive's similarity $s = S_{\mathbf{x},\mathbf{y}}$,
# $P_-$ at the hardest negative's $s = S_{\mathbf{x},\mathbf{y}'}$.
#
# | | $P_+$ | $P_-$ | from |
# |---|---|---|---|
# | con (eq. 9) | $1$ | $1$ | baseline |
# | lin (eq. 10) | $1 - s$ | $s$ | Circle loss |
# | sig (eq. 11) | $\dfrac{1}{1 + e^{\alpha(s - \lambda)}}$ | $\dfrac{1}{1 + e^{-\beta(s - \lambda)}}$ | binomial deviance |
# | sig-ms (eq. 12) | $\dfrac{1}{m^{sig}_+ + e^{\alpha(s - \lambda)}}$ | $\dfrac{1}{m^{sig}_- + e^{-\beta(s - \lambda)}}$ | MS loss |
# | lin-ms (eq. 13) | $(1 - m^{lin}_+)(1 - s)$ | $(1 + m^{lin}_-)\, s$ | new in the paper |
#
# The MS forms add a *relative-similarity* term $m$ computed from the rest of the batch: for the
# positive, from $e^{\alpha(S_{\mathbf{x},\mathbf{y}} - R)}$ over the other positive pairs $R$ in
# the set $\mathcal{P}$; for the negative, from $e^{-\beta(S_{\mathbf{x},\mathbf{y}'} - R)}$ over
# the query's other negatives in $\mathcal{N}$ (eq. 12 prints their mean; section 3b shows why
# `vlr_lib` follows MS loss itself instead), and a mean of plain differences $S - R$ for lin-ms. `vlr_lib`
# clamps the linear forms at zero ($[1-s]_+$, $[s]_+$, as Circle loss does), so a positive is never
# pushed and a negative never pulled. Fig. 3 draws the curves with $\alpha = 2$, $\beta = 10$,
# $\lambda = 0.5$ and a fixed $m = 0.1$ for the MS forms:

# %%
viz.goal.pair_weight_curves(alpha=2.0, beta=10.0, lam=0.5, rel=0.1)

# %% [markdown]
# Read the curves: every $P_+$ falls as the positive gets closer (less work left) and every $P_-$
# rises as the negative gets closer (more danger). The sigmoid forms cross $1/2$ at $s = \lambda$;
# a small MS term $m$ lifts the ceiling of the sigmoid weights from 1 to $1/m$ ("the main effect caused
# by the relative-similarity term is to dynamically increase or decrease the maximum penalty", sec. 3.3),
# and $m = 1$ gives back eq. 11 exactly, as the paper remarks. The checks:

# %%
grid = torch.linspace(-1, 1, 201, dtype=torch.float64)
lam = torch.tensor(0.5, dtype=torch.float64)


def P(name, positive, **kw):
    return goal.pair_weight(name, grid, positive, alpha=2.0, beta=10.0, lam=0.5, **kw)


# the sigmoid weights are 1/2 at s = lambda
assert abs(float(goal.pair_weight("sig", lam, True)) - 0.5) < 1e-12
assert abs(float(goal.pair_weight("sig", lam, False)) - 0.5) < 1e-12
# m = 1 turns sig-ms into sig (eq. 12 -> eq. 11); m = 0 turns lin-ms into lin (eq. 13 ->
# eq. 10)
for positive in (True, False):
    torch.testing.assert_close(P("sig-ms", positive, rel=1.0), P("sig", positive))
    torch.testing.assert_close(P("lin-ms", positive, rel=0.0), P("lin", positive))
    # the MS term m bounds the weight by 1/m
    assert P("sig-ms", positive, rel=0.1).max() <= 1 / 0.1
# P_+ never increases with s, P_- never decreases
for name in goal.GOAL_PAIRS:
    kw = {"rel": 0.1} if name.endswith("ms") else {}
    assert (P(name, True, **kw).diff() <= 1e-15).all() and (
        P(name, False, **kw).diff() >= -1e-15
    ).all()

# %% [markdown]
# ### 3b. Eq. 12 as printed, and MS loss's own weights
#
# In training, $m$ is not a knob: it comes from the batch (`goal.relative_term`). Read literally,
# eq. 12 takes $m$ as a *mean* over the set. A *hardest* negative scores above every other negative
# of its query, so each $S_{\mathbf{x},\mathbf{y}'} - R$ in $\mathcal{N}$ is positive and
# $m^{sig}_- = \text{mean}\, e^{-\beta(S - R)} \le 1$: the printed eq. 12 can only *raise* $P_-$ above
# the sigmoid, up to $1/m$ — and $m$ can be tiny. (The paper's prose speaks of $m^{sig}_- > 1$ for a
# relatively close negative; the equations say otherwise.)
#
# MS loss itself (Wang et al., CVPR 2019) writes its weights as
#
# $$w^- = \frac{1}{e^{\beta(\lambda - S_{ik})} + \sum_{k' \in \mathcal N_i} e^{\beta(S_{ik'} - S_{ik})}},
# \qquad w^+ = \frac{1}{e^{-\alpha(\lambda - S_{ik})} + \sum_{k' \in \mathcal P_i} e^{-\alpha(S_{ik'} - S_{ik})}},$$
#
# eq. 12's form with $m$ a **sum** over a set that **contains the selected pair itself**, whose term
# is $e^0 = 1$. So $m \ge 1$ and every weight is at most 1 (and at most the plain sigmoid weight).
# `vlr_lib` uses this reading by default (`ms_form="ms-loss"`) and keeps the printed one as
# `ms_form="printed"`. On one hardest negative:

# %%
s_hn = torch.tensor([0.6], dtype=torch.float64)  # a hardest negative
# the query's other negatives
others = torch.tensor([[0.5, 0.2, 0.58]], dtype=torch.float64)
members = torch.ones_like(others, dtype=torch.bool)
p_sig = goal.pair_weight("sig", s_hn, False)
for form in goal.MS_FORMS:
    m_neg = goal.relative_term(
        "sig-ms", s_hn, others, members, positive=False, ms_form=form
    )
    p_ms = goal.pair_weight("sig-ms", s_hn, False, rel=m_neg)
    print(
        f"{form:8s}: m_- = {float(m_neg):.3f};  P_-^sig-ms = {float(p_ms):.3f}  vs  "
        f"P_-^sig = {float(p_sig):.3f}"
    )
    assert (
        (float(m_neg) < 1 and float(p_ms) > float(p_sig))
        if form == "printed"
        else (float(m_neg) >= 1 and float(p_ms) <= float(p_sig))
    )

# %% [markdown]
# That difference is not cosmetic. At MS loss's own setting ($\alpha = 2$, $\beta = 50$) and cosines
# spread over $[-1, 1]$, a hardest negative far above the rest makes the printed $m^{sig}_-$ about
# $e^{-50 \cdot 0.5}$, and its weight the inverse:

# %%
S_spread = torch.randn(6, 6, generator=torch.Generator().manual_seed(0)).clamp(-1, 1)
for lam in (0.5, 1.0):
    worst = {
        form: float(
            goal.goal_gradient(
                S_spread, "con", "sig-ms", alpha=2.0, beta=50.0, lam=lam, ms_form=form
            )
            .abs()
            .max()
        )
        for form in goal.MS_FORMS
    }
    print(
        f"lambda = {lam}: max |dL/dS|  MS loss's reading {worst['ms-loss']:.3g},  as "
        f"printed {worst['printed']:.3g}"
    )
    assert worst["ms-loss"] <= 2.0  # each weight <= 1, each entry in at most 2 triplets
worst_printed = float(
    goal.goal_gradient(
        S_spread, "con", "sig-ms", alpha=2.0, beta=50.0, lam=0.5, ms_form="printed"
    )
    .abs()
    .max()
)
# ~1e10: one step of that size throws the embeddings anywhere
assert worst_printed > 1e6

# %%
widgets.goal.pair_weight_explorer()

# %% [markdown]
# ## 4. Table 1: fifteen gradients, five known losses
#
# Any triplet weight times any pair weight is a gradient GOAL can train: $3 \times 5 = 15$
# combinations. Xuan & Chen's Table 1 names the ones that an existing loss already produces; the other
# ten are "New".

# %%
viz.goal.table1_grid()

# %%
named = {key: name for key, name in goal.TABLE1.items() if name != "New"}
assert named == {
    ("con", "con"): "Triplet",
    ("nca", "con"): "hard-negative NCA",
    ("cir", "lin"): "Circle",
    ("con", "sig"): "Binomial deviance",
    ("con", "sig-ms"): "MS",
}
assert sum(name == "New" for name in goal.TABLE1.values()) == 10

# %% [markdown]
# **Why were the "New" ones never trained before?** Because many are the gradient of *no* loss. Fix one
# triplet and view the designed gradient as a vector field over the square,
# $g(S_{pos}, S_{neg}) = (-T P_+,\; T P_-)$. If a loss $L(S_{pos}, S_{neg})$ had this gradient, its mixed
# second derivatives would agree (Schwarz), so the "curl"
#
# $$\operatorname{curl} g = \frac{\partial g_{pos}}{\partial S_{neg}} - \frac{\partial g_{neg}}{\partial S_{pos}}$$
#
# would vanish everywhere. We measure it with central differences for the smooth triplet weights
# ($T^{nca}$, $T^{cir}$) and the batch-free pair weights, on the open region $S_{neg} > 0$ where no clamp
# of $P^{lin}$ acts. ($T^{con}$ is a step, whose curl lives on the hinge line; exercise 4 deals with it.)


# %%
def designed_field(triplet, pair, sp, sn):
    """(dL/dS_pos, dL/dS_neg) of one triplet under GOAL, from vlr_lib's weights."""
    t = goal.triplet_weight(triplet, sp, sn, tau=10.0)
    return -t * goal.pair_weight(pair, sp, True), t * goal.pair_weight(pair, sn, False)


def curl(triplet, pair, sp, sn, h=1e-5):
    """d g_pos / d S_neg - d g_neg / d S_pos by central differences."""
    g_pos_up, g_pos_down = (
        designed_field(triplet, pair, sp, sn + h)[0],
        designed_field(triplet, pair, sp, sn - h)[0],
    )
    g_neg_up, g_neg_down = (
        designed_field(triplet, pair, sp + h, sn)[1],
        designed_field(triplet, pair, sp - h, sn)[1],
    )
    return (g_pos_up - g_pos_down) / (2 * h) - (g_neg_up - g_neg_down) / (2 * h)


sp_pts, sn_pts = torch.meshgrid(
    torch.linspace(-0.9, 0.9, 15, dtype=torch.float64),
    torch.linspace(0.05, 0.9, 15, dtype=torch.float64),
    indexing="xy",
)
max_curl = {
    (t, p): float(curl(t, p, sp_pts, sn_pts).abs().max())
    for t, p in itertools.product(("nca", "cir"), ("con", "lin", "sig"))
}
for (t, p), c in max_curl.items():
    print(f"({t}, {p:3s})  max |curl| = {c:.1e}   Table 1: {goal.TABLE1[(t, p)]}")

integrable = {key for key, c in max_curl.items() if c < 1e-6}
# exactly the two with a name in Table 1
assert integrable == {
    ("nca", "con"),
    ("cir", "lin"),
}
assert all(max_curl[key] > 0.1 for key in max_curl if key not in integrable)

# %% [markdown]
# Among these six, the curl vanishes exactly for hard-negative NCA $(T^{nca}, P^{con})$ and Circle
# $(T^{cir}, P^{lin})$ — the two with a loss in Table 1. The four "New" smooth combinations cannot be
# written as a loss of $(S_{pos}, S_{neg})$. GOAL does not need one.
#
# ## 5. Compose a gradient on a live batch
#
# Now the whole batch. `goal.goal_gradient(S, triplet, pair, ...)` returns the designed
# $\partial L / \partial S$: for every positive pair, in both directions, $-T P_+$ on the positive and
# $+T P_-$ on that query's hardest negative. One combination with all its parameters is a
# `goal.GoalConfig`, validated once and passed whole to `goal_gradient`, `goal_objective`, the
# figures and the composer; the loose keywords give the same gradient. Here is the batch we use
# (the same toy embeddings as above; squares mark positives, triangles ▶ and ▼ the hardest
# negative of each image query and each caption query, `similarity.hardest_negative_mask`):

# %%
S = (img @ txt.T).detach()
# the paper's best combination, default parameters
best = goal.GoalConfig("cir", "sig-ms")
print(best, "->", best.label, "| uses", best.params())
torch.testing.assert_close(
    goal.goal_gradient(S, config=best), goal.goal_gradient(S, "cir", "sig-ms")
)
hn_rows, hn_cols = (
    similarity.hardest_negative_mask(S, None, d) for d in ("i2t", "t2i")
)
eye = torch.eye(N, dtype=torch.bool)
viz.matrix.similarity_heatmap(S, marks=viz.matrix.batch_marks(S))

# %% [markdown]
# The composer below pairs any $T$ with any $P$. Top: the designed weights $T P_+$ (pull on the
# positive) and $T P_-$ (push on the hardest negative) over all triplets, with this batch's $2N$
# triplets as white dots (the MS forms are drawn at a fixed $m$, slider "MS term"; on the batch, $m$
# comes from the batch). Bottom: the resulting $\partial L/\partial S$ of the batch, blue where a
# similarity is pulled up, red where it is pushed down. Things to try:
#
# - $(T^{con}, P^{con})$ and the margin: only the dots above the cliff (margin violated) get gradient, all
#   of the same size;
# - $(T^{nca}, P^{con})$ with $\tau$ from 50 down to 1: from a near-step (only triplets whose negative is
#   about as close as the positive) to a gentle ramp (every triplet a bit);
# - $(T^{cir}, P^{sig\text{-}ms})$, the paper's best: how small the weights of already-good triplets get.

# %%
widgets.goal.goal_composer(S, config=best)

# %% [markdown]
# Whatever the combination, GOAL only ever writes on positives and hardest negatives: the designed
# gradient is sparse, with at most $N + 2N$ non-zero entries in an $N \times N$ matrix. For
# $(T^{con}, P^{con})$ a positive gets gradient exactly when one of its two triplets violates the margin.

# %%
touched = eye | hn_rows | hn_cols
for t, p in itertools.product(goal.GOAL_TRIPLETS, goal.GOAL_PAIRS):
    grad = goal.goal_gradient(S, t, p)
    # nothing outside positives and hardest negatives
    assert not grad[~touched].any(), (
        t,
        p,
    )
    # pull positives, push negatives
    assert (grad.diagonal() <= 0).all() and (grad[~eye] >= 0).all(), (
        t,
        p,
    )

grad_cc = goal.goal_gradient(S, "con", "con", margin=0.2)
s_pos_b, s_neg_b = goal.batch_triplets(S)  # image queries first, then caption queries
violated = (0.2 + s_neg_b - s_pos_b > 0).reshape(2, N).any(dim=0)
assert torch.equal(grad_cc.diagonal() != 0, violated)
print(
    f"(con, con): {int(violated.sum())} of {N} positives violate a margin of 0.2 and "
    "receive gradient"
)

# %% [markdown]
# ## 6. Inside `goal_objective`: a custom autograd Function
#
# A training loop wants a scalar to call `.backward()` on. `goal.goal_objective` returns one, built by a
# `torch.autograd.Function` whose two halves do different jobs:
#
# ```python
# class _GoalFunction(torch.autograd.Function):       # vlr_lib/goal.py, abridged
#     @staticmethod
#     def forward(ctx, S, pos, cfg):
#         grad, value = _goal(S.detach(), pos, cfg)     # designed dL/dS, from today's S
#         ctx.save_for_backward(grad)                    # keep it for the backward pass
#         return value                                   # a number to log
#
#     @staticmethod
#     def backward(ctx, grad_output):
#         (grad,) = ctx.saved_tensors
#         return grad_output * grad, None, None          # dL/dS; nothing for pos and cfg
# ```
#
# - `forward` computes the designed gradient *now*, while $S$ is at hand, and returns a value for
#   logging: the triplet-hardest (VSE++) loss, comparable across all 15 combinations. Its own gradient
#   is irrelevant, because autograd never differentiates `forward`.
# - `ctx.save_for_backward` stores tensors on the graph node for the backward pass. PyTorch checks that
#   they were not modified in place in between (each tensor has a version counter) and frees them after
#   the backward pass.
# - `backward` receives $\partial(\text{whatever comes after})/\partial\,\text{value}$ as `grad_output`
#   (1 for a plain `.backward()`, 0.5 if the value is weighted by 0.5 in a sum of losses) and multiplies,
#   which is the chain rule. It returns one gradient per input of `forward`; `None` for the
#   non-tensor arguments.
#
# The weights $T$ and $P$ are thus constants with no gradient of their own: eq. 3 only needs the scalars
# $\partial L/\partial S$, not a formula they came from. Let us watch it work.

# %%
S_leaf = S.clone().requires_grad_()
value = goal.goal_objective(S_leaf, "cir", "sig-ms")
value.backward()
print(f"forward value (triplet-hardest loss, for logging): {value.item():.4f}")

# backward = design
torch.testing.assert_close(S_leaf.grad, goal.goal_gradient(S, "cir", "sig-ms"))
torch.testing.assert_close(
    value.detach(), losses.triplet_hardest(S, margin=0.2, reduction="sum")
)

# the backward is not the derivative of the forward value: that would be Triplet-SH's
# gradient
S_th = S.clone().requires_grad_()
losses.triplet_hardest(S_th, margin=0.2).backward()
assert not torch.allclose(S_leaf.grad, S_th.grad)

# grad_output is honoured: weighting the objective by 0.5 halves the gradient
S_half = S.clone().requires_grad_()
(0.5 * goal.goal_objective(S_half, "cir", "sig-ms")).backward()
torch.testing.assert_close(S_half.grad, 0.5 * S_leaf.grad)

viz.matrix.gradient_heatmap(
    S_leaf.grad,
    {"positive": eye},
    title="S.grad after goal_objective(S, 'cir', 'sig-ms').backward()",
)

# %% [markdown]
# And all the way down to the embeddings, as in eq. 3: the encoders receive $\partial L/\partial S$
# multiplied by the other modality's embeddings.

# %%
img_leaf, txt_leaf = (
    img.detach().clone().requires_grad_(),
    txt.detach().clone().requires_grad_(),
)
goal.goal_objective(img_leaf @ txt_leaf.T, "cir", "sig-ms").backward()
designed = goal.goal_gradient(S, "cir", "sig-ms")
torch.testing.assert_close(img_leaf.grad, designed @ txt.detach())
torch.testing.assert_close(txt_leaf.grad, designed.T @ img.detach())

# %% [markdown]
# ## 7. Two combinations we can check against real losses
#
# **Triplet-SH = $(T^{con}, P^{con})$.** Differentiating the hard-negative triplet loss (eq. 4) gives
# $-\delta(\cdot)$ on the positive and $+\delta(\cdot)$ on the hardest negative: $T^{con}$ with
# $P_\pm = 1$. So GOAL's (con, con) must equal autograd's gradient of `losses.triplet_hardest` — which
# is what the paper's Table 2 confirms in training (e.g. VSE++ R152-FT: 41.3 / 30.3 R@1 reported,
# 41.0 ± 0.3 / 30.2 ± 0.1 with the gradient).

# %%
S_tri = S.clone().requires_grad_()
losses.triplet_hardest(S_tri, margin=0.2, reduction="sum").backward()
torch.testing.assert_close(
    goal.goal_gradient(S, config=goal.GoalConfig("con", "con", margin=0.2)), S_tri.grad
)
print("GOAL (con, con) == autograd of triplet_hardest")

# %% [markdown]
# **Hard-negative NCA = $(T^{nca}, P^{con})$, up to $\tau$.** Eq. 6 keeps only the hardest negative in
# the softmax: per triplet $l = -\log \frac{e^{\tau s_{pos}}}{e^{\tau s_{pos}} + e^{\tau s_{neg}}} =
# \log\left(1 + e^{\tau(s_{neg} - s_{pos})}\right)$. Its derivative is
#
# $$\frac{\partial l}{\partial s_{neg}} = -\frac{\partial l}{\partial s_{pos}} =
# \frac{\tau\, e^{\tau(s_{neg} - s_{pos})}}{1 + e^{\tau(s_{neg} - s_{pos})}} = \frac{\tau}{1 + e^{\tau(s_{pos} - s_{neg})}}
# = \tau\, T^{nca},$$
#
# so the GOAL gradient of (nca, con) is the NCA gradient divided by $\tau$ (the scale is folded into
# the learning rate). We write eq. 6 in a few lines, only to let autograd differentiate it:


# %%
def nca_hard_negative(S, tau):
    """Eq. 6 summed over the batch, both directions (teaching version: positives on the
    diagonal).
    """
    eye = torch.eye(len(S), dtype=torch.bool)
    hardest = S.masked_fill(eye, float("-inf"))
    # image queries: hardest caption
    gap_rows = hardest.max(dim=1).values - S.diagonal()
    # caption queries: hardest image
    gap_cols = hardest.max(dim=0).values - S.diagonal()
    return (F.softplus(tau * gap_rows) + F.softplus(tau * gap_cols)).sum()


for tau in (1.0, 10.0, 30.0):
    S_nca = S.clone().requires_grad_()
    nca_hard_negative(S_nca, tau).backward()
    torch.testing.assert_close(
        goal.goal_gradient(S, "nca", "con", tau=tau), S_nca.grad / tau
    )
print("GOAL (nca, con) == autograd of eq. 6, divided by tau")

# %% [markdown]
# ## 8. What Xuan & Chen found
#
# The paper trains all 15 combinations on MS-COCO with VSE++ (ResNet152 and ViT, frozen and
# fine-tuned; Tables 3–4) and VSE∞ (BUTD and WSL features; Table 5), three runs each, and reports R@1.
# Their reading (sec. 4.3): the pair weights $P^{lin}, P^{sig}, P^{lin\text{-}ms}, P^{sig\text{-}ms}$
# "show clear improvement in Recall@1 over the baseline pair weight $P^{con}$", and in fine-tuning
# $T^{nca}$ and $T^{cir}$ "help pair weight continue to improve". The conclusion: "generally the
# combination of $T^{cir}$, $P^{sig\text{-}ms}$ achieve the best performance" (sec. 5). Table 5 for
# VSE∞ (BUTD), image → text R@1, on the grid of Table 1:

# %%
# Xuan & Chen, Table 5, VSE-infinity, MS-COCO 5K, R@1 (means of 3 runs); rows P, columns
# (con, nca, cir)
TABLE5 = {
    "BUTD i2t": [
        [58.9, 61.2, 60.3],
        [58.1, 60.7, 60.1],
        [59.8, 62.0, 62.0],
        [60.0, 61.7, 61.2],
        [61.8, 63.1, 63.2],
    ],
    "BUTD t2i": [
        [43.1, 43.2, 42.5],
        [43.1, 43.4, 43.0],
        [43.5, 43.9, 43.8],
        [43.6, 43.9, 43.4],
        [44.6, 44.8, 44.9],
    ],
    "WSL i2t": [
        [66.2, 67.6, 67.2],
        [66.9, 68.5, 68.4],
        [68.2, 69.7, 70.2],
        [67.8, 69.7, 69.5],
        [70.3, 71.5, 71.4],
    ],
    "WSL t2i": [
        [51.6, 51.4, 49.9],
        [52.5, 52.8, 52.5],
        [53.0, 53.1, 52.9],
        [52.8, 53.3, 52.7],
        [53.9, 54.2, 53.6],
    ],
}
as_grid = {
    k: {
        (t, p): rows[i][j]
        for i, p in enumerate(goal.GOAL_PAIRS)
        for j, t in enumerate(goal.GOAL_TRIPLETS)
    }
    for k, rows in TABLE5.items()
}
# the figure lays each grid out as the paper prints it: rows P, columns T
assert goal.table1_values(as_grid["BUTD i2t"]).tolist() == TABLE5["BUTD i2t"]
viz.goal.table1_grid(
    values=as_grid["BUTD i2t"],
    highlight=("cir", "sig-ms"),
    value_label="R@1",
    title="Xuan & Chen Table 5: VSE∞ (BUTD), image → text R@1 on MS-COCO 5K",
)

# %%
best = {k: max(g, key=g.get) for k, g in as_grid.items()}
for k, key in best.items():
    print(
        f"{k}: best {key} = {as_grid[k][key]}, (cir, sig-ms) = "
        f"{as_grid[k][('cir', 'sig-ms')]}"
    )
assert best["BUTD i2t"] == best["BUTD t2i"] == ("cir", "sig-ms")  # 63.2 and 44.9
# the trainer's name of that combination (notebook 10 trains it)
assert goal.parse_goal_name("goal:cir,sig-ms") == best["BUTD i2t"]
# 71.5 and 54.2: T^cir is 0.1 / 0.6 behind
assert best["WSL i2t"] == best["WSL t2i"] == ("nca", "sig-ms")
# in every column of every block, P^sig-ms beats the baseline P^con
assert all(
    g[(t, "sig-ms")] > g[(t, "con")]
    for g in as_grid.values()
    for t in goal.GOAL_TRIPLETS
)

# %% [markdown]
# So "best" is a tendency, not a law: $(T^{cir}, P^{sig\text{-}ms})$ wins both directions on BUTD
# (63.2 / 44.9) and on VSE++ ViT fine-tuned image → text (51.7, Table 4), while $(T^{nca}, P^{sig\text{-}ms})$
# edges it on WSL (71.5 vs 71.4 and 54.2 vs 53.6). What is consistent is the pair weight: $P^{sig\text{-}ms}$
# beats $P^{con}$ in every column above, and beats or ties it in every column of Tables 3–4 too (the one
# tie: $T^{nca}$, VSE++ ResNet152 frozen, image → text, 34.9). The paper's final models use $(T^{cir}, P^{sig\text{-}ms})$:
# VSE∞ (BUTD) goes from the reported 58.3 / 42.4 to 63.2 / 44.4 R@1 on MS-COCO 5K (Table 6), and the
# same gradient in X-VLM's fine-tuning gives 81.4 / 63.6.
#
# In **notebook 10** we train all 15 combinations ourselves, on the same cached features, with
# `vlr_lib`'s trainer (`"goal:cir,sig-ms"` and friends) and compare them with the closed-form losses.
#
# ## Summary
#
# - The encoders only ever see $\partial L/\partial S$ (eq. 3), so a gradient can be designed and handed
#   to autograd without a loss: `S.backward(G)`, or a custom `autograd.Function` whose backward returns it.
# - Triplet-loss gradients factor into a triplet weight ($T^{con}$: a cliff; $T^{nca}$: a ramp in the gap;
#   $T^{cir}$: circles around $(1, 0)$) times a pair weight ($P^{con}$, $P^{lin}$, $P^{sig}$ and their MS
#   forms, whose batch term $m$ scales the ceiling). Eq. 12 read as printed lets that ceiling $1/m$
#   explode; MS loss's own weights sum over the set *with* the selected pair, so $m \ge 1$ and every
#   weight stays $\le 1$ — `vlr_lib`'s default (`ms_form="ms-loss"`).
# - Of the 15 combinations, Table 1 names five; the smooth "New" ones we tested have non-zero curl: no loss
#   has them as gradient, and GOAL trains them anyway.
# - $(T^{con}, P^{con})$ is exactly Triplet-SH; $(T^{nca}, P^{con})$ is hard-negative NCA divided by $\tau$;
#   every combination writes only on positives and hardest negatives.
# - In the paper's Tables 3–5, $P^{sig\text{-}ms}$ beats or ties $P^{con}$ in every column, and
#   $(T^{cir}, P^{sig\text{-}ms})$ is best or close to best; the paper's final models use it.
#
# ## Exercises
#
# **1.** Show numerically that $T^{nca}$ becomes $T^{con}$ with margin $m = 0$ as $\tau \to \infty$, away
# from the diagonal $S_{pos} = S_{neg}$. How large must $\tau$ be for the two to differ by less than 0.01
# wherever $|S_{pos} - S_{neg}| > 0.05$?

# %% [markdown] jupyter={"source_hidden": true} tags=["solution"]
# **Solution 1, the derivation.** Write $d = s_{neg} - s_{pos}$. Then $T^{nca} = \sigma(\tau d)$ (eq. 7) and, with
# $m = 0$, $T^{con} = \mathbb{1}[d > 0]$ (eq. 5). For $d > 0$ their difference is $1 - \sigma(\tau d) = \sigma(-\tau d)$;
# for $d < 0$ it is $\sigma(\tau d) = \sigma(-\tau |d|)$. In both cases
#
# $$ |T^{nca} - T^{con}| = \sigma(-\tau |d|), $$
#
# which falls with $|d|$ and with $\tau$, and tends to 0 as $\tau \to \infty$ for every $d \ne 0$. Away from the band,
# $|d| > 0.05$, the largest difference is next to it: $\sigma(-0.05\,\tau)$. It is below 0.01 when
# $e^{0.05\tau} > 99$, i.e. $\tau > 20 \ln 99 \approx 91.9$. The check compares this with the largest difference on
# a grid, for $\tau$ on both sides of 91.9.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 1.
g = torch.linspace(-1, 1, 81, dtype=torch.float64)
sp, sn = torch.meshgrid(g, g, indexing="xy")
far = (sp - sn).abs() > 0.05
gap = {}
for tau in (10, 50, 92, 93, 200):
    diff = (
        goal.triplet_weight("nca", sp, sn, tau=tau)
        - goal.triplet_weight("con", sp, sn, margin=0.0)
    )[far]
    gap[tau] = float(diff.abs().max())
    print(tau, gap[tau])
sigma = {
    t: float(torch.sigmoid(torch.tensor(-0.05 * t, dtype=torch.float64))) for t in gap
}
# the largest difference: next to the band
assert all(abs(gap[t] - sigma[t]) < 1e-9 for t in gap)
assert gap[50] > 0.01 > gap[92]  # below 0.01 from tau = 20 ln 99 = 91.9 on

# %% [markdown]
# **2.** Table 1 calls $(T^{con}, P^{sig})$ binomial deviance. Write the hard-negative binomial deviance
# loss $\frac{1}{\alpha}\log(1 + e^{-\alpha(s_{pos} - \lambda)}) + \frac{1}{\beta}\log(1 + e^{\beta(s_{neg} - \lambda)})$
# (both directions) and compare its autograd gradient with `goal_gradient(S, "con", "sig")`. Why must you set
# a large margin for them to agree?

# %% [markdown] jupyter={"source_hidden": true} tags=["solution"]
# **Solution 2, the answer.** Differentiating the two softplus terms gives
# $\partial l/\partial s_{pos} = -\sigma(-\alpha(s_{pos} - \lambda))$ and $\partial l/\partial s_{neg} = \sigma(\beta(s_{neg} - \lambda))$:
# the pair weights $P^{sig}$, multiplied by nothing else. Binomial deviance has no hinge, so its triplet weight
# is always 1. $T^{con} = \delta(m + s_{neg} - s_{pos})$ is 1 only on violating triplets; since
# $s_{neg} - s_{pos} \ge -2$ for cosine similarities, a margin $m = 2$ makes $m + s_{neg} - s_{pos} > 0$ for every
# triplet short of the extreme $s_{pos} = 1$, $s_{neg} = -1$, so $T^{con} \equiv 1$ and the two gradients agree. With $m = 0.2$ the easy
# triplets get $T^{con} = 0$ and they differ: the check shows both.


# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 2.
def binomial_deviance_hard(S, alpha=2.0, beta=10.0, lam=0.5):
    eye = torch.eye(len(S), dtype=torch.bool)
    hardest = S.masked_fill(eye, float("-inf"))
    pos = S.diagonal()
    term_pos = F.softplus(-alpha * (pos - lam)) / alpha
    return sum(
        (term_pos + F.softplus(beta * (neg - lam)) / beta).sum()
        for neg in (hardest.max(dim=1).values, hardest.max(dim=0).values)
    )


S_bd = S.clone().requires_grad_()
binomial_deviance_hard(S_bd).backward()
torch.testing.assert_close(goal.goal_gradient(S, "con", "sig", margin=2.0), S_bd.grad)
assert not torch.allclose(goal.goal_gradient(S, "con", "sig", margin=0.2), S_bd.grad)

# %% [markdown]
# **3.** Section 4 found that $(T^{cir}, P^{lin})$ has zero curl. Find its loss: check that
# $l = \frac{1}{2\tau}\log\left(1 + e^{\tau[(s_{pos}-1)^2 + s_{neg}^2 - 1]}\right)$ has the gradient
# $(-T^{cir} P^{lin}_+,\; T^{cir} P^{lin}_-)$ for $s_{pos} < 1$, $s_{neg} > 0$.

# %% [markdown] jupyter={"source_hidden": true} tags=["solution"]
# **Solution 3, the derivation.** Write $u = \tau[(s_{pos} - 1)^2 + s_{neg}^2 - 1]$, so $l = \frac{1}{2\tau}\log(1 + e^u)$
# and $\frac{dl}{du} = \frac{1}{2\tau}\sigma(u)$. Since $(s_{pos} - 1)^2 + s_{neg}^2 - 1 = s_{neg}^2 - s_{pos}(2 - s_{pos})$,
# $\sigma(u) = T^{cir}$ (eq. 8). The chain rule gives
#
# $$ \frac{\partial l}{\partial s_{pos}} = \frac{1}{2\tau}\, T^{cir}\, \tau \cdot 2(s_{pos} - 1) = -T^{cir}(1 - s_{pos}),
# \qquad \frac{\partial l}{\partial s_{neg}} = \frac{1}{2\tau}\, T^{cir}\, \tau \cdot 2 s_{neg} = T^{cir} s_{neg}, $$
#
# which are $-T^{cir} P^{lin}_+$ and $T^{cir} P^{lin}_-$ with the linear pair weights $P^{lin}_+ = 1 - s_{pos}$
# (positive for $s_{pos} < 1$) and $P^{lin}_- = s_{neg}$ (positive for $s_{neg} > 0$). This $l$ is the Circle loss
# of a single pair (Sun et al. 2020) with margin 0 and scale $\tau$. The check compares autograd with the library's
# weights at three triplets.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 3.
tau = 10.0
sp = torch.tensor([0.3, 0.7, 0.9], dtype=torch.float64, requires_grad=True)
sn = torch.tensor([0.2, 0.5, 0.1], dtype=torch.float64, requires_grad=True)
(F.softplus(tau * ((sp - 1) ** 2 + sn**2 - 1)) / (2 * tau)).sum().backward()
T = goal.triplet_weight("cir", sp.detach(), sn.detach(), tau=tau)
torch.testing.assert_close(sp.grad, -T * goal.pair_weight("lin", sp.detach(), True))
torch.testing.assert_close(sn.grad, T * goal.pair_weight("lin", sn.detach(), False))

# %% [markdown]
# **4.** $T^{con}$ has zero curl away from its hinge, yet only $(T^{con}, P^{con})$ is integrable everywhere.
# Integrate the designed field of $(T^{con}, P^{con})$ and of $(T^{con}, P^{lin})$ around the rectangle
# $[0.2, 0.8] \times [0.1, 0.7]$ (which the hinge $S_{neg} = S_{pos} - 0.2$ crosses). What do you get, and why?

# %% [markdown] jupyter={"source_hidden": true} tags=["solution"]
# **Solution 4, the derivation.** A field with a potential $\phi$ has zero integral around every closed loop:
# along a path from $a$ to $b$ it integrates to $\phi(b) - \phi(a)$. $T^{con}$ splits the plane at the hinge
# $s_{neg} = s_{pos} - m$ ($m = 0.2$) into an active side, where the field is the pair weights', and an inactive
# side, where it is 0 (potential: a constant). On the active side
#
# - $(T^{con}, P^{con})$ is $(-1, 1) = \nabla \phi$ with $\phi = s_{neg} - s_{pos}$;
# - $(T^{con}, P^{lin})$ is $(-(1 - s_{pos}), s_{neg}) = \nabla \phi$ with $\phi = \frac12(1 - s_{pos})^2 + \frac12 s_{neg}^2$.
#
# Going around the rectangle counter-clockwise from $(0.2, 0.1)$, the loop leaves the active side at
# $A = (0.3, 0.1)$, crosses the inactive corner (integral 0) and re-enters it at $B = (0.8, 0.6)$; the active part
# runs from $B$ back to $A$, so
#
# $$ \oint = \phi(A) - \phi(B). $$
#
# For $P^{con}$, $\phi = s_{neg} - s_{pos} = -m$ at both points, so $\oint = 0$: $\phi$ is constant along the hinge,
# the two sides glue into one potential, and $(T^{con}, P^{con})$ is integrable everywhere (the triplet loss).
# For $P^{lin}$, $\phi(A) = \frac12 \cdot 0.7^2 + \frac12 \cdot 0.1^2 = 0.25$ and $\phi(B) = \frac12 \cdot 0.2^2 + \frac12 \cdot 0.6^2 = 0.2$:
# $\oint = 0.05 \ne 0$, so no loss has this gradient, although its curl is zero on each side. The check integrates
# the designed field numerically (`designed_field` is defined in section 4).


# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 4.
def loop_integral(triplet, pair, a=0.2, b=0.8, c=0.1, d=0.7, n=20001):
    t = torch.linspace(0, 1, n, dtype=torch.float64)
    mid = (t[1:] + t[:-1]) / 2
    total = 0.0
    for (x0, y0), (x1, y1) in [
        ((a, c), (b, c)),
        ((b, c), (b, d)),
        ((b, d), (a, d)),
        ((a, d), (a, c)),
    ]:
        sp, sn = x0 + (x1 - x0) * mid, y0 + (y1 - y0) * mid
        g_pos, g_neg = designed_field(triplet, pair, sp, sn)
        total += float(((g_pos * (x1 - x0) + g_neg * (y1 - y0)) / (n - 1)).sum())
    return total


around = {pair: loop_integral("con", pair) for pair in ("con", "lin")}
print(around)  # ~0 and 0.05
# phi(A) - phi(B) = 0 and 0.05
assert abs(around["con"]) < 1e-3 and abs(around["lin"] - 0.05) < 1e-3

# %% [markdown]
# **5.** In the composer, choose $(T^{con}, P^{con})$. Which margin makes *every* one of the $2N$ triplets of
# the batch receive gradient? Predict it from `goal.batch_triplets(S)`, then check with the slider.

# %% [markdown] jupyter={"source_hidden": true} tags=["solution"]
# **Solution 5, the answer.** A triplet receives gradient under $(T^{con}, P^{con})$ when its hinge is active,
# $m + s_{neg} - s_{pos} > 0$. All $2N$ of them are active exactly when $m > \max(s_{pos} - s_{neg})$, the
# largest gap over the batch's triplets (`goal.batch_triplets(S)` lists each query's positive and hardest
# negative). Just above it, every positive is pulled by both of its triplets: $-2$ on the whole diagonal.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 5.
s_pos_b, s_neg_b = goal.batch_triplets(S)
m_all = float((s_pos_b - s_neg_b).max())
print(f"m > {m_all:.3f}")
grad = goal.goal_gradient(S, "con", "con", margin=m_all + 1e-6)
assert (grad.diagonal() == -2).all()  # each positive pulled by both of its triplets

# %% [markdown]
# **6.** **Graded (5 points): implement the circle triplet weight.** Fill in `cir_weight(s_pos, s_neg, tau)` in the
# next cell: Xuan & Chen's $T^{cir} = 1/(1 + e^{\tau(s_{pos}(2 - s_{pos}) - s_{neg}^2)})$ (eq. 8), elementwise over
# tensors of the same shape, without calling `goal.triplet_weight` and without overflowing in float32 at $\tau = 30$.
# The cell after it checks it on 10 hidden sets of triplets and prints your score (0 while the stub raises).


# %% tags=["answer"]
def cir_weight(s_pos: torch.Tensor, s_neg: torch.Tensor, tau: float) -> torch.Tensor:
    """T^cir of each triplet (Xuan & Chen eq. 8), elementwise."""
    raise NotImplementedError("implement T^cir here")


# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 6.
def cir_weight(s_pos: torch.Tensor, s_neg: torch.Tensor, tau: float) -> torch.Tensor:
    """T^cir of each triplet (Xuan & Chen eq. 8), elementwise."""
    # 1 / (1 + e^{a}) = sigmoid(-a): torch.sigmoid never overflows
    return torch.sigmoid(tau * (s_neg**2 - s_pos * (2 - s_pos)))


assert grading.grade("07_cir_weight", cir_weight).full_marks

# %%
score = grading.check("07_cir_weight", cir_weight)

# %% [markdown]
# ## References
#
# - Faghri, Fleet, Kiros, Fidler. *VSE++: Improving Visual-Semantic Embeddings with Hard Negatives.* BMVC 2018. [arXiv:1707.05612](https://arxiv.org/abs/1707.05612)
# - Wang, Han, Huang, Dong, Scott. *Multi-Similarity Loss with General Pair Weighting for Deep Metric Learning.* CVPR 2019. [arXiv:1904.06627](https://arxiv.org/abs/1904.06627)
# - Veit, Wilber. *Improving Calibration in Deep Metric Learning With Cross-Example Softmax.* 2020. [arXiv:2011.08824](https://arxiv.org/abs/2011.08824)
# - Bleeker, de Rijke. *Do Lessons from Metric Learning Generalize to Image-Caption Retrieval?* ECIR 2022. [arXiv:2202.07474](https://arxiv.org/abs/2202.07474)
# - Li, Guo, Wang, Feng, Hwang, Du. *Unified Loss of Pair Similarity Optimization for Vision-Language Retrieval.* 2022. [arXiv:2209.13869](https://arxiv.org/abs/2209.13869)
# - Xuan, Chen. *Dissecting Deep Metric Learning Losses for Image-Text Retrieval* (GOAL). 2022. [arXiv:2210.13188](https://arxiv.org/abs/2210.13188)
