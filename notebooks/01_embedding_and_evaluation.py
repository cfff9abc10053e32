# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · The joint embedding space and how retrieval is evaluated
#
# **Learning goals.** After this notebook you can
#
# - explain why retrieval models compare *unit* vectors by cosine similarity, and why on the
#   unit hypersphere that ranks candidates exactly as Euclidean distance does (Li et al. sec. 3.3);
# - build the similarity matrix $S$ of a batch with several captions per image, and read
#   positives, hardest negatives and ranks off it;
# - compute Recall@K in both directions, rsum and mAP@5 by hand, the protocol of VSE++ used by
#   Bleeker & de Rijke (sec. 3; AP and rank: eqs. 5–6), and check `vlr_lib.metrics` against your loops;
# - say what a random model scores, so that a trained model's numbers mean something.

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

from vlr_lib import metrics, similarity, viz, widgets
from vlr_lib.demo import demo_retrieval_batch
from vlr_lib.notebook import setup
from vlr_lib.metrics import chance_rsum

cfg = setup(seed=0)

# %% [markdown]
# ## Cosine similarity and the unit hypersphere
#
# An image encoder outputs a vector $\mathbf{x}$, a text encoder a vector $\mathbf{y}$. Retrieval models
# compare their directions, not their lengths:
#
# $$ s(\mathbf{x}, \mathbf{y}) = \cos\theta(\mathbf{x}, \mathbf{y}) = \frac{\mathbf{x}^\top \mathbf{y}}{\|\mathbf{x}\|\,\|\mathbf{y}\|}
#    = \mathbf{v}^\top \mathbf{t}, \qquad \mathbf{v} = \frac{\mathbf{x}}{\|\mathbf{x}\|},\ \mathbf{t} = \frac{\mathbf{y}}{\|\mathbf{y}\|}. $$
#
# After $L_2$ normalisation every embedding lies on the unit hypersphere and the similarity is a
# plain dot product in $[-1, 1]$ (Li et al. sec. 3.3; Xuan & Chen sec. 3.1 write $S_{x,y} = \mathbf{x}^\top\mathbf{y}$
# for the normalised features). Three consequences we check below:
#
# 1. scaling an embedding changes nothing: $s(3\mathbf{x}, \mathbf{y}) = s(\mathbf{x}, \mathbf{y})$;
# 2. $s \in [-1, 1]$, with $s = 1$ only for the same direction;
# 3. on the sphere, $\|\mathbf{v} - \mathbf{t}\|^2 = 2 - 2\,\mathbf{v}^\top\mathbf{t}$: ranking by similarity (highest first)
#    is ranking by Euclidean distance (smallest first).

# %%
g = torch.Generator().manual_seed(cfg.seed)
x = torch.randn(6, 16, generator=g, dtype=torch.float64)  # 6 raw image embeddings
y = torch.randn(9, 16, generator=g, dtype=torch.float64)  # 9 raw caption embeddings

by_hand = (x @ y.T) / (x.norm(dim=1, keepdim=True) * y.norm(dim=1)[None, :])
S = similarity.similarity(x, y)
torch.testing.assert_close(S, by_hand)  # the library's S is the cosine matrix
# 1. scale does not matter
torch.testing.assert_close(similarity.similarity(3.0 * x, y), S)
assert S.abs().max() <= 1.0  # 2. ...
torch.testing.assert_close(
    similarity.similarity(x, x).diagonal(), torch.ones(6, dtype=torch.float64)
)

v, t = similarity.l2_normalize(x), similarity.l2_normalize(y)
dist2 = torch.cdist(v, t) ** 2
# 3. distance and similarity carry the same information
torch.testing.assert_close(dist2, 2 - 2 * S)
# ... and the same ranking
assert torch.equal(S.argsort(dim=1, descending=True), dist2.argsort(dim=1))
print("cosine S of 6 images x 9 captions:\n", S.numpy().round(2))

# %% [markdown]
# ## The similarity matrix of a batch
#
# In Flickr30K every image has five captions. A batch of $N$ images and their $5N$ captions gives
# $S \in [-1, 1]^{N \times 5N}$, rows images, columns captions; `caption_to_image[c]` names the image of
# caption $c$, and the *positives* of image $i$ are its five columns.
#
# We need embeddings to look at. Until notebook 09 trains a model, a toy batch stands in:
# `demo_retrieval_batch` draws a random unit vector per image and makes each of its captions a
# noisy copy, $\mathbf{t}_c = \mathrm{norm}(\mathbf{v}_i + \sigma \boldsymbol\epsilon_c)$. The noise $\sigma$ plays the role of
# how good the model is: $\sigma = 0$ is a perfect model.

# %%
n_images, per_image = 10, 5
img, txt, caption_to_image = demo_retrieval_batch(
    n_images, per_image, dim=8, noise=1.5, seed=cfg.seed
)
S = similarity.similarity(img, txt)
# [10, 50]: True where c describes i
pos = similarity.positive_mask(torch.arange(n_images), caption_to_image)
# the metrics read the same positives off caption_to_image (after their input checks)
assert torch.equal(metrics.positive_pairs(S, caption_to_image), pos)
print("S:", tuple(S.shape), "| captions per image:", pos.sum(dim=1).tolist())
assert (pos.sum(dim=1) == per_image).all() and (pos.sum(dim=0) == 1).all()
viz.evaluation.similarity_figure(
    S, caption_to_image, title="S of a toy batch: 10 images x 50 captions"
)

# %% [markdown]
# Blue squares mark the positives (five per row, one per column). The triangle ▶ in each row is the
# image query's **hardest negative**: the best-scoring caption of another image. The triangle ▼ in
# each column is the caption query's hardest negative image. Notebook 02's VSE++ loss looks
# only at those.

# %% [markdown]
# ## Recall@K in both directions
#
# Sort each query's candidates by score, best first. The **rank** of a query is the position of its
# first correct candidate (Bleeker & de Rijke eq. 6 counts the candidates scoring above):
#
# - **image → text** (image query $i$, five correct captions $P_i$):
#   $\ \mathrm{rank}_i = 1 + \#\{c \notin P_i : s_{ic} \ge \max_{c' \in P_i} s_{ic'}\}$, the position of its *best* caption;
# - **text → image** (caption query $c$ of image $i_c$):
#   $\ \mathrm{rank}_c = 1 + \#\{i \ne i_c : s_{ic} \ge s_{i_c c}\}$.
#
# The $\ge$ decides ties: a negative that scores *the same* as the positive is counted above
# it (more on that choice below).
#
# $\mathrm{R@K}$ is the percentage of queries whose rank is at most $K$:
#
# $$ \mathrm{R@K}_{i2t} = \frac{100}{N} \sum_{i} \mathbb{1}[\mathrm{rank}_i \le K], \qquad
#    \mathrm{R@K}_{t2i} = \frac{100}{5N} \sum_{c} \mathbb{1}[\mathrm{rank}_c \le K], $$
#
# and **rsum** adds the six numbers for $K \in \{1, 5, 10\}$ (maximum 600). Here are the ranks by
# plain loops: sort, then walk down the list.

# %%
S_np, c2i = S.numpy(), caption_to_image.numpy()

ranks_i2t = []
for i in range(n_images):
    # captions, best first
    order = sorted(range(S_np.shape[1]), key=lambda c: -S_np[i, c])
    ranks_i2t.append(1 + next(p for p, c in enumerate(order) if c2i[c] == i))

ranks_t2i = []
for c in range(S_np.shape[1]):
    order = sorted(range(n_images), key=lambda i: -S_np[i, c])  # images, best first
    ranks_t2i.append(1 + order.index(c2i[c]))


def recall(ranks: list[int], k: int) -> float:
    return 100.0 * sum(r <= k for r in ranks) / len(ranks)


by_hand = {
    f"{d}_r{k}": recall(r, k)
    for d, r in (("i2t", ranks_i2t), ("t2i", ranks_t2i))
    for k in (1, 5, 10)
}
by_hand["rsum"] = sum(by_hand.values())
print("i2t ranks:", ranks_i2t)
print({k: round(v, 1) for k, v in by_hand.items()})

# %% [markdown]
# The library computes the same numbers without sorting (it counts the negatives at or above the
# positive, which needs far less memory on a 1,000 × 5,000 test set):

# %%
assert metrics.ranks_i2t(S, caption_to_image).tolist() == ranks_i2t
assert metrics.ranks_t2i(S, caption_to_image).tolist() == ranks_t2i
lib = metrics.retrieval_metrics(S, caption_to_image, ks=(1, 5, 10))
assert lib.keys() == by_hand.keys() and all(
    math.isclose(lib[k], by_hand[k]) for k in lib
)
lib

# %% [markdown]
# ## Ties: a tie is not a hit
#
# Random scores never tie, so the sorting above and the library's counting agree. But scores
# *can* tie: a model that has collapsed (zeroed projection heads, or a head that outputs the
# same vector for every input) gives every pair the same score. What is its R@1?
#
# Eq. 6 says "the candidates ranked above", and a tie is neither above nor below. The workbook
# picks the **pessimistic** convention: a negative tied with the positive ranks *before* it,
# $\mathrm{rank} = 1 + \#\{\text{negatives with } s \ge s^+\}$. Why this one:
#
# - retrieval must put the right item in front of the wrong ones, and a tie does not;
# - it never flatters a model: the optimistic reading ("ties favour the positive") would give
#   a collapsed model R@K = 100 and rsum = 600, and training picks the epoch with the best
#   validation rsum, so it would pick exactly the collapsed one;
# - without ties it gives the same numbers as any other convention.
#
# The expected rank under random tie-breaking would also be defensible, but it awards a
# collapsed model the chance level, which hides the collapse. mAP@k uses the same rule
# (tied negatives first). PR-AUC needs no rule: a precision-recall curve moves a threshold
# over the scores, so tied pairs are accepted together, and a constant $S$ scores the base
# rate, the share of matching pairs.

# %%
# a collapsed model: every score equal
flat = torch.zeros(n_images, n_images * per_image)
# K <= 5: with 10 images, R@10 of
collapsed = metrics.retrieval_metrics(flat, caption_to_image, ks=(1, 5))
print(collapsed)  # t2i is 100 for any model (see below)
# 0, never 100
assert collapsed["rsum"] == 0.0 and metrics.map_at_k(flat, caption_to_image) == 0.0
assert metrics.ranks_t2i(flat, caption_to_image).tolist() == [n_images] * (
    n_images * per_image
)
# the base rate: 50 of 500 pairs
assert math.isclose(metrics.pr_auc(flat, caption_to_image), 1 / n_images)

# one tie in the real batch: image 1 now ties caption 0's true image, which costs
# caption 0 one place
S_tie = S.clone()
S_tie[1, 0] = S_tie[0, 0]
before, after = (int(metrics.ranks_t2i(X, caption_to_image)[0]) for X in (S, S_tie))
# + 1 unless image 1 already scored higher
assert after == before + int(S[1, 0] < S[0, 0])

# %% [markdown]
# ## mAP@5: all five captions, not just the best
#
# R@K of an image query only asks for its *best* caption. Bleeker & de Rijke also report
# mean average precision at 5 for i2t, which rewards ranking *all* five captions high
# (AP: their eq. 5). Truncated at $k$:
#
# $$ \mathrm{AP@}k(i) = \frac{1}{\min(k, |P_i|)} \sum_{r=1}^{k} \mathrm{P@}r \cdot \mathrm{rel}(r), \qquad
#    \mathrm{mAP@}k = \frac{1}{N}\sum_i \mathrm{AP@}k(i), $$
#
# where $\mathrm{rel}(r) = 1$ when the caption at position $r$ is one of image $i$'s, and
# $\mathrm{P@}r$ is the fraction of correct captions among the first $r$.

# %%
ap = []
for i in range(n_images):
    order = sorted(range(S_np.shape[1]), key=lambda c: -S_np[i, c])
    hits, total = 0, 0.0
    for r, c in enumerate(order[:5], start=1):
        if c2i[c] == i:
            hits += 1
            total += hits / r  # P@r at each correct position
    ap.append(total / min(5, per_image))
map5_by_hand = float(np.mean(ap))
map5 = metrics.map_at_k(S, caption_to_image, k=5)
print(f"mAP@5 by hand {map5_by_hand:.4f}, library {map5:.4f}")
assert math.isclose(map5, map5_by_hand)

# %% [markdown]
# mAP@5 can never exceed $\mathrm{R@5}_{i2t}/100$: an image whose best caption is outside the top 5
# has AP@5 = 0. And it is 1 only when all five captions fill the top five.

# %%
assert map5 <= lib["i2t_r5"] / 100 + 1e-12

# %% [markdown]
# ## What do the numbers mean? Perfect and random models
#
# A perfect model ($\sigma = 0$: every caption equals its image) puts all positives on top:
# R@1 = 100 in both directions, rsum = 600, mAP@5 = 1. (Its five captions of an image tie with
# each other, which costs nothing: only *negatives* tied with a positive count against it.)

# %%
img0, txt0, c2i0 = demo_retrieval_batch(
    n_images, per_image, dim=8, noise=0.0, seed=cfg.seed
)
S0 = similarity.similarity(img0, txt0)
perfect = metrics.retrieval_metrics(S0, c2i0)
assert perfect["rsum"] == 600.0 and metrics.map_at_k(S0, c2i0) == 1.0
perfect

# %% [markdown]
# A random model ranks candidates in random order. For t2i, the one correct image is equally
# likely at every position among $N$: $\ \mathrm{R@K} = 100\,K/N$. For i2t, the query fails only when
# none of its 5 captions is among the top $K$ of $M = 5N$:
#
# $$ \mathrm{R@K}^{\text{chance}}_{i2t} = 100\left(1 - \binom{M-5}{K} \Big/ \binom{M}{K}\right). $$
#
# Five correct captions, but among five times as many candidates: at chance the two directions
# are about equal, and i2t is never above t2i (the union bound gives at most $5K/M = K/N$).
# With only 10 images, R@10 of t2i is 100 for *any* model, which is why papers evaluate on
# 1,000 test images. We derive the chance rsum, compare it with
# `vlr_lib.metrics.chance_rsum`, and with the average over many random $S$.


# %%
def chance(n_images: int, per_image: int, ks=(1, 5, 10)) -> tuple[float, float]:
    """Chance-level sums of R@K over `ks`: (i2t, t2i), in percent."""
    m = n_images * per_image
    i2t = sum(100 * (1 - math.comb(m - per_image, k) / math.comb(m, k)) for k in ks)
    t2i = sum(100 * k / n_images for k in ks)
    return i2t, t2i


expected = sum(chance(n_images, per_image))
assert math.isclose(expected, chance_rsum(caption_to_image))
for n, k in ((10, 1), (10, 5), (1000, 1), (1000, 10)):
    i2t, t2i = chance(n, 5, ks=(k,))
    assert i2t <= t2i + 1e-9, "at chance, i2t never beats t2i"
n_trials = cfg.pick(200, 2000)
rand = torch.tensor(
    [
        metrics.retrieval_metrics(
            torch.rand(S.shape, generator=g, dtype=torch.float64), caption_to_image
        )["rsum"]
        for _ in range(n_trials)
    ]
)
stderr = float(rand.std()) / math.sqrt(n_trials)
print(
    f"chance rsum: formula {expected:.1f}, {n_trials} random matrices "
    f"{float(rand.mean()):.1f} ± {stderr:.1f}"
)
assert abs(float(rand.mean()) - expected) < 4 * stderr
print(
    "Flickr30K test (1,000 images x 5 captions): chance rsum "
    f"{sum(chance(1000, 5)):.2f}"
)

# %% [markdown]
# Finally, the noise of the toy batch behaves like model quality: more noise, lower rsum,
# down towards chance.

# %%
rsum_at = {}
for noise in (0.0, 1.0, 3.0):
    im, tx, c2 = demo_retrieval_batch(
        n_images, per_image, dim=8, noise=noise, seed=cfg.seed
    )
    rsum_at[noise] = metrics.retrieval_metrics(similarity.similarity(im, tx), c2)[
        "rsum"
    ]
print(rsum_at)
assert rsum_at[0.0] > rsum_at[1.0] > rsum_at[3.0] > expected

# %% [markdown]
# ## Explorer: a batch, its similarity matrix and one query's ranking
#
# Top: $S$ of 8 images × 40 captions with the positives and the hardest negative of every query of
# the chosen direction; the outlined row (i2t) or column (t2i) is the query. Bottom: that query's
# candidates sorted by score, blue for correct ones, orange for the others; the grey band is the top $K$. The title
# reports R@1 and R@5 in both directions and their sum (with 8 images, R@10 of t2i would be
# trivially 100, so it is left out).
#
# Try: raise the noise until the selected image's best caption leaves the top 1; switch to
# text → image and compare how often caption queries miss; find a query whose rank is 1 but whose
# other four captions sit far down (R@1 is happy, AP is not).

# %%
widgets.evaluation.retrieval_explorer(
    n_images=8, captions_per_image=5, dim=8, noise=1.5, seed=cfg.seed
)

# %% [markdown]
# ## Summary
#
# - Embeddings are compared on the unit hypersphere: cosine similarity, a dot product of unit
#   vectors, ranks exactly as Euclidean distance does.
# - $S$ holds every image–caption score of a batch; rows are image queries, columns caption queries.
# - R@K (i2t: best of the five captions; t2i: the one image), rsum = sum of six recalls, mAP@5
#   (all five captions of an image query). `vlr_lib.metrics` matches the loops above.
# - A tie is not a hit: a negative scoring the same as the positive ranks before it, so a
#   collapsed model scores 0, never 100.
# - Read every number against chance, which depends on the gallery size.
#
# ## Exercises
#
# 1. Trained models usually score higher on i2t than on t2i (e.g. Bleeker & de Rijke, Table 1),
#    yet at chance i2t is never ahead. Where does a trained model's i2t advantage come from?
#    Check with the explorer's noise slider.
# 2. Build an $S$ for 2 images × 4 captions (2 each) where R@1 = 100 in both directions but
#    mAP@2 (i2t, $k = 2$) is below 1.
# 3. Take a trained-looking $S$ and add a constant to one *column* (one caption's scores for
#    every image). Which metrics change, and which cannot? Then set that whole column to one
#    value: what rank does the caption query get, and why is that the right answer?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 1.
# An image query needs only the *best* of its five captions on top, and the maximum of
# five noisy scores is much more likely to beat the negatives than a single score; a
# caption query has one chance. A random model gains nothing from the maximum because
# every score is equally uninformative, while the gallery is five times longer.
r1 = {}
for noise in (0.5, 1.5, 3.0):
    im, tx, c2 = demo_retrieval_batch(100, 5, dim=8, noise=noise, seed=0)
    r = metrics.retrieval_metrics(similarity.similarity(im, tx), c2)
    r1[noise] = (r["i2t_r1"], r["t2i_r1"])
    print(f"noise {noise}: i2t R@1 {r['i2t_r1']:.0f}, t2i R@1 {r['t2i_r1']:.0f}")
assert all(i2t > t2i for i2t, t2i in r1.values()), (
    "i2t ahead while the model is informative"
)

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 2.
# Image 0 ranks caption 0 first (an R@1 hit) but caption 1 last, so its AP@2 is (1/1)/2
# = 0.5; image 1 is perfect; mAP@2 = 0.75. Every caption query still picks its image:
# t2i R@1 = 100.
S2 = torch.tensor(
    [
        [0.9, 0.1, 0.5, 0.4],  # image 0: captions 0, 1 are its own
        [0.0, -0.1, 0.8, 0.7],
    ],
    dtype=torch.float64,
)
c2 = torch.tensor([0, 0, 1, 1])
r = metrics.retrieval_metrics(S2, c2, ks=(1,))
print(r, metrics.map_at_k(S2, c2, k=2))
assert r["i2t_r1"] == 100 and r["t2i_r1"] == 100
assert math.isclose(metrics.map_at_k(S2, c2, k=2), 0.75)

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 3.
# A shift of one column leaves that caption query's ranking, hence t2i, as it was; it
# changes the i2t rankings of every image (caption 0 moves up in each row) and the
# global PR curve, which compares scores across queries. A constant column ranks the
# true image last: with every image tied, the model has not told them apart, and
# counting that as a hit would reward a collapsed model (the argument of the ties
# section).
c = 0  # caption 0, of image 0
S3 = S.clone()
S3[:, c] += 0.5  # shift one column: the caption's ranking of images is unchanged
assert (
    metrics.ranks_t2i(S3, caption_to_image)[c]
    == metrics.ranks_t2i(S, caption_to_image)[c]
)
assert not torch.equal(S3.argsort(dim=1), S.argsort(dim=1)), (
    "the image queries' orderings change"
)
print(
    "PR-AUC before and after the shift:",
    metrics.pr_auc(S, caption_to_image),
    metrics.pr_auc(S3, caption_to_image),
)
S3[:, c] = 0.3  # a constant column: every image ties with the true one
print(
    "rank of the true image for a constant column:",
    int(metrics.ranks_t2i(S3, caption_to_image)[c]),
)
assert metrics.ranks_t2i(S3, caption_to_image)[c] == n_images  # last place

# %% [markdown]
# ## References
#
# - Faghri, Fleet, Kiros, Fidler. *VSE++: Improving Visual-Semantic Embeddings with Hard Negatives.* BMVC 2018. [arXiv:1707.05612](https://arxiv.org/abs/1707.05612)
# - Veit, Wilber. *Improving Calibration in Deep Metric Learning With Cross-Example Softmax.* 2020. [arXiv:2011.08824](https://arxiv.org/abs/2011.08824)
# - Bleeker, de Rijke. *Do Lessons from Metric Learning Generalize to Image-Caption Retrieval?* ECIR 2022. [arXiv:2202.07474](https://arxiv.org/abs/2202.07474)
# - Li, Guo, Wang, Feng, Hwang, Du. *Unified Loss of Pair Similarity Optimization for Vision-Language Retrieval.* 2022. [arXiv:2209.13869](https://arxiv.org/abs/2209.13869)
# - Xuan, Chen. *Dissecting Deep Metric Learning Losses for Image-Text Retrieval* (GOAL). 2022. [arXiv:2210.13188](https://arxiv.org/abs/2210.13188)
