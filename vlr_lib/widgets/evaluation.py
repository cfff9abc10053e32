"""Explorers of notebooks 00-01: browse the shapes data; a batch's similarity matrix and rankings.

The callbacks only call one builder of `vlr_lib.viz.evaluation` (wiring in `_core`).
"""
from __future__ import annotations

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go

from ..demo import demo_retrieval_batch
from ..similarity import similarity
from ..viz import evaluation as V
from ._core import BookView, Explorer, explorer, slider


def shapes_browser(n_groups: int = 6, group_size: int = 4, seed: int = 0, difficulty: float = 0.5) -> Explorer:
    """Browse groups of the shapes dataset: one group's images with their five captions.

    Scenes of a group copy attributes of the group's first scene with probability
    `difficulty` (vlr_lib.data.shapes): move the slider to see negatives get harder.
    Datasets are generated once per difficulty (a few ms each) and cached.
    """
    from ..data.shapes import make_shapes  # only this explorer needs `datasets`

    cache: dict[float, tuple[np.ndarray, list[list[str]], list[str]]] = {}

    def data(difficulty: float):
        if difficulty not in cache:
            split = make_shapes(n_train=n_groups * group_size, n_val=1, n_test=1, difficulty=difficulty,
                                seed=seed, group_size=group_size)["train"]
            images = np.stack([np.asarray(im.convert("RGB")) for im in split["image"]])
            cache[difficulty] = images, split["caption"], split["img_id"]
        return cache[difficulty]

    def draw(group: int, difficulty: float) -> go.Figure:
        images, caps, ids = data(round(difficulty, 2))
        rows = slice(group * group_size, (group + 1) * group_size)
        titles = [f"img_id {i}" + (" (base)" if n == 0 else "") for n, i in enumerate(ids[rows])]
        return V.image_gallery(images[rows], caps[rows], titles)

    controls = {
        "group": slider(W.IntSlider, "group", value=0, min=0, max=n_groups - 1),
        "difficulty": slider(W.FloatSlider, "difficulty", value=difficulty, min=0.0, max=1.0, step=0.25),
    }
    # the book: the prose is about the difficulty ("at difficulty 0 ... at 1"), then the groups
    views = [BookView("difficulty slider, group 0", main="difficulty"),
             BookView(f"group slider, at difficulty {difficulty:g}", main="group")]
    return explorer(controls, draw, name="shapes-browser", book_views=views)


def retrieval_explorer(
    n_images: int = 8, captions_per_image: int = 5, dim: int = 8, noise: float = 1.5, seed: int = 0
) -> Explorer:
    """A toy batch with several captions per image: heatmap of S and one query's ranking.

    Controls: noise (how far captions lie from their image), direction (image->text
    or text->image), which query, and K of the top-K band.
    """
    n_caps = n_images * captions_per_image

    def draw(noise: float, direction: str, query: int, k: int) -> go.Figure:
        img, txt, c2i = demo_retrieval_batch(n_images, captions_per_image, dim, noise, seed)
        return V.retrieval_figure(similarity(img, txt), c2i, query, direction, k)

    controls = {
        "noise": slider(W.FloatSlider, "noise", value=noise, min=0.0, max=4.0, step=0.1),
        "direction": W.ToggleButtons(options=[("image → text", "i2t"), ("text → image", "t2i")], value="i2t"),
        "query": slider(W.IntSlider, "query", value=0, min=0, max=n_images - 1),
        "k": slider(W.IntSlider, "K", value=min(5, n_images), min=1, max=n_images),
    }

    def on_direction(change) -> None:
        # An image query ranks captions, a caption query ranks images: resize the sliders first.
        q = controls["query"]
        q.max = (n_images if change["new"] == "i2t" else n_caps) - 1
        controls["k"].max = n_caps if change["new"] == "i2t" else n_images

    controls["direction"].observe(on_direction, names="value")  # registered before the redraw
    # the book: the prose raises the noise in both directions, then looks for a query
    views = [BookView("noise slider, image → text", main="noise"),
             BookView("noise slider, text → image", {"direction": "t2i"}, "noise"),
             BookView(f"image query slider, at noise {noise:g}", main="query")]
    return explorer(controls, draw, rows=[["noise", "direction"], ["query", "k"]], name="retrieval",
                    book_views=views)
