"""Every closed-form loss of the workbook, each a function of the similarity matrix S.

The S contract (docs/architecture.md): S[i, j] is the similarity of image i and caption j.
Positives sit on the diagonal unless `pos_mask` marks them. Each positive pair
(i, j) is one *anchor term*; in the image->text direction its negatives are the
entries of row i outside `pos_mask`, in the text->image direction those of
column j. With the default diagonal layout this is exactly the papers' batch
losses; with a mask it also handles several captions of one image in a batch and
masks false negatives (a repeated image is never its own negative).

Reductions: "sum" adds every anchor term, "mean" divides that sum by the number
of positive pairs (N on the diagonal), "none" returns one value per positive
pair (both directions added) in the order of ``pos_mask.nonzero()``. The two
per-query losses differ, as their papers do: smooth_ap has one value per query row,
siglip one per image (row), and its "mean" is the paper's division by the number of
images.

All losses are vectorised over the batch: O(N^2) time and memory, no Python loop
over examples.
"""
from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F
from torch import Tensor

from ._checks import (
    Positives,
    check_nonnegative,
    check_positive,
    check_reduction,
    check_scalar,
    check_similarity,
    check_tensor,
    reduce,
    values_checked,
)
from .loss_entry import REDUCTION, Hyper, LossEntry
from .similarity import hardest_negatives, _hardest_negatives_diagonal

__all__ = [
    "triplet_all",
    "triplet_hardest",
    "triplet_soft",
    "info_nce",
    "unified",
    "sampled_softmax",
    "cross_example_softmax",
    "smooth_ap",
    "smooth_step",
    "clip_learned",
    "siglip",
    "clamp_logit_scale_",
    "LOGIT_SCALE_MIN",
    "LOGIT_SCALE_MAX",
    "CLIP_LOGIT_SCALE_INIT",
    "SIGLIP_LOGIT_SCALE_INIT",
    "SIGLIP_LOGIT_BIAS_INIT",
    "REGISTERED",
]


# --------------------------------------------------------------------------- helpers


def _margin(margin: float | Tensor, pos: Positives, like: Tensor) -> Tensor | float:
    """A scalar margin, or one margin per positive pair (Li et al. eq. 26, m_i)."""
    if isinstance(margin, Tensor):
        check_tensor("margin", margin, ndim=1)
        if margin.numel() != pos.count:
            raise ValueError(
                f"margin must be a number or a 1-D tensor with one value per positive pair ({pos.count}), "
                f"got {margin.numel()} values"
            )
        if values_checked() and bool((margin < 0).any()):
            raise ValueError("margin must be >= 0 everywhere")
        return margin.to(like)
    return check_nonnegative("margin", margin)


def _masked(S: Tensor, neg: Tensor, fill: float) -> Tensor:
    """S with every non-negative entry replaced by `fill` (-inf for max / logsumexp)."""
    return S.masked_fill(~neg, fill)


def _pos_scores(S: Tensor, pos: Positives) -> Tensor:
    return S.diagonal() if pos.diagonal else S[pos.rows, pos.cols]


def _query_rows(S: Tensor, pos: Positives) -> tuple[Tensor, Tensor]:
    """Row of S and negative mask of the query of every positive pair: [P, n_cols] each."""
    if pos.diagonal:
        return S, pos.neg
    return S[pos.rows], pos.neg[pos.rows]


def _both_directions(S: Tensor, pos: Positives, term) -> Tensor:
    """term(S, pos) gives per-pair values with rows as queries; add the column-query view."""
    return term(S, pos) + term(S.T, pos.transposed())


def _finite(loss: Tensor, name: str, param: str, value: object, too: str) -> Tensor:
    """Never return NaN silently. S is validated finite, so a non-finite loss means that `param`
    scaled the scores out of the dtype's range: the error names it and which way to move it. (Inside
    ``_checks.validated`` the caller -- the trainer -- watches for non-finite losses itself.)"""
    if values_checked() and not bool(torch.isfinite(loss).all()):
        if isinstance(value, Tensor) and value.dim() == 0:  # a learned scalar (clip_learned, siglip)
            value = float(value.detach())
        shown = f"{value:g}" if isinstance(value, (int, float)) else "the given values"
        way = "larger" if too == "small" else "smaller"
        also = "" if loss.dtype == torch.float64 else " or compute in float64"
        raise FloatingPointError(f"{name} overflowed {loss.dtype}: {param}={shown} is too {too} for these scores; "
                                 f"make it {way}{also} (cosine similarities lie in [-1, 1])")
    return loss


# --------------------------------------------------------------------------- fused diagonal paths
#
# With one caption per image (no pos_mask) the positives are the diagonal of S. There the losses below
# skip the N x N masks and autograd's chain of N x N temporaries: each is one torch.autograd.Function
# whose forward reads S a few times (row reductions, and column reductions along dim 0 -- never a
# transposed copy or a max-with-indices over columns) and whose hand-written backward writes dL/dS in
# one or two passes. They compute the same formulas as the general (masked) code paths, which remain
# the reading of the papers' equations; tests/core checks the two against the slow references and
# against each other (float32 and float64) and gradchecks every Function in float64. Docs:
# docs/benchmarks.md, "Losses, 2026-11-26" and "Losses after the fused top-k, 2026-11-26".


def _plain(x: float | Tensor) -> bool:
    """A margin the fused paths may take: a number, or a tensor no gradient is asked of."""
    return not isinstance(x, Tensor) or not x.requires_grad


def _shifted(S: Tensor, scale: float, shift: float | Tensor, rows: bool) -> Tensor:
    """X = scale * S + scale * shift off the diagonal (shift per row if `rows` else per column), X_ii = scale * S_ii."""
    X = torch.mul(S, scale)
    if isinstance(shift, Tensor):
        X.add_(shift[:, None] * scale if rows else shift[None, :] * scale)
        X.diagonal().sub_(shift * scale)
    elif shift:
        X.add_(shift * scale)
        X.diagonal().sub_(shift * scale)
    return X


def _exp_stats(X: Tensor, dim: int) -> tuple[Tensor, Tensor, Tensor]:
    """E = exp(X - max) along `dim`, its sums, and log-sum-exp of X along `dim`."""
    m = X.amax(dim, keepdim=True)
    E = torch.sub(X, m).exp_()
    total = E.sum(dim)
    return E, total, m.squeeze(dim) + total.log()


class _DiagSoftmaxCE(torch.autograd.Function):
    """Per pair i: out_scale * (LSE_j X_ij - X_ii) over rows (+ the same over columns if `both`), with
    X = scale * S + scale * shift off the diagonal (_shifted): the cross-entropy of each query with
    its diagonal target. dL/dX = softmax(X) - I per direction; dX/dS = scale.

    `scale` is a number, or a 0-D tensor (a learned scale, clip_learned; no shift then) that receives
    dL/dscale = sum_ij dL/dX_ij S_ij, one dot product of dL/dS with S over scale."""

    @staticmethod
    def forward(ctx, S, scale, shift, both, out_scale):  # type: ignore[override]
        ctx.learned = isinstance(scale, Tensor)
        if ctx.learned and (isinstance(shift, Tensor) or shift):
            raise ValueError("a learned (tensor) scale takes no shift")
        X = _shifted(S, scale, shift, rows=True)
        E_r, sum_r, lse_r = _exp_stats(X, 1)
        per_pair = lse_r - X.diagonal()
        saved = [E_r, sum_r]
        if both:
            if isinstance(shift, Tensor):  # a margin per pair: the column query j adds m_j
                X = _shifted(S, scale, shift, rows=False)
            E_c, sum_c, lse_c = _exp_stats(X, 0)
            per_pair = per_pair + (lse_c - X.diagonal())
            saved += [E_c, sum_c]
        if ctx.learned:
            saved += [S, scale]
        else:
            ctx.scale = scale
        ctx.save_for_backward(*saved)
        ctx.out_scale, ctx.both = out_scale, both
        return per_pair * out_scale

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        saved = ctx.saved_tensors
        if ctx.learned:
            *saved, S, scale = saved
        else:
            scale = ctx.scale
        g = g * (scale * ctx.out_scale)
        if ctx.both:
            E_r, sum_r, E_c, sum_c = saved
            grad = torch.mul(E_r, (g / sum_r)[:, None]).addcmul_(E_c, (g / sum_c)[None, :])
            grad.diagonal().sub_(2 * g)
        else:
            E_r, sum_r = saved
            grad = torch.mul(E_r, (g / sum_r)[:, None])
            grad.diagonal().sub_(g)
        grad_scale = None
        if ctx.learned and ctx.needs_input_grad[1]:  # grad is scale * dL/dX: dL/dscale = <dL/dX, S>
            grad_scale = torch.dot(grad.reshape(-1), S.reshape(-1)) / scale
        return grad, grad_scale, None, None, None


def _diag_softmax_ce(S: Tensor, scale: float | Tensor, shift: float | Tensor = 0.0, both: bool = True,
                     out_scale: float = 1.0) -> Tensor:
    return _DiagSoftmaxCE.apply(S, scale, shift.detach() if isinstance(shift, Tensor) else shift, both, out_scale)


def _off_diagonal(S: Tensor, scale: float) -> tuple[Tensor, Tensor]:
    """scale * S with the diagonal (the positives) set to -inf, and the scaled diagonal itself. W is row-major
    even for a transposed S (as S.T for caption queries), so that row reductions and topk read rows
    contiguously: copy_ transposes in blocks (~1 ms at N = 1024), while torch.mul keeps S's strides and a
    row-wise topk over a transposed layout takes 2-5x as long."""
    W = torch.mul(S, scale) if S.is_contiguous() else S.contiguous().mul_(scale)
    x = W.diagonal().clone()
    W.diagonal().fill_(-math.inf)
    return W, x


class _DiagCrossExample(torch.autograd.Function):
    """Cross-example softmax on the diagonal layout: per pair i, logaddexp(x_i, L) - x_i with x_i = scale * S_ii
    and L the log-sum-exp of scale * S over every off-diagonal entry, or over its k largest (`topk`
    given: the entries above the k-th largest value t, plus k - c copies of t, as _top_k_logsumexp).

    The N x N steps work on one copy W of scale * S (the diagonal -inf) and, with `topk`, one more: the
    selection gives t and the number of entries >= t, and E = exp(W - max) where W >= t, else 0 (the softmax
    weights' numerators), is made with float passes only (no bool mask, no cast)."""

    @staticmethod
    def forward(ctx, S, scale, k):  # type: ignore[override]
        W, x = _off_diagonal(S, scale)
        M = W.amax()
        if k is None:
            E = W.sub_(M).exp_()  # the diagonal's -inf gives 0
            Z = E.sum()
        else:
            t, n_keep = _kth_largest_count(W.reshape(-1), k)
            # exp over max(W, t) (finite: exp_ stays on its vectorised path, which -inf or underflowing inputs
            # leave: 7.5 vs 2 ms at N = 1024), times 1 where W >= t and 0 elsewhere: W - (the float below t) is
            # > 0 exactly there (a difference of distinct floats is never 0), read off as sign(relu(.)) in place
            E = torch.clamp_min(W, t).sub_(M).exp_()
            E.mul_(W.sub_(torch.nextafter(t, t.new_tensor(-math.inf))).relu_().sign_())
            # the entries tied with t count as k - (entries above t) copies of t: Z subtracts the surplus copies
            e_t = torch.exp(t - M)
            Z = E.sum() - (n_keep - k) * e_t
            if n_keep != k:  # ties at t (rare): share the k - c copies' weight among them
                at = torch.mul(S, scale) == t  # W's entries, bit for bit (W itself is now E)
                at.diagonal().fill_(False)
                n_at = at.sum()
                share = (k - (n_keep - n_at)).to(E.dtype) / n_at.to(E.dtype)
                E = torch.where(at, e_t * share, E)
        L = M + Z.log()
        ctx.save_for_backward(E, Z, x, L)
        ctx.scale = scale
        return torch.logaddexp(x, L) - x

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        E, Z, x, L = ctx.saved_tensors
        p = torch.sigmoid(x - L)  # the positive's share of its partition function
        g_L = (g * (1 - p)).sum()
        grad = torch.mul(E, g_L * ctx.scale / Z)
        grad.diagonal().copy_(g * (p - 1) * ctx.scale)
        return grad, None, None


class _DiagSampledTopK(torch.autograd.Function):
    """Sampled softmax with top-k negative mining on the diagonal layout (Veit & Wilber eq. 3): per query row i,
    logaddexp(x_i, L_i) - x_i with x_i = scale * S_ii and L_i the log-sum-exp of scale * S over the k largest
    negatives of row i -- the same k for every row (each has N - 1 negatives).

    Forward: one per-row partial selection (`topk`, unsorted: no sort of a row) of the k largest negatives
    (the diagonal, set to -inf, is never among them), their values and columns; L_i is the log-sum-exp of
    those N x k values alone. Ties at the k-th largest value are handled as `topk` handles them in the masked
    path: exactly k entries are kept, so the value is the sum over the c entries above the k-th largest t plus
    k - c copies of t whichever tied entries are picked. Backward: the softmax weights of the kept entries
    times scale (1 - p_i), scattered to their columns (no N x N mask), and scale (p_i - 1) on the diagonal,
    with p_i = sigmoid(x_i - L_i) the positive's share of its partition function."""

    @staticmethod
    def forward(ctx, S, scale, k):  # type: ignore[override]
        W, x = _off_diagonal(S, scale)
        V, cols = W.topk(k, dim=1, sorted=False)
        del W
        M = V.amax(1, keepdim=True)
        E = V.sub_(M).exp_()  # in place: V is topk's own output
        Z = E.sum(1)
        L = M.squeeze(1) + Z.log()
        ctx.save_for_backward(E, cols, Z, x, L)
        ctx.scale = scale
        return torch.logaddexp(x, L) - x

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        E, cols, Z, x, L = ctx.saved_tensors
        p = torch.sigmoid(x - L)
        w = E * (g * (1 - p) * ctx.scale / Z)[:, None]  # out of place: E is saved (a retained graph reuses it)
        n = g.shape[-1]
        grad = torch.zeros_like(g)[:, None].repeat(1, n).scatter_(1, cols, w)
        grad.diagonal().copy_(g * (p - 1) * ctx.scale)
        return grad, None, None


class _DiagTripletAll(torch.autograd.Function):
    """triplet_all on the diagonal layout: per pair i, sum_{n != i} [m_i - s_ii + s_in]_+ + [m_i - s_ii + s_ni]_+.

    Forward: the row hinges are relu(S + (m - diag)[:, None]) and the column hinges relu(S + (m - diag)[None, :]),
    each summed without a mask (the diagonal's own term is subtracted). Backward: each hinge that is active
    puts g on its negative and -g on the positive."""

    @staticmethod
    def forward(ctx, S, m):  # type: ignore[override]
        c = m - S.diagonal()
        H_r = torch.add(S, c[:, None]).relu_()
        H_c = torch.add(S, c[None, :]).relu_()
        per_pair = (H_r.sum(1) - H_r.diagonal()) + (H_c.sum(0) - H_c.diagonal())
        ctx.save_for_backward(H_r, H_c)
        return per_pair

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        H_r, H_c = ctx.saved_tensors
        grad = torch.sign(H_r)  # 1 where the hinge is active, else 0
        grad.diagonal().zero_()
        active = grad.sum(1)
        grad = grad * g[:, None]  # out of place: g may be batched (vmap over the backward, vlr_lib.analysis)
        on_c = torch.sign(H_c)
        on_c.diagonal().zero_()
        active = active + on_c.sum(0)
        grad.addcmul_(on_c, g[None, :])
        grad.diagonal().copy_(-g * active)
        return grad, None


class _DiagTripletHardest(torch.autograd.Function):
    """triplet_hardest on the diagonal layout: per pair i, [m_i + max_{n != i} s_in - s_ii]_+ + the column's;
    the backward puts g on each violating query's hardest negative and -g on its positive."""

    @staticmethod
    def forward(ctx, S, m):  # type: ignore[override]
        rows, cols, _ = _hardest_negatives_diagonal(S)
        d = S.diagonal()
        h_r, h_c = m + rows.values - d, m + cols.values - d
        ctx.save_for_backward(rows.indices, cols.indices, h_r > 0, h_c > 0)
        return h_r.relu() + h_c.relu()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        idx_r, idx_c, on_r, on_c = ctx.saved_tensors
        w_r, w_c = g * on_r, g * on_c
        n = g.numel()
        grad = torch.zeros_like(g)[:, None].repeat(1, n)  # batched with g under vmap (vlr_lib.analysis)
        i = torch.arange(n, device=g.device)
        grad.index_put_((i, idx_r), w_r, accumulate=True)
        grad.index_put_((idx_c, i), w_c, accumulate=True)
        grad.diagonal().sub_(w_r + w_c)
        return grad, None


def _kth_largest(values: Tensor, k: int) -> Tensor:
    """The k-th largest entry of a 1-D tensor (0-D result), by partial selection, never a sort (see _kth_largest_count)."""
    return _kth_largest_count(values, k)[0]


def _kth_largest_count(values: Tensor, k: int) -> tuple[Tensor, int]:
    """The k-th largest entry t of a 1-D tensor (0-D result) and how many entries are >= t, never a sort.

    A strided sample of about 2^14 entries brackets the k-th largest value between two of its
    order statistics; one pass counts the entries above the bracket and keeps the few inside it,
    and kthvalue over those few finishes the selection. If the bracket misses (a sample that is
    not representative, e.g. sorted or heavily tied input) it falls back to kthvalue over all.
    Small k: topk; k near n (t among the 256 smallest): topk from below, where the sample would
    miss and kthvalue over all can take a second (its quickselect's worst case, on input sorted
    in descending order). The result is exact in every case: it is an entry of `values`. The
    count (k unless entries tie with t) comes from the bracket's own counts; the other branches
    count it in one more pass. Counts use count_nonzero (a bool tensor's sum() is several times
    slower).
    """
    n = values.numel()
    low = n - k + 1  # t is the low-th smallest entry
    if k <= 256 or low <= 256 or n <= 1 << 16:
        if k <= 256:
            t = values.topk(k, sorted=False).values.min()
        elif low <= 256:
            t = values.topk(low, largest=False, sorted=False).values.max()
        else:
            t = values.kthvalue(low).values
        return t, int(torch.count_nonzero(values >= t))
    stride = n >> 14
    sample = values[::stride]
    m = sample.numel()
    rank = k * m / n  # expected rank of t in the sample, from the top
    spread = 5.0 * math.sqrt(rank * (1 - rank / m)) + 5.0
    r_hi, r_lo = max(1, int(rank - spread)), min(m, int(math.ceil(rank + spread)))
    ordered = sample.topk(r_lo, sorted=True).values if r_lo < m else sample.sort(descending=True).values
    hi, lo = ordered[r_hi - 1], ordered[r_lo - 1]
    over = values > hi
    above = int(torch.count_nonzero(over))
    inside = values[(values >= lo) ^ over]  # lo <= value <= hi (over is a subset of value >= lo)
    need = k - above
    if 1 <= need <= inside.numel():  # the k-th largest lies inside the bracket
        t = inside.kthvalue(inside.numel() - need + 1).values
        return t, above + int(torch.count_nonzero(inside >= t))
    t = values.kthvalue(n - k + 1).values
    return t, int(torch.count_nonzero(values >= t))


# --------------------------------------------------------------------------- triplet


def triplet_all(
    S: Tensor, margin: float | Tensor = 0.2, reduction: str = "sum", pos_mask: Tensor | None = None
) -> Tensor:
    r"""Triplet loss over every negative, in both directions (Bleeker & de Rijke eq. 3a/3b).

    For each positive pair (i, j):
    :math:`\sum_{n \in N_i} [m - s_{ij} + s_{in}]_+ + \sum_{n \in N_j} [m - s_{ij} + s_{nj}]_+`,
    the first sum over the negatives of image query i (row i), the second over the
    negatives of caption query j (column j). Every margin-violating negative
    contributes with weight 1 (Bleeker eq. 9b).

    Derived in notebooks/02_triplet_losses.py.
    """
    S, pos = check_similarity(S, pos_mask)
    check_reduction(reduction)
    m = _margin(margin, pos, S)
    if pos.diagonal and _plain(m):
        per_pair = _DiagTripletAll.apply(S, m.detach() if isinstance(m, Tensor) else m)
        return _finite(reduce(per_pair, reduction), "triplet_all", "margin", m, "large")

    def term(S: Tensor, pos: Positives) -> Tensor:
        rows, neg = _query_rows(S, pos)
        m_col = m[:, None] if isinstance(m, Tensor) else m
        hinge = F.relu(m_col - _pos_scores(S, pos)[:, None] + rows)
        return (hinge * neg).sum(dim=1)

    return _finite(reduce(_both_directions(S, pos, term), reduction), "triplet_all", "margin", m, "large")


def _hardest_negative(S: Tensor, pos: Positives) -> Tensor:
    """Hardest negative score of each positive pair's query (row view), shape [P] (similarity.hardest_negatives)."""
    row_max = hardest_negatives(S, pos.neg).values
    return row_max if pos.diagonal else row_max[pos.rows]


def triplet_hardest(
    S: Tensor, margin: float | Tensor = 0.2, reduction: str = "sum", pos_mask: Tensor | None = None
) -> Tensor:
    r"""VSE++ max-violation triplet loss, Triplet-HN / Triplet-SH (Li et al. eq. 1; Bleeker eq. 1-2).

    For each positive pair (i, j): :math:`[m + \max_{n \in N_i} s_{in} - s_{ij}]_+ +
    [m + \max_{n \in N_j} s_{nj} - s_{ij}]_+` -- only the hardest negative of each
    query, image->text and text->image. A 1-D `margin` gives per-pair margins m_i,
    the NCR form (Li et al. eq. 27).

    Derived in notebooks/02_triplet_losses.py.
    """
    S, pos = check_similarity(S, pos_mask)
    check_reduction(reduction)
    m = _margin(margin, pos, S)
    if pos.diagonal and _plain(m):
        per_pair = _DiagTripletHardest.apply(S, m.detach() if isinstance(m, Tensor) else m)
        return _finite(reduce(per_pair, reduction), "triplet_hardest", "margin", m, "large")

    def term(S: Tensor, pos: Positives) -> Tensor:
        return F.relu(m + _hardest_negative(S, pos) - _pos_scores(S, pos))

    return _finite(reduce(_both_directions(S, pos, term), reduction), "triplet_hardest", "margin", m, "large")


def triplet_soft(S: Tensor, reduction: str = "sum", pos_mask: Tensor | None = None) -> Tensor:
    r"""Triplet-SH with the soft margin of Hermans, Beyer & Leibe (*In Defense of the Triplet Loss for Person
    Re-Identification*, 2017, sec. 2, "soft-margin"): the hinge :math:`[m + x]_+` replaced by
    :math:`\log(1 + e^{x})`, with no margin.

    For each positive pair (i, j): :math:`\log(1 + e^{\max_{n \in N_i} s_{in} - s_{ij}}) +
    \log(1 + e^{\max_{n \in N_j} s_{nj} - s_{ij}})` -- the hardest negative of each query, both directions, as
    :func:`triplet_hardest`. Where the hinge is 0 or has slope 1, the softplus has slope
    :math:`\sigma(s_{neg} - s_{pos}) \in (0, 1)`: every triplet keeps some gradient, the most violating the most.
    Hermans et al. write it on distances; on similarities the gap is :math:`s_{neg} - s_{pos}`.

    Derived in notebooks/02_triplet_losses.py.
    """
    S, pos = check_similarity(S, pos_mask)
    check_reduction(reduction)

    def term(S: Tensor, pos: Positives) -> Tensor:
        return F.softplus(_hardest_negative(S, pos) - _pos_scores(S, pos))

    return reduce(_both_directions(S, pos, term), reduction)


# --------------------------------------------------------------------------- softmax family


def _neg_logsumexp(S: Tensor, pos: Positives, scale: float | Tensor) -> Tensor:
    """log sum_{n in N_q} exp(scale * s_qn) for the query of every positive pair, shape [P]."""
    lse = torch.logsumexp(_masked(S * scale, pos.neg, -math.inf), dim=1)
    return lse if pos.diagonal else lse[pos.rows]


def info_nce(
    S: Tensor, temperature: float = 0.1, reduction: str = "mean", pos_mask: Tensor | None = None
) -> Tensor:
    r"""NT-Xent / InfoNCE / CLIP / VLC loss in both directions (Bleeker eq. 4; Li et al. eqs. 3-4).

    For each positive pair (i, j), with :math:`\tau` the temperature:
    :math:`\ell^{i\to t} = -\log \frac{e^{s_{ij}/\tau}}{e^{s_{ij}/\tau} + \sum_{n \in N_i} e^{s_{in}/\tau}}`
    and :math:`\ell^{t\to i}` the same over column j. "sum" is
    :math:`\sum (\ell^{i\to t} + \ell^{t\to i})`, "mean" that sum / N. With one caption
    per image this is the cross-entropy of every row and every column with its
    diagonal target, i.e. 2 x open_clip's ClipLoss at logit scale 1/tau. Other
    positives of the same query are left out of the denominator (they are not
    negatives), as pytorch-metric-learning's NTXentLoss does.

    Derived in notebooks/03_contrastive.py.
    """
    S, pos = check_similarity(S, pos_mask)
    check_reduction(reduction)
    inv_t = 1.0 / check_positive("temperature", temperature)
    per_pair = _nt_xent(S, pos, inv_t)
    return _finite(reduce(per_pair, reduction), "info_nce", "temperature", 1.0 / inv_t, "small")


def _nt_xent(S: Tensor, pos: Positives, scale: float | Tensor) -> Tensor:
    """NT-Xent per positive pair, both directions, at logit scale `scale` = 1/tau: the one code path of
    info_nce and clip_learned. `scale` is a number or a 0-D tensor (a learned scale, which receives
    dL/dscale: the fused Function's own backward on the diagonal, autograd on the masked path)."""
    if pos.diagonal:  # the positive is the only non-negative: cross-entropy of every row and column, fused
        return _diag_softmax_ce(S, scale)

    def term(S: Tensor, pos: Positives) -> Tensor:
        if pos.diagonal:  # the positive is the only non-negative: plain cross-entropy
            return F.cross_entropy(S * scale, pos.rows, reduction="none")
        logit_pos = _pos_scores(S, pos) * scale
        return torch.logaddexp(logit_pos, _neg_logsumexp(S, pos, scale)) - logit_pos

    return _both_directions(S, pos, term)


def unified(
    S: Tensor,
    margin: float | Tensor = 0.2,
    gamma: float = 60.0,
    reduction: str = "sum",
    pos_mask: Tensor | None = None,
    weights: Tensor | None = None,
) -> Tensor:
    r"""Unified loss of pair similarity optimisation (Li et al. eq. 5), with eqs. 24 and 26.

    For each positive pair (i, j):
    :math:`\frac{1}{\gamma}\Big[\log\big(1 + \sum_{n \in N_i} e^{\gamma(s_{in} - s_{ij} + m)}\big)
    + \log\big(1 + \sum_{n \in N_j} e^{\gamma(s_{nj} - s_{ij} + m)}\big)\Big]`.

    Evaluated as :math:`\mathrm{softplus}(\gamma(m - s_{ij}) + \mathrm{LSE}_n(\gamma s_{in}))/\gamma`,
    which stays finite for gamma up to 1e4. Limits (Li eqs. 6-7):
    gamma -> inf gives triplet_hardest(S, m); gamma * unified(S, 0, gamma) equals
    info_nce(S, 1/gamma, "sum").

    Variants (Li et al. appendix A.4):
    - `weights` (same shape as S): the weighted unified loss, eq. 24, in which every
      similarity s_ij is replaced by w_ij * s_ij.
    - `margin` as a 1-D tensor with one value per positive pair: the adaptive-margin
      unified loss, eq. 26 (m_i shared by both directions of pair i).
    Li et al. recommend m = 0.2 and gamma = 50-60.

    Derived in notebooks/04_unified_loss.py.
    """
    S, pos = check_similarity(S, pos_mask)
    check_reduction(reduction)
    g = check_positive("gamma", gamma)
    m = _margin(margin, pos, S)
    if weights is not None:
        check_tensor("weights", weights, ndim=2)
        if weights.shape != S.shape:
            raise ValueError(f"weights must have the shape of S {tuple(S.shape)}, got {tuple(weights.shape)}")
        S = weights * S
    if pos.diagonal and _plain(m):
        # log(1 + sum_n e^{g(s_in - s_ii + m)}) is the cross-entropy of the logits g * (S + m off the
        # diagonal) with target i: the j = i term is e^0 = 1. Fused over rows and columns.
        per_pair = _diag_softmax_ce(S, g, m, out_scale=1.0 / g)
        return _finite(reduce(per_pair, reduction), "unified", "gamma", g, "large")

    def term(S: Tensor, pos: Positives) -> Tensor:
        if pos.diagonal:
            # log(1 + sum_n e^{g(s_in - s_ii + m)}) is the cross-entropy of the logits
            # g * (S + m off the diagonal) with target i: the j = i term is e^0 = 1.
            logits = S + (m[:, None] if isinstance(m, Tensor) else m)
            logits.diagonal().sub_(m)
            return F.cross_entropy(logits * g, pos.rows, reduction="none") / g
        return F.softplus(g * (m - _pos_scores(S, pos)) + _neg_logsumexp(S, pos, g), threshold=20.0) / g

    return _finite(reduce(_both_directions(S, pos, term), reduction), "unified", "gamma", g, "large")


def _topk_counts(topk: int | float | None, available: Tensor) -> Tensor | None:
    """`topk` as a number of negatives per query, given how many each query has (`available`, int [Q]).

    One meaning everywhere in vlr_lib: an int >= 1 is a count, a float in (0, 1] is a
    fraction of the available negatives, k = ceil(fraction * available) (1.0 keeps all;
    the product is rounded to 1e-9 first, so 0.3 of 10 negatives is 3, not 4).
    None keeps every negative. A bool is neither.
    """
    if topk is None:
        return None
    fewest = int(available.min())
    if isinstance(topk, numbers.Integral) and not isinstance(topk, bool):
        if not 1 <= topk <= fewest:
            raise ValueError(f"topk as an int is a count of negatives and must lie in [1, {fewest}] "
                             f"(the negatives of a query here), got {topk}")
        return torch.full_like(available, int(topk))
    if isinstance(topk, numbers.Real) and not isinstance(topk, bool):
        if not 0.0 < topk <= 1.0:
            raise ValueError(f"topk as a float is a fraction of the negatives and must lie in (0, 1], got {topk} "
                             "(pass an int for a count)")
        return torch.ceil(torch.round(float(topk) * available.double(), decimals=9)).long().clamp_min(1)
    raise TypeError(f"topk must be an int count >= 1, a float fraction in (0, 1] or None, got {topk!r}")


def _keep_top(masked: Tensor, k: Tensor) -> Tensor:
    """The k[q] largest entries of each row q, the rest -inf (rows of -inf-masked negatives)."""
    if bool((k == k[0]).all()):
        return masked.topk(int(k[0]), dim=1).values
    ordered = masked.sort(dim=1, descending=True).values
    rank = torch.arange(ordered.shape[1], device=masked.device)
    return ordered.masked_fill(rank[None, :] >= k[:, None], -math.inf)


def sampled_softmax(
    S: Tensor,
    scale: float = 20.0,
    topk: int | float | None = None,
    reduction: str = "mean",
    pos_mask: Tensor | None = None,
) -> Tensor:
    r"""Sampled softmax cross-entropy over rows (Veit & Wilber eq. 2); `topk` gives eq. 3.

    Rows are queries (pass S.T for caption queries). For each positive pair (i, j):
    :math:`-\log \frac{e^{\lambda s_{ij}}}{e^{\lambda s_{ij}} + \sum_{n \in N_i} e^{\lambda s_{in}}}`
    with :math:`\lambda` = `scale` (20 in the paper). With `topk`, only the largest
    negatives of each row enter the partition function: stochastic negative mining
    (eq. 3). `topk` is an int count (k negatives per row) or a float fraction in
    (0, 1] of the row's negatives (1.0 = all, i.e. no mining); None keeps them all.
    "mean" is the paper's 1/N sum.

    Derived in notebooks/05_cross_example_softmax.py.
    """
    S, pos = check_similarity(S, pos_mask, both_directions=False)
    check_reduction(reduction)
    lam = check_positive("scale", scale)
    if pos.diagonal:  # every row has the N - 1 off-diagonal negatives: one k for all, no N x N mask read
        n = S.shape[0]
        k = None if topk is None else int(_topk_counts(topk, torch.tensor([n - 1]))[0])
        if k is None or k == n - 1:  # no mining, or the top k of N - 1 negatives is all of them
            per_pair = _diag_softmax_ce(S, lam, both=False)
        else:
            per_pair = _DiagSampledTopK.apply(S, lam, k)
        return _finite(reduce(per_pair, reduction), "sampled_softmax", "scale", lam, "large")
    k = _topk_counts(topk, pos.neg.sum(dim=1))
    logits = S * lam
    masked = _masked(logits, pos.neg, -math.inf)
    if k is not None:
        masked = _keep_top(masked, k)
    lse_neg = torch.logsumexp(masked, dim=1)
    if not pos.diagonal:
        lse_neg = lse_neg[pos.rows]
    logit_pos = _pos_scores(logits, pos)
    per_pair = torch.logaddexp(logit_pos, lse_neg) - logit_pos
    return _finite(reduce(per_pair, reduction), "sampled_softmax", "scale", lam, "large")


def _top_k_logsumexp(values: Tensor, k: int) -> Tensor:
    """log sum of exp over the k largest entries of a 1-D tensor, without sorting.

    A linear-time selection finds the k-th largest value t; the top k are the c
    entries strictly above t plus k - c copies of t (ties at t are interchangeable).
    Over the N^2 negatives of a batch this is several times faster than topk.
    """
    t = values.kthvalue(values.numel() - k + 1).values
    above = values > t
    n_at_t = (k - above.sum()).to(values.dtype)  # >= 1 by definition of t
    return torch.logaddexp(torch.logsumexp(values.masked_fill(~above, -math.inf), dim=0), t + n_at_t.log())


def cross_example_softmax(
    S: Tensor,
    scale: float = 20.0,
    topk: int | float | None = None,
    reduction: str = "mean",
    pos_mask: Tensor | None = None,
) -> Tensor:
    r"""Cross-example softmax (Veit & Wilber eq. 5); `topk` gives cross-example negative mining (eq. 6).

    Every positive is compared with *all* negatives of the batch, whichever query
    they belong to: :math:`-\log \frac{e^{\lambda s_{ij}}}{e^{\lambda s_{ij}} + \sum_{s \in N_B}
    e^{\lambda s}}`, with :math:`N_B` every off-diagonal (non-positive) entry of S.
    This ties the scores of different queries to one scale, which is what improves
    calibration. `topk` keeps only the largest negatives of the whole batch
    (cross-example negative mining, eq. 6): an int count, or a float fraction in
    (0, 1] of all the batch's negatives (the paper uses 0.5; 1.0 = all).

    Derived in notebooks/05_cross_example_softmax.py.
    """
    S, pos = check_similarity(S, pos_mask, both_directions=False)
    check_reduction(reduction)
    lam = check_positive("scale", scale)
    if pos.diagonal:
        n = S.shape[0]
        k = None if topk is None else int(_topk_counts(topk, torch.tensor([n * (n - 1)]))[0])
        per_pair = _DiagCrossExample.apply(S, lam, k)
        return _finite(reduce(per_pair, reduction), "cross_example_softmax", "scale", lam, "large")
    k = _topk_counts(topk, pos.neg.sum().reshape(1))
    negs = _masked(S * lam, pos.neg, -math.inf).flatten()  # every negative of the batch
    lse_neg = torch.logsumexp(negs, dim=0) if k is None else _top_k_logsumexp(negs, int(k[0]))
    logit_pos = _pos_scores(S, pos) * lam
    per_pair = torch.logaddexp(logit_pos, lse_neg) - logit_pos
    return _finite(reduce(per_pair, reduction), "cross_example_softmax", "scale", lam, "large")


# --------------------------------------------------------------------------- ranking


def smooth_step(x: Tensor, tau: float) -> Tensor:
    r"""G(x; tau) = 1 / (1 + e^{-x/tau}) (Bleeker & de Rijke eq. 7): the smooth stand-in for 1{x > 0}.

    SmoothAP counts candidate j as ranked above i by :math:`G(s_j - s_i)`; tau -> 0
    recovers the step (the exact rank), larger tau spreads it. Never overflows.

    Derived in notebooks/06_smooth_ap.py.
    """
    return _smooth_step(check_tensor("x", x), check_positive("tau", tau))


def _smooth_step(x: Tensor, tau: float) -> Tensor:
    return torch.sigmoid(x / tau)


def smooth_ap(S: Tensor, tau: float = 0.01, pos_mask: Tensor | None = None, reduction: str = "mean") -> Tensor:
    r"""1 - SmoothAP per row query (Bleeker & de Rijke eqs. 5-8; Brown et al. 2020).

    For query q with positives P and candidates :math:`\Omega` (its whole row):
    :math:`AP_q \approx \frac{1}{|P|}\sum_{i \in P}
    \frac{1 + \sum_{j \in P, j\ne i} G(s_j - s_i)}{1 + \sum_{j \in \Omega, j \ne i} G(s_j - s_i)}`,
    with :math:`G(x) = \sigma(x/\tau)` (eq. 7) replacing the indicator of "j ranks
    above i". The extraction writes :math:`D_{ij} = s_i - s_j`, but the rank of eq. 6
    counts candidates scoring *above* i, so the argument is s_j - s_i (as in Brown et
    al.); we use that reading. The loss per query is 1 - AP_q (eq. 8), so it lies in
    [0, 1); "mean" averages over queries, "sum" adds, "none" gives one value per row.
    Several positives per row (e.g. 5 captions of an image) are allowed through
    `pos_mask`. Rows are queries (pass S.T for caption queries).

    Derived in notebooks/06_smooth_ap.py.
    """
    S, pos = check_similarity(S, pos_mask, both_directions=False)
    check_reduction(reduction)
    t = check_positive("tau", tau)
    rows, neg = _query_rows(S, pos)  # [P, M]: the row of the query of each positive
    s_i = _pos_scores(S, pos)[:, None]
    above = _smooth_step(rows - s_i, t)
    # The sums run over j != i: the j = i term is exactly sigmoid(0) = 1/2 with zero
    # gradient (s_i - s_i), so subtracting 1/2 removes it without a mask.
    rank_all = 0.5 + above.sum(dim=1)
    rank_pos = 1.0 if pos.diagonal else 0.5 + (above * ~neg).sum(dim=1)
    ratio = rank_pos / rank_all  # [P]
    n_rows = S.shape[0]
    ap_sum = torch.zeros(n_rows, dtype=S.dtype, device=S.device).index_add(0, pos.rows, ratio)
    # Positives per query, counted with index_add (exact for counts < 2^24): bincount would size its output
    # from the largest index, a synchronisation on a GPU.
    n_pos = torch.zeros(n_rows, dtype=S.dtype, device=S.device).index_add(0, pos.rows, torch.ones_like(ratio))
    per_query = 1.0 - ap_sum / n_pos
    return _finite(reduce(per_query, reduction), "smooth_ap", "tau", t, "small")


# --------------------------------------------------------------------------- learned temperature and bias (practice)
#
# The losses as CLIP and SigLIP train them: the model holds the log of the logit scale, t' (open_clip's
# `logit_scale` parameter), and SigLIP a bias b; the loss exponentiates t', so the gradient reaches the
# parameter the model holds. Both take t' and b as numbers or 0-D tensors (vlr_lib._checks.check_scalar).

#: The range open_clip's training loop clamps t' = log(1/tau) to after every step (open_clip_train/train.py), so that
#: the scale e^{t'} stays in [1, 100]: CLIP's "clipped to prevent scaling the logits by more than 100" (Radford et
#: al.). clip_learned and siglip refuse a t' outside it; clamp_logit_scale_ keeps a parameter inside.
LOGIT_SCALE_MIN = 0.0
LOGIT_SCALE_MAX = math.log(100.0)
#: CLIP's initial t' = log(1/0.07) (Radford et al., after Wu et al. 2018; open_clip's default).
CLIP_LOGIT_SCALE_INIT = math.log(1 / 0.07)
#: SigLIP's initial t' = log 10 and b = -10 (Zhai et al.; open_clip's --siglip).
SIGLIP_LOGIT_SCALE_INIT = math.log(10.0)
SIGLIP_LOGIT_BIAS_INIT = -10.0


def clamp_logit_scale_(logit_scale: Tensor) -> Tensor:
    """Clamp a learned t' = log(1/tau) into [LOGIT_SCALE_MIN, LOGIT_SCALE_MAX] = [0, log 100], in place, no autograd.

    What open_clip's training loop does after every optimiser step (``logit_scale.clamp_(0, math.log(100))``),
    so that the scale e^{t'} never exceeds 100 (Radford et al.). Returns the same tensor. A
    value it leaves is always accepted by :func:`clip_learned` and :func:`siglip` (checked in its own dtype).

    Derived in notebooks/03_contrastive.py.
    """
    check_tensor("logit_scale", logit_scale)
    with torch.no_grad():
        logit_scale.clamp_(LOGIT_SCALE_MIN, LOGIT_SCALE_MAX)
    return logit_scale


def _log_scale(logit_scale: float | Tensor, S: Tensor) -> Tensor:
    """t' checked (finite, within the clamp) as a 0-D tensor of S's dtype, in the graph if it is a tensor."""
    return check_scalar("logit_scale", logit_scale, S, LOGIT_SCALE_MIN, LOGIT_SCALE_MAX)


def clip_learned(
    S: Tensor,
    logit_scale: float | Tensor = CLIP_LOGIT_SCALE_INIT,
    reduction: str = "mean",
    pos_mask: Tensor | None = None,
) -> Tensor:
    r"""NT-Xent with a learned temperature, as CLIP trains it (Radford et al., Fig. 3 and the training details;
    open_clip's ClipLoss).

    The model holds :math:`t' = \log(1/\tau)` (`logit_scale`) and the loss is :func:`info_nce` at the
    scale :math:`e^{t'}`: for each positive pair (i, j),
    :math:`\ell^{i\to t} = -\log \frac{e^{e^{t'} s_{ij}}}{e^{e^{t'} s_{ij}} + \sum_{n \in N_i} e^{e^{t'} s_{in}}}`
    and :math:`\ell^{t\to i}` the same over column j. It runs info_nce's own code path (`_nt_xent`), so
    ``clip_learned(S, log(1/tau)) == info_nce(S, tau)`` for every reduction and mask. A `logit_scale`
    tensor that requires grad receives :math:`\partial L/\partial t' = \sum_{ij} s_{ij}\,\partial L/\partial s_{ij}`
    (L depends on S only through :math:`e^{t'} S`).

    `logit_scale`: a number or a 0-D tensor, default ``CLIP_LOGIT_SCALE_INIT`` = log(1/0.07), CLIP's
    initialisation. It must lie in [``LOGIT_SCALE_MIN``, ``LOGIT_SCALE_MAX``] = [0, log 100], the range
    :func:`clamp_logit_scale_` keeps it in after each step (a value outside is an error, never clamped here).

    Readings:

    - Reduction, as info_nce: "sum" adds both directions over the positive pairs, "mean" divides that by
      their number P (N on the diagonal), "none" gives the P values. open_clip's ClipLoss is the *average*
      of the two directions' mean cross-entropies, so with S = img @ txt.T of unit-norm features
      ``clip_learned(S, t, "mean") == 2 * ClipLoss()(img, txt, logit_scale=exp(t))``, value and gradients
      (to t' as well). Halve it to train exactly as open_clip (Adam is insensitive to the factor but for
      its epsilon; plain SGD is not).
    - open_clip's loss takes the scale already exponentiated (the model passes ``logit_scale.exp()``); this
      function takes t' and exponentiates it, so the gradient reaches the parameter the model holds.
    - With a `pos_mask`, other positives of a query leave its denominator, as in info_nce.

    Derived in notebooks/03_contrastive.py.
    """
    S, pos = check_similarity(S, pos_mask)
    check_reduction(reduction)
    per_pair = _nt_xent(S, pos, _log_scale(logit_scale, S).exp())
    return _finite(reduce(per_pair, reduction), "clip_learned", "logit_scale", logit_scale, "large")


def _signed_logits(S: Tensor, pos: Positives, t: Tensor, b: Tensor) -> Tensor:
    """z_ij (t s_ij + b): each logit with the sign of its label, z = +1 at positives, -1 elsewhere."""
    logits = S * t + b
    if pos.diagonal:  # no N x N mask: negate every entry, then the diagonal back
        signed = logits.neg()
        signed.diagonal().neg_()
        return signed
    return torch.where(pos.neg, -logits, logits)


def siglip(
    S: Tensor,
    logit_scale: float | Tensor = SIGLIP_LOGIT_SCALE_INIT,
    logit_bias: float | Tensor = SIGLIP_LOGIT_BIAS_INIT,
    reduction: str = "mean",
    pos_mask: Tensor | None = None,
) -> Tensor:
    r"""SigLIP's pairwise sigmoid loss (Zhai et al., "Sigmoid Loss for Language Image Pre-Training", ICCV 2023,
    Algorithm 1; open_clip's SigLipLoss).

    Every entry of S is its own binary classification, match or not:
    :math:`L = -\frac{1}{N}\sum_{i}\sum_{j} \log \sigma\big(z_{ij}\,(t\,s_{ij} + b)\big)`, :math:`t = e^{t'}`,
    with :math:`z_{ij} = +1` at the positives (the diagonal, or `pos_mask`), :math:`-1` elsewhere, and N the
    number of images (rows of S). There is no softmax: a pair's term, and its gradient
    :math:`\partial L/\partial s_{ij} = \frac{t}{N}\big(\sigma(t s_{ij} + b) - [z_{ij} = 1]\big)`, depend on
    its own similarity alone (:func:`vlr_lib.analysis.siglip_weights`).

    `logit_scale` t' (the log of the scale t; default ``SIGLIP_LOGIT_SCALE_INIT`` = log 10, the paper's
    initialisation) lies in [0, log 100] as in :func:`clip_learned`; `logit_bias` b is any finite number
    (default ``SIGLIP_LOGIT_BIAS_INIT`` = -10, the paper's: it starts every pair near
    :math:`\sigma(-10) \approx 0`, the prior of a batch with N - 1 negatives per positive). Each is a number
    or a 0-D tensor; gradients reach tensors. Computed as :math:`-\log\sigma(\cdot)` by ``logsigmoid``: no
    exponential overflows for any finite logit, and the loss is finite at the clamp t = 100 in float32.

    Readings:

    - The bias enters as in Algorithm 1 and open_clip, logits = t s + b (with b = -10 every pair starts
      near "no match", the reason the paper gives for that initialisation); the paper's displayed loss is read
      with that sign.
    - Normalisation: the sum over all pairs divided by N, the number of images (Algorithm 1's n, open_clip's
      ``image_features.shape[0]``), not by N^2 or by the positives. "none" gives one value per image (its
      row's sum over every caption), "mean" their mean, "sum" their sum; so
      ``siglip(S, t, b, "mean") == SigLipLoss()(img, txt, exp(t), b)`` with S = img @ txt.T of unit-norm
      features, value and gradients (to t' and b as well). With several captions per image (a
      rectangular S and `pos_mask`) N is still the number of images.
    - The two directions are the same N^2 binary terms, so the sum is taken once (there is no image -> text
      and text -> image pair of terms to add, unlike :func:`clip_learned`).
    - A `pos_mask` makes every marked pair a positive (a repeated image is never its own negative). As for
      every loss of the S contract, each row and column needs a positive and a negative, although the
      sigmoid loss itself would not.

    Derived in notebooks/03_contrastive.py.
    """
    S, pos = check_similarity(S, pos_mask)
    check_reduction(reduction)
    t = _log_scale(logit_scale, S).exp()
    b = check_scalar("logit_bias", logit_bias, S)
    per_image = F.logsigmoid(_signed_logits(S, pos, t, b)).sum(dim=1).neg()
    return _siglip_finite(reduce(per_image, reduction), S, t, b, logit_scale, logit_bias)


def _siglip_finite(loss: Tensor, S: Tensor, t: Tensor, b: Tensor, logit_scale: object, logit_bias: object) -> Tensor:
    """_finite naming the parameter that overflowed: the bias when |b| outweighs t max|s_ij| (t <= 100, so with
    cosine similarities it is always the bias), else the scale (S outside the cosine range)."""
    if not values_checked() or bool(torch.isfinite(loss).all()):
        return loss
    if float(b.detach().abs()) >= float(t.detach()) * float(S.detach().abs().max()):
        return _finite(loss, "siglip", "logit_bias", logit_bias, "large in magnitude")
    return _finite(loss, "siglip", "logit_scale", logit_scale, "large")

# --------------------------------------------------------------------------- the registry's entries

_MARGIN = Hyper(low=0.0, high=1.0)
_SCALE = Hyper(low=1.0, high=100.0)
_TOPK = Hyper("topk")

#: One entry per loss (``vlr_lib.registry`` reads them: the trainer, the command lines, the report and the figures
#: find a loss by name there). Adding a loss: its function above, its entry here, its slow reference in
#: tests/core/references.py, and the notebook its docstring names (docs/architecture.md, "How to add a loss").
REGISTERED: tuple[LossEntry, ...] = (
    LossEntry("triplet_all", triplet_all, "Triplet",
              ("Triplet (all negatives)", "VSE0 sum of hinges (Faghri et al.)", "Triplet (Bleeker & de Rijke)"),
              {"margin": _MARGIN, "reduction": REDUCTION}, cocos="triplet"),
    LossEntry("triplet_hardest", triplet_hardest, "Triplet-SH",
              ("Triplet-SH (Bleeker & de Rijke)", "Triplet-HN (Li et al.)", "VSE++ max of hinges (Faghri et al.)",
               "Triplet (Xuan & Chen, Table 1)"),
              {"margin": _MARGIN, "reduction": REDUCTION}, cocos="triplet_sh"),
    LossEntry("triplet_soft", triplet_soft, "Triplet-SH, soft margin",
              ("Soft-margin triplet (Hermans, Beyer & Leibe 2017)",), {"reduction": REDUCTION}),
    LossEntry("info_nce", info_nce, "NT-Xent",
              ("NT-Xent (Chen et al.; Bleeker & de Rijke)", "InfoNCE", "VLC (Li et al.)", "CLIP loss (Radford et al.)"),
              {"temperature": Hyper(low=0.005, high=1.0), "reduction": REDUCTION}, cocos="nt_xent"),
    LossEntry("unified", unified, "Unified", ("Unified loss (Li et al., eq. 5)",),
              {"margin": _MARGIN, "gamma": Hyper(low=1.0, high=1000.0), "reduction": REDUCTION}),
    LossEntry("sampled_softmax", sampled_softmax, "Sampled softmax", ("Sampled softmax (Veit & Wilber, eq. 2)",),
              {"scale": _SCALE, "topk": _TOPK, "reduction": REDUCTION}, row_wise=True),
    LossEntry("cross_example_softmax", cross_example_softmax, "Cross-example softmax",
              ("Cross-example softmax (Veit & Wilber, eq. 5)",),
              {"scale": _SCALE, "topk": _TOPK, "reduction": REDUCTION}, row_wise=True),
    LossEntry("smooth_ap", smooth_ap, "SmoothAP", ("SmoothAP (Brown et al.; Bleeker & de Rijke)",),
              {"tau": Hyper(low=1e-4, high=1.0), "reduction": REDUCTION}, cocos="smooth_ap", row_wise=True),
    LossEntry("clip_learned", clip_learned, "NT-Xent, learned τ",
              ("CLIP loss with a learned temperature (Radford et al.)", "open_clip's ClipLoss with logit_scale"),
              {"logit_scale": Hyper(low=LOGIT_SCALE_MIN, high=LOGIT_SCALE_MAX, learned=True,
                                    init=CLIP_LOGIT_SCALE_INIT), "reduction": REDUCTION}),
    LossEntry("siglip", siglip, "SigLIP", ("Sigmoid loss (Zhai et al., SigLIP)", "open_clip's SigLipLoss"),
              {"logit_scale": Hyper(low=LOGIT_SCALE_MIN, high=LOGIT_SCALE_MAX, learned=True,
                                    init=SIGLIP_LOGIT_SCALE_INIT),
               "logit_bias": Hyper(learned=True, init=SIGLIP_LOGIT_BIAS_INIT), "reduction": REDUCTION}),
)
