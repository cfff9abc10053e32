"""vlr_lib.losses against installed peers, where their definitions coincide.

The mappings (written out so that a reader can check them):
- info_nce(S, tau, "mean") == PML NTXentLoss(tau)(img -> txt) + NTXentLoss(tau)(txt -> img):
  PML averages -log(e^{s_ap/tau} / (e^{s_ap/tau} + sum_neg e^{s_an/tau})) over positive pairs,
  which is our per-direction anchor term; with ref_emb the anchors are one modality and the
  candidates the other.
- info_nce(S, tau, "mean") == 2 * open_clip ClipLoss(img, txt, logit_scale=1/tau): ClipLoss is
  the *average* of the two cross-entropies, our "mean" their sum divided by N.
- clip_learned(S, t', "mean") == 2 * open_clip ClipLoss(img, txt, logit_scale=exp(t')): open_clip's model
  holds t' (its `logit_scale` parameter) and hands the loss exp(t'); ours takes t' itself. The factor 2 is
  info_nce's (above); it carries to the gradient w.r.t. t'.
- siglip(S, t', b, "mean") == open_clip SigLipLoss(img, txt, logit_scale=exp(t'), logit_bias=b), no factor:
  both divide the sum of the N^2 terms -log sigmoid(z (t s + b)) by the number of images.
In each, open_clip takes features, not S: unit-norm img and txt, and S = img @ txt.T (vlr_lib.similarity).
- triplet_hardest(S, m, "sum") == PML TripletMarginLoss(m, CosineSimilarity, SumReducer) with a
  BatchHardMiner, summed over both directions (one positive per anchor, so the miner's hardest
  positive is the positive).
- triplet_all(S, m, "sum") == the same loss without a miner (all triplets), both directions.
PML drops "self" pairs when ref_labels *is* labels; the captions are other items, so we pass
a clone (see the foundation issue).
"""
from __future__ import annotations

import math

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


def _unit(img, txt):
    return torch.nn.functional.normalize(img, dim=-1), torch.nn.functional.normalize(txt, dim=-1)


def _leaf(x: float) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64, requires_grad=True)


@pytest.mark.parametrize("logit_scale", [0.0, math.log(1 / 0.07), math.log(100)])
def test_clip_learned_vs_open_clip(logit_scale):
    """Value and gradients w.r.t. both embeddings and the learned t': 2 x ClipLoss at exp(t') (module docstring)."""
    open_clip_loss = pytest.importorskip("open_clip.loss")
    img, txt = embeddings(seed=5)
    t = _leaf(logit_scale)
    ours = L.clip_learned(similarity(img, txt), t, "mean")
    theirs = 2 * open_clip_loss.ClipLoss()(*_unit(img, txt), logit_scale=t.exp())
    assert_same_value_and_grads(ours, theirs, (img, txt, t))


@pytest.mark.parametrize("logit_scale, logit_bias", [(math.log(10), -10.0), (0.0, 0.0), (math.log(100), -5.0),
                                                     (math.log(3), 2.0)])
def test_siglip_vs_open_clip(logit_scale, logit_bias):
    """Value and gradients w.r.t. both embeddings, t' and b: SigLipLoss at exp(t') and b, one process (world_size 1)."""
    open_clip_loss = pytest.importorskip("open_clip.loss")
    img, txt = embeddings(seed=6)
    t, b = _leaf(logit_scale), _leaf(logit_bias)
    ours = L.siglip(similarity(img, txt), t, b, "mean")
    theirs = open_clip_loss.SigLipLoss()(*_unit(img, txt), logit_scale=t.exp(), logit_bias=b)
    assert_same_value_and_grads(ours, theirs, (img, txt, t, b))


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
