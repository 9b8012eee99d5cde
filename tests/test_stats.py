import math

import pytest
from scipy import stats as scipy_stats

from stortune.stats import ratio_ci, summarize


def test_summary_matches_hand_computation() -> None:
    s = summarize([10.0, 12.0, 14.0], confidence=0.9)
    assert s.mean == 12.0 and s.std == 2.0 and s.rsd == pytest.approx(2 / 12)
    half = scipy_stats.t.ppf(0.95, 2) * 2.0 / math.sqrt(3)  # t(0.95, 2) = 2.919986
    assert half == pytest.approx(3.3717, abs=1e-4)
    assert (s.ci_low, s.ci_high) == pytest.approx((12 - half, 12 + half))
    assert s.ci_half_width_rel == pytest.approx(half / 12)


def test_summary_of_few_values() -> None:
    assert summarize([]).n == 0 and math.isnan(summarize([]).mean)
    one = summarize([5.0])
    assert one.mean == 5.0 and one.ci_low == -math.inf
    assert summarize([1.0, float("nan"), 3.0]).n == 2


def test_ratio_interval_covers_the_ratio_and_narrows_with_data() -> None:
    a = [100.0, 104.0, 96.0]
    b = [200.0, 210.0, 190.0]
    r = ratio_ci(a, b)
    assert r.ratio == pytest.approx(2.0)
    assert r.ci_low < 2.0 < r.ci_high
    wider = ratio_ci([100.0, 130.0, 70.0], [200.0, 260.0, 140.0])
    assert wider.ci_high - wider.ci_low > r.ci_high - r.ci_low
    exact = ratio_ci([5.0, 5.0], [10.0, 10.0])
    assert (exact.ci_low, exact.ci_high) == (2.0, 2.0)
    assert math.isnan(ratio_ci([], [1.0]).ratio)
