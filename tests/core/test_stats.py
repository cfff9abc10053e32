"""vlr_lib.stats: the paired t interval against scipy and by hand, and its verdicts."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vlr_lib import stats


def test_t_quantiles_match_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    for df in [1, 2, 3, 4, 5, 9, 29, 30, 31, 40, 100, 1000]:
        assert stats.t_quantile_975(df) == pytest.approx(scipy_stats.t.ppf(0.975, df), abs=2e-3)


def test_paired_interval_by_hand():
    a, b = [10.0, 12.0, 11.0, 13.0, 9.0], [9.0, 10.0, 10.5, 11.0, 9.5]
    d = np.subtract(a, b)  # 1, 2, 0.5, 2, -0.5
    mean, low, high = stats.paired_interval(a, b)
    half = 2.776 * d.std(ddof=1) / math.sqrt(5)
    assert mean == pytest.approx(1.0) and (low, high) == (pytest.approx(1.0 - half), pytest.approx(1.0 + half))


def test_pairing_removes_what_the_seed_does_to_both():
    """A large shared seed effect and a small constant gap: unpaired the gap drowns, paired it is exact."""
    shared = np.array([0.0, 50.0, -40.0, 20.0, 90.0])
    mean, low, high = stats.paired_interval(shared + 1.0, shared)
    assert (mean, low, high) == (pytest.approx(1.0), pytest.approx(1.0), pytest.approx(1.0))
    assert stats.verdict(low, high, +1) == "holds" and stats.verdict(low, high, -1) == "reverses"


def test_one_pair_cannot_tell_and_straddling_zero_cannot_tell():
    mean, low, high = stats.paired_interval([3.0], [1.0])
    assert mean == 2.0 and (low, high) == (-math.inf, math.inf)
    assert stats.verdict(low, high, +1) == "cannot tell"
    assert stats.verdict(*stats.paired_interval([1.0, 3.0, 2.0], [2.0, 1.0, 2.5])[1:], +1) == "cannot tell"


@pytest.mark.parametrize("a,b,match", [([], [], "equally long"), ([1.0, math.nan], [1.0, 2.0], "finite"),
                                       ([1.0, 2.0], [1.0], "equally long")])
def test_bad_input_is_an_error(a, b, match):
    with pytest.raises(ValueError, match=match):
        stats.paired_interval(a, b)


@pytest.mark.parametrize("df", [0, -1, 2.5, True])
def test_bad_degrees_of_freedom(df):
    with pytest.raises(ValueError, match="df"):
        stats.t_quantile_975(df)


def test_expected_must_be_a_sign():
    with pytest.raises(ValueError, match="expected"):
        stats.verdict(1.0, 2.0, 0)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 8, 29, 120])
def test_two_sided_p_against_scipy(df):
    scipy_stats = pytest.importorskip("scipy.stats")
    for t in [0.0, 0.3, 1.0, 2.2, 4.3, 12.7, -3.0]:
        assert stats.t_two_sided_p(t, df) == pytest.approx(2 * scipy_stats.t.sf(abs(t), df), abs=1e-12)
    assert stats.t_quantile(0.05, df) == pytest.approx(scipy_stats.t.ppf(0.975, df), rel=1e-9)


def test_two_sided_p_by_hand():
    # df = 1 is Cauchy: P(|T| >= 1) = 1 - 2 atan(1) / pi = 1/2; df = 2: P(|T| >= t) = 1 - t / sqrt(2 + t^2).
    assert stats.t_two_sided_p(1.0, 1) == pytest.approx(0.5)
    assert stats.t_two_sided_p(2.0, 2) == pytest.approx(1 - 2 / math.sqrt(6))
    assert stats.t_two_sided_p(math.inf, 3) == 0.0 and stats.t_two_sided_p(0.0, 3) == pytest.approx(1.0)


def test_holm_by_hand():
    # m = 4, sorted p: 0.01, 0.02, 0.03, 0.04 -> 4*0.01, 3*0.02, 2*0.03, max(.., 1*0.04): 0.04, 0.06, 0.06, 0.06.
    got = stats.holm([0.03, 0.01, 0.04, 0.02])
    assert got == pytest.approx([0.06, 0.04, 0.06, 0.06])
    # the running maximum: sorted 0.001 * 3, 0.3 * 2 = 0.6, then 0.5 * 1 = 0.5 is raised to 0.6.
    assert stats.holm([0.3, 0.5, 0.001]) == pytest.approx([0.6, 0.6, 0.003])
    # the cap: 0.6 * 2 = 1.2 -> 1, and 0.7 after it is raised to 1.
    assert stats.holm([0.6, 0.7, 0.001]) == pytest.approx([1.0, 1.0, 0.003])


def test_holm_against_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    rng = np.random.default_rng(0)
    for m in (1, 2, 7, 33):
        p = rng.uniform(0, 0.2, m)
        assert stats.holm(p) == pytest.approx(multitest.multipletests(p, method="holm")[1])


def test_holm_against_a_brute_force_step_down():
    """Holm's procedure as written: reject the smallest p while p_(k) < alpha / (m - k + 1), stop at the first not."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        p = rng.uniform(0, 0.1, rng.integers(1, 12))
        rejected = set()
        for k, i in enumerate(np.argsort(p, kind="stable")):
            if p[i] >= 0.05 / (len(p) - k):
                break
            rejected.add(int(i))
        assert {i for i, q in enumerate(stats.holm(p)) if q < 0.05} == rejected


@pytest.mark.parametrize("bad", [[], [1.2], [-0.1, 0.5], [math.nan]])
def test_holm_refuses_what_is_not_p_values(bad):
    with pytest.raises(ValueError, match="pvalues"):
        stats.holm(bad)


def _family():
    base = np.array([400.0, 420.0, 410.0])
    return [stats.Comparison("clear", base + [10.0, 11.0, 10.5], base, expected=+1),
            stats.Comparison("against", base - [10.0, 11.0, 10.5], base, expected=+1),
            stats.Comparison("weak", base + [3.0, -1.0, 4.0], base, expected=+1),
            stats.Comparison("rank", base + [0.4, 0.5, 0.45], base)]


def test_verdicts_read_the_holm_corrected_test():
    out = stats.verdicts(_family(), family=["clear", "against", "weak", "rank"]).set_index("name")
    assert list(out["verdict"]) == ["holds", "reverses", "cannot tell", "ahead"]
    assert out["p_holm"].tolist() == pytest.approx(stats.holm(out["p"]).tolist())
    for name, r in out.iterrows():
        d = np.asarray(_family()[list(out.index).index(name)].a) - [400.0, 420.0, 410.0]
        assert r["delta"] == pytest.approx(d.mean())
        # the Holm-level interval excludes 0 exactly when the corrected test rejects, and is wider than the raw one
        assert (r["low_holm"] > 0 or r["high_holm"] < 0) == (r["p_holm"] < 0.05)
        assert r["low_holm"] <= r["low"] and r["high_holm"] >= r["high"]


def test_a_comparison_significant_alone_can_fail_in_its_family():
    """p = 0.02 alone holds; among five comparisons with larger p it is multiplied by 5 and cannot tell."""
    base = np.zeros(3)
    nearly = stats.Comparison("nearly", base + [1.0, 1.4, 0.7], base, expected=+1)
    assert stats.verdicts([nearly], family=["nearly"])["verdict"].item() == "holds"
    others = [stats.Comparison(f"x{i}", base + [1.0, -1.0, 0.5 + i], base, expected=+1) for i in range(4)]
    out = stats.verdicts([nearly, *others], family=["nearly", "x0", "x1", "x2", "x3"]).set_index("name")
    assert out.at["nearly", "uncorrected"] == "holds" and out.at["nearly", "verdict"] == "cannot tell"


def test_a_comparison_outside_the_family_is_exploratory():
    with pytest.raises(ValueError, match="exploratory"):
        stats.verdicts(_family(), family=["clear", "against", "weak"])
    with pytest.raises(ValueError, match="were not given"):
        stats.verdicts(_family()[:2], family=["clear", "against", "weak"])
    with pytest.raises(ValueError, match="twice"):
        stats.verdicts(_family()[:1] * 2, family=["clear"])
    with pytest.raises(ValueError, match="family"):
        stats.verdicts(_family(), family="clear")
