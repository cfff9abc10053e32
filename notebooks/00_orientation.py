# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 00 · Orientation: image–text retrieval and this workbook
#
# **Learning goals.** After this notebook you can
#
# - say what image–text retrieval is: a *query* in one modality, a *ranked list of candidates* in the other;
# - name the five papers this workbook follows, and find the notebook that treats a given equation;
# - check that your environment works and choose a data mode (`shapes` or `flickr30k`);
# - browse the synthetic `shapes` data that the notebooks use by default.
#
# There is nothing to derive yet. Notebook 01 starts with the similarity matrix and
# how retrieval is evaluated.
#
# Every notebook begins with the same setup cell: all its imports (the library's modules by
# name: `losses`, `metrics`, `viz`, `widgets`, ...), then `setup`, which reads three environment
# variables (`VLR_FAST=1` for small sizes, `VLR_DATA` for the data mode, `VLR_DEVICE` for the
# device), seeds every random generator and sets the plotly renderer.

# %%
try:  # opened without the workbook installed (Colab, a JupyterHub, a copied notebook)?
    import vlr_lib  # noqa: F401
except ModuleNotFoundError:
    raise ModuleNotFoundError(
        "vlr_lib is not installed: in a cell run `%pip install -e "
        "/path/to/vlr-workbook` "
        "(the folder holding pyproject.toml), then restart the kernel"
    ) from None

import ipywidgets
import numpy as np
import plotly
import torch

import vlr_lib
from vlr_lib import losses, registry, similarity, viz, widgets
from vlr_lib.data import COLUMNS, load_flickr30k, make_shapes, scene_overlap
from vlr_lib.notebook import setup

cfg = setup(seed=0)

# %% [markdown]
# ## What image–text retrieval is
#
# Take a collection of images, each with a few captions (five in Flickr30K). A retrieval
# system answers two kinds of query:
#
# - **image → text (i2t)**: given an image, rank all captions so that the ones describing it come first;
# - **text → image (t2i)**: given a caption, rank all images so that the one it describes comes first.
#
# The systems in this workbook are *dual encoders*. An image encoder maps image $i$ to a
# vector $\mathbf{v}_i$, a text encoder maps caption $j$ to $\mathbf{t}_j$, both of unit length and
# in the same $d$-dimensional space, the *joint embedding space*. The score of a pair is the
# cosine similarity $s_{ij} = \mathbf{v}_i^\top \mathbf{t}_j$. All scores of a batch form the
# **similarity matrix** $S$: rows are images, columns are captions. An i2t query reads a
# row of $S$ and sorts it; a t2i query does the same with a column.
#
# Training shapes $S$: a loss pushes each *positive* pair (an image and its own caption)
# above the *negatives* (everything else in its row and column). Every loss in the workbook
# is a function of $S$, so they can be compared on exactly the same numbers.
#
# A tiny example: three images and three captions in a 2-dimensional space, with made-up numbers.

# %%
# image embeddings (not yet unit length)
img = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.2]])
# caption j describes image j
txt = torch.tensor([[0.9, 0.1], [0.2, 1.0], [-1.0, -0.3]])
S = similarity.similarity(img, txt)  # normalises both, then S = img @ txt.T
print(S.numpy().round(3))
print(
    "image query i -> captions, best first:", S.argsort(dim=1, descending=True).tolist()
)
print(
    "caption query j -> images, best first:",
    S.argsort(dim=0, descending=True).T.tolist(),
)

# %% [markdown]
# In this toy space every query finds its match first, in both directions: the diagonal of
# $S$ holds the largest entry of its row and of its column.

# %%
assert (S.argmax(dim=1) == torch.arange(3)).all(), (
    "i2t: each image ranks its caption first"
)
assert (S.argmax(dim=0) == torch.arange(3)).all(), (
    "t2i: each caption ranks its image first"
)
assert S.abs().max() <= 1.0 + 1e-6, "cosine similarities lie in [-1, 1]"

# %% [markdown]
# ## The five papers and the map of the workbook
#
# | paper | short name | what we take |
# |---|---|---|
# | Xuan & Chen, *Dissecting Deep Metric Learning Losses for Image-Text Retrieval* | GOAL | the gradient of a triplet loss as *triplet weight × pair weight*; training with a designed gradient |
# | Li et al., *Unified Loss of Pair Similarity Optimization for Vision-Language Retrieval* | unified loss | one loss with margin $m$ and scale $\gamma$ that contains Triplet-SH and NT-Xent; gradients on the hypersphere |
# | Veit & Wilber, *Improving Calibration in Deep Metric Learning With Cross-Example Softmax* | cross-example softmax | negatives from the whole batch, not only the query's own row; calibration |
# | Bleeker & de Rijke, *Do Lessons from Metric Learning Generalize to Image-Caption Retrieval?* | COCOS | Triplet vs Triplet-SH vs NT-Xent vs SmoothAP; counting the samples that contribute to a gradient |
# | Faghri et al., *VSE++* (through the papers above) | VSE++ | the hardest-negative triplet loss that the others start from |
#
# Which notebook treats which equations (equation numbers are those of the papers' arXiv
# versions, linked in the References at the end of every notebook):
#
# | notebook | topic | paper, equations |
# |---|---|---|
# | 00 | orientation | — |
# | 01 | joint embedding space, evaluation | Li et al. sec. 3.3 (unit hypersphere); Bleeker & de Rijke sec. 3 (R@K, rsum, mAP@5) and eqs. 5–6 (AP, rank) |
# | 02 | triplet losses | Bleeker & de Rijke eqs. 1–3, 9–10; Li et al. eqs. 1–2, 8–12; Xuan & Chen eqs. 3–5 |
# | 03 | contrastive learning | Bleeker & de Rijke eqs. 4, 11; Li et al. eqs. 3–4 (VLC) |
# | 04 | the unified loss | Li et al. eqs. 5–7, 13–19, 24–27 |
# | 05 | cross-example softmax | Veit & Wilber eqs. 2–6, Fig. 4 |
# | 06 | SmoothAP | Bleeker & de Rijke eqs. 5–8, 12 |
# | 07 | GOAL | Xuan & Chen eqs. 3, 5–13, Table 1, Figs. 2–3 |
# | 08 | COCOS | Bleeker & de Rijke eqs. 9–13, Tables 2–4 |
# | 09 | training a retrieval model | Li et al. Figs. 3–4 |
# | 10 | loss showdown | Bleeker & de Rijke Table 1; Xuan & Chen Tables 3–5 |
# | 11 | hyperparameters | Li et al. Fig. 5; sweeps of $m$, $\gamma$, $\tau$, $k$ |
#
# The library `vlr_lib` holds every formula once, with the paper and equation in its
# docstring; the notebooks derive a formula, then assert that the library computes the same.
#
# **One name per loss.** The papers name the same losses differently. The workbook uses one
# name each, the label of the loss's entry in `vlr_lib.registry` (one entry per loss: its
# function, its names, its hyperparameters with their defaults and the notebook that derives
# it), and lists the others once, here (`python -m vlr_lib losses` prints the same glossary):

# %% [markdown]
# %%
for name in registry.names():
    entry = registry.entry(name)
    print(f"{entry.label:22s} losses.{name:22s} also: {'; '.join(entry.aliases)}")
assert registry.label("triplet_hardest") == "Triplet-SH"
assert registry.label("goal:cir,sig-ms") == "GOAL (cir, sig-ms)"

# %% [markdown]
# ## Environment check
#
# The versions the workbook was written against, the device this session uses, and one
# loss evaluated on a $2 \times 2$ matrix whose value we work out by hand.

# %%
print(
    f"vlr_lib {vlr_lib.__version__} | torch {torch.__version__} | plotly "
    f"{plotly.__version__} "
    f"| ipywidgets {ipywidgets.__version__}"
)
print(f"device: {cfg.device} (CUDA available: {torch.cuda.is_available()})")

# %% [markdown]
# With margin $m = 0.2$ and $S = \begin{pmatrix} 0.5 & 0.6 \\ 0.2 & 0.4 \end{pmatrix}$ (positives
# on the diagonal), the hardest-negative triplet loss Triplet-SH (Li et al. eq. 1) has one hinge per
# row and one per column:
#
# - row 0 (image 0): $[0.2 + 0.6 - 0.5]_+ = 0.3$; row 1: $[0.2 + 0.2 - 0.4]_+ = 0$;
# - column 0 (caption 0): $[0.2 + 0.2 - 0.5]_+ = 0$; column 1: $[0.2 + 0.6 - 0.4]_+ = 0.4$.
#
# The total is $0.7$.

# %%
S_tiny = torch.tensor([[0.5, 0.6], [0.2, 0.4]], dtype=torch.float64)
value = losses.triplet_hardest(S_tiny, margin=0.2)
print(f"triplet_hardest = {value.item():.4f}")
assert abs(value.item() - 0.7) < 1e-12, (
    "the library's Triplet-SH should give the hand-computed 0.7"
)
assert torch.ones(2, device=cfg.device).sum().item() == 2.0, (
    "the chosen device computes"
)

# %% [markdown]
# ## Data modes
#
# The same notebooks run on two datasets, chosen by `VLR_DATA`:
#
# - **`shapes`** (default, no download, any laptop): synthetic images of one to three coloured
#   shapes on a $3 \times 3$ grid, each with five captions from seven templates
#   (`vlr_lib.data.shapes.make_shapes`). It has the columns of Flickr30K (`image`, `caption`,
#   `split`, `img_id`, `filename`), so every later cell runs unchanged. A `difficulty` knob
#   decides how much similar scenes share, i.e. how hard the negatives are.
# - **`flickr30k`** (a GPU machine with network on first use): Flickr30K with the Karpathy
#   split (29,000 / 1,014 / 1,000 images × 5 captions), read through Hugging Face `datasets`
#   from a Parquet copy on the Hub (`vlr_lib.data.load_flickr30k`, about 4.4 GB, cached under
#   `HF_HOME`). Run `python -m vlr_lib check --data flickr30k` to see what is missing, then
#   `python data_scripts/prepare_flickr30k.py` once to download and save it (to
#   `~/.cache/vlr-workbook/data/flickr30k`, where every command and notebook looks; set
#   `VLR_DATA_PATH` for a copy elsewhere), then `python data_scripts/extract_features.py --data
#   flickr30k` on a GPU to encode every image and caption once with a frozen backbone (pretrained
#   weights download on first use); the training notebooks then fit small heads on the cached
#   features in minutes. Set `VLR_DATA=flickr30k` before starting Jupyter.
#
# Below are a few images of the current mode with their five captions.

# %%
if cfg.data == "shapes":
    data = make_shapes(n_train=cfg.pick(16, 64), n_val=8, n_test=8, seed=cfg.seed)
else:
    # VLR_DATA_PATH, the prepared copy, else the Hub (the error says how to work
    # offline)
    data = load_flickr30k()
print(data)


def thumbnail(image, size: int = 160) -> np.ndarray:
    """A small RGB copy of a PIL image (shapes are 64 px and stay as they are)."""
    image = image.convert("RGB")
    image.thumbnail((size, size))
    return np.asarray(image)


examples = data["test"].select(range(4))
viz.evaluation.image_gallery(
    [thumbnail(im) for im in examples["image"]],
    examples["caption"],
    [f"img_id {i}" for i in examples["img_id"]],
)

# %% [markdown]
# The schema is the same in both modes, and every image has five captions:

# %%
assert tuple(data["test"].column_names) == COLUMNS
assert set(data) == {"train", "validation", "test"}
assert all(len(c) == 5 for c in data["test"]["caption"])

# %% [markdown]
# ### Explorer: how hard are the negatives?
#
# Shapes scenes come in groups of four. The first scene of a group is random; the other
# three copy each of its attributes (number of objects, and each object's colour, shape,
# size and cell) with probability `difficulty`. At difficulty 0 the four scenes have
# little in common; at 1 each differs from the first in exactly one attribute, so its
# captions are almost those of the first image. Those near-duplicates are the *hard
# negatives* that the triplet losses of notebook 02 chase. Move the sliders.

# %%
widgets.evaluation.shapes_browser(n_groups=cfg.pick(3, 8), seed=cfg.seed)

# %% [markdown]
# A check of the claim: scenes of a group share more with each other as `difficulty`
# grows (`scene_overlap` measures the share of attributes a scene has in common with its
# most similar other scene).

# %%
overlap = {}
for difficulty in (0.0, 0.5, 1.0):
    _, scenes = make_shapes(
        n_train=cfg.pick(64, 400),
        n_val=1,
        n_test=1,
        difficulty=difficulty,
        seed=cfg.seed,
        return_scenes=True,
    )
    overlap[difficulty] = float(scene_overlap(scenes["train"]).mean())
print({d: round(v, 3) for d, v in overlap.items()})
assert overlap[0.0] < overlap[0.5] < overlap[1.0], "harder data: more shared attributes"

# %% [markdown]
# ## Summary
#
# - Retrieval ranks candidates of one modality for a query of the other: rows of $S$ for
#   image queries, columns for caption queries.
# - All losses of the workbook are functions of $S$; `vlr_lib` holds each once and the
#   notebooks check it against hand derivations.
# - `shapes` runs anywhere in seconds; `flickr30k` needs a download and, for feature
#   extraction, ideally a GPU.
#
# ## Exercises
#
# 1. In the toy example above, move caption 2 to `[-0.6, 0.8]`. Which queries now fail to
#    rank their match first? Predict before running.
# 2. The tiny loss above was 0.7. For which margin $m$ does it become 0?
# 3. In the explorer, set difficulty to 1. Which attribute differs between the base scene
#    of a group and each of the other three?

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 1.
# Caption 2 now points at 126.9°, between image 1 (90°) and image 2 (168.7°), slightly
# closer to image 1.
txt2 = txt.clone()
txt2[2] = torch.tensor([-0.6, 0.8])
S2 = similarity.similarity(img, txt2)
print("i2t picks", S2.argmax(dim=1).tolist(), "t2i picks", S2.argmax(dim=0).tolist())
# Image 2 still ranks caption 2 first (cosine 0.75 against 0.0 for caption 1), but
# caption 2 ranks image 1 first (0.80 against 0.75): the t2i query of caption 2 fails
# while every i2t query succeeds. The two directions can disagree, which is why both are
# evaluated and why the losses have a term for each.
assert S2.argmax(dim=1).tolist() == [0, 1, 2] and S2.argmax(dim=0).tolist() == [0, 1, 1]

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 2.
# Each hinge is [m + s- - s+]_+ with s+ - s- equal to -0.1, 0.2, 0.3, -0.2 for row 0,
# row 1, column 0, column 1. The loss vanishes only when m <= min(s+ - s-) = -0.2,
# impossible for m >= 0: row 0 and column 1 have a negative *above* their positive. At m
# = 0 it is 0.3.
tiny = [losses.triplet_hardest(S_tiny, margin=m).item() for m in (0.0, 0.1, 0.2)]
print(tiny)
# > 0 from m = 0 on: no margin the library accepts makes it vanish
assert np.allclose(tiny, [0.3, 0.5, 0.7])

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 3.
# Exactly one colour, shape or size of one object (the members pick different ones), so
# their captions differ in one word, e.g. "a small red circle" vs "a small blue circle".
_, scenes = make_shapes(
    n_train=40, n_val=1, n_test=1, difficulty=1.0, seed=cfg.seed, return_scenes=True
)
scenes = scenes["train"]
base = {}
for i, group in enumerate(scenes.group):
    b = base.setdefault(group, i)  # member 0 of a group is its base scene
    if b != i:
        assert scenes.n_objects[i] == scenes.n_objects[b]
        assert (scenes.attrs[i] != scenes.attrs[b]).sum() == 1, (
            "one attribute of one object differs"
        )
print("every member differs from its base scene in exactly one attribute")

# %% [markdown]
# ## References
#
# - Faghri, Fleet, Kiros, Fidler. *VSE++: Improving Visual-Semantic Embeddings with Hard Negatives.* BMVC 2018. [arXiv:1707.05612](https://arxiv.org/abs/1707.05612)
# - Brown, Xie, Kalogeiton, Zisserman. *Smooth-AP: Smoothing the Path Towards Large-Scale Image Retrieval.* ECCV 2020. [arXiv:2007.12163](https://arxiv.org/abs/2007.12163)
# - Veit, Wilber. *Improving Calibration in Deep Metric Learning With Cross-Example Softmax.* 2020. [arXiv:2011.08824](https://arxiv.org/abs/2011.08824)
# - Bleeker, de Rijke. *Do Lessons from Metric Learning Generalize to Image-Caption Retrieval?* ECIR 2022. [arXiv:2202.07474](https://arxiv.org/abs/2202.07474)
# - Li, Guo, Wang, Feng, Hwang, Du. *Unified Loss of Pair Similarity Optimization for Vision-Language Retrieval.* 2022. [arXiv:2209.13869](https://arxiv.org/abs/2209.13869)
# - Xuan, Chen. *Dissecting Deep Metric Learning Losses for Image-Text Retrieval* (GOAL). 2022. [arXiv:2210.13188](https://arxiv.org/abs/2210.13188)
