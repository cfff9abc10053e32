"""The synthetic `shapes` dataset: coloured shapes with five template captions each.

The workbook's embedded default (CPU, no network). Each image shows one to
three objects; an object has a colour (6), a shape (4), a size (2) and a cell
of a 3x3 grid, which fixes the relations "left of / right of / above / below"
between objects. Each image gets five different captions drawn from seven
templates of varied wording. The output is a `datasets.DatasetDict` in the
Flickr30K schema of `vlr_lib.data.flickr30k` (same columns, same features), so
notebooks, `vlr_lib.features` and the trainer have one code path.

Difficulty (how hard the negatives are)
---------------------------------------
Scenes come in groups of `group_size` (default 4). The first scene of a group
is drawn at random (its *base*); every other member copies each attribute of
the base independently with probability `difficulty` (the number of objects,
and per object colour, shape, size and cell) and draws it afresh otherwise. A
member that ends up identical to its base gets one colour, shape or size
changed (different members change different ones), so no two scenes of a group
are the same. Hence:

* difficulty = 0: all scenes independent; negatives are easy.
* difficulty = 1: each member differs from its base in exactly one attribute
  ("a small red circle" vs "a small blue circle"): minimal pairs, the hardest
  negatives; a bag-of-words model cannot separate some of them.
* in between: the expected share of attributes a scene shares with its base
  grows linearly with `difficulty` (see `scene_overlap` to measure it).

Groups never straddle splits. Every split draws from its own child of
`numpy.random.SeedSequence(seed)`, so the same seed gives byte-identical data,
and changing `n_train` leaves validation and test unchanged.

Images are rasterised with numpy only (vectorised over the images of a chunk)
and PNG-encoded with zlib, so the bytes do not depend on an imaging library.
"""
from __future__ import annotations

import math
import os
import struct
import zlib
from dataclasses import dataclass, fields
from pathlib import Path

import datasets
import numpy as np

from .._checks import check_int
from ..data_sizes import SIZES as SPLIT_SIZES
from .flickr30k import COLUMNS, FEATURES, SPLITS

COLORS = ("red", "green", "blue", "yellow", "purple", "orange")
RGB = np.array(
    [[220, 40, 40], [40, 170, 60], [50, 90, 230], [235, 215, 40], [150, 60, 190], [245, 140, 30]], dtype=np.uint8
)
SHAPES = ("circle", "square", "triangle", "diamond")
SIZES = ("small", "large")
MAX_OBJECTS = 3
GRID = 3
BACKGROUND = np.array([30, 30, 30], dtype=np.uint8)
ATTRIBUTES = ("color", "shape", "size", "cell")
_N_VALUES = (len(COLORS), len(SHAPES), len(SIZES), GRID * GRID)
_RADIUS = (0.07, 0.12)  # object radius as a fraction of the image side, small / large
_CHUNK = 256  # images rasterised at once (bounds memory)


@dataclass(frozen=True)
class Scenes:
    """Scene attributes of one split; `attrs[i, k]` = (colour, shape, size, cell) of object k, -1 if absent."""

    n_objects: np.ndarray  # [N] in 1..MAX_OBJECTS
    attrs: np.ndarray  # [N, MAX_OBJECTS, 4] int64
    jitter: np.ndarray  # [N, MAX_OBJECTS, 2] pixel offsets from the cell centre (nuisance, not captioned)
    group: np.ndarray  # [N] group index; member 0 of a group is its base scene

    def __len__(self) -> int:
        return int(self.n_objects.shape[0])

    def to_arrays(self, prefix: str = "") -> dict[str, np.ndarray]:
        return {prefix + f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str = "") -> "Scenes":
        return cls(**{f.name: np.asarray(arrays[prefix + f.name]) for f in fields(cls)})


# ---------------------------------------------------------------- scene sampling
def sample_scenes(n: int, difficulty: float, rng: np.random.Generator, group_size: int = 4) -> Scenes:
    """`n` scenes in groups of `group_size`; members share each base attribute with probability `difficulty`."""
    check_int("n", n, 1)
    _check_unit("difficulty", difficulty)
    check_int("group_size", group_size, 1)
    idx = np.arange(n)
    group, member = idx // group_size, idx % group_size
    base_n, base_a = _random_objects(-(-n // group_size), rng)
    fresh_n, fresh_a = _random_objects(n, rng)
    copy_n = (rng.random(n) < difficulty) | (member == 0)
    copy_a = (rng.random((n, MAX_OBJECTS, 4)) < difficulty) | (member == 0)[:, None, None]
    n_obj = np.where(copy_n, base_n[group], fresh_n)
    attrs = np.where(copy_a, base_a[group], fresh_a)
    attrs[:, :, 3] = _distinct_cells(attrs[:, :, 3], rng)
    attrs = _make_unique(attrs, n_obj, base_n[group], base_a[group], member, group, rng)  # keeps cells
    active = np.arange(MAX_OBJECTS)[None, :] < n_obj[:, None]
    attrs = np.where(active[:, :, None], attrs, -1)
    jitter = rng.uniform(-1.0, 1.0, size=(n, MAX_OBJECTS, 2))
    return Scenes(n_obj.astype(np.int64), attrs.astype(np.int64), jitter, group.astype(np.int64))


def _random_objects(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n_obj = rng.integers(1, MAX_OBJECTS + 1, size=n)
    attrs = np.stack([rng.integers(0, k, size=(n, MAX_OBJECTS)) for k in _N_VALUES], axis=-1)
    attrs[:, :, 3] = np.argsort(rng.random((n, GRID * GRID)), axis=1)[:, :MAX_OBJECTS]  # distinct cells
    return n_obj, attrs


def _make_unique(attrs: np.ndarray, n_obj: np.ndarray, base_n: np.ndarray, base_a: np.ndarray, member: np.ndarray,
                 group: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Members identical to their base change one colour/shape/size; members pick different slots."""
    active = np.arange(MAX_OBJECTS)[None, :] < n_obj[:, None]
    same = (n_obj == base_n) & ((attrs == base_a).all(-1) | ~active).all(-1) & (member > 0)
    n_slots = 3 * n_obj  # colour, shape, size of each active object
    offset = rng.integers(0, 3 * MAX_OBJECTS, size=group.max() + 1)[group]
    slot = (member - 1 + offset) % n_slots
    obj, attr = slot // 3, slot % 3
    k = np.array(_N_VALUES)[attr]
    step = 1 + rng.integers(0, k - 1)  # in 1..k-1: always a different value
    rows = np.flatnonzero(same)
    attrs = attrs.copy()
    attrs[rows, obj[rows], attr[rows]] = (attrs[rows, obj[rows], attr[rows]] + step[rows]) % k[rows]
    return attrs


def _distinct_cells(cells: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Move objects whose cell is taken by an earlier object to a free cell (random order)."""
    n = cells.shape[0]
    rows = np.arange(n)
    order = np.argsort(rng.random((n, GRID * GRID)), axis=1)
    used = np.zeros((n, GRID * GRID), dtype=bool)
    out = cells.copy()
    for k in range(MAX_OBJECTS):  # loop over object slots, vectorised over scenes
        free_in_order = ~used[rows[:, None], order]
        alternative = order[rows, free_in_order.argmax(axis=1)]
        out[:, k] = np.where(used[rows, out[:, k]], alternative, out[:, k])
        used[rows, out[:, k]] = True
    return out


def scene_overlap(scenes: Scenes, k: int = 1) -> np.ndarray:
    """For each scene, how much it has in common with its `k` most similar other scenes of the split.

    shared(i, j) = ([n_i = n_j] + #{(o, a): object o present in both, attribute a equal})
                   / (1 + 4 max(n_i, n_j))   (objects compared slot by slot),
    returns the mean of the k largest shared(i, j), j != i; shape [N], values in [0, 1].
    Hard negatives are the scenes with a large overlap: the mean grows with `difficulty`.
    """
    check_int("k", k, 1)
    if k >= len(scenes):
        raise ValueError(f"k must be < the number of scenes ({len(scenes)}), got {k}")
    a = scenes.attrs
    both = (a[:, None, :, :1] >= 0) & (a[None, :, :, :1] >= 0)
    equal = ((a[:, None] == a[None, :]) & both).sum(axis=(-1, -2))
    equal = equal + (scenes.n_objects[:, None] == scenes.n_objects[None, :])
    share = equal / (1 + 4 * np.maximum(scenes.n_objects[:, None], scenes.n_objects[None, :]))
    np.fill_diagonal(share, -np.inf)
    return -np.sort(-share, axis=1)[:, :k].mean(axis=1)


def attribute_matrix(scenes: Scenes) -> np.ndarray:
    """Bag of attributes per scene, float32 [N, 24]: counts of each colour, shape, size, cell, then one-hot n_objects."""
    blocks = []
    for a, k in enumerate(_N_VALUES):
        values = scenes.attrs[:, :, a]
        blocks.append(((values[:, :, None] == np.arange(k)) & (values[:, :, None] >= 0)).sum(axis=1))
    blocks.append(scenes.n_objects[:, None] == np.arange(1, MAX_OBJECTS + 1))
    return np.concatenate(blocks, axis=1).astype(np.float32)


# ---------------------------------------------------------------- rasterisation
def render(scenes: Scenes, image_size: int = 64) -> np.ndarray:
    """uint8 images [N, image_size, image_size, 3], vectorised over images (chunks of _CHUNK)."""
    check_int("image_size", image_size, 16)
    return np.concatenate(
        [_render_chunk(scenes, slice(s, s + _CHUNK), image_size) for s in range(0, len(scenes), _CHUNK)]
    )


def _render_chunk(scenes: Scenes, rows: slice, size: int) -> np.ndarray:
    attrs, jitter = scenes.attrs[rows], scenes.jitter[rows]
    n = attrs.shape[0]
    cell = size / GRID
    yy, xx = (np.mgrid[0:size, 0:size] + 0.5).astype(np.float32)
    img = np.broadcast_to(BACKGROUND, (n, size, size, 3)).copy()
    for k in range(MAX_OBJECTS):  # objects in slot order; cells are distinct so nothing overlaps
        color, shape, big, pos = (attrs[:, k, a] for a in range(4))
        r = np.asarray(_RADIUS, dtype=np.float32)[np.clip(big, 0, 1)] * size
        room = np.maximum(cell / 2 - r - 1, 0)  # jitter keeps the object inside its cell
        cx = (pos % GRID + 0.5) * cell + jitter[:, k, 0] * room
        cy = (pos // GRID + 0.5) * cell + jitter[:, k, 1] * room
        for s, inside in enumerate(_SHAPE_TESTS):  # loop over the 4 shapes, vectorised over images
            sel = np.flatnonzero((shape == s) & (pos >= 0))  # absent objects (-1) draw nothing
            if sel.size == 0:
                continue
            dx = xx - cx[sel, None, None].astype(np.float32)
            dy = yy - cy[sel, None, None].astype(np.float32)
            mask = inside(dx, dy, r[sel, None, None])
            img[sel] = np.where(mask[..., None], RGB[color[sel]][:, None, None, :], img[sel])
    return img


# Inside tests per shape at offsets (dx, dy) from the centre, radius r; sizes give similar areas.
def _triangle(dx: np.ndarray, dy: np.ndarray, r: np.ndarray) -> np.ndarray:
    t = (dy + r) / (2 * r)  # 0 at the apex, 1 at the base
    return (t >= 0) & (t <= 1) & (np.abs(dx) <= 1.15 * r * t)


_SHAPE_TESTS = (
    lambda dx, dy, r: dx * dx + dy * dy <= r * r,
    lambda dx, dy, r: np.maximum(np.abs(dx), np.abs(dy)) <= 0.88 * r,
    _triangle,
    lambda dx, dy, r: np.abs(dx) + np.abs(dy) <= 1.25 * r,
)


def encode_png(img: np.ndarray) -> bytes:
    """Minimal deterministic PNG (8-bit RGB, no filtering, zlib level 6) of a uint8 [H, W, 3] array."""
    h, w, _ = img.shape
    raw = np.concatenate([np.zeros((h, 1), np.uint8), img.reshape(h, w * 3)], axis=1).tobytes()

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


# ---------------------------------------------------------------- captions
_SIZE_WORDS = (("small", "little", "tiny"), ("large", "big"))
_RELATIONS = (("left of", "to the left of"), ("right of", "to the right of"), ("above", "over"), ("below", "under"))
_PLACES = ("in the top left", "at the top", "in the top right", "on the left", "in the middle",
           "on the right", "in the bottom left", "at the bottom", "in the bottom right")
N_TEMPLATES = 7
N_CAPTIONS = 5


def relation(cell_a: int, cell_b: int) -> int:
    """Index into ("left of", "right of", "above", "below") of object a relative to object b."""
    ra, ca, rb, cb = cell_a // GRID, cell_a % GRID, cell_b // GRID, cell_b % GRID
    if abs(ca - cb) >= abs(ra - rb):
        return 0 if ca < cb else 1
    return 2 if ra < rb else 3


def _a(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


class _Words:
    """Word choices for one caption, drawn from a per-caption stream of random integers."""

    def __init__(self, attrs: np.ndarray, draws: np.ndarray):
        self.attrs, self.draws, self.i = attrs, draws, 0

    def _pick(self, options: tuple[str, ...]) -> str:
        self.i += 1
        return options[int(self.draws[self.i - 1]) % len(options)]

    def c(self, k: int) -> str:
        return COLORS[self.attrs[k, 0]]

    def h(self, k: int) -> str:
        return SHAPES[self.attrs[k, 1]]

    def s(self, k: int) -> str:
        return SIZES[self.attrs[k, 2]]

    def s_syn(self, k: int) -> str:
        return self._pick(_SIZE_WORDS[self.attrs[k, 2]])

    def place(self, k: int) -> str:
        return _PLACES[self.attrs[k, 3]]

    def rel(self, a: int, b: int) -> str:
        return self._pick(_RELATIONS[relation(self.attrs[a, 3], self.attrs[b, 3])])

    def full(self, k: int, syn: bool = False) -> str:
        return _a(f"{self.s_syn(k) if syn else self.s(k)} {self.c(k)} {self.h(k)}")

    def ch(self, k: int) -> str:
        return _a(f"{self.c(k)} {self.h(k)}")


def _templates_1(w: _Words) -> list[str]:
    return [
        w.full(0),
        f"there is {w.full(0, syn=True)}",
        f"{w.ch(0)} {w.place(0)}",
        f"a single {w.s(0)} {w.h(0)} coloured {w.c(0)}",
        f"one {w.c(0)} {w.h(0)} on a dark background",
        f"{_a(w.h(0))} that is {w.s(0)} and {w.c(0)}",
        f"{w.place(0)}, {w.full(0, syn=True)}",
    ]


def _templates_2(w: _Words) -> list[str]:
    return [
        f"{w.full(0)} {w.rel(0, 1)} {w.full(1)}",
        f"two shapes: {w.ch(0)} and {w.ch(1)}",
        f"the {w.c(0)} {w.h(0)} is {w.rel(0, 1)} the {w.c(1)} {w.h(1)}",
        f"{w.full(1, syn=True)} {w.rel(1, 0)} {w.full(0, syn=True)}",
        f"there are two shapes, {w.full(0, syn=True)} and {w.full(1, syn=True)}",
        f"{w.ch(0)} {w.place(0)} and {w.ch(1)} {w.place(1)}",
        f"a {w.s(0)} {w.h(0)} in {w.c(0)} and a {w.s(1)} {w.h(1)} in {w.c(1)}",
    ]


def _templates_3(w: _Words) -> list[str]:
    return [
        f"{w.full(0)} {w.rel(0, 1)} {w.full(1)}, and {w.full(2)}",
        f"three shapes: {w.ch(0)}, {w.ch(1)} and {w.ch(2)}",
        f"the {w.c(1)} {w.h(1)} is {w.rel(1, 0)} the {w.c(0)} {w.h(0)} and {w.rel(1, 2)} the {w.c(2)} {w.h(2)}",
        f"three shapes, among them {w.full(2, syn=True)} {w.rel(2, 1)} {w.full(1, syn=True)}",
        f"{w.ch(0)} {w.place(0)}, {w.ch(1)} {w.place(1)} and {w.ch(2)} {w.place(2)}",
        f"{w.full(0, syn=True)}, {w.full(1, syn=True)} and {w.full(2, syn=True)}",
        f"{_a(w.c(0))}, {_a(w.c(1))} and {_a(w.c(2))} shape on a dark background",
    ]


_FAMILIES = (_templates_1, _templates_2, _templates_3)


def captions(scenes: Scenes, rng: np.random.Generator) -> list[list[str]]:
    """Five different captions per scene: five of the seven templates of its object count, random wording.

    String formatting is inherently per example; the random draws are made up
    front (vectorised) so that the result depends only on `rng`'s state.
    """
    n = len(scenes)
    choice = np.argsort(rng.random((n, N_TEMPLATES)), axis=1)[:, :N_CAPTIONS]
    draws = rng.integers(0, 6, size=(n, 16))  # 6 is divisible by every option count (2, 3)

    def five(i: int) -> list[str]:
        every = _FAMILIES[scenes.n_objects[i] - 1](_Words(scenes.attrs[i], draws[i]))
        return [every[t] for t in choice[i]]

    return [five(i) for i in range(n)]


# ---------------------------------------------------------------- the dataset
def make_shapes(
    n_train: int = SPLIT_SIZES["default"]["n_train"],
    n_val: int = SPLIT_SIZES["default"]["n_val"],
    n_test: int = SPLIT_SIZES["default"]["n_test"],
    image_size: int = 64,
    difficulty: float = 0.5,
    seed: int = 0,
    group_size: int = 4,
    return_scenes: bool = False,
) -> datasets.DatasetDict | tuple[datasets.DatasetDict, dict[str, Scenes]]:
    """The shapes dataset as a DatasetDict ("train", "validation", "test") in the Flickr30K schema.

    img_id runs over all splits ("0", "1", ...); filename is "shapes_<img_id>.png".
    With `return_scenes`, also returns {split: Scenes} (the attributes behind
    every image, e.g. for `attribute_matrix` or `scene_overlap`).
    """
    check_int("image_size", image_size, 16)
    out, all_scenes, first_id = {}, {}, 0
    for key, (scenes, rng) in _split_scenes(n_train, n_val, n_test, difficulty, seed, group_size).items():
        out[key] = _to_dataset(scenes, captions(scenes, rng), render(scenes, image_size), SPLITS[key], first_id)
        all_scenes[key] = scenes
        first_id += len(scenes)
    dd = datasets.DatasetDict(out)
    return (dd, all_scenes) if return_scenes else dd


def split_scenes(n_train: int = 2000, n_val: int = 200, n_test: int = 200, difficulty: float = 0.5, seed: int = 0,
                 group_size: int = 4) -> dict[str, Scenes]:
    """The scenes `make_shapes` draws for each split with these arguments, without rendering or captions
    (cheap: e.g. to measure `scene_overlap` at several difficulties)."""
    return {key: scenes for key, (scenes, _) in
            _split_scenes(n_train, n_val, n_test, difficulty, seed, group_size).items()}


def _split_scenes(n_train: int, n_val: int, n_test: int, difficulty: float, seed: int,
                  group_size: int) -> dict[str, tuple[Scenes, np.random.Generator]]:
    """Each split's scenes and its random generator after drawing them (the captions are drawn next)."""
    sizes = {"train": n_train, "validation": n_val, "test": n_test}
    for name, n in zip(("n_train", "n_val", "n_test"), sizes.values()):
        check_int(name, n, 1)
    _check_unit("difficulty", difficulty)
    check_int("seed", seed, 0)
    check_int("group_size", group_size, 1)
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(len(sizes))]
    return {key: (sample_scenes(n, difficulty, rng, group_size), rng) for (key, n), rng in zip(sizes.items(), rngs)}


def _to_dataset(scenes: Scenes, caps: list[list[str]], images: np.ndarray, split: str, first_id: int) -> datasets.Dataset:
    ids = [str(first_id + i) for i in range(len(scenes))]
    columns = {
        "image": [{"bytes": encode_png(im), "path": None} for im in images],  # zlib works per image
        "caption": caps,
        "split": [split] * len(ids),
        "img_id": ids,
        "filename": [f"shapes_{i}.png" for i in ids],
    }
    return datasets.Dataset.from_dict({c: columns[c] for c in COLUMNS}, features=FEATURES)


SCENES_FILE = "scenes.npz"


def save_shapes(dd: datasets.DatasetDict, path: str | os.PathLike, scenes: dict[str, Scenes] | None = None) -> None:
    """`dd.save_to_disk(path)`, plus the scene attributes as `scenes.npz` next to it when given."""
    dd.save_to_disk(str(path))
    if scenes is not None:
        arrays = {k: v for split, s in scenes.items() for k, v in s.to_arrays(f"{split}/").items()}
        np.savez(Path(path) / SCENES_FILE, **arrays)


def load_shapes(
    path: str | os.PathLike, return_scenes: bool = False
) -> datasets.DatasetDict | tuple[datasets.DatasetDict, dict[str, Scenes]]:
    """A shapes dataset written by `save_shapes` (or data_scripts/make_shapes.py)."""
    p = Path(path)
    if not (p / "dataset_dict.json").exists():
        raise FileNotFoundError(
            f"path {str(p)!r} holds no saved dataset; create one with "
            f"`python data_scripts/make_shapes.py --out {p}` or make_shapes()"
        )
    dd = datasets.load_from_disk(str(p))
    if not return_scenes:
        return dd
    if not (p / SCENES_FILE).exists():
        raise FileNotFoundError(f"path {str(p)!r} has no {SCENES_FILE}; save it with save_shapes(dd, path, scenes)")
    with np.load(p / SCENES_FILE) as z:
        arrays = dict(z)
    return dd, {split: Scenes.from_arrays(arrays, f"{split}/") for split in dd}


# ---------------------------------------------------------------- checks
def _check_unit(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    return float(value)
