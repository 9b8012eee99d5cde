"""Evaluation numbers match hand computations; scenarios hold out the right rows."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from stortune.models import make_model
from stortune.models.evaluation import (
    compare_on_folds,
    error_cdf,
    extrapolation_scenarios,
    interpolation_scenario,
    paired_t_test,
)
from stortune.models.metrics import mean_relative_error, r2, relative_errors
from stortune.models.plots import plot_error_cdf, plot_predicted_vs_measured
from stortune.models.study import SearchSettings, assess_technique, prepare


def test_mean_relative_error_by_hand():
    # |110-100|/100 = 0.1, |180-200|/200 = 0.1, |50-50|/50 = 0; the 0 measurement is left out.
    y, prediction = [100, 200, 50, 0], [110, 180, 50, 3]
    np.testing.assert_allclose(relative_errors(y, prediction), [0.1, 0.1, 0.0])
    assert mean_relative_error(y, prediction) == pytest.approx(0.2 / 3)


def test_r2_by_hand():
    # SST = 1 + 0 + 1 = 2 around the mean 2; SSE = 0.25 + 0 + 0.25 = 0.5; R^2 = 1 - 0.5/2.
    assert r2([1, 2, 3], [1.5, 2, 2.5]) == pytest.approx(0.75)


def test_paired_t_test_by_hand():
    # Differences a - b: -0.5, -0.5, 0, -1.0; mean -0.5; sample sd sqrt(0.5/3); n = 4.
    # t = -0.5 / (sqrt(0.5/3) / 2) = -sqrt(6) = -2.449490; 3 degrees of freedom:
    # p = 2 * (1 - F(sqrt 6)) with F(t) = 1/2 + (t / (sqrt3 (1 + t^2/3)) + atan(t / sqrt3)) / pi
    #   = 2 * (1/2 - (0.4714045 + 0.9553166) / pi) = 0.091721.
    result = paired_t_test([1.0, 2.0, 3.0, 4.0], [1.5, 2.5, 3.0, 5.0])
    assert result.statistic == pytest.approx(-math.sqrt(6))
    assert result.pvalue == pytest.approx(0.091721, abs=1e-6)
    # Mean errors 2.5 and 3.0: the first is 1/6 lower.
    assert result.reduction == pytest.approx(-1 / 6)


def test_error_cdf_is_sorted_relative_errors():
    errors, share = error_cdf([10, 10, 10, 10], [13, 10, 11, 12])
    np.testing.assert_allclose(errors, [0.0, 0.1, 0.2, 0.3])
    np.testing.assert_allclose(share, [0.25, 0.5, 0.75, 1.0])


def frame(n=200, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "size": rng.integers(1, 33, n) * 4,
            "share": rng.random(n),
            "sched": rng.choice(["noop", "cfq"], n),
            "flag": rng.choice([True, False], n),
        }
    )


def test_interpolation_rows_lie_inside_the_training_ranges():
    X = frame()
    scenario = interpolation_scenario(X, 0.2, seed=1)
    assert len(set(scenario.train) & set(scenario.test)) == 0
    assert 0 < len(scenario.test) <= 40
    train = X.iloc[scenario.train]
    for name in ("size", "share"):
        assert X[name].iloc[scenario.test].between(train[name].min(), train[name].max()).all()


def test_extrapolation_trains_on_one_side_and_tests_beyond():
    X = frame()
    scenarios = {s.name: s for s in extrapolation_scenarios(X, fraction=0.2)}
    assert set(scenarios) == {"size above", "size below", "share above", "share below"}
    above = scenarios["size above"]
    assert X["size"].iloc[above.train].max() <= above.cut < X["size"].iloc[above.test].min()
    below = scenarios["share below"]
    assert X["share"].iloc[below.test].max() < below.cut <= X["share"].iloc[below.train].min()


def test_extrapolation_over_three_levels_tests_the_outer_ones():
    X = pd.DataFrame({"buffers": [64, 128, 256] * 10})
    scenarios = {s.name: s for s in extrapolation_scenarios(X, fraction=0.2)}
    assert set(X["buffers"].iloc[scenarios["buffers above"].test]) == {256}
    assert set(X["buffers"].iloc[scenarios["buffers below"].train]) == {128, 256}


def test_compare_on_folds_pairs_the_same_folds():
    X = frame()
    y = X["size"] * 2.0 + (X["sched"] == "cfq")
    same = compare_on_folds(make_model("linear"), make_model("linear"), X, y, cv=5)
    assert same.mean_a == same.mean_b
    better = compare_on_folds(make_model("linear"), make_model("cart"), X, y, cv=5)
    assert better.mean_a < better.mean_b and better.pvalue < 0.05


def test_assess_technique_with_the_split_search():
    X = frame()
    y = np.where(X["size"] > 64, 100.0, 10.0) + 5 * (X["sched"] == "cfq")
    interpolation, extrapolation, folds = prepare(X, y, seed=0, cv=5)
    settings = SearchSettings(splits=2, explorations=2, max_iter=2, cv=5)
    result = assess_technique("cart", X, y, interpolation, extrapolation, folds, True, settings)
    assert result.optimisation is not None
    assert result.optimisation.mre_optimized <= result.optimisation.mre_default
    assert set(result.extrapolation) == {"size above", "size below", "share above", "share below"}
    data = result.as_dict()
    assert data["optimization"]["evaluations"] == result.optimisation.evaluations > 1
    assert 0.9 < data["r2_fit"] <= 1


def test_plots_are_written_as_png_and_svg(tmp_path):
    y = np.array([1.0, 2.0, 3.0, 4.0])
    files = plot_predicted_vs_measured(y, y * 1.1, tmp_path / "pvm", "t", "iops")
    files += plot_error_cdf({"a": (y, y * 1.1), "b": (y, y * 0.8)}, tmp_path / "cdf")
    assert sorted(p.name for p in files) == ["cdf.png", "cdf.svg", "pvm.png", "pvm.svg"]
    assert all(p.stat().st_size > 1000 for p in files)
    assert files[0].read_bytes()[:4] == b"\x89PNG"
