"""vlr_lib.similarity: S, its positives and the one hardest-negative finder, against loops."""
from __future__ import annotations

import pytest
import torch

from vlr_lib import losses
from vlr_lib.similarity import DIRECTIONS, hardest_negative_mask, hardest_negatives, positive_mask, similarity


def rand_S(n: int, m: int, seed: int) -> torch.Tensor:
    return torch.rand(n, m, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 2 - 1


def test_directions_and_similarity_is_cosine():
    assert DIRECTIONS == ("i2t", "t2i")
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(4, 3, generator=g), torch.randn(6, 3, generator=g)
    S = similarity(x, y)
    expected = torch.tensor([[float(a @ b / (a.norm() * b.norm())) for b in y] for a in x])
    torch.testing.assert_close(S, expected)
    with pytest.raises(ValueError, match="embedding dimension"):
        similarity(x, torch.randn(2, 4))


def test_positive_mask_from_ids():
    c2i = torch.tensor([0, 0, 1, 2, 2])
    mask = positive_mask(torch.arange(3), c2i)
    assert mask.tolist() == [[c2i[c] == i for c in range(5)] for i in range(3)]
    ids = torch.tensor([0, 1, 0])  # image 0 twice in a batch: its other caption is no negative
    assert positive_mask(ids).tolist() == [[True, False, True], [False, True, False], [True, False, True]]
    with pytest.raises(ValueError, match="image_ids"):
        positive_mask(torch.zeros(2, 2))


def loop_hardest(S: torch.Tensor, pos: torch.Tensor, direction: str) -> torch.Tensor:
    """First maximum among each query's negatives, by loops."""
    out = torch.zeros_like(pos)
    rows = S if direction == "i2t" else S.T
    mask = pos if direction == "i2t" else pos.T
    for q in range(rows.shape[0]):
        negs = [j for j in range(rows.shape[1]) if not mask[q, j]]
        best = negs[0]
        for j in negs[1:]:
            if rows[q, j] > rows[q, best]:
                best = j
        if direction == "i2t":
            out[q, best] = True
        else:
            out[best, q] = True
    return out


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("n, per, levels", [(2, 1, None), (3, 2, None), (6, 5, None), (5, 1, 3), (4, 3, 2)])
def test_hardest_negative_mask_against_loops(direction, n, per, levels):
    S = rand_S(n, n * per, seed=n * per)
    if levels:  # ties: the first maximum is picked, one per query
        S = (S * levels).round() / levels
    pos = positive_mask(torch.arange(n), torch.arange(n * per) // per)
    mask = hardest_negative_mask(S, None if per == 1 else pos, direction)
    assert torch.equal(mask, loop_hardest(S, pos, direction))
    assert not (mask & pos).any() and int(mask.sum()) == (n if direction == "i2t" else n * per)


def test_hardest_negatives_is_what_triplet_hardest_differentiates():
    """The gradient of VSE++'s max reaches exactly the entry the finder names, ties included."""
    S = (rand_S(6, 6, seed=3) * 2).round() / 2  # many ties
    pos = torch.eye(6, dtype=torch.bool)
    leaf = S.clone().requires_grad_()
    losses.triplet_hardest(leaf, margin=5.0).backward()  # every query active
    hit = (leaf.grad > 0) & ~pos
    assert torch.equal(hit, hardest_negative_mask(S) | hardest_negative_mask(S, direction="t2i"))
    values, indices = hardest_negatives(S, ~pos)
    torch.testing.assert_close(values, S.masked_fill(pos, -9).max(dim=1).values)
    assert torch.equal(S[torch.arange(6), indices], values)


def test_hardest_negative_mask_bad_input():
    with pytest.raises(ValueError, match="direction"):
        hardest_negative_mask(torch.zeros(2, 2), direction="both")
    with pytest.raises(ValueError, match="S must be square"):
        hardest_negative_mask(torch.zeros(2, 3))
