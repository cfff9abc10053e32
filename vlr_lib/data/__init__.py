"""Datasets of the workbook, all in one schema (see `flickr30k.FEATURES`).

- `make_shapes` / `load_shapes`: the synthetic shapes dataset (CPU, no network).
- `load_flickr30k`: Flickr30K, Karpathy split, through Hugging Face `datasets`.
"""
from .flickr30k import (
    COLUMNS,
    DEFAULT_REPO_ID,
    DEFAULT_REVISION,
    FEATURES,
    KARPATHY_SIZES,
    SPLITS,
    DatasetUnavailableError,
    check_schema,
    check_split_sizes,
    load_flickr30k,
    normalize_flickr30k,
)
from .shapes import Scenes, attribute_matrix, load_shapes, make_shapes, save_shapes, scene_overlap

__all__ = [
    "COLUMNS",
    "DEFAULT_REPO_ID",
    "DEFAULT_REVISION",
    "FEATURES",
    "KARPATHY_SIZES",
    "SPLITS",
    "DatasetUnavailableError",
    "Scenes",
    "attribute_matrix",
    "check_schema",
    "check_split_sizes",
    "load_flickr30k",
    "load_shapes",
    "make_shapes",
    "normalize_flickr30k",
    "save_shapes",
    "scene_overlap",
]
