"""Models that map inputs into the joint embedding space.

Two families, both ending in an L2-normalised embedding so that S = img @ txt.T
is the cosine similarity of the S contract (docs/architecture.md):

- projection heads (``LinearHead``, ``MLPHead``) on top of frozen, cached
  features -- the setting of the Flickr30K mode and of the loss comparisons;
- tiny encoders trained from scratch (``TinyCNN`` for 64 x 64 RGB images,
  ``TextGRU`` / ``TextBag`` over a whitespace vocabulary) for the end-to-end
  mode on the synthetic shapes data, small enough to train on a laptop CPU.

Normalisation uses ``torch.nn.functional.normalize`` (x / max(||x||, eps), the
formula of ``vlr_lib.similarity.l2_normalize``) because it runs inside the
training step: the checked version would synchronise with the device and turn a
diverging run into a validation error instead of the trainer's
``TrainingDivergedError``. It is computed in float32 even under bf16 autocast.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "LinearHead",
    "MLPHead",
    "make_head",
    "TinyCNN",
    "TextGRU",
    "TextBag",
    "make_text_encoder",
    "Vocabulary",
    "tokenize",
]

PAD, UNK = "<pad>", "<unk>"
_TOKEN = re.compile(r"[a-z0-9]+")


def _unit(x: Tensor) -> Tensor:
    """Rows scaled to unit length, in float32 (bf16 norms are too coarse for cosine scores)."""
    return F.normalize(x.float(), dim=-1)


def _check_dim(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


# --------------------------------------------------------------------------- heads


class LinearHead(nn.Module):
    """x -> normalize(W x + b): the linear projection of VSE++ (Faghri et al.) onto the sphere."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.in_dim, self.out_dim = _check_dim("in_dim", in_dim), _check_dim("out_dim", out_dim)
        self.fc = nn.Linear(in_dim, out_dim)

    def forward(self, x: Tensor) -> Tensor:
        return _unit(self.fc(x))


class MLPHead(nn.Module):
    """x -> normalize(W x + MLP(x)): a linear projection plus a two-layer residual MLP.

    The linear path keeps the head at least as expressive as ``LinearHead`` and
    gives it a well-conditioned start; the MLP (hidden width ``hidden``, ReLU)
    adds non-linear capacity (the projection of VSE-infinity, without batch norm,
    which would couple the examples of a batch and break the exact equality
    between one process and several).
    """

    def __init__(self, in_dim: int, out_dim: int, hidden: int | None = None) -> None:
        super().__init__()
        self.in_dim, self.out_dim = _check_dim("in_dim", in_dim), _check_dim("out_dim", out_dim)
        hidden = _check_dim("hidden", hidden if hidden is not None else max(out_dim, in_dim // 2))
        self.fc = nn.Linear(in_dim, out_dim)
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, out_dim))

    def forward(self, x: Tensor) -> Tensor:
        return _unit(self.fc(x) + self.mlp(x))


HEADS = {"linear": LinearHead, "mlp": MLPHead}


def make_head(kind: str, in_dim: int, out_dim: int) -> nn.Module:
    """A projection head by name: "linear" or "mlp"."""
    if kind not in HEADS:
        raise ValueError(f"head must be one of {tuple(HEADS)}, got {kind!r}")
    return HEADS[kind](in_dim, out_dim)


# --------------------------------------------------------------------------- image encoder


class TinyCNN(nn.Module):
    """A four-block CNN for 64 x 64 RGB images -> unit vectors of size ``out_dim``.

    Each block is conv 3x3 (stride 2) + ReLU: 64 -> 32 -> 16 -> 8 -> 4 pixels,
    then global average and max pooling (position-free colour/shape evidence plus
    its strongest response) and a linear map. Input: uint8 [N, 3, 64, 64] (or
    [N, 64, 64, 3], converted) or float in [0, 1]; scaled to [-1, 1] inside.
    """

    def __init__(self, out_dim: int = 64, width: int = 32) -> None:
        super().__init__()
        self.out_dim = _check_dim("out_dim", out_dim)
        w = _check_dim("width", width)
        chans = [3, w // 2, w, w, 2 * w]
        self.features = nn.Sequential(
            *[
                layer
                for c_in, c_out in zip(chans[:-1], chans[1:])
                for layer in (nn.Conv2d(c_in, c_out, 3, stride=2, padding=1), nn.ReLU())
            ]
        )
        self.channels = chans[-1]
        # Position matters for scenes ("left of", "above"): keep a coarse 2x2 map as well.
        self.fc = nn.Linear(sum(self.pooled_blocks), out_dim)

    @property
    def pooled_blocks(self) -> tuple[int, int, int]:
        """Sizes of the three parts of `pooled`, in order: average, max, 2 x 2 average map."""
        return self.channels, self.channels, 4 * self.channels

    def feature_map(self, images: Tensor) -> Tensor:
        """The last convolutional map, [N, 2 * width, H / 16, W / 16] (4 x 4 for 64 x 64 images)."""
        x = images
        if x.dim() == 4 and x.shape[-1] == 3 and x.shape[1] != 3:
            x = x.permute(0, 3, 1, 2)  # channels-last arrays from PIL / numpy
        if not torch.is_floating_point(x):
            x = x.float() / 255.0
        return self.features(x * 2.0 - 1.0)

    def pool(self, h: Tensor) -> Tensor:
        """A feature map pooled: average, max and 2 x 2 average map, concatenated (see `pooled_blocks`)."""
        return torch.cat([h.mean(dim=(2, 3)), h.amax(dim=(2, 3)), F.adaptive_avg_pool2d(h, 2).flatten(1)], dim=1)

    def pooled(self, images: Tensor) -> Tensor:
        """The pooled convolutional features before the projection, [N, 12 * width]."""
        return self.pool(self.feature_map(images))

    def forward(self, images: Tensor) -> Tensor:
        return _unit(self.fc(self.pooled(images)))


# --------------------------------------------------------------------------- text


def tokenize(text: str) -> list[str]:
    """Lower-case alphanumeric words; punctuation is dropped ("A red, big circle." -> [a, red, big, circle])."""
    return _TOKEN.findall(text.lower())


class Vocabulary:
    """Word <-> id map built from training captions; id 0 pads, id 1 is unknown."""

    def __init__(self, words: Sequence[str]) -> None:
        self.itos = [PAD, UNK, *[w for w in words if w not in (PAD, UNK)]]
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    @classmethod
    def build(cls, captions: Iterable[str], min_count: int = 1) -> "Vocabulary":
        """Every word seen at least ``min_count`` times, most frequent first (ties alphabetical)."""
        counts = Counter(tok for c in captions for tok in tokenize(c))
        return cls([w for w, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if n >= min_count])

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, captions: Sequence[str], max_len: int | None = None) -> Tensor:
        """Padded id matrix [n_captions, max_len] (right padding with 0)."""
        ids = [[self.stoi.get(t, 1) for t in tokenize(c)] or [1] for c in captions]
        length = max_len or max(len(x) for x in ids)
        out = torch.zeros(len(ids), length, dtype=torch.long)
        for row, x in enumerate(ids):  # data preparation, once per dataset
            x = x[:length]
            out[row, : len(x)] = torch.tensor(x)
        return out


class TextGRU(nn.Module):
    """Word embeddings -> GRU -> last hidden state -> linear -> unit vector (the VSE++ text encoder, tiny).

    Input: padded ids [N, L] (0 = pad, right padding). The GRU runs over the full
    padded length; the state at each caption's last real token is taken, so
    padding never changes a caption's embedding.
    """

    def __init__(self, vocab_size: int, out_dim: int = 64, word_dim: int = 32, hidden: int = 64) -> None:
        super().__init__()
        self.out_dim = _check_dim("out_dim", out_dim)
        self.embed = nn.Embedding(_check_dim("vocab_size", vocab_size), _check_dim("word_dim", word_dim), padding_idx=0)
        self.gru = nn.GRU(word_dim, _check_dim("hidden", hidden), batch_first=True)
        self.fc = nn.Linear(hidden, out_dim)

    def forward(self, ids: Tensor) -> Tensor:
        states, _ = self.gru(self.embed(ids))  # [N, L, hidden]
        last = (ids != 0).sum(dim=1).clamp_min(1) - 1
        h = states[torch.arange(ids.shape[0], device=ids.device), last]
        return _unit(self.fc(h))


class TextBag(nn.Module):
    """Mean of word embeddings -> linear -> unit vector: order-blind, the fastest text encoder."""

    def __init__(self, vocab_size: int, out_dim: int = 64, word_dim: int = 64) -> None:
        super().__init__()
        self.out_dim = _check_dim("out_dim", out_dim)
        self.embed = nn.Embedding(_check_dim("vocab_size", vocab_size), _check_dim("word_dim", word_dim), padding_idx=0)
        self.fc = nn.Linear(word_dim, out_dim)

    def forward(self, ids: Tensor) -> Tensor:
        mask = (ids != 0).unsqueeze(-1).float()
        mean = (self.embed(ids) * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1.0)
        return _unit(self.fc(mean))


TEXT_ENCODERS = {"gru": TextGRU, "bag": TextBag}


def make_text_encoder(kind: str, vocab_size: int, out_dim: int, word_dim: int | None = None,
                      hidden: int | None = None) -> nn.Module:
    """A text encoder by name ("gru" or "bag"); `word_dim` / `hidden` default to the class's (the bag has no hidden)."""
    if kind not in TEXT_ENCODERS:
        raise ValueError(f"text_encoder must be one of {tuple(TEXT_ENCODERS)}, got {kind!r}")
    sizes = {"word_dim": word_dim, "hidden": hidden}
    if kind == "bag" and hidden is not None:
        raise ValueError("hidden is a size of the GRU; the 'bag' text encoder has none (leave hidden unset)")
    return TEXT_ENCODERS[kind](vocab_size, out_dim, **{k: v for k, v in sizes.items() if v is not None})
