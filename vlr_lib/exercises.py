"""The graded exercises of notebooks 02-08 (``vlr_lib.grading`` checks them): what each asks for, its cases, its
known mistakes. Notebook 03 has three (NT-Xent, then CLIP's learned temperature and SigLIP's sigmoid loss); the
others one each.

An :class:`Exercise` names the library function an answer must match (bound here, at import: replacing
``losses.triplet_hardest`` in a kernel does not change what an answer is compared with), what an answer may not
call, its tolerances, and how its cases are drawn: random batches plus the edge cases its text demands -- rows
whose negatives are all below 0, float32 at the scale where a naive ``exp`` overflows (CLIP's and SigLIP's at the
clamp t = 100), ties on a grid of 0.25, the smallest sizes. Each known mistake is a function written the wrong way
(a flipped sign, the positives masked with 0, a naive exp...), which the checker matches against a wrong answer to
name it.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from . import analysis, goal, losses, metrics


@dataclass(frozen=True)
class Case:
    """One case: the keyword arguments the answer is called with, how a message names it, and what it tests."""

    kwargs: dict[str, object]
    label: str
    kind: str = "random"


@dataclass(frozen=True)
class Exercise:
    """A graded exercise: the library function an answer must match, its cases, the known mistakes, what an
    answer may not call, and the tolerances (float64, float32)."""

    key: str
    title: str
    points: int
    signature: str
    reference: Callable[..., object]
    cases: Callable[[torch.Generator, int], list[Case]]
    mistakes: dict[str, Callable[..., object]] = field(default_factory=dict)
    forbidden: tuple[Callable, ...] = ()
    rtol: float = 1e-5
    atol: float = 1e-7
    rtol32: float = 1e-4
    atol32: float = 1e-5

    @property
    def function(self) -> str:
        """The name of the function the student writes (``triplet_sh``)."""
        return self.signature.split("(")[0]


# --------------------------------------------------------------------------- drawing the cases


def _uniform(gen: torch.Generator, shape: tuple[int, ...], low: float, high: float) -> Tensor:
    return low + (high - low) * torch.rand(shape, generator=gen, dtype=torch.float64)


def _size(gen: torch.Generator, low: int = 2, high: int = 10) -> int:
    return int(torch.randint(low, high, (1,), generator=gen))


def _pick(gen: torch.Generator, values: tuple) -> object:
    return values[int(torch.randint(len(values), (1,), generator=gen))]


def _cosines(gen: torch.Generator, n: int, dim: int = 8) -> Tensor:
    """Cosine similarities of n random unit vectors with n others, positives (the diagonal) above chance."""
    x = torch.nn.functional.normalize(torch.randn(n, dim, generator=gen, dtype=torch.float64), dim=1)
    y = torch.nn.functional.normalize(torch.randn(n, dim, generator=gen, dtype=torch.float64), dim=1)
    return x @ torch.nn.functional.normalize(y + 0.8 * x, dim=1).T


def _square(gen: torch.Generator, n: int, diag: tuple[float, float], off: tuple[float, float]) -> Tensor:
    """A square S with its diagonal drawn from `diag` and every other entry from `off`."""
    S = _uniform(gen, (n, n), *off)
    S.diagonal().copy_(_uniform(gen, (n,), *diag))
    return S


def _grid(gen: torch.Generator, n: int) -> Tensor:
    """A square S on a grid of 0.25 (exact in float32 and float64): ties between negatives, and with the margin."""
    return torch.randint(-4, 5, (n, n), generator=gen).double() / 4


def _below_zero(gen: torch.Generator, n: int) -> Tensor:
    """Every negative below 0, the positives just above: a max over negatives masked with 0 finds 0."""
    return _square(gen, n, (0.0, 0.2), (-0.7, -0.05))


def _confident(gen: torch.Generator, n: int) -> Tensor:
    """Positives near 1 and negatives up to 0.95, float32: e^{100 s} overflows (float32 stops at e^88)."""
    return _square(gen, n, (0.9, 1.0), (-0.5, 0.95)).float()


def _hard(gen: torch.Generator, n: int) -> Tensor:
    """Negatives far above their positives, float32: e^{60 (s_in - s_ii + m)} overflows."""
    return _square(gen, n, (-0.6, -0.2), (0.5, 0.95)).float()


Edge = tuple[str, Callable[[torch.Generator], dict[str, object]]]


def _mix(gen: torch.Generator, total: int, random: Callable[[torch.Generator], dict], edges: list[Edge]) -> list[Case]:
    """`total` cases: each edge kind once (practice) or twice (regrade), the rest random."""
    repeat = max(1, total // (2 * len(edges))) if edges else 0
    chosen = [("random", random)] * (total - repeat * len(edges)) + [e for e in edges for _ in range(repeat)]
    out = []
    for kind, make in chosen:
        kwargs = make(gen)
        out.append(Case(kwargs, _label(kwargs), kind))
    return out


def _label(kwargs: dict[str, object]) -> str:
    parts = []
    for name, value in kwargs.items():
        if isinstance(value, Tensor):
            shape = "x".join(map(str, value.shape)) or "scalar"
            parts.append(f"{name} {shape}" + (" float32" if value.dtype == torch.float32 else ""))
        else:
            parts.append(f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}")
    return ", ".join(parts)


def _s_cases(param: str, values: tuple, edges: list[Edge]) -> Callable[[torch.Generator, int], list[Case]]:
    """Square S of sizes 2-9 with `param` drawn from `values`, and the exercise's edge cases."""

    def make(gen: torch.Generator, total: int) -> list[Case]:
        return _mix(gen, total, lambda g: {"S": _cosines(g, _size(g)), param: _pick(g, values)}, edges)

    return make


def _ap_random(gen: torch.Generator, m: int | None = None) -> dict[str, object]:
    """One query's scores, rounded to one decimal so that some positives tie with negatives."""
    m = m or _size(gen, 3, 12)
    scores = torch.round(torch.rand(m, generator=gen, dtype=torch.float64), decimals=1)
    is_pos = torch.rand(m, generator=gen) < 0.4
    is_pos[int(torch.randint(m, (1,), generator=gen))] = True
    return {"scores": scores, "is_pos": is_pos}


def _ap_cases(gen: torch.Generator, total: int) -> list[Case]:
    edges: list[Edge] = [
        ("a single candidate", lambda g: {"scores": torch.rand(1, generator=g, dtype=torch.float64),
                                          "is_pos": torch.tensor([True])}),
        ("every candidate positive", lambda g: {"scores": torch.rand(5, generator=g, dtype=torch.float64),
                                                "is_pos": torch.ones(5, dtype=torch.bool)}),
        ("every score tied", lambda g: {"scores": torch.full((6,), 0.5, dtype=torch.float64),
                                        "is_pos": torch.tensor([False, True, False, True, False, False])}),
        ("float32 scores", lambda g: {k: v.float() if v.is_floating_point() else v for k, v in _ap_random(g).items()}),
    ]
    return _mix(gen, total, _ap_random, edges)


def _triplets(gen: torch.Generator, shape: tuple[int, ...], tau: float, s_pos_range=(-1.0, 1.0)) -> dict[str, object]:
    return {"s_pos": _uniform(gen, shape, *s_pos_range), "s_neg": _uniform(gen, shape, -1.0, 1.0), "tau": tau}


def _weight_cases(gen: torch.Generator, total: int) -> list[Case]:
    def overflowing(g: torch.Generator) -> dict[str, object]:
        # s_pos near -1: tau (s_pos (2 - s_pos) - s_neg^2) reaches -108, e^{108} overflows in float32
        kwargs = _triplets(g, (12,), 30.0, (-1.0, -0.8))
        kwargs["s_pos"][:4] = _uniform(g, (4,), 0.9, 1.0)  # and a few on the other side
        return {k: v.float() if isinstance(v, Tensor) else v for k, v in kwargs.items()}

    edges: list[Edge] = [
        ("float32, tau = 30: a naive exp overflows", overflowing),
        ("a [3, 4] batch of triplets", lambda g: _triplets(g, (3, 4), _pick(g, (5.0, 30.0)))),
        ("one triplet", lambda g: _triplets(g, (1,), _pick(g, (1.0, 10.0)))),
        ("float32", lambda g: {k: v.float() if isinstance(v, Tensor) else v
                               for k, v in _triplets(g, (_size(g, 1, 20),), 10.0).items()}),
    ]
    return _mix(gen, total, lambda g: _triplets(g, (_size(g, 1, 20),), _pick(g, (1.0, 5.0, 10.0, 30.0))), edges)


#: Learned log-scales t' the cases draw: 0 (t = 1), log 10 (SigLIP's start), log(1/0.07) (CLIP's start), log 100
#: (the clamp).
_LOG_SCALES = (0.0, math.log(10.0), math.log(1 / 0.07), math.log(100.0))


def _clip_cases(gen: torch.Generator, total: int) -> list[Case]:
    top = math.log(100.0)
    return _mix(gen, total, lambda g: {"S": _cosines(g, _size(g)), "logit_scale": _pick(g, _LOG_SCALES)}, [
        ("float32, t' = log 100 (the clamp): a naive exp overflows", lambda g: {"S": _confident(g, _size(g)),
                                                                                 "logit_scale": top}),
        ("float32", lambda g: {"S": _f32(g), "logit_scale": math.log(1 / 0.07)}),
        ("N = 2", lambda g: {"S": _cosines(g, 2), "logit_scale": math.log(10.0)}),
        ("ties (S on a grid of 0.25)", lambda g: {"S": _grid(g, _size(g, 3)), "logit_scale": math.log(10.0)}),
    ])


def _one_hard_negative(S: Tensor) -> Tensor:
    """S with one negative at 0.95 (at t = 100 its -z (t s + b) is 95: e^{95} is inf in float32, in every draw)."""
    S = S.clone()
    S[0, 1] = 0.95
    return S


def _siglip_random(gen: torch.Generator) -> dict[str, object]:
    return {"S": _cosines(gen, _size(gen)), "logit_scale": _pick(gen, _LOG_SCALES),
            "logit_bias": _pick(gen, (-10.0, -5.0, -1.0, 0.0, 2.0))}


def _siglip_cases(gen: torch.Generator, total: int) -> list[Case]:
    top = math.log(100.0)
    return _mix(gen, total, _siglip_random, [
        # negatives up to 0.95 at t = 100: -z (t s + b) reaches 95, and e^{95} overflows float32 (it stops at e^88)
        ("float32, t' = log 100 (the clamp), b = 0: a naive exp overflows", lambda g: {
            "S": _one_hard_negative(_confident(g, _size(g, 3))), "logit_scale": top, "logit_bias": 0.0}),
        ("float32, SigLIP's start (t = 10, b = -10)", lambda g: {"S": _f32(g), "logit_scale": math.log(10.0),
                                                                 "logit_bias": -10.0}),
        ("N = 2", lambda g: {"S": _cosines(g, 2), "logit_scale": math.log(10.0), "logit_bias": -5.0}),
        ("ties (S on a grid of 0.25)", lambda g: {"S": _grid(g, _size(g, 3)), "logit_scale": math.log(10.0),
                                                  "logit_bias": -2.0}),
    ])


def _unified_random(gen: torch.Generator) -> dict[str, object]:
    return {"S": _cosines(gen, _size(gen)), "margin": _pick(gen, (0.0, 0.1, 0.2, 0.5)),
            "gamma": _pick(gen, (1.0, 10.0, 60.0))}


# --------------------------------------------------------------------------- the references and the known mistakes
# Bound here, at import: replacing losses.triplet_hardest in a kernel does not change what an answer is compared with.

_triplet_hardest, _triplet_all, _info_nce = losses.triplet_hardest, losses.triplet_all, losses.info_nce
_sampled_softmax, _cross_example_softmax = losses.sampled_softmax, losses.cross_example_softmax
_unified_weights, _unified_one_negative_weight = analysis.unified_weights, analysis.unified_one_negative_weight
_cocos, _average_precision_of, _triplet_weight = analysis.cocos, metrics.average_precision, goal.triplet_weight
_clip_learned, _siglip = losses.clip_learned, losses.siglip


def _off(S: Tensor) -> Tensor:
    return ~torch.eye(len(S), dtype=torch.bool)


def _cocos_triplet(S: Tensor, margin: float) -> Tensor:
    return _cocos(S, "triplet", margin=margin)["i2t"]["C_q"]


def _average_precision(scores: Tensor, is_pos: Tensor) -> Tensor:
    return torch.tensor(_average_precision_of(scores, is_pos), dtype=torch.float64)


def _sh_masked_with_zero(S: Tensor, margin: float) -> Tensor:
    """A known mistake: the positives masked with 0 instead of -inf, so a row whose negatives are all below 0
    takes 0 as its hardest negative."""
    negatives, d = S.masked_fill(~_off(S), 0.0), S.diagonal()
    return torch.relu(margin + negatives.amax(1) - d).sum() + torch.relu(margin + negatives.amax(0) - d).sum()


def _nt_xent_naive(S: Tensor, temperature: float) -> Tensor:
    """A known mistake: the softmax written with exp, which overflows in float32 once S / tau passes 88."""
    e = torch.exp(S / temperature)
    return -(torch.log(e.diagonal() / e.sum(1)).sum() + torch.log(e.diagonal() / e.sum(0)).sum()) / len(S)


def _unified_naive(S: Tensor, margin: float, gamma: float) -> Tensor:
    """A known mistake: D = e^{gamma (...)} computed as is, inf / inf = NaN in float32 at gamma = 60."""
    D = torch.exp(gamma * (S - S.diagonal()[:, None] + margin)) * _off(S)
    return D / (1 + D.sum(dim=1, keepdim=True))


def _cross_example_naive(S: Tensor, scale: float) -> Tensor:
    """A known mistake: e^{lambda s} computed as is, inf / inf in float32 at lambda = 100."""
    pos, neg = torch.exp(scale * S.diagonal()), torch.exp(scale * S[_off(S)]).sum()
    return -torch.log(pos / (pos + neg)).mean()


def _cir_naive(s_pos: Tensor, s_neg: Tensor, tau: float) -> Tensor:
    """A known mistake: the sigmoid written e^{-a} / (1 + e^{-a}): inf / inf in float32 once -a passes 88."""
    e = torch.exp(-tau * (s_pos * (2 - s_pos) - s_neg**2))
    return e / (1 + e)


def _nt_xent_at(S: Tensor, scale: Tensor | float) -> Tensor:
    """NT-Xent at the scale `scale` (logits scale * S), both directions summed / N, with no range check: the
    learned-temperature mistakes below feed it what a wrong answer would."""
    logits = S * scale
    d = logits.diagonal()
    return ((torch.logsumexp(logits, 1) - d).sum() + (torch.logsumexp(logits, 0) - d).sum()) / len(S)


def _clip_naive(S: Tensor, logit_scale: float) -> Tensor:
    """A known mistake: the softmax written with exp, which overflows in float32 once e^{t'} s passes 88."""
    e = torch.exp(math.exp(logit_scale) * S)
    return -(torch.log(e.diagonal() / e.sum(1)).sum() + torch.log(e.diagonal() / e.sum(0)).sum()) / len(S)


def _signs(S: Tensor) -> Tensor:
    """z_ij: +1 at the positives (the diagonal), -1 elsewhere."""
    return 2.0 * torch.eye(len(S), dtype=S.dtype) - 1.0


def _sigmoid_loss(S: Tensor, t: float, b: float, z: Tensor | None = None, over: int | None = None) -> Tensor:
    """-sum_ij log sigmoid(z_ij (t s_ij + b)) / over (default N), with no range check: the SigLIP mistakes below."""
    z = _signs(S) if z is None else z
    return -torch.nn.functional.logsigmoid(z * (t * S + b)).sum() / (over or len(S))


def _siglip_naive(S: Tensor, logit_scale: float, logit_bias: float) -> Tensor:
    """A known mistake: -log sigmoid(x) written log(1 + e^{-x}), which overflows in float32 once -x passes 88."""
    x = _signs(S) * (math.exp(logit_scale) * S + logit_bias)
    return torch.log(1 + torch.exp(-x)).sum() / len(S)


def _ap_over_every_rank(scores: Tensor, is_pos: Tensor) -> Tensor:
    """A known mistake: precision averaged over every rank, not only at the positives."""
    order = torch.argsort(scores, descending=True)
    hits = is_pos[order].double().cumsum(0)
    return (hits / torch.arange(1, len(scores) + 1)).mean()


def _ap_ties_favour(scores: Tensor, is_pos: Tensor) -> Tensor:
    """A known mistake: a negative that ties with a positive counted below it (> instead of >=)."""
    pos = torch.sort(scores[is_pos], descending=True).values
    above = (scores[~is_pos][None, :] > pos[:, None]).sum(dim=1)
    before = torch.arange(len(pos))
    return ((before + 1.0) / (1 + above + before)).mean()


def _both_directions(S: Tensor, margin: float, sign: float) -> Tensor:
    hard = S.masked_fill(~_off(S), -math.inf)
    d = S.diagonal()
    return torch.relu(margin + sign * (hard.amax(1) - d)).sum() + torch.relu(margin + sign * (hard.amax(0) - d)).sum()


def _f32(gen: torch.Generator, n: int | None = None) -> Tensor:
    return _cosines(gen, n or _size(gen)).float()


EXERCISES: dict[str, Exercise] = {
    e.key: e
    for e in [
        Exercise(
            "02_triplet_sh", "Triplet-SH, the hardest negative of each query", 5, "triplet_sh(S, margin) -> scalar, summed",
            lambda S, margin: _triplet_hardest(S, margin),
            _s_cases("margin", (0.0, 0.1, 0.2, 0.5), [
                ("every negative below 0", lambda g: {"S": _below_zero(g, _size(g, 3)), "margin": 0.5}),
                ("ties (S on a grid of 0.25)", lambda g: {"S": _grid(g, _size(g, 3)), "margin": 0.25}),
                ("N = 2", lambda g: {"S": _cosines(g, 2), "margin": 0.2}),
                ("float32", lambda g: {"S": _f32(g), "margin": 0.2}),
            ]),
            {
                "the positives masked with 0, not -inf (wrong when every negative of a row is below 0)": _sh_masked_with_zero,
                "the hinge's sign flipped ([m + s_ii - max s_ij]_+)": lambda S, margin: _both_directions(S, margin, -1.0),
                "every negative summed, not the hardest (Triplet)": lambda S, margin: _triplet_all(S, margin),
                "the margin left out": lambda S, margin: _triplet_hardest(S, 0.0),
                "only the image queries (rows), not the caption queries": lambda S, margin: torch.relu(
                    margin + S.masked_fill(~_off(S), -math.inf).amax(1) - S.diagonal()).sum(),
            },
            forbidden=(losses.triplet_hardest,),
        ),
        Exercise(
            "03_nt_xent", "NT-Xent in both directions", 5, "nt_xent(S, temperature) -> scalar, (rows + columns) / N",
            lambda S, temperature: _info_nce(S, temperature),
            _s_cases("temperature", (0.05, 0.1, 0.5, 1.0), [
                ("float32, temperature 0.01: a naive exp overflows", lambda g: {"S": _confident(g, _size(g)),
                                                                                "temperature": 0.01}),
                ("float32", lambda g: {"S": _f32(g), "temperature": 0.05}),
                ("N = 2", lambda g: {"S": _cosines(g, 2), "temperature": 0.1}),
                ("ties (S on a grid of 0.25)", lambda g: {"S": _grid(g, _size(g, 3)), "temperature": 0.1}),
            ]),
            {
                "the softmax written with exp, which overflows in float32 (use torch.logsumexp)": _nt_xent_naive,
                "only the image queries (rows)": lambda S, temperature: _sampled_softmax(S, 1 / temperature),
                "the temperature left out": lambda S, temperature: _info_nce(S, 1.0),
                "the temperature multiplied instead of divided": lambda S, temperature: _info_nce(S, 1 / temperature),
                "a mean over the 2N terms, not their sum / N": lambda S, temperature: _info_nce(S, temperature) / 2,
            },
            forbidden=(losses.info_nce,),
        ),
        Exercise(
            "03_clip_learned", "NT-Xent with CLIP's learned temperature", 5,
            "clip_loss(S, logit_scale) -> scalar, (rows + columns) / N at the scale e^{logit_scale}",
            lambda S, logit_scale: _clip_learned(S, logit_scale),
            _clip_cases,
            {
                "the softmax written with exp, which overflows in float32 at t' = log 100 (use torch.logsumexp)":
                    _clip_naive,
                "open_clip's ClipLoss: the mean of the two directions (half the library's (rows + columns) / N)":
                    lambda S, logit_scale: _clip_learned(S, logit_scale) / 2,
                "t' used as the scale itself (S t'), not e^{t'}": lambda S, logit_scale: _nt_xent_at(S, logit_scale),
                "e^{t'} used as a temperature (S / e^{t'}), not as the scale": lambda S, logit_scale: _nt_xent_at(
                    S, math.exp(-logit_scale)),
                "only the image queries (rows)": lambda S, logit_scale: _sampled_softmax(S, math.exp(logit_scale)),
            },
            forbidden=(losses.clip_learned, losses.info_nce),
        ),
        Exercise(
            "03_siglip", "SigLIP's sigmoid loss", 5,
            "sigmoid_loss(S, logit_scale, logit_bias) -> scalar, summed over every pair / N",
            lambda S, logit_scale, logit_bias: _siglip(S, logit_scale, logit_bias),
            _siglip_cases,
            {
                "-log sigmoid(x) written log(1 + e^{-x}), which overflows in float32 at t = 100 (use "
                "F.logsigmoid)": _siglip_naive,
                "the labels' sign flipped (z = -1 at the positives, +1 elsewhere)": lambda S, logit_scale, logit_bias:
                    _sigmoid_loss(S, math.exp(logit_scale), logit_bias, -_signs(S)),
                "the bias left out": lambda S, logit_scale, logit_bias: _sigmoid_loss(S, math.exp(logit_scale), 0.0),
                "divided by N^2 (a mean over the pairs), not by N as Algorithm 1 and open_clip do":
                    lambda S, logit_scale, logit_bias: _sigmoid_loss(S, math.exp(logit_scale), logit_bias,
                                                                     over=len(S) ** 2),
                "t' used as the scale itself, not e^{t'}": lambda S, logit_scale, logit_bias: _sigmoid_loss(
                    S, logit_scale, logit_bias),
                "the positives only (every negative's term left out)": lambda S, logit_scale, logit_bias:
                    -torch.nn.functional.logsigmoid(math.exp(logit_scale) * S.diagonal() + logit_bias).sum() / len(S),
            },
            forbidden=(losses.siglip,),
        ),
        Exercise(
            "04_unified_weights", "the weight of each negative in the unified loss", 5,
            "unified_weights(S, margin, gamma) -> [N, N], image queries (rows), 0 on the diagonal",
            lambda S, margin, gamma: _unified_weights(S, margin, gamma),
            lambda gen, total: _mix(gen, total, _unified_random, [
                ("float32, gamma 60: a naive exp overflows", lambda g: {"S": _hard(g, _size(g)), "margin": 0.2,
                                                                        "gamma": 60.0}),
                ("float32", lambda g: {"S": _f32(g), "margin": 0.2, "gamma": 10.0}),
                ("N = 2", lambda g: {"S": _cosines(g, 2), "margin": 0.1, "gamma": 10.0}),
                ("ties (S on a grid of 0.25)", lambda g: {"S": _grid(g, _size(g, 3)), "margin": 0.25, "gamma": 10.0}),
            ]),
            {
                "D = e^{gamma (...)} computed as is, which overflows in float32 at gamma = 60 (work in log space)":
                    _unified_naive,
                "a softmax over the negatives alone (the positive's '1 +' left out)": lambda S, margin, gamma: torch.softmax(
                    (gamma * S).masked_fill(~_off(S), -math.inf), dim=1),
                "each negative's own sigmoid (the one-negative weight)": lambda S, margin, gamma: _unified_one_negative_weight(
                    S - S.diagonal()[:, None], margin, gamma) * _off(S),
                "the margin left out": lambda S, margin, gamma: _unified_weights(S, 0.0, gamma),
            },
            forbidden=(analysis.unified_weights,),
        ),
        Exercise(
            "05_cross_example", "cross-example softmax", 5, "cross_example(S, scale) -> scalar, mean over the N positives",
            lambda S, scale: _cross_example_softmax(S, scale),
            _s_cases("scale", (1.0, 5.0, 20.0), [
                ("float32, scale 100: a naive exp overflows", lambda g: {"S": _confident(g, _size(g)), "scale": 100.0}),
                ("float32", lambda g: {"S": _f32(g), "scale": 20.0}),
                ("N = 2", lambda g: {"S": _cosines(g, 2), "scale": 20.0}),
                ("ties (S on a grid of 0.25)", lambda g: {"S": _grid(g, _size(g, 3)), "scale": 5.0}),
            ]),
            {
                "e^{lambda s} computed as is, which overflows in float32 at lambda = 100 (use torch.logsumexp)":
                    _cross_example_naive,
                "each row's own negatives (sampled softmax), not the whole batch's": lambda S, scale: _sampled_softmax(S, scale),
                "the scale left out": lambda S, scale: _cross_example_softmax(S, 1.0),
                "summed over the positives, not averaged": lambda S, scale: _cross_example_softmax(S, scale, reduction="sum"),
            },
            forbidden=(losses.cross_example_softmax,),
        ),
        Exercise(
            "06_average_precision", "average precision of one query", 5, "average_precision(scores, is_pos) -> float in [0, 1]",
            _average_precision,
            _ap_cases,
            {
                "precision averaged over every rank, not only at the positives": _ap_over_every_rank,
                "a negative tied with a positive ranked below it (> instead of >=)": _ap_ties_favour,
            },
            forbidden=(metrics.average_precision, metrics.map_at_k),
            rtol=1e-9, atol=1e-12, rtol32=1e-6, atol32=1e-7,
        ),
        Exercise(
            "07_cir_weight", "GOAL's circle triplet weight T^cir", 5, "cir_weight(s_pos, s_neg, tau) -> tensor like s_pos",
            lambda s_pos, s_neg, tau: _triplet_weight("cir", s_pos, s_neg, tau=tau),
            _weight_cases,
            {
                "the sigmoid written e^{-a} / (1 + e^{-a}), which overflows in float32 at tau = 30 (use torch.sigmoid)":
                    _cir_naive,
                "the sigmoid's argument with the wrong sign": lambda s_pos, s_neg, tau: torch.sigmoid(
                    tau * (s_pos * (2 - s_pos) - s_neg**2)),
                "the NCA weight instead (straight lines, not circles)": lambda s_pos, s_neg, tau: _triplet_weight(
                    "nca", s_pos, s_neg, tau=tau),
                "tau left out": lambda s_pos, s_neg, tau: _triplet_weight("cir", s_pos, s_neg, tau=1.0),
            },
            forbidden=(goal.triplet_weight,),
        ),
        Exercise(
            "08_cocos_triplet", "COCOS of Triplet: contributing negatives per image query", 5,
            "cocos_triplet(S, margin) -> int tensor [N]",
            _cocos_triplet,
            _s_cases("margin", (0.1, 0.2, 0.5, 1.0), [
                ("negatives exactly at the margin (S on a grid of 0.25)", lambda g: {"S": _grid(g, _size(g, 3)),
                                                                                     "margin": _pick(g, (0.25, 0.5))}),
                ("float32 on a grid of 0.25", lambda g: {"S": _grid(g, _size(g, 3)).float(), "margin": 0.5}),
                ("N = 2", lambda g: {"S": _cosines(g, 2), "margin": 0.2}),
                ("every negative below 0", lambda g: {"S": _below_zero(g, _size(g, 3)), "margin": 0.5}),
            ]),
            {
                "a negative exactly at the margin counted (<= instead of <)": lambda S, margin: (
                    (S.diagonal()[:, None] - S <= margin) & _off(S)).sum(dim=1),
                "the caption queries (columns) counted instead": lambda S, margin: _cocos(
                    S, "triplet", margin=margin)["t2i"]["C_q"],
                "the positive counted as well": lambda S, margin: _cocos_triplet(S, margin) + 1,
                "the margin left out": lambda S, margin: _cocos_triplet(S, 1e-12),
            },
            forbidden=(analysis.cocos, analysis.cocos_mask, analysis.cocos_table),
            rtol=0.0, atol=0.0, rtol32=0.0, atol32=0.0,
        ),
    ]
}
"""Every graded exercise by key: the chapter's number, then what the student implements."""
