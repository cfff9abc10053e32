"""Why losses behave differently: where the gradient goes, COCOS counts and tangent-gradient norms.

Analyses from the source papers, all functions of the S contract
(docs/architecture.md); the figures of vlr_lib.viz draw what these compute:

- :func:`loss_gradient` -- dL/dS of any loss on a batch (autograd), the one way every
  notebook and figure looks at a gradient;
- the weight each negative gets: :func:`softmax_weights` (NT-Xent, Bleeker & de Rijke
  eq. 11) with :func:`effective_number`, :func:`unified_weights` and the one-negative
  curves :func:`unified_one_negative_loss` / :func:`unified_one_negative_weight`
  (Li et al. eqs. 13-16), :func:`partition_weights` (Veit & Wilber eqs. 2-6), :func:`siglip_weights`
  (Zhai et al.'s sigmoid loss, Algorithm 1: each pair's weight depends on its own similarity alone);
- :func:`unified_limit` -- how fast the unified loss tends to Triplet-SH as gamma grows (Li et al. eq. 6);

- :func:`cocos` -- *counting contributing samples* (Bleeker & de Rijke, sec. 4,
  eqs. 9-13): how many candidates of a batch enter the gradient w.r.t. each query
  for Triplet, Triplet-SH, NT-Xent and SmoothAP; :func:`cocos_mask` says which ones,
  and :func:`cocos_table` lays the counts out like the paper's Tables 2-4.
- :func:`tangent_gradient_norms` -- the part of the gradient that is tangent to
  the unit hypersphere (Li et al. sec. 3.3, eqs. 8-19), and the closed forms
  :func:`triplet_hn_tangent_norm` (eqs. 11-12) and :func:`unified_tangent_norm`
  (eqs. 17-18, one negative) for the three-vector geometry of Li et al. Fig. 2, whose
  descent directions :func:`triplet_hn_descent` gives.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np
import torch
from torch import Tensor

from . import losses
from ._checks import (
    check_choice,
    check_int,
    check_nonnegative,
    check_positive,
    check_scalar,
    check_similarity,
    check_tensor,
)
from .similarity import DIRECTIONS, hardest_negatives, l2_normalize

__all__ = [
    "loss_gradient",
    "softmax_weights",
    "effective_number",
    "unified_one_negative_loss",
    "unified_one_negative_weight",
    "unified_weights",
    "UnifiedLimit",
    "unified_limit",
    "partition_weights",
    "siglip_weights",
    "COCOS_LOSSES",
    "CocosSettings",
    "cocos",
    "cocos_mask",
    "cocos_table",
    "TangentNorms",
    "tangent_gradient_norms",
    "SphereNorms",
    "triplet_hn_tangent_norm",
    "unified_tangent_norm",
    "SphereTriplet",
    "triplet_hn_descent",
]

#: The losses COCOS is defined for (Bleeker & de Rijke sec. 4); each training loss names its rule in its registry
#: entry (``vlr_lib.registry.cocos_rules``): the paper counts only these four losses (eqs. 9-13).
COCOS_LOSSES = ("triplet", "triplet_sh", "nt_xent", "smooth_ap")

_TABLE_OF = {"triplet": 2, "triplet_sh": 2, "nt_xent": 3, "smooth_ap": 4}


# --------------------------------------------------------------------------- dL/dS and the weight of each negative


def loss_gradient(S: Tensor, loss_fn: Callable[[Tensor], Tensor]) -> Tensor:
    """dL/dS of a scalar loss ``loss_fn(S)`` by autograd, detached; S itself and its graph are not touched.

    The one helper behind every "where does the gradient go" figure and notebook cell:
    ``loss_gradient(S, lambda X: losses.triplet_hardest(X, 0.2))``.

    Derived in notebooks/02_triplet_losses.py.
    """
    check_tensor("S", S, ndim=2)
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be a callable S -> scalar loss, got {type(loss_fn).__name__}")
    with torch.enable_grad():
        leaf = S.detach().clone().requires_grad_()
        loss = loss_fn(leaf)
        if not isinstance(loss, Tensor) or loss.numel() != 1:
            raise ValueError("loss_fn must return a scalar tensor")
        (grad,) = torch.autograd.grad(loss.reshape(()), leaf, allow_unused=True)
    return torch.zeros_like(leaf) if grad is None else grad.detach()


def _oriented(S: Tensor, pos_mask: Tensor | None, direction: str) -> tuple[Tensor, Tensor | None]:
    """S (and mask) with the queries of `direction` as rows: images for "i2t", captions for "t2i"."""
    check_choice("direction", direction, DIRECTIONS)
    if direction == "i2t":
        return S, pos_mask
    return S.T, None if pos_mask is None else pos_mask.T


def softmax_weights(
    S: Tensor, temperature: float, pos_mask: Tensor | None = None, direction: str = "i2t"
) -> Tensor:
    r"""Weight of every negative in the NT-Xent gradient of its query (Bleeker & de Rijke eq. 11).

    Row q of the result holds, for each negative n of query q,
    :math:`p_{qn} = e^{s_{qn}/\tau} / Z(q)` -- the factor of :math:`\tau^{-1} v_n` in
    eq. 11 -- and 0 at the query's positives. Read off the library's loss:
    :math:`\tau\,\partial L / \partial s_{qn}` of the one-direction NT-Xent
    ``losses.sampled_softmax(S, scale=1/tau, reduction="sum")``. With one positive per
    query each row sums to :math:`1 - p_{q+}`, the weight of the positive; with several
    (a `pos_mask`), the weights of the query's positive pairs add up. Rows are the
    queries of `direction` ("i2t": images, "t2i": captions).

    Derived in notebooks/03_contrastive.py.
    """
    t = check_positive("temperature", temperature)
    S_q, mask_q = _oriented(S, pos_mask, direction)
    _, pos = check_similarity(S_q, mask_q, both_directions=False)
    grad = loss_gradient(
        S_q, lambda X: losses.sampled_softmax(X, scale=1.0 / t, reduction="sum", pos_mask=mask_q)
    )
    return (grad * t).masked_fill(~pos.neg, 0.0)


def effective_number(weights: object) -> float:
    r"""Effective number of negatives :math:`\exp(H(p))`, p the weights normalised to sum 1.

    The perplexity of the weight distribution: k for k equal weights, 1 when one
    negative takes all the weight (Triplet-SH's mining). A display statistic of this
    workbook, not from the papers. 0.0 when every weight is 0 (no negative gets gradient).

    Derived in notebooks/03_contrastive.py.
    """
    w = torch.as_tensor(np.asarray(weights.detach().cpu() if isinstance(weights, Tensor) else weights,
                                   dtype=np.float64)).flatten()
    if w.numel() == 0 or not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
        raise ValueError("weights must be a non-empty array of finite values >= 0")
    total = w.sum()
    if total <= 0:
        return 0.0
    p = w[w > 0] / total
    return float(torch.exp(-(p * p.log()).sum()))


class TemperatureSweep(NamedTuple):
    """Soft mining of NT-Xent at each temperature of a sweep (:func:`temperature_sweep`), one value per temperature."""

    temperatures: np.ndarray  #: sorted ascending
    query_effective_number: list[float]  #: effective number of the query's negatives
    mean_effective_number: list[float]  #: over the queries that get any gradient (NaN when none does)
    hardest_share: list[float]  #: the query's heaviest negative's share of its weight (NaN when all are 0)


def temperature_sweep(S: Tensor, temperatures: object, query: int = 0, pos_mask: Tensor | None = None,
                      direction: str = "i2t") -> TemperatureSweep:
    """:func:`softmax_weights` over a sweep of temperatures, read as soft hard-negative mining.

    For the query `query` (a row of `direction`'s queries): the :func:`effective_number` of its negatives and the
    share of the heaviest one; and the mean effective number over the queries that get any gradient (at a tiny
    temperature an easy query's weights all underflow to exactly 0: it is left out of the mean).

    Derived in notebooks/03_contrastive.py.
    """
    taus = np.asarray(sorted(check_positive("temperatures", float(t)) for t in temperatures))
    if taus.size < 2:
        raise ValueError("temperatures must hold at least two values")
    S_q, mask_q = _oriented(S, pos_mask, direction)
    neg = check_similarity(S_q, mask_q, both_directions=False)[1].neg
    query = check_int("query", query, 0, S_q.shape[0] - 1)
    idx = torch.nonzero(neg[query]).flatten()
    n_eff_q, n_eff_mean, top_q = [], [], []
    for t in taus:
        W = softmax_weights(S, float(t), pos_mask, direction)
        w = W[query, idx[torch.argsort(W[query, idx], descending=True, stable=True)]].detach().cpu().numpy()
        w = w.astype(np.float64)  # the share in float64, whatever the dtype of S
        n_eff_q.append(effective_number(w))
        top_q.append(w[0] / w.sum() if w.sum() > 0 else np.nan)
        live = [effective_number(row) for row in W if (row > 0).any()]
        n_eff_mean.append(np.mean(live) if live else np.nan)
    return TemperatureSweep(taus, n_eff_q, n_eff_mean, top_q)


def _as_gaps(x: object) -> Tensor:
    gaps = torch.as_tensor(x, dtype=torch.float64)
    return check_tensor("x", gaps)


def unified_one_negative_loss(x: object, margin: float, gamma: float) -> Tensor:
    r"""One query term of the unified loss with a single negative at gap x = s_ij - s_ii (Li et al. eqs. 5, 13).

    :math:`\frac{1}{\gamma}\log(1 + e^{\gamma(x + m)})`, a stable softplus, float64,
    elementwise over `x` (a number, array or tensor of gaps). It is :math:`[x + m]_+`
    within :math:`\log 2/\gamma` (eq. 6) and, with m = 0, :math:`1/\gamma` times the
    NT-Xent term at temperature :math:`1/\gamma` (eq. 7).

    Derived in notebooks/04_unified_loss.py.
    """
    m, g = check_nonnegative("margin", margin), check_positive("gamma", gamma)
    return torch.logaddexp(torch.zeros(()), g * (_as_gaps(x) + m)) / g


def unified_one_negative_weight(x: object, margin: float, gamma: float) -> Tensor:
    r"""d(:func:`unified_one_negative_loss`)/dx = D/(1+D) = sigmoid(gamma (x + m)) (Li et al. eqs. 14-16).

    :math:`D = e^{\gamma(x + m)}`; the :math:`1/\gamma` of eq. 5 cancels the chain rule's
    :math:`\gamma`, so this is eq. 15 for any gamma. It tends to the step 1{x > -m} of
    Triplet-HN as gamma grows (eq. 6).

    Derived in notebooks/04_unified_loss.py.
    """
    m, g = check_nonnegative("margin", margin), check_positive("gamma", gamma)
    return torch.sigmoid(g * (_as_gaps(x) + m))


def unified_weights(S: Tensor, margin: float, gamma: float, pos_mask: Tensor | None = None) -> Tensor:
    r"""Weight :math:`D_{in}/(1 + \sum_k D_{ik})` of every negative in its image query's unified term (Li eqs. 14-16).

    :math:`D_{in} = e^{\gamma(s_{in} - s_{ij} + m)}` for the positive pair (i, j) of row i:
    the image -> text half of :func:`vlr_lib.losses.unified` pushes negative n down with
    this weight (a softmax over the negatives and the "1" of the positive). 0 at
    positives; with several positives in a row (`pos_mask`) their pairs' weights add.
    The caption -> text half is ``unified_weights(S.T, ...).T``; the two sum to autograd
    of ``losses.unified(S, m, gamma, "sum")`` at every negative.

    Derived in notebooks/04_unified_loss.py.
    """
    m, g = check_nonnegative("margin", margin), check_positive("gamma", gamma)
    S, pos = check_similarity(S, pos_mask, both_directions=False)
    S = S.detach()
    rows, neg = S[pos.rows], pos.neg[pos.rows]  # the row of each positive pair's image query
    logits = (g * (rows - S[pos.rows, pos.cols][:, None] + m)).masked_fill(~neg, -math.inf)
    log_z = torch.logaddexp(torch.logsumexp(logits, dim=1, keepdim=True), S.new_zeros(()))  # the "1 +"
    return torch.zeros_like(S).index_add_(0, pos.rows, torch.exp(logits - log_z))


class UnifiedLimit(NamedTuple):
    """The unified loss against its gamma -> infinity limit on one batch (:func:`unified_limit`)."""

    gammas: np.ndarray  # the scales, sorted
    gap: np.ndarray  # unified(S, m, gamma) - triplet_hardest(S, m)
    bound: np.ndarray  # 2 P log(N) / gamma, the gap's upper bound
    resolution: float  # 8 eps L: a smaller gap is float64 rounding, not a measurement


def unified_limit(S: Tensor, margin: float, gammas: object) -> UnifiedLimit:
    r"""unified(S, m, gamma) - triplet_hardest(S, m) for each of `gammas` and its bound (Li et al. eq. 6 with a rate).

    Each query term satisfies :math:`\max(0, \max_j \gamma x_j) \le \log(1 + \sum_j e^{\gamma x_j})
    \le \max(0, \max_j \gamma x_j) + \log N` (N candidates: the N - 1 negatives and the 1), so the
    gap lies in :math:`[0, 2 P \log N / \gamma]` for P positive pairs and two directions: the unified
    loss tends to Triplet-SH (VSE++'s max of hinges) as gamma grows. Both losses are sums of size L;
    in float64 a gap below a few ulps of L (`resolution`, 8 eps L) is rounding. S is square with its
    positives on the diagonal.

    Derived in notebooks/04_unified_loss.py.
    """
    m = check_nonnegative("margin", margin)
    S, pos = check_similarity(S)
    g = np.asarray(sorted(check_positive("gammas", float(v)) for v in gammas))
    hn = float(losses.triplet_hardest(S, m))
    unified = np.array([float(losses.unified(S, m, float(v))) for v in g])
    resolution = 8 * np.finfo(np.float64).eps * max(abs(hn), float(np.abs(unified).max(initial=0.0)), 1e-300)
    return UnifiedLimit(g, unified - hn, 2 * pos.count * np.log(S.shape[1]) / g, resolution)


def partition_weights(
    S: Tensor, query: int, loss: str = "sampled_softmax", topk: int | float | None = None, scale: float = 20.0
) -> Tensor:
    r"""Softmax weight of every entry of S in the partition function of query `query`'s term (Veit & Wilber).

    `loss` is "sampled_softmax" (eq. 2; with `topk`, stochastic negative mining, eq. 3)
    or "cross_example_softmax" (eq. 5; with `topk`, cross-example negative mining,
    eq. 6); `topk` has the library's one meaning (int count, float fraction). For
    :math:`\ell_q = -\lambda s_{qq} + \log Z_q` autograd of the library's per-query term
    gives :math:`\lambda p_s` at every negative s inside :math:`Z_q`, 0 at every entry
    left out and :math:`-\lambda(1 - p_+)` at the positive. The result holds
    :math:`p_s` at the negatives in :math:`Z_q`, :math:`p_+` at the positive S[q, q] and
    0 elsewhere; it sums to 1 and :math:`\ell_q = -\log p_+`. `S` is square with the
    positives on the diagonal, rows are queries. Computed in float64 (a weight below
    1e-308 would show as left out).

    Derived in notebooks/05_cross_example_softmax.py.
    """
    check_choice("loss", loss, ("sampled_softmax", "cross_example_softmax"))
    lam = check_positive("scale", scale)
    S, _ = check_similarity(S, None, both_directions=False)
    q = check_int("query", query, 0, S.shape[0] - 1)
    fn = getattr(losses, loss)
    weights = loss_gradient(S.double(), lambda X: fn(X, lam, topk=topk, reduction="none")[q]) / lam
    weights[q, q] += 1.0  # the positive: 1 - (1 - p+) = p+
    return weights


def siglip_weights(
    S: Tensor,
    logit_scale: float | Tensor = losses.SIGLIP_LOGIT_SCALE_INIT,
    logit_bias: float | Tensor = losses.SIGLIP_LOGIT_BIAS_INIT,
    pos_mask: Tensor | None = None,
) -> Tensor:
    r"""Weight of every pair in the SigLIP gradient, :math:`w_{ij} = \sigma(t s_{ij} + b) - [z_{ij} = 1]`
    (Zhai et al., Algorithm 1).

    Differentiating :func:`vlr_lib.losses.siglip`'s term :math:`-\log\sigma(z_{ij}\,l_{ij})`, with
    :math:`l_{ij} = t s_{ij} + b`, :math:`t = e^{t'}`: :math:`\frac{d}{dl}[-\log\sigma(zl)] = -z\,\sigma(-zl)`,
    which is :math:`\sigma(l)` for z = -1 and :math:`\sigma(l) - 1` for z = +1; the chain rule adds t and the
    loss's 1/N, so :math:`\partial L/\partial s_{ij} = \frac{t}{N} w_{ij}` for ``siglip(..., "mean")`` (N rows).
    A negative gets :math:`\sigma(l_{ij}) \in (0, 1)` -- the probability the model gives to "match", pushing it
    down -- and a positive :math:`\sigma(l_{ij}) - 1 \in (-1, 0)`, pulling it up. Each weight depends on its own
    similarity alone: moving another negative changes none of the others, unlike :func:`softmax_weights`, where
    every negative of a query shares one normaliser Z(q). Same arguments and defaults as ``losses.siglip``.

    Derived in notebooks/03_contrastive.py.
    """
    S, pos = check_similarity(S, pos_mask)
    t = check_scalar("logit_scale", logit_scale, S, losses.LOGIT_SCALE_MIN, losses.LOGIT_SCALE_MAX).detach().exp()
    b = check_scalar("logit_bias", logit_bias, S).detach()
    logits = S.detach() * t + b
    # sigma(l) - 1 written as -sigma(-l): no cancellation when sigma(l) is near 1
    if pos.diagonal:
        w = torch.sigmoid(logits)
        w.diagonal().copy_(-torch.sigmoid(-logits.diagonal()))
        return w
    return torch.where(pos.neg, torch.sigmoid(logits), -torch.sigmoid(-logits))


# --------------------------------------------------------------------------- COCOS


class _Pairs(NamedTuple):
    """One direction seen from its queries, one row per positive pair (anchor term).

    scores[p] is the whole candidate row of the query of pair p, neg[p] marks its
    negatives, s_pos[p] the positive's score, is_pos[p] the positive's own column.
    """

    query: Tensor  # [P] query index of each pair
    scores: Tensor  # [P, M]
    neg: Tensor  # [P, M] bool
    is_self: Tensor  # [P, M] bool, True only at the pair's positive
    s_pos: Tensor  # [P]
    n_queries: int


def _pairs(S_dir: Tensor, pos_dir: Tensor) -> _Pairs:
    """Rows of S_dir are the queries; pos_dir is the dense bool positive mask."""
    query, cand = pos_dir.nonzero(as_tuple=True)
    scores = S_dir[query]
    is_self = torch.zeros_like(scores, dtype=torch.bool)
    is_self[torch.arange(query.numel(), device=S_dir.device), cand] = True
    return _Pairs(query, scores, ~pos_dir[query], is_self, S_dir[query, cand], S_dir.shape[0])


def _per_query_sum(values: Tensor, pr: _Pairs) -> Tensor:
    return torch.zeros(pr.n_queries, dtype=values.dtype, device=values.device).index_add(0, pr.query, values)


def _per_query_mean(values: Tensor, pr: _Pairs) -> Tensor:
    n_pos = torch.bincount(pr.query, minlength=pr.n_queries).to(values.dtype)
    return _per_query_sum(values, pr) / n_pos


def _triplet(pr: _Pairs, margin: float) -> Tensor:
    # Eq. 9b: a triplet contributes iff s+ - s- < alpha. Written as the hinge's
    # argument (alpha - s+ + s- > 0), exactly as losses.triplet_all computes it.
    return pr.neg & ((margin - pr.s_pos[:, None] + pr.scores) > 0)


def _triplet_sh(pr: _Pairs, margin: float) -> Tensor:
    # Eqs. 9a/10: only the hardest negative (the one losses.triplet_hardest picks), when the hinge is active.
    hardest = hardest_negatives(pr.scores, pr.neg)
    active = (margin + hardest.values - pr.s_pos) > 0
    mask = torch.zeros_like(pr.neg)
    mask[torch.arange(mask.shape[0], device=mask.device), hardest.indices] = active
    return mask


def _nt_xent(pr: _Pairs, temperature: float, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    # Eq. 11: weight of candidate j = exp(s_j / tau) / Z(q), Z over the positive and
    # the negatives of the anchor term (other positives are left out, as in losses.info_nce).
    logits = pr.scores / temperature
    candidates = pr.neg | pr.is_self
    log_z = torch.logsumexp(logits.masked_fill(~candidates, -math.inf), dim=1, keepdim=True)
    weight = torch.exp(logits - log_z).masked_fill(~candidates, 0.0)
    contributing = pr.neg & (weight > eps)
    w_neg = (weight * contributing).sum(dim=1)
    w_pos = 1.0 - (weight * pr.is_self).sum(dim=1)
    return contributing, w_neg, w_pos


def _smooth_ap(pr: _Pairs, tau: float, eps: float) -> Tensor:
    # Eq. 13 with D_ij = s_j - s_i (candidate j above positive i), G = losses.smooth_step (eq. 7)
    # and sim(D) = G(D)(1 - G(D)) / tau (appendix eq. 24); R(i, Omega) = 1 + sum_{j != i} G(D_ij).
    diff = pr.scores - pr.s_pos[:, None]
    g = losses.smooth_step(diff, tau)
    rank = 1.0 + g.masked_fill(pr.is_self, 0.0).sum(dim=1, keepdim=True)
    sim = g * losses.smooth_step(-diff, tau) / tau  # G (1 - G), stable in both tails
    return ~pr.is_self & (sim / rank**2 > eps)


@dataclass(frozen=True)
class CocosSettings:
    """The parameters of the four COCOS rules (Bleeker & de Rijke sec. 4), validated once.

    `eps` is the threshold epsilon of NT-Xent and SmoothAP (0.01 in the paper), `margin`
    the triplets' alpha, `temperature` NT-Xent's tau, `tau` SmoothAP's. :func:`cocos`
    takes them as keywords (the trainer passes a loss's own arguments there);
    :func:`cocos_mask`, the figures and the explorer take the object.
    """

    eps: float = 0.01
    margin: float = 0.2
    temperature: float = 0.1
    tau: float = 0.01

    def __post_init__(self) -> None:
        checked = dict(eps=check_positive("eps", self.eps), margin=check_nonnegative("margin", self.margin),
                       temperature=check_positive("temperature", self.temperature), tau=check_positive("tau", self.tau))
        for key, value in checked.items():
            object.__setattr__(self, key, value)


def _contributions(pr: _Pairs, loss: str, c: CocosSettings):
    """[P, M] bool: the candidates contributing to each anchor term's gradient; NT-Xent's W terms too."""
    if loss == "triplet":
        return _triplet(pr, c.margin), {}
    if loss == "triplet_sh":
        return _triplet_sh(pr, c.margin), {}
    if loss == "nt_xent":
        contributing, w_neg, w_pos = _nt_xent(pr, c.temperature, c.eps)
        return contributing, {"W_neg": _per_query_mean(w_neg, pr), "W_pos": _per_query_mean(w_pos, pr)}
    return _smooth_ap(pr, c.tau, c.eps), {}


def _cocos_input(loss: str, S: Tensor, pos_mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """The checked rule name's S (detached) and its bool positive mask."""
    check_choice("loss", loss, COCOS_LOSSES)
    S, pos = check_similarity(S, pos_mask, both_directions=True)
    return S.detach(), ~pos.neg


def _summary(parts: dict[str, Tensor]) -> dict[str, object]:
    """The per-direction dictionary of :func:`cocos` from C^q per query (and W for NT-Xent)."""
    c_q = parts["C_q"]
    active = c_q > 0
    n_active = int(active.sum())
    out: dict[str, object] = {
        "n_queries": int(c_q.numel()),
        "C_q": c_q,
        "C_q_mean": float(c_q.double().mean()),
        "C_q_mean_active": float(c_q[active].double().mean()) if n_active else math.nan,
        "C_B": int(c_q.sum()) if not torch.is_floating_point(c_q) else float(c_q.double().sum()),
        "C_0": int(c_q.numel() - n_active),
    }
    for key in ("W_neg", "W_pos"):
        if key in parts:
            out[key] = float(parts[key].double().mean())
    return out


@torch.no_grad()
def cocos(
    S: Tensor,
    loss: str,
    eps: float = 0.01,
    margin: float = 0.2,
    temperature: float = 0.1,
    tau: float = 0.01,
    pos_mask: Tensor | None = None,
) -> dict[str, dict[str, object]]:
    r"""Counting contributing samples, COCOS (Bleeker & de Rijke sec. 4, eqs. 9-13).

    For every query the count of candidates that enter the gradient w.r.t. the query,
    in both directions: ``"i2t"`` (rows of S are the queries, captions the candidates)
    and ``"t2i"`` (columns are the queries).

    `loss` is one of :data:`COCOS_LOSSES`:

    - ``"triplet"`` (eq. 9b): :math:`C^q = \#\{v^- : s^+ - s^- < \alpha\}`, with
      :math:`\alpha` = `margin`; these are exactly the negatives with a non-zero
      gradient in :func:`vlr_lib.losses.triplet_all`.
    - ``"triplet_sh"`` (eqs. 9a, 10): :math:`C^q = 1\{s^+ - \max s^- < \alpha\}`, so
      :math:`C^B` is the number of queries with a non-zero gradient in
      :func:`vlr_lib.losses.triplet_hardest`.
    - ``"nt_xent"`` (eq. 11): a negative contributes when its softmax weight
      :math:`e^{s^-/\tau}/Z(q) > \epsilon`, :math:`Z(q)` summing :math:`e^{s/\tau}` over
      the positive and the negatives (`temperature` = :math:`\tau`). ``W_neg`` is
      :math:`W^{qv^-}`, the summed weight of the contributing negatives, and ``W_pos``
      is :math:`W^{qv^+} = 1 - e^{s^+/\tau}/Z(q)`, both averaged over the queries.
      The weights are :math:`\tau` times the gradient of
      :func:`vlr_lib.losses.info_nce` w.r.t. the negatives' scores.
    - ``"smooth_ap"`` (eq. 13): :math:`C^q = \frac{1}{|P|}\sum_{i\in P}
      \#\{j \ne i : sim(D_{ij}) / R(i,\Omega)^2 > \epsilon\}` (negatives and the other
      positives), with :math:`G(x) = \sigma(x/\tau)` (eq. 7, `tau` = :math:`\tau`),
      :math:`R(i,\Omega) = 1 + \sum_{j\ne i} G(D_{ij})` and :math:`sim = G(1-G)/\tau`.

    Readings of the extraction (written down because the text is ambiguous):

    - :math:`D_{ij}`: the text says :math:`s_i - s_j`, but the matrix of appendix eq. 16
      gives :math:`s_j - s_i`, and only that sign makes :math:`R` count the candidates
      ranked *above* i (eqs. 6, 17); we use :math:`D_{ij} = s_j - s_i`, as
      :func:`vlr_lib.losses.smooth_ap` does. :math:`sim(D)` is even in D, so the sign
      only matters for the rank.
    - :math:`sim` includes the factor :math:`1/\tau` (appendix eqs. 23-24: "the
      derivative of (7)"). With one positive per query, :math:`sim(D_{ij})/R^2` is then
      exactly the gradient of :math:`1 - AP_q` w.r.t. :math:`s_j`.
    - The tables report :math:`C^q` as the mean over the queries that have a gradient
      (:math:`C^q > 0`): Table 2, Flickr30k VSE++ Triplet i2t, 768.92 / (128 - 14.78)
      = 6.79; Triplet-SH shows 1 +- 0; Table 4 t2i shows 1.47 with 636.7 of 640 queries
      at zero. That is ``"C_q_mean_active"``; ``"C_q_mean"`` averages over all queries.
    - Several positives per query (`pos_mask`, e.g. five captions per image): each
      positive pair is one anchor term, as in :mod:`vlr_lib.losses`. Triplet, Triplet-SH
      and NT-Xent counts add over the anchor terms of the query (the gradient w.r.t. the
      query adds them); NT-Xent's ``W_neg``/``W_pos`` average over them (each is a share
      of one softmax); SmoothAP averages over the positives as eq. 13 does. With one
      positive per query every count is the paper's.

    Returns ``{"i2t": d, "t2i": d}``, each ``d`` with

    - ``"n_queries"`` (int), ``"C_q"`` (tensor [n_queries]: :math:`C^q` per query),
    - ``"C_q_mean"`` (float): :math:`C^q` averaged over all queries,
    - ``"C_q_mean_active"`` (float): averaged over queries with :math:`C^q > 0`, the
      tables' convention (NaN when no query has a gradient),
    - ``"C_B"``: :math:`\sum_q C^q` (int; a float for SmoothAP, whose :math:`C^q` is
      a mean over positives -- the paper does not report it there),
    - ``"C_0"`` (int): the number of queries with :math:`C^q = 0`,
    - NT-Xent only: ``"W_neg"`` and ``"W_pos"`` (floats).

    `eps` (the threshold :math:`\epsilon`, 0.01 in the paper) is used by NT-Xent and
    SmoothAP; `margin` by the triplets; `temperature` by NT-Xent; `tau` by SmoothAP.
    All are validated whatever `loss` is.

    Derived in notebooks/08_cocos.py.
    """
    settings = CocosSettings(eps, margin, temperature, tau)
    S, is_pos = _cocos_input(loss, S, pos_mask)
    out = {}
    for direction, (S_dir, pos_dir) in {"i2t": (S, is_pos), "t2i": (S.T, is_pos.T)}.items():
        pr = _pairs(S_dir, pos_dir)
        contributing, extra = _contributions(pr, loss, settings)
        per_pair = contributing.sum(dim=1)
        # SmoothAP's C^q is a mean over the query's positives (eq. 13); the others add over anchor terms.
        c_q = _per_query_mean(per_pair.to(S.dtype), pr) if loss == "smooth_ap" else _per_query_sum(per_pair, pr)
        out[direction] = _summary({"C_q": c_q, **extra})
    return out


@torch.no_grad()
def cocos_mask(
    S: Tensor,
    loss: str,
    settings: CocosSettings = CocosSettings(),
    direction: str = "i2t",
    pos_mask: Tensor | None = None,
) -> Tensor:
    r"""Bool [n_queries, n_candidates]: which candidates contribute to each query's gradient (eqs. 9-13).

    Rows are the queries of `direction` (images for "i2t": S itself; captions for
    "t2i": S.T). The rules of :func:`cocos`, which counts these marks, with the
    parameters of `settings`: a candidate is marked when it contributes to any anchor
    term of the query. With one positive per query a row's sum is exactly
    ``cocos(...)[direction]["C_q"]``.

    Derived in notebooks/08_cocos.py.
    """
    check_choice("direction", direction, DIRECTIONS)
    if not isinstance(settings, CocosSettings):
        raise TypeError(f"settings must be a CocosSettings, got {type(settings).__name__}")
    S, is_pos = _cocos_input(loss, S, pos_mask)
    S_dir, pos_dir = (S, is_pos) if direction == "i2t" else (S.T, is_pos.T)
    pr = _pairs(S_dir, pos_dir)
    contributing, _ = _contributions(pr, loss, settings)
    marks = torch.zeros(S_dir.shape, dtype=torch.int64, device=S.device).index_add_(0, pr.query, contributing.long())
    return marks > 0


def cocos_table(
    S: Tensor,
    eps: float = 0.01,
    margin: float = 0.2,
    temperature: float = 0.1,
    tau: float = 0.01,
    pos_mask: Tensor | None = None,
    losses: tuple[str, ...] = COCOS_LOSSES,
):
    """COCOS of several losses on one S as a pandas DataFrame (Bleeker & de Rijke Tables 2-4).

    One row per loss x direction, in the order of `losses`, i2t before t2i. Columns:
    ``table`` (2, 3 or 4: where the paper reports that loss), ``loss``, ``direction``,
    ``C_q`` (mean over queries with a gradient, the tables' convention), ``C_q_all``
    (mean over all queries), ``C_B``, ``C_0``, ``W_neg`` and ``W_pos`` (NT-Xent only,
    NaN elsewhere) and ``n_queries``. The paper averages these over many batches of
    128; average the frames of several batches to do the same. See :func:`cocos` for
    the definitions and arguments.

    Derived in notebooks/08_cocos.py.
    """
    import pandas as pd  # only the table needs pandas

    if isinstance(losses, str):
        losses = (losses,)
    rows = []
    for name in losses:
        result = cocos(S, name, eps=eps, margin=margin, temperature=temperature, tau=tau, pos_mask=pos_mask)
        for direction, d in result.items():
            rows.append(
                {
                    "table": _TABLE_OF[name],
                    "loss": name,
                    "direction": direction,
                    "C_q": d["C_q_mean_active"],
                    "C_q_all": d["C_q_mean"],
                    "C_B": float(d["C_B"]),
                    "C_0": d["C_0"],
                    "W_neg": d.get("W_neg", math.nan),
                    "W_pos": d.get("W_pos", math.nan),
                    "n_queries": d["n_queries"],
                }
            )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- tangent gradients


def _by_name_or_index(self, key):
    """``__getitem__`` of the result tuples below: ``r["img"]`` as well as ``r[0]`` (a NamedTuple takes no mixin)."""
    if isinstance(key, str):
        return getattr(self, key)
    return tuple.__getitem__(self, key)


class TangentNorms(NamedTuple):
    """Gradients w.r.t. the unit embeddings, split into tangent and radial parts.

    ``img`` / ``txt``: norms of the tangent components, shape [N_img] / [N_txt].
    ``img_radial`` / ``txt_radial``: the signed radial coefficients g.x (the radial
    component is (g.x) x; its norm is the absolute value).
    ``img_tangent`` / ``txt_tangent``: the tangent vectors g - (g.x) x, [N, D].
    Fields are reachable as attributes or by name: ``r.img`` or ``r["img"]``.
    """

    img: Tensor
    txt: Tensor
    img_radial: Tensor
    txt_radial: Tensor
    img_tangent: Tensor
    txt_tangent: Tensor

    __getitem__ = _by_name_or_index


def _split(g: Tensor, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Tangent norm, radial coefficient and tangent vector of gradients g at unit points x."""
    radial = (g * x).sum(dim=1)
    tangent = g - radial[:, None] * x
    return tangent.norm(dim=1), radial, tangent


def tangent_gradient_norms(img: Tensor, txt: Tensor, loss_fn: Callable[[Tensor], Tensor]) -> TangentNorms:
    r"""Per-sample norm of the loss gradient tangent to the unit hypersphere (Li et al. sec. 3.3).

    `img` [N_img, D] and `txt` [N_txt, D] are normalised here onto the unit sphere,
    :math:`S = \hat{v} \hat{t}^\top` is formed and `loss_fn(S)` (a scalar, e.g.
    ``lambda S: losses.triplet_hardest(S, 0.2)``) is differentiated w.r.t. the unit
    embeddings. Each gradient g at a unit point x splits into a radial part
    :math:`(g\cdot x)x`, which only changes the length and is undone by normalisation,
    and the tangent part :math:`g - (g\cdot x)x`, the one that moves x on the sphere.
    Its norm is :math:`\|g\| \sin\theta(x, g)` -- Li et al. eqs. 11-12 and 17-18 for
    the losses they analyse. It is also :math:`\|x_{raw}\|\,\|\partial L/\partial x_{raw}\|`
    for the un-normalised embedding, i.e. what a network actually receives.

    Returns a :class:`TangentNorms` (tangent norms, signed radial coefficients and the
    tangent vectors, for images and captions). The inputs' autograd graphs are not
    touched; the outputs carry no graph.

    Derived in notebooks/02_triplet_losses.py.
    """
    check_tensor("img", img, ndim=2)
    check_tensor("txt", txt, ndim=2)
    if txt.shape[1] != img.shape[1]:
        raise ValueError(f"txt must have the embedding dimension of img ({img.shape[1]}), got {txt.shape[1]}")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be a callable S -> scalar loss, got {type(loss_fn).__name__}")
    with torch.enable_grad():
        v = l2_normalize(img.detach()).requires_grad_()
        t = l2_normalize(txt.detach()).requires_grad_()
        loss = loss_fn(v @ t.T)
        if not isinstance(loss, Tensor) or loss.numel() != 1:
            raise ValueError("loss_fn must return a scalar tensor")
        if not loss.requires_grad:
            raise ValueError("loss_fn must return a loss that depends on S (no gradient reached S)")
        g_v, g_t = torch.autograd.grad(loss.reshape(()), (v, t), allow_unused=True)
    g_v = torch.zeros_like(v) if g_v is None else g_v
    g_t = torch.zeros_like(t) if g_t is None else g_t
    v, t = v.detach(), t.detach()
    n_v, r_v, tan_v = _split(g_v, v)
    n_t, r_t, tan_t = _split(g_t, t)
    return TangentNorms(n_v, n_t, r_v, r_t, tan_v, tan_t)


class SphereNorms(NamedTuple):
    """Tangent-gradient norms at the anchor, its hardest negative and its positive.

    Reachable as attributes or by name (``r.anchor`` or ``r["anchor"]``).
    """

    anchor: Tensor
    negative: Tensor
    positive: Tensor

    __getitem__ = _by_name_or_index


def _angles(theta_pos, theta_neg, phi) -> tuple[Tensor, Tensor, Tensor]:
    vals = []
    for name, value in (("theta_pos", theta_pos), ("theta_neg", theta_neg), ("phi", phi)):
        if isinstance(value, Tensor):
            check_tensor(name, value)
            vals.append(value)
        else:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number or a tensor of angles, got {type(value).__name__}")
            if not math.isfinite(value):
                raise ValueError(f"{name} must be finite, got {value}")
            vals.append(torch.tensor(float(value), dtype=torch.float64))
    dtype = torch.promote_types(torch.promote_types(vals[0].dtype, vals[1].dtype), vals[2].dtype)
    return tuple(torch.broadcast_tensors(*(x.to(dtype) for x in vals)))  # type: ignore[return-value]


def _geometry(theta_pos, theta_neg, phi) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Anchor-tangent norm of (t_neg - t_pos), sines and similarities of the Fig. 2 geometry.

    Anchor v = e_z; positive t at polar angle theta_pos, hardest negative t^ at polar
    angle theta_neg, their azimuths phi apart around v. The tangent part of t^ - t at
    v is its projection onto the x-y plane:
    ||.||^2 = sin^2 theta_neg + sin^2 theta_pos - 2 sin theta_pos sin theta_neg cos phi.
    """
    tp, tn, ph = _angles(theta_pos, theta_neg, phi)
    sp, sn = torch.sin(tp), torch.sin(tn)
    anchor = (sn * torch.cos(ph) - sp).hypot(sn * torch.sin(ph))
    return anchor, sn.abs(), sp.abs(), torch.cos(tp), torch.cos(tn)


def triplet_hn_tangent_norm(theta_pos, theta_neg, phi, margin: float = 0.2) -> SphereNorms:
    r"""Closed-form tangent-gradient norms of Triplet-HN for one anchor (Li et al. eqs. 8-12).

    Unit anchor v, positive t with :math:`\theta(v, t)` = `theta_pos`, hardest negative
    :math:`\hat t` with :math:`\theta(v, \hat t)` = `theta_neg`, and `phi` the angle
    between the two around the anchor's axis (0: same side of v, :math:`\pi`: opposite
    sides -- the 2-D picture of Li et al. Fig. 2). Angles in radians; floats or tensors
    (broadcast). With the loss active (:math:`\cos\theta^- - \cos\theta^+ + m > 0`):

    - anchor, eq. 11: :math:`\|\hat t - t\|\sin\theta(v, \hat t - t)`, the norm of
      :math:`(\hat t - t) - ((\hat t - t)\cdot v)v`;
    - hardest negative, eq. 12: :math:`\sin\theta(v, \hat t)`;
    - positive (same argument, not written in the paper): :math:`\sin\theta(v, t)`.

    All three are 0 when the hinge is inactive. For :math:`\hat t \to v` the negative's
    norm vanishes, and for :math:`\hat t \to t` so does the anchor's -- Li et al.'s
    explanation of Triplet-HN's early vanishing gradient.

    Derived in notebooks/02_triplet_losses.py.
    """
    m = check_nonnegative("margin", margin)
    anchor, neg, pos, cos_p, cos_n = _geometry(theta_pos, theta_neg, phi)
    active = ((cos_n - cos_p + m) > 0).to(anchor.dtype)
    return SphereNorms(anchor * active, neg * active, pos * active)


def unified_tangent_norm(theta_pos, theta_neg, phi, margin: float = 0.2, gamma: float = 60.0) -> SphereNorms:
    r"""Closed-form tangent-gradient norms of the unified loss with one negative (Li et al. eqs. 13-18).

    Same geometry as :func:`triplet_hn_tangent_norm`. For
    :math:`\frac{1}{\gamma}\log(1 + e^{\gamma(s^- - s^+ + m)})` the gradient is the
    Triplet-HN one scaled by :math:`D/(1+D)`, :math:`D = e^{\gamma(\cos\theta^- - \cos\theta^+ + m)}`
    (eqs. 14-16; the paper sets :math:`\gamma = 1`, the :math:`1/\gamma` of eq. 5 cancels
    the chain-rule :math:`\gamma` for any :math:`\gamma`). As :math:`\gamma\to\infty`,
    :math:`D/(1+D)` tends to the hinge's indicator: eq. 6. With a single negative the
    sum of eq. 17 has one term, so it is exact (with several negatives eq. 17 adds the
    norms of the terms, an upper bound on the norm of their sum).

    Derived in notebooks/04_unified_loss.py.
    """
    m = check_nonnegative("margin", margin)
    g = check_positive("gamma", gamma)
    anchor, neg, pos, cos_p, cos_n = _geometry(theta_pos, theta_neg, phi)
    weight = torch.sigmoid(g * (cos_n - cos_p + m))  # D / (1 + D)
    return SphereNorms(anchor * weight, neg * weight, pos * weight)


class SphereTriplet(NamedTuple):
    """Li et al. Fig. 2 in 3-D: the unit anchor v, positive t and hardest negative t^ ([..., 3] each), and
    the tangent part of minus the Triplet-HN gradient at each -- the way a gradient step moves it."""

    anchor: Tensor
    positive: Tensor
    negative: Tensor
    anchor_step: Tensor
    positive_step: Tensor
    negative_step: Tensor


def triplet_hn_descent(theta_pos, theta_neg, phi, margin: float = 0.2) -> SphereTriplet:
    r"""Points and descent directions of Triplet-HN for one anchor on the unit sphere (Li et al. eqs. 8-12).

    The geometry of :func:`triplet_hn_tangent_norm`: v = e_z, t at polar angle `theta_pos`
    and azimuth 0, t^ at polar angle `theta_neg` and azimuth `phi` (0: the same side of v
    as t, :math:`\pi`: the opposite side; the 2-D picture of Fig. 2 is the x-z plane).
    Raw gradients (eqs. 9-10) when the hinge :math:`\cos\theta^- - \cos\theta^+ + m` is
    active: dL/dv = t^ - t, dL/dt^ = v, dL/dt = -v; else 0. Each step is
    :math:`-(g - (g\cdot x)x)` at its point x, so its norm is the tangent norm of eqs. 11-12.

    Derived in notebooks/02_triplet_losses.py.
    """
    m = check_nonnegative("margin", margin)
    tp, tn, ph = _angles(theta_pos, theta_neg, phi)
    zero = torch.zeros_like(tp)
    v = torch.stack([zero, zero, torch.ones_like(tp)], dim=-1)
    t = torch.stack([torch.sin(tp), zero, torch.cos(tp)], dim=-1)
    t_hat = torch.stack([torch.sin(tn) * torch.cos(ph), torch.sin(tn) * torch.sin(ph), torch.cos(tn)], dim=-1)
    active = ((torch.cos(tn) - torch.cos(tp) + m) > 0).to(tp.dtype)[..., None]

    def step(g: Tensor, x: Tensor) -> Tensor:
        return -active * (g - (g * x).sum(dim=-1, keepdim=True) * x)

    return SphereTriplet(v, t, t_hat, step(t_hat - t, v), step(-v, t), step(v, t_hat))
