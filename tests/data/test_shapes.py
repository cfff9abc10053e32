"""The synthetic shapes dataset: determinism, schema, captions, rendering, difficulty."""
from __future__ import annotations

import io
import itertools
import subprocess
import sys
import time
from pathlib import Path

import datasets
import numpy as np
import pytest
from PIL import Image

from vlr_lib.data import COLUMNS, FEATURES, check_schema, load_shapes, make_shapes, save_shapes
from vlr_lib.data import shapes as S

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def small():
    return make_shapes(24, 8, 8, difficulty=0.5, seed=3, return_scenes=True)


def _table(ds):
    return ds.with_format("arrow")[:]


def _words(text: str) -> set[str]:
    return set(text.replace(",", " ").replace(":", " ").split())


# ---------------------------------------------------------------- determinism, splits, schema
def test_same_seed_gives_byte_identical_data(small):
    again = make_shapes(24, 8, 8, difficulty=0.5, seed=3)
    for split in ("train", "validation", "test"):
        assert _table(again[split]).equals(_table(small[0][split]))
    raw = small[0]["train"].cast_column("image", datasets.Image(decode=False))
    assert raw[0]["image"]["bytes"][:8] == b"\x89PNG\r\n\x1a\n"


def test_different_seed_gives_different_data(small):
    other = make_shapes(24, 8, 8, difficulty=0.5, seed=4)
    assert other["train"]["caption"][:] != small[0]["train"]["caption"][:]


def test_n_train_does_not_change_the_other_splits(small):
    bigger = make_shapes(40, 8, 8, difficulty=0.5, seed=3)
    for split in ("validation", "test"):
        a, b = _table(bigger[split]), _table(small[0][split])
        assert a.column("image").equals(b.column("image"))
        assert a.column("caption").equals(b.column("caption"))


def test_split_sizes_names_and_ids(small):
    dd = small[0]
    assert list(dd) == ["train", "validation", "test"]
    assert [len(dd[k]) for k in dd] == [24, 8, 8]
    assert set(dd["train"]["split"]) == {"train"}
    assert set(dd["validation"]["split"]) == {"val"}  # the Karpathy spelling, as in Flickr30K
    assert set(dd["test"]["split"]) == {"test"}
    ids = [i for k in dd for i in dd[k]["img_id"]]
    assert ids == [str(i) for i in range(40)]
    assert dd["test"][0]["filename"] == "shapes_32.png"


def test_schema_is_the_flickr30k_schema(small):
    check_schema(small[0])
    for ds in small[0].values():
        assert tuple(ds.column_names) == COLUMNS
        assert ds.features == FEATURES
    img = small[0]["train"][0]["image"]
    assert img.size == (64, 64) and img.mode == "RGB"


def test_every_image_has_five_distinct_captions(small):
    for ds in small[0].values():
        for caps in ds["caption"]:
            assert len(caps) == 5 and len(set(caps)) == 5
            assert all(isinstance(c, str) and c for c in caps)


def test_captions_name_exactly_the_colours_and_shapes_of_the_scene(small):
    dd, scenes = small
    for split in dd:
        for caps, attrs in zip(dd[split]["caption"], scenes[split].attrs):
            present = attrs[attrs[:, 0] >= 0]
            words = set().union(*(_words(c) for c in caps))
            assert {S.COLORS[c] for c in present[:, 0]} == words & set(S.COLORS)
            assert {S.SHAPES[h] for h in present[:, 1]} == words & set(S.SHAPES)


def test_captions_vary_in_wording():
    dd = make_shapes(60, 4, 4, seed=0)
    first_words = {caps[0].split()[0] for caps in dd["train"]["caption"]}
    assert len(first_words) >= 5  # several templates open captions in different ways


# ---------------------------------------------------------------- relations and rendering
@pytest.mark.parametrize(
    "a, b, expected",
    [(0, 1, "left of"), (2, 0, "right of"), (1, 7, "above"), (7, 4, "below"),
     (0, 8, "left of"),  # diagonal: horizontal wins ties
     (3, 2, "left of"), (6, 1, "below")],
)
def test_relation_by_hand(a, b, expected):
    # cells: 0 1 2 / 3 4 5 / 6 7 8 (row-major, row 0 at the top)
    names = ("left of", "right of", "above", "below")
    assert names[S.relation(a, b)] == expected


def test_pixels_show_each_object_in_its_cell(small):
    dd, scenes = small
    cell = 64 / S.GRID
    for img, attrs in zip(dd["train"]["image"], scenes["train"].attrs):
        pix = np.asarray(img)
        present = attrs[attrs[:, 0] >= 0]
        for color, _, _, pos in present:
            if (present[:, 0] == color).sum() > 1:
                continue  # same colour twice: centroids would mix
            ys, xs = np.nonzero((pix == S.RGB[color]).all(-1))
            assert len(ys) > 10
            assert int(ys.mean() // cell) == pos // S.GRID and int(xs.mean() // cell) == pos % S.GRID
        drawn = (pix != S.BACKGROUND).any(-1).sum()
        assert drawn == sum(((pix == S.RGB[c]).all(-1)).sum() for c in set(present[:, 0]))


def test_large_objects_cover_more_pixels_than_small_ones():
    dd, scenes = make_shapes(40, 4, 4, seed=1, return_scenes=True)
    area = {0: [], 1: []}
    for img, attrs in zip(dd["train"]["image"], scenes["train"].attrs):
        pix = np.asarray(img)
        present = attrs[attrs[:, 0] >= 0]
        for color, _, size, _ in present:
            if (present[:, 0] == color).sum() == 1:
                area[size].append((pix == S.RGB[color]).all(-1).sum())
    assert min(area[1]) > max(area[0])


def test_png_encoder_round_trips_through_an_independent_decoder():
    img = np.random.default_rng(0).integers(0, 256, size=(7, 5, 3), dtype=np.uint8)
    decoded = np.asarray(Image.open(io.BytesIO(S.encode_png(img))).convert("RGB"))
    np.testing.assert_array_equal(decoded, img)


# ---------------------------------------------------------------- difficulty
def _overlap_reference(scenes: S.Scenes) -> np.ndarray:
    """Loop version of the documented shared-attribute share, max over the other scenes."""
    n = len(scenes)
    best = np.full(n, -1.0)
    for i, j in itertools.permutations(range(n), 2):
        ni, nj = scenes.n_objects[i], scenes.n_objects[j]
        equal = int(ni == nj)
        for k in range(min(ni, nj)):
            equal += sum(int(scenes.attrs[i, k, a] == scenes.attrs[j, k, a]) for a in range(4))
        best[i] = max(best[i], equal / (1 + 4 * max(ni, nj)))
    return best


def test_scene_overlap_matches_loop_reference():
    _, scenes = make_shapes(30, 4, 4, difficulty=0.6, seed=5, return_scenes=True)
    np.testing.assert_allclose(S.scene_overlap(scenes["train"]), _overlap_reference(scenes["train"]))


_CONTENT = set(S.COLORS) | set(S.SHAPES) | {"small", "little", "tiny", "large", "big", "left", "right", "above",
                                             "below", "over", "under", "top", "bottom", "middle"}


def _caption_overlap(dd, k: int = 3) -> float:
    """Mean over images of the k largest Jaccard indices of content words with other images' captions."""
    bags = [set().union(*(_words(c) for c in caps)) & _CONTENT for caps in dd["train"]["caption"]]
    best = [np.mean(sorted((len(a & b) / len(a | b) for j, b in enumerate(bags) if j != i), reverse=True)[:k])
            for i, a in enumerate(bags)]
    return float(np.mean(best))


def test_higher_difficulty_means_more_shared_attributes():
    attr, text = [], []
    for d in (0.0, 0.5, 1.0):
        dd, scenes = make_shapes(160, 4, 4, difficulty=d, seed=0, return_scenes=True)
        attr.append(S.scene_overlap(scenes["train"], k=3).mean())
        text.append(_caption_overlap(dd))
    # measured here: attributes 0.61 / 0.65 / 0.83, caption words 0.60 / 0.62 / 0.65
    assert attr[0] + 0.02 < attr[1] and attr[1] + 0.05 < attr[2], attr
    assert text[0] < text[1] < text[2] and text[0] + 0.02 < text[2], text


def test_difficulty_one_gives_minimal_pairs():
    _, scenes = make_shapes(40, 4, 4, difficulty=1.0, seed=2, group_size=4, return_scenes=True)
    sc = scenes["train"]
    for g in np.unique(sc.group):
        members = np.flatnonzero(sc.group == g)
        base = members[0]
        for m in members[1:]:
            assert sc.n_objects[m] == sc.n_objects[base]
            assert (sc.attrs[m] != sc.attrs[base]).sum() == 1  # exactly one colour, shape or size differs
        flat = {sc.attrs[m].tobytes() for m in members}
        assert len(flat) == len(members)  # no two scenes of a group are equal


def test_difficulty_zero_does_not_copy_the_base():
    _, scenes = make_shapes(400, 4, 4, difficulty=0.0, seed=2, return_scenes=True)
    sc = scenes["train"]
    member = np.arange(len(sc)) % 4
    same_colour = sc.attrs[member > 0, 0, 0] == sc.attrs[np.arange(len(sc))[member > 0] - member[member > 0], 0, 0]
    assert abs(same_colour.mean() - 1 / len(S.COLORS)) < 0.06  # chance level


def test_objects_of_a_scene_occupy_distinct_cells():
    _, scenes = make_shapes(200, 4, 4, difficulty=0.8, seed=7, return_scenes=True)
    for attrs in scenes["train"].attrs:
        cells = attrs[attrs[:, 3] >= 0, 3]
        assert len(set(cells)) == len(cells)


def test_attribute_matrix_counts():
    _, scenes = make_shapes(20, 4, 4, seed=1, return_scenes=True)
    sc = scenes["train"]
    m = S.attribute_matrix(sc)
    assert m.shape == (20, 6 + 4 + 2 + 9 + 3)
    np.testing.assert_array_equal(m[:, :6].sum(1), sc.n_objects)
    np.testing.assert_array_equal(m[:, -3:].argmax(1) + 1, sc.n_objects)


# ---------------------------------------------------------------- inputs, speed, disk, script
@pytest.mark.parametrize(
    "kwargs, exc, name",
    [({"difficulty": 1.5}, ValueError, "difficulty"), ({"difficulty": "hard"}, TypeError, "difficulty"),
     ({"n_train": 0}, ValueError, "n_train"), ({"n_val": 2.5}, TypeError, "n_val"),
     ({"image_size": 8}, ValueError, "image_size"), ({"seed": -1}, ValueError, "seed"),
     ({"group_size": 0}, ValueError, "group_size")],
)
def test_bad_inputs_name_the_argument(kwargs, exc, name):
    with pytest.raises(exc, match=f"^{name}"):
        make_shapes(**{"n_train": 4, "n_val": 2, "n_test": 2, **kwargs})


def test_two_thousand_images_take_seconds():
    start = time.perf_counter()
    dd = make_shapes(2000, 10, 10, seed=0)
    assert len(dd["train"]) == 2000
    assert time.perf_counter() - start < 20  # ~1 s here; generous for a shared CPU


def test_save_and_load_round_trip(tmp_path, small):
    dd, scenes = small
    save_shapes(dd, tmp_path / "shapes", scenes)
    back, back_scenes = load_shapes(tmp_path / "shapes", return_scenes=True)
    for split in dd:
        assert _table(back[split]).equals(_table(dd[split]))
        np.testing.assert_array_equal(back_scenes[split].attrs, scenes[split].attrs)
    with pytest.raises(FileNotFoundError, match="path"):
        load_shapes(tmp_path / "nothing")


def test_make_shapes_script(tmp_path):
    script = ROOT / "data_scripts" / "make_shapes.py"
    help_out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, check=True)
    assert "--difficulty" in help_out.stdout and "--out" in help_out.stdout
    out = tmp_path / "s"
    args = ["--out", str(out), "--n-train", "8", "--n-val", "4", "--n-test", "4", "--seed", "9", "--difficulty", "0.3"]
    subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, check=True, cwd=tmp_path)
    expected = make_shapes(8, 4, 4, difficulty=0.3, seed=9)
    loaded = load_shapes(out)
    for split in expected:
        assert _table(loaded[split]).equals(_table(expected[split]))
