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
