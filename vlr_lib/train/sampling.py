"""Which captions form each batch of an epoch, drawn on the device from (seed, epoch).

VSE++ (Faghri et al.) iterates over *captions*: an epoch visits every caption
once, each paired with its image. Two captions of one image can then meet in a
batch; their images are the same, so each caption's image is a positive for
the other caption, not a negative. The trainer masks these false negatives with
``similarity.positive_mask`` on the image ids (the pos_mask of the S contract,
docs/architecture.md).

Batches are a pure function of (seed, epoch): the permutation of epoch e is
drawn from a generator seeded with ``seed`` and ``e``. A resumed run therefore
draws exactly the batches of an uninterrupted one without storing RNG state.
"""
from __future__ import annotations

import torch
from torch import Tensor

from ..similarity import positive_mask

SAMPLINGS = ("captions", "images")


def epoch_generator(seed: int, epoch: int, device: torch.device) -> torch.Generator:
    """A generator on `device` seeded by (seed, epoch); different epochs get unrelated streams."""
    g = torch.Generator(device=device)
    g.manual_seed((int(seed) * 1_000_003 + int(epoch) * 7_919 + 17) % (2**63 - 1))
    return g


def _one_caption_per_image(caption_to_image: Tensor, n_images: int, g: torch.Generator) -> Tensor:
    """A random caption of every image, as caption indices in image order."""
    keys = torch.rand(caption_to_image.numel(), generator=g, device=caption_to_image.device)
    best = torch.full((n_images,), -1.0, device=keys.device).scatter_reduce(0, caption_to_image, keys, "amax")
    chosen = (keys == best[caption_to_image]).nonzero().squeeze(1)  # keys are distinct with probability 1
    return chosen[torch.argsort(caption_to_image[chosen], stable=True)]


def epoch_batches(
    caption_to_image: Tensor,
    n_images: int,
    batch_size: int,
    seed: int,
    epoch: int,
    sampling: str = "captions",
) -> Tensor:
    """Caption indices of every batch of the epoch, shape [n_batches, batch_size], on caption_to_image's device.

    - "captions" (VSE++): a permutation of all captions cut into batches;
    - "images": one random caption per image, images permuted: no image repeats
      inside a batch (5x shorter epochs with 5 captions per image).

    The last incomplete batch is dropped (a different remainder every epoch), so
    every step sees the same number of negatives. Batches whose captions all
    describe one image have no negative at all and are dropped too (possible only
    when batch_size <= captions per image).
    """
    g = epoch_generator(seed, epoch, caption_to_image.device)
    if sampling == "images":
        pool = _one_caption_per_image(caption_to_image, n_images, g)
        order = pool[torch.randperm(pool.numel(), generator=g, device=pool.device)]
    else:
        order = torch.randperm(caption_to_image.numel(), generator=g, device=caption_to_image.device)
    n_batches = order.numel() // batch_size
    batches = order[: n_batches * batch_size].view(n_batches, batch_size)
    ids = caption_to_image[batches]
    return batches[~(ids == ids[:, :1]).all(dim=1)]


def batch_mask(image_ids: Tensor) -> Tensor | None:
    """pos_mask of a batch of (image, caption) pairs; None (the diagonal) when no image repeats.

    Returning None keeps the losses on their faster diagonal path. The test reads the mask:
    the trainer calls it on the host copy of the ids (:func:`epoch_positives`), never on the device.
    """
    mask = positive_mask(image_ids)
    return mask if int(mask.sum()) > image_ids.numel() else None


Pairs = tuple[Tensor, Tensor]


def epoch_positives(caption_to_image: Tensor, batches: Tensor) -> list[Pairs | None]:
    """Per batch of the epoch: (rows, cols) of its pos_mask on the device, or None when no image repeats.

    Worked out on the host from one copy of the epoch's image ids -- one synchronisation per
    epoch -- and sent to the device in one non-blocking copy, so that the step loop never waits
    for the device: the losses take these pairs (``vlr_lib._checks.validated``) instead of
    calling ``nonzero`` on every masked batch. They are in ``pos_mask.nonzero()`` order; the
    mask is symmetric (the batch's image ids on both axes), so they are its transpose's too.
    """
    ids = caption_to_image[batches].cpu()
    pairs = [None if (m := batch_mask(row)) is None else torch.stack(m.nonzero(as_tuple=True)) for row in ids]
    found = [p for p in pairs if p is not None]
    if not found:
        return [None] * len(pairs)
    flat = torch.cat(found, dim=1)
    if caption_to_image.device.type == "cuda":
        flat = flat.pin_memory()  # page-locked: the copy below runs asynchronously
    flat = flat.to(caption_to_image.device, non_blocking=True)
    out: list[Pairs | None] = []
    start = 0
    for p in pairs:
        n = 0 if p is None else p.shape[1]
        out.append(None if p is None else (flat[0, start : start + n], flat[1, start : start + n]))
        start += n
    return out
