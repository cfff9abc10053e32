"""vlr_lib.losses against installed peers, where their definitions coincide.

The mappings (written out so that a reader can check them):
- info_nce(S, tau, "mean") == PML NTXentLoss(tau)(img -> txt) + NTXentLoss(tau)(txt -> img):
  PML averages -log(e^{s_ap/tau} / (e^{s_ap/tau} + sum_neg e^{s_an/tau})) over positive pairs,
  which is our per-direction anchor term; with ref_emb the anchors are one modality and the
  candidates the other.
- info_nce(S, tau, "mean") == 2 * open_clip ClipLoss(img, txt, logit_scale=1/tau): ClipLoss is
  the *average* of the two cross-entropies, our "mean" their sum divided by N.
- triplet_hardest(S, m, "sum") == PML TripletMarginLoss(m, CosineSimilarity, SumReducer) with a
  BatchHardMiner, summed over both directions (one positive per anchor, so the miner's hardest
  positive is the positive).
- triplet_all(S, m, "sum") == the same loss without a miner (all triplets), both directions.
PML drops "self" pairs when ref_labels *is* labels; the captions are other items, so we pass
a clone (see the foundation issue).
"""
from __future__ import annotations

import pytest
import torch

from vlr_lib import losses as L
from vlr_lib.similarity import similarity

pml_losses = pytest.importorskip("pytorch_metric_learning.losses")
pml_miners = pytest.importorskip("pytorch_metric_learning.miners")
from pytorch_metric_learning.distances import CosineSimilarity  # noqa: E402
from pytorch_metric_learning.reducers import SumReducer  # noqa: E402


def embeddings(n: int = 16, d: int = 8, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    img = torch.randn(n, d, generator=g, dtype=torch.float64)
    txt = img + 0.8 * torch.randn(n, d, generator=g, dtype=torch.float64)
    return img.requires_grad_(), txt.requires_grad_()


def both_ways(pml_loss, img, txt, labels, miner=None):
    total = 0.0
    for anchors, cands in ((img, txt), (txt, img)):
        ref_labels = labels.clone()
        idx = miner(anchors, labels, cands, ref_labels) if miner is not None else None
        total = total + pml_loss(anchors, labels, indices_tuple=idx, ref_emb=cands, ref_labels=ref_labels)
    return total


def assert_same_value_and_grads(ours, theirs, inputs):
    torch.testing.assert_close(ours, theirs)
    g_ours = torch.autograd.grad(ours, inputs, retain_graph=True)
    g_theirs = torch.autograd.grad(theirs, inputs)
    for a, b in zip(g_ours, g_theirs):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("tau", [0.05, 0.1, 0.5])
@pytest.mark.parametrize("repeat", [False, True], ids=["distinct", "repeated_images"])
def test_info_nce_vs_pml_ntxent(tau, repeat):
    img, txt = embeddings(seed=1)
    labels = torch.arange(16)
    if repeat:  # captions 3 and 9 describe the same image: a positive, not a negative
        labels[9] = 3
    S = similarity(img, txt)
    mask = labels[:, None] == labels[None, :]
    ours = L.info_nce(S, tau, "sum", pos_mask=mask) / int(mask.sum())
    theirs = both_ways(pml_losses.NTXentLoss(temperature=tau), img, txt, labels)
    assert_same_value_and_grads(ours, theirs, (img, txt))


@pytest.mark.parametrize("tau", [0.01, 0.07, 1.0])
def test_info_nce_vs_open_clip(tau):
    open_clip_loss = pytest.importorskip("open_clip.loss")
    img, txt = embeddings(seed=2)
    img_n = torch.nn.functional.normalize(img, dim=-1)
    txt_n = torch.nn.functional.normalize(txt, dim=-1)
    ours = L.info_nce(similarity(img, txt), tau, "mean")
    theirs = 2 * open_clip_loss.ClipLoss()(img_n, txt_n, logit_scale=torch.tensor(1 / tau, dtype=torch.float64))
    assert_same_value_and_grads(ours, theirs, (img, txt))


@pytest.mark.parametrize("margin", [0.05, 0.2, 0.5])
def test_triplet_hardest_vs_pml_batch_hard(margin):
    img, txt = embeddings(seed=3)
    labels = torch.arange(16)
    loss = pml_losses.TripletMarginLoss(margin=margin, distance=CosineSimilarity(), reducer=SumReducer())
    miner = pml_miners.BatchHardMiner(distance=CosineSimilarity())
    ours = L.triplet_hardest(similarity(img, txt), margin, "sum")
    theirs = both_ways(loss, img, txt, labels, miner)
    assert float(ours.detach()) > 0  # the comparison is not vacuous
    assert_same_value_and_grads(ours, theirs, (img, txt))


@pytest.mark.parametrize("margin", [0.05, 0.2, 0.5])
def test_triplet_all_vs_pml_all_triplets(margin):
    img, txt = embeddings(seed=4)
    labels = torch.arange(16)
    loss = pml_losses.TripletMarginLoss(margin=margin, distance=CosineSimilarity(), reducer=SumReducer())
    ours = L.triplet_all(similarity(img, txt), margin, "sum")
    theirs = both_ways(loss, img, txt, labels)
    assert float(ours.detach()) > 0
    assert_same_value_and_grads(ours, theirs, (img, txt))
