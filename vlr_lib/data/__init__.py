"""Datasets of the workbook, all in one schema (see `flickr30k.FEATURES`).

- `make_shapes` / `load_shapes`: the synthetic shapes dataset (CPU, no network).
- `load_flickr30k`: Flickr30K, Karpathy split, through Hugging Face `datasets`.

`DATA_MODES` are the two data modes every entry point offers (VLR_DATA, --data).
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

#: The data modes of the workbook: the synthetic shapes (CPU) and Flickr30K (cached features, GPU).
DATA_MODES = ("shapes", "flickr30k")

__all__ = [
    "DATA_MODES",
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
