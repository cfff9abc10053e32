# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · Triplet losses: every negative, or only the hardest?
#
# **Learning goals.** After this notebook you can
#
# - write the triplet loss over all negatives, *Triplet* (Bleeker & de Rijke eqs. 3a–3b), and the
#   hardest-negative loss of VSE++, *Triplet-SH* (Bleeker & de Rijke eqs. 1–2; Li et al. call it
#   Triplet-HN, eqs. 1–2, and VSE++ the max of hinges) as functions of the similarity matrix $S$;
# - derive their gradients $\partial L / \partial S$ by hand, check them against autograd, and carry
#   them to the embeddings (Xuan & Chen eqs. 3–4; Bleeker & de Rijke eqs. 9a–9b);
# - say which entries of $S$ receive gradient under each loss, and how the margin $m$ changes that;
# - follow Li et al.'s hypersphere argument (eqs. 8–12) for why Triplet-SH's gradient vanishes
#   when the positive and the hardest negative both sit close to the anchor.

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

from vlr_lib import analysis, grading, losses, similarity, widgets
from vlr_lib.demo import demo_embeddings
from vlr_lib.notebook import setup

cfg = setup(seed=0)

# %% [markdown]
# ## Two triplet losses on $S$
#
# A batch of $N$ images and their $N$ captions gives a square $S$ with the positives $s_{ii}$ on the
# diagonal. A *triplet* is an anchor, its positive and one negative: image $i$ with caption $i$ and
# caption $j \ne i$ (an image query, row $i$), or caption $i$ with image $i$ and image $j$ (a caption
# query, column $i$). The hinge $[m - s_{ii} + s_{ij}]_+$ is positive while the negative is not at least
# $m$ below the positive: the triplet *violates the margin*.
#
# **Triplet, all negatives** (Bleeker & de Rijke eqs. 3a–3b; one term per query, both directions):
#
# $$ L_{\text{all}} = \sum_{i}\sum_{j \ne i} \Big( [m - s_{ii} + s_{ij}]_+ + [m - s_{ii} + s_{ji}]_+ \Big). $$
#
# **Triplet-SH**, the max-violation loss of VSE++ (Li et al. eqs. 1–2): only each query's hardest
# negative, $\hat T_i = \arg\max_{j \ne i} s_{ij}$ for image $i$ and $\hat V_i = \arg\max_{j\ne i} s_{ji}$ for caption $i$:
#
# $$ L_{\text{SH}} = \sum_{i} \Big( [m + \max_{j \ne i} s_{ij} - s_{ii}]_+ + [m + \max_{j \ne i} s_{ji} - s_{ii}]_+ \Big). $$
#
# A live batch: `demo_embeddings` makes caption $i$ a noisy copy of image $i$ (the noise sets how
# hard the batch is). The loops below are the formulas, term by term.

# %%
n, margin = 8, 0.2
img, txt = demo_embeddings(n=n, dim=16, noise=2.0, seed=cfg.seed)
S = similarity.similarity(img, txt)
S_np = S.numpy()


def hinge(x: float) -> float:
    return max(x, 0.0)


L_all = sum(
    hinge(margin - S_np[i, i] + S_np[i, j]) + hinge(margin - S_np[i, i] + S_np[j, i])
    for i in range(n)
    for j in range(n)
    if j != i
)
L_hn = sum(
    hinge(margin + max(S_np[i, j] for j in range(n) if j != i) - S_np[i, i])
    + hinge(margin + max(S_np[j, i] for j in range(n) if j != i) - S_np[i, i])
    for i in range(n)
)
print(f"L_all = {L_all:.4f} (library {losses.triplet_all(S, margin).item():.4f})")
print(f"L_SH  = {L_hn:.4f} (library {losses.triplet_hardest(S, margin).item():.4f})")
assert math.isclose(losses.triplet_all(S, margin).item(), L_all, rel_tol=1e-12)
assert math.isclose(losses.triplet_hardest(S, margin).item(), L_hn, rel_tol=1e-12)

# %% [markdown]
# **A soft margin.** Hermans, Beyer & Leibe (2017, sec. 2) replace the hinge by the
# softplus $\log(1 + e^{x})$ and drop the margin:
# $L_{\text{soft}} = \sum_i \big(\log(1 + e^{\max_{j \ne i} s_{ij} - s_{ii}})
# + \log(1 + e^{\max_{j \ne i} s_{ji} - s_{ii}})\big)$. Its slope
# $\sigma(s_{neg} - s_{pos})$ is never exactly 0: a triplet far inside the margin still
# gets a little gradient, where the hinge gives it none.

# %%
L_soft = sum(
    math.log1p(math.exp(max(S_np[i, j] for j in range(n) if j != i) - S_np[i, i]))
    + math.log1p(math.exp(max(S_np[j, i] for j in range(n) if j != i) - S_np[i, i]))
    for i in range(n)
)
assert math.isclose(losses.triplet_soft(S).item(), L_soft, rel_tol=1e-12)
easy = similarity.similarity(*demo_embeddings(n=n, dim=16, noise=0.3, seed=cfg.seed))
grads = [
    analysis.loss_gradient(easy, f)
    for f in (losses.triplet_soft, losses.triplet_hardest)
]
print(
    f"L_soft = {L_soft:.4f}; on an easy batch the soft margin moves "
    f"{int((grads[0] != 0).sum())} entries, Triplet-SH {int((grads[1] != 0).sum())}"
)
assert (grads[0] != 0).sum() > (grads[1] != 0).sum()

# %% [markdown]
# Each Triplet-SH term is one of the terms that $L_{\text{all}}$ adds up (the one with the largest
# negative), so $L_{\text{SH}} \le L_{\text{all}}$, and both are zero exactly when no triplet violates the margin.

# %%
assert L_hn <= L_all
# an easy batch as well
easy_img, easy_txt = demo_embeddings(n=n, dim=16, noise=0.3, seed=cfg.seed)
for batch in (S, similarity.similarity(easy_img, easy_txt)):
    for m in (0.0, 0.2, 1.0):
        hn, every = (
            losses.triplet_hardest(batch, m).item(),
            losses.triplet_all(batch, m).item(),
        )
        assert hn <= every and (hn == 0.0) == (every == 0.0)

# %% [markdown]
# ## The gradient with respect to $S$, by hand
#
# A hinge $[m - s^+ + s^-]_+$ has derivative $+1$ with respect to $s^-$ and $-1$ with respect to $s^+$
# while it is active, and $0$ otherwise: the constant *triplet weight* $T^{con} = \delta(m + s^- - s^+)$
# of Xuan & Chen (eq. 5; $\delta$ the Heaviside step). Adding up the hinges that contain an entry:
#
# - **all negatives.** An off-diagonal $s_{ij}$ appears in image $i$'s term and in caption $j$'s term:
#   $\ \partial L_{\text{all}}/\partial s_{ij} = \mathbb{1}[m - s_{ii} + s_{ij} > 0] + \mathbb{1}[m - s_{jj} + s_{ij} > 0]$,
#   and the diagonal collects minus every violation of row $i$ and of column $i$;
# - **hardest negative.** Only $s_{i\hat T_i}$ and $s_{\hat V_j j}$ can receive gradient, $+1$ each when their hinge is
#   active; the diagonal gets $-1$ per active hinge of its row and of its column.
#
# We write both with numpy, splitting row (image-query) and column (caption-query) terms, and check
# them against autograd on the library's losses (`analysis.loss_gradient`, the one helper every
# notebook and figure uses for $\partial L/\partial S$).


# %%
def grad_all(S: np.ndarray, m: float) -> tuple[np.ndarray, np.ndarray]:
    """dL_all/dS as (row-query part, column-query part)."""
    off = ~np.eye(len(S), dtype=bool)
    d = np.diag(S)
    viol_row = (m - d[:, None] + S > 0) & off  # image i, negative caption j
    viol_col = (m - d[None, :] + S > 0) & off  # caption j, negative image i
    G_row = viol_row.astype(float) - np.diag(viol_row.sum(axis=1))
    G_col = viol_col.astype(float) - np.diag(viol_col.sum(axis=0))
    return G_row, G_col


def grad_hardest(S: np.ndarray, m: float) -> tuple[np.ndarray, np.ndarray]:
    """dL_SH/dS as (row-query part, column-query part)."""
    N, rows = len(S), np.arange(len(S))
    masked = np.where(np.eye(N, dtype=bool), -np.inf, S)
    # T^_i and V^_j (Li et al. eq. 2)
    h_row, h_col = (
        masked.argmax(axis=1),
        masked.argmax(axis=0),
    )
    a = (m + S[rows, h_row] - np.diag(S) > 0).astype(float)  # active image-query hinges
    # active caption-query hinges
    b = (m + S[h_col, rows] - np.diag(S) > 0).astype(float)
    G_row, G_col = np.zeros_like(S), np.zeros_like(S)
    G_row[rows, h_row], G_col[h_col, rows] = a, b
    return G_row - np.diag(a), G_col - np.diag(b)


G_all = sum(grad_all(S_np, margin))
G_hn = sum(grad_hardest(S_np, margin))
np.testing.assert_allclose(
    G_all, analysis.loss_gradient(S, lambda X: losses.triplet_all(X, margin)).numpy()
)
np.testing.assert_allclose(
    G_hn, analysis.loss_gradient(S, lambda X: losses.triplet_hardest(X, margin)).numpy()
)
print(
    "entries of S with gradient: all negatives",
    int((G_all != 0).sum()),
    "| hardest",
    int((G_hn != 0).sum()),
)

# %% [markdown]
# What the derivation says, checked:
#
# 1. every active triplet pushes one negative down exactly as hard as it pulls its positive up, so
#    the entries of $\partial L/\partial S$ sum to zero;
# 2. under Triplet-SH, only the diagonal and the hardest negatives (at most one per row and one per
#    column, so at most $3N$ entries in all) receive gradient, each off-diagonal with weight 1 or 2
#    whatever the size of the violation;
# 3. every entry that Triplet-SH moves is also moved by the all-negatives loss (a violating hardest
#    negative is a violating negative).

# %%
assert abs(G_all.sum()) < 1e-12 and abs(G_hn.sum()) < 1e-12  # 1.
masked = np.where(np.eye(n, dtype=bool), -np.inf, S_np)
hardest = np.zeros((n, n), dtype=bool)
hardest[np.arange(n), masked.argmax(axis=1)] = True
hardest[masked.argmax(axis=0), np.arange(n)] = True
off_support = (G_hn != 0) & ~np.eye(n, dtype=bool)
assert not (off_support & ~hardest).any() and (G_hn != 0).sum() <= 3 * n  # 2.
assert set(np.unique(G_hn[off_support])) <= {1.0, 2.0}
assert not ((G_hn != 0) & (G_all == 0)).any()  # 3.
# the library's one hardest-negative finder picks the same entries
# (similarity.hardest_negatives, and its mask per direction)
S_t = torch.from_numpy(S_np)
neg = ~torch.eye(n, dtype=torch.bool)
assert np.array_equal(
    similarity.hardest_negatives(S_t, neg).indices, masked.argmax(axis=1)
)
lib_hardest = similarity.hardest_negative_mask(S_t) | similarity.hardest_negative_mask(
    S_t, None, "t2i"
)
assert np.array_equal(lib_hardest.numpy(), hardest)

# %% [markdown]
# ## From $S$ to the embeddings
#
# With unit embeddings $\mathbf{x}_i$ (images) and $\mathbf{y}_j$ (captions), $s_{ij} = \mathbf{x}_i^\top \mathbf{y}_j$, so the chain rule
# gives Xuan & Chen's eq. 3: $\ \partial L/\partial \mathbf{x}_i = \sum_j \frac{\partial L}{\partial s_{ij}}\, \mathbf{y}_j$ and
# $\partial L/\partial \mathbf{y}_j = \sum_i \frac{\partial L}{\partial s_{ij}}\, \mathbf{x}_i$, in matrix form $G Y$ and $G^\top X$.
# For one image query of Triplet-SH with hardest negative $\mathbf{y}'$ this is their eq. 4,
# $\ \delta(m + s_{x,y'} - s_{x,y})(\mathbf{y}' - \mathbf{y})$ from the image's own term.

# %%
X = img.detach().clone().requires_grad_()
Y = txt.detach().clone().requires_grad_()
# S = X Y^T with the unit embeddings as leaves
losses.triplet_hardest(X @ Y.T, margin).backward()
np.testing.assert_allclose(X.grad.numpy(), G_hn @ txt.numpy(), atol=1e-12)
np.testing.assert_allclose(Y.grad.numpy(), G_hn.T @ img.numpy(), atol=1e-12)

# %% [markdown]
# Bleeker & de Rijke write the gradient of one query's own term the same way (eqs. 9a–9b):
# for Triplet-SH $\ \mathbf{v}^+ - \mathbf{v}^-$ if $s^+ - s^- < \alpha$, for the all-negatives Triplet
# $\sum_{\mathbf{v}^-} \mathbb{1}\{s^+ - s^- < \alpha\}(\mathbf{v}^+ - \mathbf{v}^-)$. Read as a *descent direction* (minus the
# derivative; the derivative itself is $\mathbf{v}^- - \mathbf{v}^+$). Their count of the violating negatives of a query is
# COCOS, $C^q$ (notebook 08): it is the number of nonzero off-diagonal entries in the row part of
# our $\partial L/\partial S$, which we check against `analysis.cocos`.

# %%
G_row_all, G_col_all = grad_all(S_np, margin)
Y_np = txt.numpy()
for i in range(n):  # eq. 9b, term by term: sum over violating negatives of (v- - v+)
    eq9b = sum(
        Y_np[j] - Y_np[i]
        for j in range(n)
        if j != i and S_np[i, i] - S_np[i, j] < margin
    )
    np.testing.assert_allclose(
        G_row_all[i] @ Y_np,
        eq9b if np.ndim(eq9b) else np.zeros(Y_np.shape[1]),
        atol=1e-12,
    )

off = ~np.eye(n, dtype=bool)
cocos_all = analysis.cocos(S, "triplet", margin=margin)
cocos_sh = analysis.cocos(S, "triplet_sh", margin=margin)
assert cocos_all["i2t"]["C_q"].tolist() == ((G_row_all != 0) & off).sum(axis=1).tolist()
assert cocos_all["t2i"]["C_q"].tolist() == ((G_col_all != 0) & off).sum(axis=0).tolist()
G_row_hn, G_col_hn = grad_hardest(S_np, margin)
assert cocos_sh["i2t"]["C_q"].tolist() == (-np.diag(G_row_hn)).astype(int).tolist()
print("violating negatives per image query (C^q):", cocos_all["i2t"]["C_q"].tolist())

# %% [markdown]
# ## Explorer: which entries of $S$ receive gradient?
#
# Left, $\partial L_{\text{all}}/\partial S$; right, $\partial L_{\text{SH}}/\partial S$, on the same batch. Red entries are pushed
# down by a gradient step, blue ones pulled up. Squares are the positives, triangles ▶ each image's
# hardest negative caption, triangles ▼ each caption's hardest negative image.
#
# Try: set $m = 0$ on an easy batch (low noise) — do both losses go silent? Raise $m$: the
# all-negatives loss lights up row after row, Triplet-SH never more than the marked cells. At
# high noise, the diagonal of the left panel saturates: every violating negative adds to it.

# %%
widgets.triplet.gradient_explorer(n=8, dim=16, noise=2.0, seed=cfg.seed, margin=margin)

# %% [markdown]
# The margin's effect, checked on the batch above: the set of entries with gradient grows with $m$
# for both losses; with $m > 2$ every hinge is active (since $s_{ij} - s_{ii} \ge -2$), so every entry of $S$
# gets gradient from $L_{\text{all}}$, while Triplet-SH still touches at most $3N$.

# %%
counts = {
    m: (
        int((sum(grad_all(S_np, m)) != 0).sum()),
        int((sum(grad_hardest(S_np, m)) != 0).sum()),
    )
    for m in (0.0, 0.1, 0.2, 0.5, 1.0, 2.1)
}
print("margin: (entries with gradient, all negatives / hardest)", counts)
ms = sorted(counts)
assert all(counts[a][k] <= counts[b][k] for a, b in zip(ms, ms[1:]) for k in (0, 1))
assert counts[2.1][0] == n * n and counts[2.1][1] <= 3 * n

# %% [markdown]
# ## Li et al.: why Triplet-SH's gradient can vanish (eqs. 8–12)
#
# Take the image-query term for anchor $\mathbf{v}$ with positive $\mathbf{t}$ and hardest negative $\hat{\mathbf{t}}$
# (Li et al. eq. 8): $\ L = \max(\mathbf{v}^\top\hat{\mathbf{t}} - \mathbf{v}^\top\mathbf{t} + m, 0)$. While active, its gradients are
# (eqs. 9–10)
#
# $$ \frac{\partial L}{\partial \mathbf{v}} = \hat{\mathbf{t}} - \mathbf{t}, \qquad \frac{\partial L}{\partial \hat{\mathbf{t}}} = \mathbf{v}, \qquad \frac{\partial L}{\partial \mathbf{t}} = -\mathbf{v}. $$
#
# The embeddings live on the unit sphere. A gradient $\mathbf{g}$ at a point $\mathbf{x}$ splits into a *radial* part
# $(\mathbf{g}^\top\mathbf{x})\,\mathbf{x}$, which only changes the length and is undone by normalisation, and a *tangent*
# part $\mathbf{g} - (\mathbf{g}^\top\mathbf{x})\,\mathbf{x}$, the only part that moves $\mathbf{x}$ on the sphere. Its norm is
# $\|\mathbf{g}\| \sin\theta(\mathbf{x}, \mathbf{g})$ (eqs. 11–12):
#
# $$ \|g(\mathbf{v})\| = \|\hat{\mathbf{t}} - \mathbf{t}\| \sin\theta(\mathbf{v}, \hat{\mathbf{t}} - \mathbf{t}), \qquad \|g(\hat{\mathbf{t}})\| = \sin\theta(\mathbf{v}, \hat{\mathbf{t}}). $$
#
# Put the anchor at the north pole, $\mathbf{v} = \mathbf{e}_z$; the positive at polar angle $\theta^+$, the negative at
# $\theta^-$, their azimuths $\varphi$ apart ($\varphi = 0$: same side of $\mathbf{v}$, $\varphi = \pi$: opposite sides, the
# picture of Li et al. Fig. 2). Projecting $\hat{\mathbf{t}} - \mathbf{t}$ onto the tangent plane at $\mathbf{v}$ (drop the $z$
# component) gives a closed form:
#
# $$ \|g(\mathbf{v})\|^2 = \sin^2\theta^- + \sin^2\theta^+ - 2\sin\theta^+\sin\theta^-\cos\varphi, \qquad \|g(\hat{\mathbf{t}})\| = \sin\theta^-. $$
#
# We compute the projection with numpy on a grid of angles and compare with the library's
# closed form `analysis.triplet_hn_tangent_norm` and with our formula.


# %%
def points(
    theta_pos: float, theta_neg: float, phi: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    v = np.array([0.0, 0.0, 1.0])
    t = np.array([math.sin(theta_pos), 0.0, math.cos(theta_pos)])
    t_hat = np.array(
        [
            math.sin(theta_neg) * math.cos(phi),
            math.sin(theta_neg) * math.sin(phi),
            math.cos(theta_neg),
        ]
    )
    return v, t, t_hat


def tangent(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    return g - (g @ x) * x  # drop the radial part


def derived_norms(
    theta_pos: float, theta_neg: float, phi: float, m: float
) -> tuple[float, float]:
    v, t, t_hat = points(theta_pos, theta_neg, phi)
    active = float(v @ t_hat - v @ t + m > 0)  # eq. 8's hinge
    # eq. 12, from eq. 10
    return (
        np.linalg.norm(tangent(active * (t_hat - t), v)),  # eq. 11, from eq. 9
        np.linalg.norm(tangent(active * v, t_hat)),
    )


angles = np.radians([0.0, 5.0, 20.0, 45.0, 90.0, 135.0, 180.0])
for tp in angles:
    for tn in angles:
        for phi in (0.0, math.pi / 3, math.pi):
            anchor, negative = derived_norms(tp, tn, phi, margin)
            lib = analysis.triplet_hn_tangent_norm(
                float(tp), float(tn), phi, margin=margin
            )
            assert math.isclose(anchor, float(lib.anchor), abs_tol=1e-12)
            assert math.isclose(negative, float(lib.negative), abs_tol=1e-12)
            if anchor > 0:  # active: the closed form of the projection
                closed = math.sqrt(
                    max(
                        0.0,
                        math.sin(tn) ** 2
                        + math.sin(tp) ** 2
                        - 2 * math.sin(tp) * math.sin(tn) * math.cos(phi),
                    )
                )
                assert math.isclose(anchor, closed, abs_tol=1e-9)
                assert math.isclose(negative, abs(math.sin(tn)), abs_tol=1e-12)
print(
    "numpy projection = library closed form on", len(angles) ** 2 * 3, "angle triples"
)
# the explorer below draws analysis.triplet_hn_descent: its steps are minus the
# tangent parts of eqs. 9-10, so their lengths are the norms above
for tp in angles:
    for tn in angles:
        sphere = analysis.triplet_hn_descent(float(tp), float(tn), math.pi / 3, margin)
        anchor, negative = derived_norms(tp, tn, math.pi / 3, margin)
        assert math.isclose(float(sphere.anchor_step.norm()), anchor, abs_tol=1e-9)
        assert math.isclose(float(sphere.negative_step.norm()), negative, abs_tol=1e-9)

# %% [markdown]
# The same split, on a whole batch: `analysis.tangent_gradient_norms` differentiates a loss with respect
# to the unit embeddings and keeps the tangent part. By hand: $\partial L/\partial X = G Y$ (above), then
# remove each row's radial component.

# %%
r = analysis.tangent_gradient_norms(
    img, txt, lambda S: losses.triplet_hardest(S, margin)
)
g_img = G_hn @ txt.numpy()
by_hand = np.linalg.norm(
    g_img - (g_img * img.numpy()).sum(axis=1, keepdims=True) * img.numpy(), axis=1
)
np.testing.assert_allclose(r.img.numpy(), by_hand, atol=1e-12)
print("tangent gradient norm per image:", r.img.numpy().round(3))

# %% [markdown]
# Now Li et al.'s point. Early in training, everything looks alike: the hardest negative is very
# similar to the anchor ($\theta^- \to 0$, so $\sin\theta^- \to 0$) and to the positive ($\hat{\mathbf{t}} \to \mathbf{t}$, so
# $\|\hat{\mathbf{t}} - \mathbf{t}\| \to 0$). The hinge is then fully active — the loss is about $m$, as large as it
# gets for such a triplet — but the tangent gradients that could fix it are nearly zero.

# %%
for deg_pos, deg_neg, phi in ((3.0, 2.0, math.pi), (3.0, 2.0, 0.0), (60.0, 60.0, 0.0)):
    tp, tn = math.radians(deg_pos), math.radians(deg_neg)
    loss = max(0.0, math.cos(tn) - math.cos(tp) + margin)
    norms = analysis.triplet_hn_tangent_norm(tp, tn, phi, margin=margin)
    print(
        f"theta+ {deg_pos:4.0f}, theta- {deg_neg:4.0f}, phi {math.degrees(phi):3.0f}: "
        f"loss {loss:.3f}, "
        f"|g(v)| {float(norms.anchor):.3f}, |g(t^)| {float(norms.negative):.3f}"
    )
    assert loss >= margin - 1e-12  # active, and at least m
    # both close to the anchor: every tangent norm is at most sin(theta+) + sin(theta-)
    if deg_pos < 5:
        assert float(norms.anchor) <= math.sin(tp) + math.sin(tn) + 1e-12 < 0.11
        assert float(norms.negative) < 0.04
    # negative = positive: the anchor gets nothing, though the negative still does
    else:
        assert float(norms.anchor) < 1e-12 and float(norms.negative) > 0.8

# %% [markdown]
# ## Explorer: the tangent gradient over the angles
#
# The anchor sits at the top of the circle. Move the angles of the positive ($\theta^+$) and of the hardest
# negative ($\theta^-$), on the same or opposite sides. Left: the three points and the tangent parts of the
# descent direction (cyan arrows, length = norm). Middle and right: the anchor's and the negative's
# tangent norms for every pair of angles; the cross is where you are, and above the dashed line the
# hinge is inactive (the loss and every gradient are 0).
#
# Try: start at $\theta^+ = \theta^- = 5°$ — a hard, confusing triplet with tiny arrows. Then open
# $\theta^-$ towards $90°$: the negative's push grows like $\sin\theta^-$. With "same side" and
# $\theta^- = \theta^+$, the anchor's arrow disappears at any angle.

# %%
widgets.triplet.tangent_explorer(
    theta_pos_deg=5.0, theta_neg_deg=5.0, side="opposite", margin=margin
)

# %% [markdown]
# ## Summary
#
# - $L_{\text{all}}$ sums a hinge for every negative of every query; Triplet-SH keeps only each query's hardest
#   negative, so $L_{\text{SH}} \le L_{\text{all}}$.
# - Both give every active triplet the same weight ($T^{con}$, Xuan & Chen eq. 5): $+1$ on its negative, $-1$ on its
#   positive. Under Triplet-SH at most $3N$ entries of $S$ move; under $L_{\text{all}}$ up to all $N^2$, which is how
#   many easy negatives can swamp the informative ones (Bleeker & de Rijke sec. 5).
# - The gradient reaches the embeddings as $GY$ and $G^\top X$ (Xuan & Chen eq. 3).
# - On the sphere only the tangent part of a gradient acts. For Triplet-SH it is $\|\hat{\mathbf{t}} - \mathbf{t}\|\sin\theta$ at the
#   anchor and $\sin\theta(\mathbf{v}, \hat{\mathbf{t}})$ at the negative (Li et al. eqs. 11–12): it vanishes when the
#   positive and the hardest negative crowd the anchor, exactly when the loss is large. Notebook 04's
#   unified loss keeps many negatives in play to avoid this.
#
# ## Exercises
#
# 1. For a batch of $N$ pairs, what is the largest number of nonzero entries of $\partial L_{\text{SH}}/\partial S$?
#    When is it reached, and when can it be smaller even though every hinge is active?
# 2. Show that the gradient of Triplet-SH does not depend on *how much* a triplet violates the margin.
#    What would a loss whose gradient grows with the violation look like?
# 3. In Li et al.'s geometry, at which angle $\theta^-$ does the hardest negative receive the largest tangent push?
#    What does that say about negatives that are almost identical to the anchor?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 1.
# 3N: N diagonal entries plus one hardest negative per row and one per column, all
# distinct. It is smaller when a row's and a column's hardest negative are the same
# entry (s_ij hardest for image i *and* caption j; it then gets weight 2), as in the
# batch above.
G = sum(grad_hardest(S_np, 5.0))  # m = 5: every hinge active
nonzero, shared = int((G != 0).sum()), int((G[~np.eye(n, dtype=bool)] == 2).sum())
print(
    f"{nonzero} nonzero entries of at most {3 * n}; {shared} negative(s) hardest for "
    "both row and column"
)
assert nonzero == 3 * n - shared

# %% [markdown] jupyter={"source_hidden": true} tags=["solution"]
# **Solution 2, the derivation.** Image query $i$'s term of Triplet-SH is $\ell_i = [x_i]_+$ with the
# violation $x_i = m + s_{i\hat T_i} - s_{ii}$, where $\hat T_i$ is its hardest negative. Which negative is
# hardest does not change under a small enough change of $S$ (away from ties), so by the chain rule
#
# $$ \frac{\partial \ell_i}{\partial s_{i\hat T_i}} = \frac{d[x]_+}{dx}\Big|_{x = x_i} = \mathbb{1}[x_i > 0],
# \qquad \frac{\partial \ell_i}{\partial s_{ii}} = -\mathbb{1}[x_i > 0], $$
#
# and 0 for every other entry: $[x]_+ = \max(x, 0)$ has slope 1 wherever $x > 0$ and slope 0 wherever
# $x < 0$. The weight is the step $\mathbb{1}[x_i > 0]$, the same for $x_i = 10^{-6}$ and for $x_i = 1$: the
# size of the violation changes the loss's *value*, never its gradient. The caption queries' terms are the
# same with columns, so every entry of $\partial L_{\text{SH}}/\partial S$ is a sum of at most two
# $\pm 1$'s: 0, 1 or 2 off the diagonal, 0, −1 or −2 on it.
#
# A loss whose gradient grows with the violation: the squared hinge $\tfrac12 [x]_+^2$, whose derivative is
# $[x]_+$ itself; or the softplus $\tfrac1\gamma \log(1 + e^{\gamma x})$ of notebook 04, whose derivative
# $\sigma(\gamma x)$ rises smoothly with $x$ (a different *triplet weight*, in Xuan & Chen's words). The
# check: a much larger violation in row 0 leaves every weight in $\{0, 1, 2\}$.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 2.
S2 = S.clone()
S2[0, 1] = S2[0, 0] + 0.5  # a much larger violation in row 0
G2 = analysis.loss_gradient(S2, lambda X: losses.triplet_hardest(X, margin))
print("distinct |dL/dS| entries:", G2.abs().unique().tolist())
assert set(G2.abs().unique().tolist()) <= {0.0, 1.0, 2.0}, (
    "every weight is 0, 1 or 2, whatever the violation"
)

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 3.
# The tangent push ||g(t)|| = sin(theta-) is largest at theta- = 90° and zero at theta-
# = 0: the closer a negative is to the anchor, the weaker the push that could separate
# them. Near-duplicates of the anchor, the hardest of hard negatives, barely move --
# which is Li et al.'s explanation of Triplet-SH's slow start.
thetas = np.radians(np.arange(0, 181, 15))
push = analysis.triplet_hn_tangent_norm(
    torch.tensor(0.0), torch.tensor(thetas), 0.0, margin=2.0
).negative
print(dict(zip(np.arange(0, 181, 15).tolist(), push.numpy().round(3).tolist())))
assert np.degrees(thetas[int(push.argmax())]) == 90 and float(push[0]) < 1e-12

# %% [markdown]
# 4. **Graded (5 points): implement Triplet-SH.** Fill in `triplet_sh(S, margin)` in the next cell: the
#    loss $L_{\text{SH}}$ above, both directions, summed, for a square $S$ with the positives on its diagonal,
#    written with tensor operations (no loop, and not by calling `losses.triplet_hardest`). The cell after it
#    compares your function with the library on 10 hidden batches and prints your score; while the stub raises
#    `NotImplementedError` it reports 0.


# %% tags=["answer"]
def triplet_sh(S: torch.Tensor, margin: float) -> torch.Tensor:
    """Triplet-SH of the square S: each image's and each caption's hardest negative,
    hinged, summed.
    """
    raise NotImplementedError("implement Triplet-SH here")


# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 4.
def triplet_sh(S: torch.Tensor, margin: float) -> torch.Tensor:
    """Triplet-SH of the square S: each image's and each caption's hardest negative,
    hinged, summed.
    """
    # a positive is no negative
    negatives = S.masked_fill(torch.eye(len(S), dtype=torch.bool), -math.inf)
    positives = S.diagonal()
    # row i: hardest caption
    image_queries = torch.relu(margin + negatives.amax(dim=1) - positives)
    # column i: hardest image
    caption_queries = torch.relu(margin + negatives.amax(dim=0) - positives)
    return image_queries.sum() + caption_queries.sum()


assert grading.grade("02_triplet_sh", triplet_sh).full_marks

# %%
score = grading.check("02_triplet_sh", triplet_sh)

# %% [markdown]
# ## References
#
# - Faghri, Fleet, Kiros, Fidler. *VSE++: Improving Visual-Semantic Embeddings with Hard Negatives.* BMVC 2018. [arXiv:1707.05612](https://arxiv.org/abs/1707.05612)
# - Veit, Wilber. *Improving Calibration in Deep Metric Learning With Cross-Example Softmax.* 2020. [arXiv:2011.08824](https://arxiv.org/abs/2011.08824)
# - Bleeker, de Rijke. *Do Lessons from Metric Learning Generalize to Image-Caption Retrieval?* ECIR 2022. [arXiv:2202.07474](https://arxiv.org/abs/2202.07474)
# - Li, Guo, Wang, Feng, Hwang, Du. *Unified Loss of Pair Similarity Optimization for Vision-Language Retrieval.* 2022. [arXiv:2209.13869](https://arxiv.org/abs/2209.13869)
# - Xuan, Chen. *Dissecting Deep Metric Learning Losses for Image-Text Retrieval* (GOAL). 2022. [arXiv:2210.13188](https://arxiv.org/abs/2210.13188)
