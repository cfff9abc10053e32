r"""GOAL: training with a gradient designed directly, not derived from a loss.

Xuan & Chen, "Dissecting Deep Metric Learning Losses for Image-Text Retrieval"
(WACV 2023), sec. 3. Take one triplet -- a query, its positive and its hardest
negative in the batch -- with similarities s_pos and s_neg. Every triplet-family
loss of deep metric learning has a gradient of the form (eq. 3, with eq. 4)

    dL/ds_pos = -T * P_+        dL/ds_neg = +T * P_-

a *triplet weight* T, which depends on both similarities (eqs. 5, 7, 8), times a
*pair weight* P, which depends on one similarity of the triplet and, for the MS
forms, on the rest of the batch (eqs. 9-13). GOAL trains any of the 3 x 5
combinations, also those that are the gradient of no loss, by handing this
gradient to autograd through a custom backward (:func:`goal_objective`).

Here the gradient is designed with respect to S itself; autograd carries it to
the embeddings through S = img @ txt.T, which is eq. 3 (dl/dx = sum_j dl/dS_xj y_j).
Queries run in both directions (rows = image queries, columns = caption queries)
and their gradients add, as in the symmetric loss of sec. 3.1.

:class:`GoalConfig` holds one combination and all its parameters (validated in one
place); :func:`goal_objective` and :func:`goal_gradient` take it, or the same
parameters as keywords.

Two readings of the MS pair weight (eq. 12), ``ms_form``:

- ``"ms-loss"`` (the default): the weights of MS loss itself (Wang et al., CVPR 2019,
  "Multi-Similarity Loss with General Pair Weighting", the gradient of their eq. 6),
  :math:`w^+ = 1/(e^{-\alpha(\lambda - S_{ik})} + \sum_{k' \in \mathcal{P}_i} e^{-\alpha(S_{ik'} - S_{ik})})`
  and :math:`w^- = 1/(e^{\beta(\lambda - S_{ik})} + \sum_{k' \in \mathcal{N}_i} e^{\beta(S_{ik'} - S_{ik})})`,
  whose sums run over sets that *contain the selected pair itself*. In eq. 12's notation
  the relative term is :math:`m = 1 + \sum_{\text{others}} e^{\pm(\cdot)}`, a sum, so
  m >= 1 and every pair weight is <= 1 (and <= the plain sigmoid weight of eq. 11).
  With T <= 1 too, each designed weight T * P is <= 1, and |dL/dS_ij| is at most the
  number of anchor triplets that select entry (i, j) -- 2 when the positives are on
  the diagonal (the entry's row query and its column query).
- ``"printed"``: eq. 12 as printed, :math:`m` the *mean* over the set without the
  selected pair. For a hardest negative every other member scores below it, so
  :math:`m^{sig}_- = \mathrm{mean}\, e^{-\beta(s_{neg} - R)}` can be tiny and
  :math:`P_- \approx 1/m` huge: at MS loss's own beta = 50, lambda = 0.5, a batch of
  spread cosines gives |dL/dS| ~ 1e11, and larger beta overflows. Kept because it
  is what the paper prints and it shows why MS loss adds the pair to its own sum.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ._checks import (
    Positives,
    check_choice,
    check_finite,
    check_nonnegative,
    check_positive,
    check_similarity,
    check_tensor,
    values_checked,
)
from .loss_entry import Hyper
from .similarity import hardest_negatives, _hardest_negatives_diagonal

__all__ = [
    "GOAL_TRIPLETS",
    "GOAL_PAIRS",
    "MS_FORMS",
    "TRIPLET_PARAMS",
    "PAIR_PARAMS",
    "TABLE1",
    "table1_values",
    "parse_goal_name",
    "GoalConfig",
    "triplet_weight",
    "pair_weight",
    "relative_term",
    "batch_triplets",
    "goal_gradient",
    "goal_objective",
]

GOAL_TRIPLETS: tuple[str, ...] = ("con", "nca", "cir")
GOAL_PAIRS: tuple[str, ...] = ("con", "lin", "sig", "lin-ms", "sig-ms")
_MS_PAIRS = ("lin-ms", "sig-ms")
#: The two readings of eq. 12 (see the module docstring): MS loss's own bounded weights, or eq. 12 as printed.
MS_FORMS: tuple[str, ...] = ("ms-loss", "printed")
#: The numeric parameters each triplet weight (eqs. 5, 7, 8) and each pair weight (eqs. 9-13) uses; eps is the MS
#: sets' mining margin. (sig-ms also takes ms_form, the reading of eq. 12: a choice of formula, not a number.)
#: Written once: figures, widgets and result tables read it from here.
TRIPLET_PARAMS: dict[str, tuple[str, ...]] = {"con": ("margin",), "nca": ("tau",), "cir": ("tau",)}
PAIR_PARAMS: dict[str, tuple[str, ...]] = {"con": (), "lin": (), "sig": ("alpha", "beta", "lam"), "lin-ms": ("eps",),
                                           "sig-ms": ("alpha", "beta", "lam", "eps")}
#: The range each GOAL parameter makes sense in (the registry's entries for "goal:<triplet>,<pair>";
#: ``vlr_lib.registry``), and ms_form's choices.
HYPER: dict[str, Hyper] = {
    "margin": Hyper(low=0.0, high=1.0),
    "tau": Hyper(low=0.1, high=100.0),
    "alpha": Hyper(low=0.1, high=100.0),
    "beta": Hyper(low=0.1, high=100.0),
    "lam": Hyper(low=-1.0, high=1.0),
    "eps": Hyper(low=0.0, high=0.5),
    "ms_form": Hyper("choice", choices=MS_FORMS),
}

#: Table 1 of the paper: the existing loss each (triplet weight, pair weight) combination
#: reproduces; "New" marks the combinations that only GOAL can train. Table 1 calls (nca, con)
#: "NT-Xent loss", but its eq. 6 is the *hard-negative* NCA (one hardest negative per query, as
#: Triplet-SH), not NT-Xent over every negative of the batch (``losses.info_nce``): named so here.
TABLE1: dict[tuple[str, str], str] = {
    **{(t, p): "New" for t in GOAL_TRIPLETS for p in GOAL_PAIRS},
    ("con", "con"): "Triplet",
    ("nca", "con"): "hard-negative NCA",
    ("cir", "lin"): "Circle",
    ("con", "sig"): "Binomial deviance",
    ("con", "sig-ms"): "MS",
}


def table1_values(values: Mapping[tuple[str, str], float]) -> np.ndarray:
    """One finite number per (triplet, pair) combination of Table 1 (e.g. a recall of Tables 3-5) as a 5 x 3
    array: rows GOAL_PAIRS, columns GOAL_TRIPLETS; a ValueError names missing or unknown keys.

    Derived in notebooks/07_goal.py.
    """
    missing = [key for key in TABLE1 if key not in values]
    extra = [key for key in values if key not in TABLE1]
    if missing or extra:
        raise ValueError(f"values must have exactly the 15 (triplet, pair) keys; missing {missing}, unknown {extra}")
    z = np.array([[float(values[(t, p)]) for t in GOAL_TRIPLETS] for p in GOAL_PAIRS])
    if not np.isfinite(z).all():
        raise ValueError("values must be finite numbers")
    return z


def parse_goal_name(name: str) -> tuple[str, str]:
    """Split a trainer loss name "goal:<triplet>,<pair>" (e.g. "goal:cir,sig-ms") into its two weights.

    Derived in notebooks/07_goal.py.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string like 'goal:cir,sig-ms', got {type(name).__name__}")
    prefix, colon, rest = name.partition(":")
    if prefix != "goal" or not colon or rest.count(",") != 1:
        raise ValueError(f"name must look like 'goal:<triplet>,<pair>', e.g. 'goal:cir,sig-ms', got {name!r}")
    triplet, pair = (part.strip() for part in rest.split(","))
    return check_choice("triplet", triplet, GOAL_TRIPLETS), check_choice("pair", pair, GOAL_PAIRS)


@dataclass(frozen=True)
class GoalConfig:
    """One GOAL gradient: a triplet weight, a pair weight and every parameter, validated once.

    Fields: `triplet` (one of GOAL_TRIPLETS), `pair` (one of GOAL_PAIRS), `margin` (T^con,
    eq. 5), `tau` (T^nca and T^cir, eqs. 7-8), `alpha`, `beta`, `lam` (P^sig and P^sig-ms,
    eqs. 11-12), `eps` (the MS sets' mining margin, P^lin-ms and P^sig-ms) and `ms_form`
    (the reading of eq. 12, one of MS_FORMS). A combination uses only some of them:
    :meth:`params`. ``GoalConfig.from_name("goal:cir,sig-ms", beta=50)`` builds one from
    the trainer's loss name. Frozen, so one config can be shared by a figure, a widget
    and a training run.

    Where the defaults come from: margin = 0.2 is the triplet margin of VSE++ and of the
    paper's sec. 4; tau = 10 is the value of the paper's *figures* (Fig. 2: T^nca and T^cir
    "with tau = 10"), alpha = 2, beta = 10 and lam = 0.5 those of Fig. 3's pair-weight curves;
    eps = 0.1 is MS loss's mining margin (Wang et al. 2019). The paper gives no training recipe
    for them: these are values for drawing the weights, not tuned ones. On cosines, T^cir at
    tau = 10 has a median weight of ~0.004 and trains slowly; the showdown trains T^cir at a
    tau chosen on validation (``vlr_lib.experiments.showdown.CIR_TAU``).
    """

    triplet: str = "con"
    pair: str = "con"
    margin: float = 0.2  # VSE++ and the paper's sec. 4
    tau: float = 10.0  # from the paper's Fig. 2, not a training recipe
    alpha: float = 2.0  # from the paper's Fig. 3
    beta: float = 10.0  # from the paper's Fig. 3
    lam: float = 0.5  # from the paper's Fig. 3
    eps: float = 0.1  # MS loss's mining margin (Wang et al. 2019)
    ms_form: str = "ms-loss"

    def __post_init__(self) -> None:
        checked = dict(
            triplet=check_choice("triplet", self.triplet, GOAL_TRIPLETS),
            pair=check_choice("pair", self.pair, GOAL_PAIRS),
            margin=check_nonnegative("margin", self.margin),
            tau=check_positive("tau", self.tau),
            alpha=check_positive("alpha", self.alpha),
            beta=check_positive("beta", self.beta),
            lam=check_finite("lam", self.lam),
            eps=check_nonnegative("eps", self.eps),
            ms_form=check_choice("ms_form", self.ms_form, MS_FORMS),
        )
        for key, value in checked.items():
            object.__setattr__(self, key, value)

    @classmethod
    def from_name(cls, name: str, **params: object) -> "GoalConfig":
        """The config of a trainer loss name, "goal:<triplet>,<pair>", with `params` set."""
        triplet, pair = parse_goal_name(name)
        return cls(triplet, pair, **params)  # type: ignore[arg-type]

    @property
    def name(self) -> str:
        """The trainer's loss name, e.g. "goal:cir,sig-ms"."""
        return f"goal:{self.triplet},{self.pair}"

    @property
    def label(self) -> str:
        """The display name, e.g. "GOAL (cir, sig-ms)" (the registry's label of the name)."""
        return f"GOAL ({self.triplet}, {self.pair})"

    @property
    def known_as(self) -> str:
        """The loss this combination reproduces in Table 1, or "New"."""
        return TABLE1[(self.triplet, self.pair)]

    def params(self) -> dict[str, float | str]:
        """The parameters the chosen weights use, with their values: TRIPLET_PARAMS, PAIR_PARAMS, then
        ms_form for sig-ms."""
        form = ("ms_form",) if self.pair == "sig-ms" else ()
        keys = [*TRIPLET_PARAMS[self.triplet], *PAIR_PARAMS[self.pair], *form]
        return {key: getattr(self, key) for key in dict.fromkeys(keys)}

    def pair_weights(self, s: Tensor | float, positive: bool, rel: Tensor | float = 0.1) -> Tensor:
        """:func:`pair_weight` of this config's pair weight and parameters; `rel` is the relative term m of the
        MS forms (eqs. 12-13), used by them only (a figure passes one m for every pair weight, Fig. 3: 0.1)."""
        return pair_weight(self.pair, s, positive, self.alpha, self.beta, self.lam,
                           rel if self.pair in _MS_PAIRS else None)

    def weights(self, s_pos: Tensor, s_neg: Tensor, rel: Tensor | float = 0.1) -> tuple[Tensor, Tensor]:
        """The designed gradient of triplets (s_pos, s_neg), Xuan & Chen eqs. 3-4: the pull on the positive
        T(s_pos, s_neg) P_+(s_pos) = -dL/ds_pos and the push on the hardest negative T P_-(s_neg) = dL/ds_neg,
        elementwise (`rel` as in :meth:`pair_weights`)."""
        t = triplet_weight(self.triplet, s_pos, s_neg, margin=self.margin, tau=self.tau)
        return t * self.pair_weights(s_pos, True, rel), t * self.pair_weights(s_neg, False, rel)


_DEFAULT = GoalConfig()


def _resolve(config: GoalConfig | None, **loose: object) -> GoalConfig:
    """The config of a call: `config` itself, or one built from the loose keywords -- never a mix."""
    unknown = sorted(set(loose) - {f.name for f in fields(GoalConfig)})
    if unknown:
        raise TypeError(f"{unknown[0]} is not a GOAL parameter; the parameters are the fields of GoalConfig")
    if config is None:
        return GoalConfig(**loose)  # type: ignore[arg-type]
    if not isinstance(config, GoalConfig):
        raise TypeError(f"config must be a GoalConfig, got {type(config).__name__}")
    changed = [key for key, value in loose.items() if value != getattr(_DEFAULT, key)]
    if changed:
        raise ValueError(f"pass either config or the loose parameters, not both; also given: {changed}")
    return config


# --------------------------------------------------------------------------- validation helpers


def _as_tensor(name: str, x: Tensor | float, like: Tensor | None = None) -> Tensor:
    """A finite floating tensor; plain numbers become 0-D tensors (of `like`'s dtype if given)."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        x = torch.tensor(float(x), dtype=torch.get_default_dtype() if like is None else like.dtype)
    return check_tensor(name, x)


def _check_broadcast(names: tuple[str, str], a: Tensor, b: Tensor) -> None:
    try:
        torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError:
        raise ValueError(
            f"{names[1]} must broadcast with {names[0]}, got shapes {tuple(b.shape)} and {tuple(a.shape)}"
        ) from None


# --------------------------------------------------------------------------- triplet weights


def triplet_weight(
    name: str, s_pos: Tensor | float, s_neg: Tensor | float, margin: float = 0.2, tau: float = 10.0
) -> Tensor:
    r"""Triplet weight T of a (query, positive, hardest negative) triplet, elementwise (sec. 3.2).

    - "con", eq. 5: :math:`T = \delta(m + s_{neg} - s_{pos})`, the Heaviside step of
      the triplet loss (eq. 4). Taken as 0 at the hinge itself, where autograd's relu
      gradient is 0 too, so (con, con) reproduces the triplet loss's gradient exactly.
    - "nca", eq. 7: :math:`T = 1/(1 + e^{\tau(s_{pos} - s_{neg})}) = \sigma(\tau(s_{neg} - s_{pos}))`.
      Derivation (the paper's Appendix is not in our extraction, so here it is): eq. 6
      for one triplet is :math:`l = \log(1 + e^{\tau(s_{neg} - s_{pos})})`, hence
      :math:`\partial l/\partial s_{neg} = -\partial l/\partial s_{pos} = \tau T^{nca}`.
      The GOAL gradient of (nca, con) is therefore the hard-negative NCA gradient
      divided by :math:`\tau`.
    - "cir", eq. 8: :math:`T = 1/(1 + e^{\tau(s_{pos}(2 - s_{pos}) - s_{neg}^2)})`; its level
      sets are the circles :math:`(s_{pos} - 1)^2 + s_{neg}^2 = c` of Circle loss.

    `margin` is used by "con" only, `tau` by "nca" and "cir". The sigmoid forms
    never overflow.

    Derived in notebooks/07_goal.py.
    """
    check_choice("name", name, GOAL_TRIPLETS)
    s_pos, s_neg = _as_tensor("s_pos", s_pos), _as_tensor("s_neg", s_neg)
    _check_broadcast(("s_pos", "s_neg"), s_pos, s_neg)
    return _triplet(name, s_pos, s_neg, check_nonnegative("margin", margin), check_positive("tau", tau))


def _triplet(name: str, s_pos: Tensor, s_neg: Tensor, margin: float, tau: float) -> Tensor:
    if name == "con":
        return (margin + s_neg - s_pos > 0).to(torch.result_type(s_pos, s_neg))
    if name == "nca":
        return torch.sigmoid(tau * (s_neg - s_pos))
    return torch.sigmoid(tau * (s_neg.square() - s_pos * (2 - s_pos)))


# --------------------------------------------------------------------------- pair weights


def pair_weight(
    name: str,
    s: Tensor | float,
    positive: bool,
    alpha: float = 2.0,
    beta: float = 10.0,
    lam: float = 0.5,
    rel: Tensor | float | None = None,
) -> Tensor:
    r"""Pair weight P_+ (``positive=True``, s = s_pos) or P_- (s = s_neg), elementwise (sec. 3.3).

    - "con", eq. 9: :math:`P_\pm = 1`.
    - "lin", eq. 10 (Circle loss): :math:`P_+ = [1 - s]_+`, :math:`P_- = [s]_+`.
    - "sig", eq. 11 (binomial deviance): :math:`P_+ = 1/(1 + e^{\alpha(s - \lambda)})`,
      :math:`P_- = 1/(1 + e^{-\beta(s - \lambda)})`.
    - "sig-ms", eq. 12 (MS loss): :math:`P_+ = 1/(m^{sig}_+ + e^{\alpha(s - \lambda)})`,
      :math:`P_- = 1/(m^{sig}_- + e^{-\beta(s - \lambda)})`; with m = 1 it is "sig".
    - "lin-ms", eq. 13: :math:`P_+ = [1 - m^{lin}_+]_+ [1 - s]_+`,
      :math:`P_- = [1 + m^{lin}_-]_+ [s]_+`; with m = 0 it is "lin".

    `rel` is the relative-similarity term m of the MS forms (required for them, and
    only for them): a number or a tensor broadcasting with `s`, > 0 for "sig-ms"
    (it is a mean of exponentials). :func:`relative_term` computes it from the batch;
    Fig. 3 of the paper plots the MS weights at m = 0.1.

    The clamps :math:`[\cdot]_+` are our reading: eq. 10 drops the :math:`[\cdot]_+`
    of Circle loss's own weights, and without it a negative pair with s < 0 would be
    *pulled in* (P_- < 0). With them every pair weight is >= 0, so positives are
    always pulled and negatives always pushed. For cosine similarities the clamp on
    P_+ never acts; on P_- it acts only when s_neg < 0.

    Derived in notebooks/07_goal.py.
    """
    check_choice("name", name, GOAL_PAIRS)
    s = _as_tensor("s", s)
    if not isinstance(positive, bool):
        raise TypeError(f"positive must be a bool (True for P_+, False for P_-), got {type(positive).__name__}")
    alpha, beta = check_positive("alpha", alpha), check_positive("beta", beta)
    lam = check_finite("lam", lam)
    return _pair(name, s, positive, alpha, beta, lam, _check_rel(name, rel, s))


def _check_rel(name: str, rel: Tensor | float | None, s: Tensor) -> Tensor | None:
    """The MS term in the form _pair takes: m for "lin-ms", log m for "sig-ms"."""
    if name not in _MS_PAIRS:
        if rel is not None:
            raise ValueError(f"rel is the relative-similarity term of the MS pair weights only; got it for {name!r}")
        return None
    if rel is None:
        raise ValueError(f"rel (the relative-similarity term m of eqs. 12/13) must be given for {name!r}")
    rel = _as_tensor("rel", rel, like=s).to(s)
    _check_broadcast(("s", "rel"), s, rel)
    if name == "lin-ms":
        return rel
    if bool((rel <= 0).any()):
        raise ValueError("rel must be > 0 for 'sig-ms' (m^sig is a mean of exponentials)")
    return rel.log()


def _pair(
    name: str, s: Tensor, positive: bool, alpha: float, beta: float, lam: float, ms: Tensor | None = None
) -> Tensor:
    """Eqs. 9-13. `ms` is m^lin for "lin-ms" and log m^sig for "sig-ms"."""
    if name == "con":
        return torch.ones_like(s)
    if name in ("lin", "lin-ms"):
        base = (1 - s).clamp_min(0) if positive else s.clamp_min(0)
        if name == "lin":
            return base
        return ((1 - ms) if positive else (1 + ms)).clamp_min(0) * base
    x = alpha * (s - lam) if positive else -beta * (s - lam)
    if name == "sig":
        return torch.sigmoid(-x)
    return torch.exp(-torch.logaddexp(ms, x))  # 1 / (m + e^x) without overflow


# --------------------------------------------------------------------------- MS relative terms


def relative_term(
    name: str,
    s: Tensor,
    others: Tensor,
    members: Tensor,
    positive: bool,
    alpha: float = 2.0,
    beta: float = 10.0,
    ms_form: str = "ms-loss",
) -> Tensor:
    r"""Relative-similarity term m of the MS pair weights (eqs. 12, 13), one per selected pair.

    s[k] is the similarity of the k-th selected pair (its positive if `positive`,
    else its hardest negative); row k of `others` holds the candidate relative
    similarities R and row k of `members` (bool) marks which of them are in the set
    (:math:`\mathcal{P}` for positives, :math:`\mathcal{N}` for negatives), the
    selected pair itself excluded. With :math:`e_R = e^{\alpha(s - R)}` for positives
    and :math:`e^{-\beta(s - R)}` for negatives:

    - "sig-ms", ``ms_form="ms-loss"`` (MS loss's own weights, Wang et al. 2019: the
      sum runs over the set *and the selected pair*, whose term is :math:`e^0 = 1`):
      :math:`m^{sig} = 1 + \sum_{R} e_R \ge 1`, so :math:`P^{sig-ms} \le 1`;
    - "sig-ms", ``ms_form="printed"`` (eq. 12 as printed):
      :math:`m^{sig} = \mathrm{mean}_{R}\, e_R`, 1 for an empty set;
    - "lin-ms" (eq. 13, GOAL's own parameter-free form, bounded as printed):
      :math:`m^{lin}_\pm = \mathrm{mean}\,(s - R)` over the set, 0 for an empty set;
      `ms_form` does not apply.

    With an empty set both sig-ms readings give m = 1, which turns eq. 12 into
    eq. 11 (the paper's own remark on m = 1), and lin-ms gives 0, which turns eq. 13
    into eq. 10. (The authors' public code uses 0 for both, which makes an isolated
    pair's sig-ms weight :math:`e^{-\alpha(s - \lambda)}`, up to e^3; we keep the
    paper's reading.) Shapes: s [K], others and members [K, M].

    We follow the equations where the paper's prose disagrees with them: for a
    hardest negative every member of :math:`\mathcal{N}` lies below s, so the printed
    :math:`m^{sig}_- \le 1` (and :math:`m^{lin}_- \ge 0`), which *raises* P_- above the
    plain sigmoid, up to 1/m -- the prose says m_- > 1. That unbounded 1/m is why the
    default is MS loss's own sum.

    Derived in notebooks/07_goal.py.
    """
    check_choice("name", name, _MS_PAIRS)
    check_choice("ms_form", ms_form, MS_FORMS)
    s = check_tensor("s", s, ndim=1)
    others = check_tensor("others", others, ndim=2)
    if not isinstance(members, Tensor) or members.dtype != torch.bool or members.shape != others.shape:
        raise ValueError(f"members must be a bool tensor shaped like others {tuple(others.shape)}")
    if others.shape[0] != s.shape[0]:
        raise ValueError(f"others must have one row per entry of s ({s.shape[0]}), got {others.shape[0]}")
    if not isinstance(positive, bool):
        raise TypeError(f"positive must be a bool, got {type(positive).__name__}")
    alpha, beta = check_positive("alpha", alpha), check_positive("beta", beta)
    ms = _relative(name, s, others, members, positive, alpha, beta, ms_form)
    return ms.exp() if name == "sig-ms" else ms


def _relative(
    name: str, s: Tensor, others: Tensor, members: Tensor, positive: bool, alpha: float, beta: float, ms_form: str
) -> Tensor:
    """m^lin for "lin-ms", log m^sig for "sig-ms" (a log-sum-exp, so it never overflows)."""
    count = members.sum(dim=1)
    diff = s[:, None] - others
    if name == "lin-ms":
        total = torch.where(members, diff, 0).sum(dim=1)
        return torch.where(count > 0, total / count.clamp_min(1), 0)
    logits = torch.where(members, alpha * diff if positive else -beta * diff, -math.inf)
    if ms_form == "ms-loss":  # log(1 + sum): the selected pair's own term is e^0 = 1
        return torch.logaddexp(torch.logsumexp(logits, dim=1), s.new_zeros(()))
    log_mean = torch.logsumexp(logits, dim=1) - count.clamp_min(1).to(s).log()
    return torch.where(count > 0, log_mean, 0)


# --------------------------------------------------------------------------- the GOAL gradient


def _hardest(S: Tensor, pos: Positives) -> tuple[Tensor, Tensor, Tensor]:
    """Rows as queries: positive score, hardest-negative score and its column, one per positive pair.

    similarity.hardest_negatives picks a single hardest negative, as losses.triplet_hardest does.
    """
    neg_val, neg_col = hardest_negatives(S, pos.neg)
    return S[pos.rows, pos.cols], neg_val[pos.rows], neg_col[pos.rows]


def batch_triplets(S: Tensor, pos_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(s_pos, s_neg) of every anchor triplet GOAL weighs (sec. 3.1), image queries first, then caption queries.

    Each positive pair (i, j) gives two triplets: the image query i with its hardest
    negative caption, and the caption query j with its hardest negative image. These
    are the points at which :func:`goal_gradient` evaluates T and P; shape [2P] each.

    Derived in notebooks/07_goal.py.
    """
    S, pos = check_similarity(S, pos_mask)
    S = S.detach()
    rows, cols = _hardest(S, pos), _hardest(S.T, pos.transposed())
    return torch.cat([rows[0], cols[0]]), torch.cat([rows[1], cols[1]])


def _ms_sets(S: Tensor, pos: Positives, s_pos: Tensor, s_neg: Tensor, neg_col: Tensor, eps: float):
    r"""Candidates and members of :math:`\mathcal{P}` and :math:`\mathcal{N}` (sec. 3.3), rows as queries.

    Both sets are the *anchor's own* pairs, as in MS loss (Wang et al. 2019, eqs. 6-8) and as
    eq. 12's notation :math:`R_{x,y^i}` (anchor x, its other positives y^i) writes them.
    :math:`\mathcal{P}`: the anchor's other positives below its hardest negative + eps -- the
    paper's :math:`R < \max\{S_{x,y'}, R'\} + \epsilon`, whose max is s_neg.
    :math:`\mathcal{N}`: the anchor's other negatives (all but the hardest) above its lowest
    positive - eps -- the paper's :math:`R' > \min\{S_{x,y}, R\} - \epsilon`.
    With one caption per image a caption query has no other positive, so its m_+ is empty
    (P^sig-ms_+ = P^sig_+). Versions before 2026-11-26 took :math:`\mathcal{P}` over every
    positive pair of the batch and the batch's lowest positive: |P| ~ 90 there, m_+ ~ 100, and
    the positive pull all but vanished (docs/results.md, run 7).
    """
    n_pairs = s_pos.numel()
    others_pos = s_pos[None, :].expand(n_pairs, n_pairs)
    same_anchor = pos.rows[:, None] == pos.rows[None, :]
    same_anchor.fill_diagonal_(False)
    in_p = same_anchor & (others_pos < s_neg[:, None] + eps)
    lowest_pos = torch.full((S.shape[0],), math.inf, dtype=S.dtype, device=S.device)
    lowest_pos = lowest_pos.scatter_reduce(0, pos.rows, s_pos, reduce="amin")
    rows = S[pos.rows]
    in_n = pos.neg[pos.rows] & (rows > (lowest_pos[pos.rows] - eps)[:, None])
    in_n[torch.arange(n_pairs, device=S.device), neg_col] = False
    return (others_pos, in_p), (rows, in_n)


def _check_weights(w_pos: Tensor, w_neg: Tensor, cfg: GoalConfig, S: Tensor) -> None:
    """The gradient is built from these 2P weights alone: checking them checks it, and says which knob overflowed.

    Skipped inside ``_checks.validated`` (the trainer watches its loss on the device instead)."""
    if not values_checked():
        return
    for w, param, value in ((w_pos, "alpha", cfg.alpha), (w_neg, "beta", cfg.beta)):
        if bool(torch.isfinite(w).all()):
            continue
        if cfg.pair == "sig-ms" and cfg.ms_form == "printed":
            raise FloatingPointError(
                f"goal ({cfg.triplet}, sig-ms) overflowed {S.dtype} at {param}={value:g}: with ms_form='printed' "
                f"(eq. 12 as printed) the weight 1/m grows without bound as {param} grows; lower {param}, or use "
                "ms_form='ms-loss', whose weights are <= 1"
            )
        raise FloatingPointError(
            f"goal ({cfg.triplet}, {cfg.pair}) weights overflowed {S.dtype}: scores up to "
            f"{float(S.abs().max()):.3g} are far outside the cosine range [-1, 1]"
        )


#: One direction's designed gradient, sparse: dL/dS[rows[k], cols[k]] += values[k] (accumulated).
_Entries = tuple[Tensor, Tensor, Tensor]


def _weights(cfg: GoalConfig, s_pos: Tensor, s_neg: Tensor, ms_pos: Tensor | None, ms_neg: Tensor | None,
             S: Tensor) -> tuple[Tensor, Tensor]:
    """T * P_+ and T * P_- of every triplet (eqs. 3-4), checked finite."""
    t = _triplet(cfg.triplet, s_pos, s_neg, cfg.margin, cfg.tau)
    w_pos = t * _pair(cfg.pair, s_pos, True, cfg.alpha, cfg.beta, cfg.lam, ms_pos)
    w_neg = t * _pair(cfg.pair, s_neg, False, cfg.alpha, cfg.beta, cfg.lam, ms_neg)
    _check_weights(w_pos, w_neg, cfg, S)
    return w_pos, w_neg


def _one_direction(S: Tensor, pos: Positives, cfg: GoalConfig) -> tuple[list[_Entries], Tensor]:
    """The designed dL/dS of the row queries of S as sparse entries, and their triplet-hardest value."""
    s_pos, s_neg, neg_col = _hardest(S, pos)
    ms_pos = ms_neg = None
    if cfg.pair in _MS_PAIRS:
        (cand_p, in_p), (cand_n, in_n) = _ms_sets(S, pos, s_pos, s_neg, neg_col, cfg.eps)
        ms_pos = _relative(cfg.pair, s_pos, cand_p, in_p, True, cfg.alpha, cfg.beta, cfg.ms_form)
        ms_neg = _relative(cfg.pair, s_neg, cand_n, in_n, False, cfg.alpha, cfg.beta, cfg.ms_form)
    w_pos, w_neg = _weights(cfg, s_pos, s_neg, ms_pos, ms_neg, S)
    # Several positives of one query share its hardest negative: the entries accumulate.
    entries = [(pos.rows, pos.cols, -w_pos), (pos.rows, neg_col, w_neg)]
    return entries, F.relu(cfg.margin + s_neg - s_pos).sum()


def _diagonal_ms_neg(W: Tensor, s_pos: Tensor, s_neg: Tensor, cfg: GoalConfig, dim: int) -> Tensor:
    r"""The MS term of the hardest negatives (m^lin, or log m^sig in MS loss's form) on the diagonal layout.

    The same sets as :func:`_ms_sets` (with one positive per query, :math:`\mathcal{P}` is empty and the
    lowest positive is the positive itself), summed along `dim` of W (S with a -inf diagonal) without
    building them: :math:`\mathcal{N}` = the negatives above s_pos - eps other than the hardest. The
    hardest negative's own term is exactly e^0 = 1 (sig-ms) or s_neg - s_neg = 0 (lin-ms), and it is
    in the set's condition exactly when the set is non-empty or it is alone; so the sums run over
    the condition and count it once, as MS loss's "1 +" does (sig-ms), or leave it out of the count
    (lin-ms)."""
    view = (lambda v: v[:, None]) if dim == 1 else (lambda v: v[None, :])
    c = s_pos - cfg.eps
    # D = R - c: > 0 exactly where R > c (a float difference of distinct floats is never 0), -inf on W's diagonal;
    # the set is read off D's sign, with no bool N x N mask
    D = torch.sub(W, view(c))
    if cfg.pair == "sig-ms":  # log(1 + sum over the others of e^{beta (R - s_neg)}), each term <= 1
        total = F.threshold_(D, 0.0, -math.inf).add_(view(c - s_neg)).mul_(cfg.beta).exp_().sum(dim)
        return total.clamp_min(1.0).log()
    # lin-ms: the sum of s_neg - R over the set, as n (s_neg - c) - sum (R - c)
    D.relu_()
    over = D.sum(dim)
    n_inside = D.sign_().sum(dim)  # exact: a float sum of at most N ones
    total = n_inside * (s_neg - c) - over
    count = n_inside - (s_neg > c).to(W.dtype)
    return torch.where(count > 0, total / count.clamp_min(1), 0)


def _goal_diagonal(S: Tensor, cfg: GoalConfig) -> tuple[list[_Entries], Tensor]:
    """:func:`_goal_entries` for positives on the diagonal: both directions from one copy of S."""
    rows, cols, W = _hardest_negatives_diagonal(S)
    d = S.diagonal()
    idx = torch.arange(d.numel(), device=S.device)
    entries, value = [], S.new_zeros(())
    for hardest, dim in ((rows, 1), (cols, 0)):
        ms_pos = ms_neg = None
        if cfg.pair in _MS_PAIRS:
            ms_pos = torch.zeros_like(d)  # no other positive: m_+ of an empty set (log 1 = 0, or 0)
            ms_neg = _diagonal_ms_neg(W, d, hardest.values, cfg, dim)
        w_pos, w_neg = _weights(cfg, d, hardest.values, ms_pos, ms_neg, S)
        neg_at = (idx, hardest.indices) if dim == 1 else (hardest.indices, idx)
        entries += [(idx, idx, -w_pos), (*neg_at, w_neg)]
        value = value + F.relu(cfg.margin + hardest.values - d).sum()
    return entries, value


def _goal_entries(S: Tensor, pos: Positives, cfg: GoalConfig) -> tuple[_Entries, Tensor]:
    """The designed dL/dS of both directions as one sparse set of entries, and the triplet-hardest value."""
    if pos.diagonal and not (cfg.pair == "sig-ms" and cfg.ms_form == "printed"):
        entries, value = _goal_diagonal(S, cfg)
    else:
        entries, value_rows = _one_direction(S, pos, cfg)
        # The caption queries: the same on S.T, each entry's (row, column) swapped back.
        entries_t, value_cols = _one_direction(S.T, pos.transposed(), cfg)
        entries += [(c, r, v) for r, c, v in entries_t]
        value = value_rows + value_cols
    r, c, v = (torch.cat(parts) for parts in zip(*entries))
    return (r, c, v), value


def _dense(shape: torch.Size, like: Tensor, entries: _Entries, scale: Tensor | None = None) -> Tensor:
    r, c, v = entries
    grad = like.new_zeros(shape)
    return grad.index_put_((r, c), v if scale is None else v * scale, accumulate=True)


def _goal(S: Tensor, pos: Positives, cfg: GoalConfig) -> tuple[Tensor, Tensor]:
    entries, value = _goal_entries(S, pos, cfg)
    return _dense(S.shape, S, entries), value


def goal_gradient(
    S: Tensor,
    triplet: str = _DEFAULT.triplet,
    pair: str = _DEFAULT.pair,
    *,
    pos_mask: Tensor | None = None,
    config: GoalConfig | None = None,
    **params: object,
) -> Tensor:
    """The designed dL/dS of :func:`goal_objective` as a plain tensor (no autograd), for plots and analysis.

    Takes a :class:`GoalConfig` (``goal_gradient(S, config=cfg)``) or the weights and the
    other fields of GoalConfig as keywords (``goal_gradient(S, "cir", "sig-ms", beta=50)``),
    not both; see :func:`goal_objective` for what each field does.

    Derived in notebooks/07_goal.py.
    """
    cfg = _resolve(config, triplet=triplet, pair=pair, **params)
    S, pos = check_similarity(S, pos_mask)
    return _goal(S.detach(), pos, cfg)[0]


class _GoalFunction(torch.autograd.Function):
    """Forward: the logging value. Backward: the designed gradient, weights held constant."""

    @staticmethod
    def forward(ctx, S: Tensor, pos: Positives, cfg: GoalConfig) -> Tensor:  # type: ignore[override]
        entries, value = _goal_entries(S.detach(), pos, cfg)
        ctx.save_for_backward(*entries)  # 4 entries per positive pair: the N x N gradient is written in backward
        ctx.shape = S.shape
        return value

    @staticmethod
    def backward(ctx, grad_output: Tensor):  # type: ignore[override]
        r, c, v = ctx.saved_tensors
        # scaled after the scatter: grad_output may be batched (vmap over the backward, vlr_lib.analysis)
        return grad_output * _dense(ctx.shape, v, (r, c, v)), None, None


def goal_objective(
    S: Tensor,
    triplet: str = _DEFAULT.triplet,
    pair: str = _DEFAULT.pair,
    margin: float = _DEFAULT.margin,
    tau: float = _DEFAULT.tau,
    alpha: float = _DEFAULT.alpha,
    beta: float = _DEFAULT.beta,
    lam: float = _DEFAULT.lam,
    eps: float = _DEFAULT.eps,
    ms_form: str = _DEFAULT.ms_form,
    pos_mask: Tensor | None = None,
    config: GoalConfig | None = None,
) -> Tensor:
    r"""GOAL objective (Xuan & Chen sec. 3, eq. 3): a scalar whose backward is the designed gradient.

    Every positive pair (i, j) is an anchor term, in both directions: the image
    query i with its hardest negative caption (the largest S[i, n] outside
    `pos_mask` in row i) and the caption query j with its hardest negative image
    (the largest S[n, j] in column j). For each such triplet the backward puts
    :math:`-T \cdot P_+` on S[i, j] and :math:`+T \cdot P_-` on the hardest negative,
    with T = ``triplet_weight(triplet, s_pos, s_neg, margin, tau)`` and P from
    ``pair_weight(pair, ...)``; every other entry of dL/dS is 0 and everything is
    summed over anchor terms and directions. T and P are constants (no gradient
    flows through them), as in the paper: this is what makes non-integrable
    combinations trainable.

    Known special cases (Table 1, :data:`TABLE1`): (con, con) is exactly the gradient
    of ``losses.triplet_hardest(S, margin, "sum")``; (nca, con) is the gradient of the
    hard-negative NCA loss of eq. 6 divided by `tau` (see :func:`triplet_weight`).

    Parameters (the fields of :class:`GoalConfig`; pass one as `config` instead):
    `margin` (T^con), `tau` (T^nca, T^cir), `alpha`, `beta`, `lam` (P^sig, P^sig-ms:
    alpha, beta, lambda of eqs. 11-12), `eps` (the MS sets: MS loss's pair-mining
    margin epsilon, which decides which other pairs enter :math:`\mathcal{P}` and
    :math:`\mathcal{N}`; 0.1 as in MS loss and the authors' code; used by "lin-ms" and
    "sig-ms" only), `ms_form` (P^sig-ms only: "ms-loss", MS loss's own weights, each
    <= 1, or "printed", eq. 12 as printed; see the module docstring and
    :func:`relative_term`).

    Forward value (for logging only -- its own autograd gradient is *not* the
    backward): the triplet-hardest (VSE++) loss,
    :math:`\sum [m + s_{neg} - s_{pos}]_+` over anchor terms and both directions, the
    number the paper's baselines report. It is comparable across all 15
    combinations and equals the trained objective for (con, con).

    Derived in notebooks/07_goal.py.
    """
    cfg = _resolve(config, triplet=triplet, pair=pair, margin=margin, tau=tau, alpha=alpha, beta=beta, lam=lam,
                   eps=eps, ms_form=ms_form)
    S, pos = check_similarity(S, pos_mask)
    return _GoalFunction.apply(S, pos, cfg)
