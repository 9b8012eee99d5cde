"""The split search (Algorithm 1) finds known minima and never evaluates a point twice."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest

from stortune.models import CARTModel, default_space
from stortune.models.search import Choice, Integer, Real, SplitSearchCV, split_search


class Recorder:
    def __init__(self, function):
        self.function = function
        self.calls: list[tuple] = []

    def __call__(self, params):
        self.calls.append(tuple(sorted(params.items())))
        return self.function(params)


def bowl(p):
    return (p["a"] - 0.3) ** 2 + (p["b"] - 7) ** 2


def test_finds_the_minimum_of_a_two_parameter_function():
    objective = Recorder(bowl)
    result = split_search(objective, {"a": Real(0, 1), "b": Integer(0, 20)})
    assert result.best_params["b"] == 7
    assert result.best_params["a"] == pytest.approx(0.3, abs=1e-3)
    assert result.best_score == pytest.approx(0.0, abs=1e-6)
    assert result.iterations == 10 and result.stop_reason == "max_iter"


def test_never_evaluates_a_point_twice():
    objective = Recorder(bowl)
    result = split_search(objective, {"a": Real(0, 1), "b": Integer(0, 20)}, max_iter=10)
    assert len(objective.calls) == len(set(objective.calls)) == result.n_evaluations
    assert all(isinstance(dict(c)["b"], int) and 0 <= dict(c)["b"] <= 20 for c in objective.calls)


def test_first_iteration_is_the_full_grid_from_the_lower_corner():
    objective = Recorder(bowl)
    result = split_search(objective, {"a": Real(0, 1), "b": Integer(0, 20)}, max_iter=1)
    assert objective.calls[0] == (("a", 0.0), ("b", 0))
    # k = 4 splits: (k + 2)^2 = 36 corners, the lower corner among them.
    assert result.n_evaluations == 36
    assert {dict(c)["b"] for c in objective.calls} == {0, 4, 8, 12, 16, 20}
    assert {dict(c)["a"] for c in objective.calls} == {0.0, 0.2, 0.4, 0.6, 0.8, 1.0}


def test_discrete_spaces_are_exhausted_without_repeats():
    objective = Recorder(lambda p: abs(p["n"] - 3) + (0 if p["mode"] == "b" else 1))
    space = {"n": Integer(1, 6), "mode": Choice(("a", "b", "c"))}
    result = split_search(objective, space, max_iter=50)
    assert result.best_params == {"n": 3, "mode": "b"}
    assert result.stop_reason == "exhausted"
    assert len(objective.calls) == len(set(objective.calls)) <= 18


def test_stops_on_small_improvement_or_budget():
    flat = split_search(lambda p: 1.0, {"a": Real(0, 1)}, tol=0.01)
    assert flat.stop_reason == "tol" and flat.iterations == 1
    capped = split_search(bowl, {"a": Real(0, 1), "b": Integer(0, 20)}, max_evals=10)
    assert capped.stop_reason == "max_evals" and capped.n_evaluations == 10
    out_of_time = split_search(lambda p: p["a"], {"a": Real(0, 1)}, max_seconds=0)
    assert out_of_time.stop_reason == "max_seconds" and out_of_time.n_evaluations == 1


def test_nan_scores_count_as_worst():
    result = split_search(
        lambda p: math.nan if p["a"] < 0.5 else p["a"], {"a": Real(0, 1)}, max_iter=3
    )
    assert result.best_params["a"] == pytest.approx(0.5, abs=0.05)


def test_split_search_cv_tunes_a_tree():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.random(200), "b": rng.random(200)})
    y = np.where(X.a > 0.5, 10.0, 0.0) + np.where(X.b > 0.5, 1.0, 0.0)
    search = SplitSearchCV(
        CARTModel(), default_space("cart", len(X)), splits=2, explorations=2, max_iter=3, cv=5
    ).fit(X, y)
    assert search.best_score_ < 0.5
    assert search.best_params_["cp"] < 0.01
    assert search.predict(X.iloc[:5]).shape == (5,)


def test_default_ranges_are_the_papers_capped_by_rows():
    assert default_space("cart")["minsplit"] == Integer(2, 400)
    assert default_space("cart", n_rows=100)["minsplit"] == Integer(2, 100)
    assert default_space("mars-int")["thresh"] == Real(0.0, 0.999)
    assert default_space("linear") == {}


def test_defaults_are_kept_when_the_search_finds_nothing_better():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.random(200)})
    y = X.a.to_numpy()
    # One evaluation only, the lower corner cp = 0.9, which prunes the tree to its root.
    space = {"cp": Real(0.9, 0.999)}
    tuned = SplitSearchCV(CARTModel(), space, max_evals=1, cv=5).fit(X, y)
    assert tuned.best_params_ == {} and tuned.best_score_ < 0.1
    forced = SplitSearchCV(CARTModel(), space, max_evals=1, cv=5, keep_defaults=False).fit(X, y)
    assert forced.best_params_ == {"cp": 0.9} and forced.best_score_ > 0.2


def test_parallel_search_scores_the_same_points_in_the_same_order():
    space = {"a": Real(0, 1), "b": Integer(0, 20)}
    serial = split_search(bowl, space, max_iter=4)
    parallel = split_search(bowl, space, max_iter=4, n_jobs=2)
    assert parallel.history == serial.history
    assert parallel.best_params == serial.best_params and parallel.stop_reason == "max_iter"
    capped = split_search(bowl, space, max_evals=11, n_jobs=2)
    assert capped.n_evaluations == 11 and capped.history == serial.history[:11]


def test_split_search_cv_in_parallel_finds_what_the_serial_one_finds():
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"a": rng.random(150), "b": rng.random(150)})
    y = np.where(X.a > 0.5, 10.0, 0.0) + X.b
    settings = dict(splits=2, explorations=2, max_iter=2, cv=5)
    serial = SplitSearchCV(CARTModel(), default_space("cart", len(X)), **settings).fit(X, y)
    parallel = SplitSearchCV(CARTModel(), default_space("cart", len(X)), n_jobs=2, **settings).fit(
        X, y
    )
    assert parallel.search_.history == serial.search_.history
    assert parallel.best_params_ == serial.best_params_


def test_an_objective_out_of_time_stops_the_search_without_scoring_the_point():
    calls = []

    def slow_after_five(params):
        calls.append(params)
        return None if len(calls) > 5 else bowl(params)

    result = split_search(slow_after_five, {"a": Real(0, 1), "b": Integer(0, 20)})
    assert result.stop_reason == "max_seconds" and result.n_evaluations == 5
    assert len(calls) == 6 and result.best_score == min(s for _, s in result.history)
    nothing = split_search(lambda p: None, {"a": Real(0, 1)})
    assert nothing.stop_reason == "max_seconds" and nothing.n_evaluations == 0


class SlowTree(CARTModel):
    """A tree that takes a fixed time to fit: the deadline must cut an evaluation short."""

    fits = 0

    def _fit_encoded(self, Z, y):
        SlowTree.fits += 1
        time.sleep(0.2)
        super()._fit_encoded(Z, y)


def test_split_search_cv_stops_inside_an_evaluation_at_its_deadline():
    rng = np.random.default_rng(2)
    X = pd.DataFrame({"a": rng.random(60)})
    y = X.a.to_numpy()
    SlowTree.fits = 0
    tuned = SplitSearchCV(SlowTree(), {"cp": Real(0.0, 0.5)}, cv=10, max_seconds=0.5).fit(X, y)
    # One 10-fold evaluation takes 2 s: the search stops after a few folds of its first point,
    # unscored; the defaults are then scored in full (10 fits) and kept, and refitted (1 fit).
    assert tuned.search_.n_evaluations == 0 and tuned.search_.stop_reason == "max_seconds"
    assert tuned.best_params_ == {} and math.isfinite(tuned.best_score_)
    assert SlowTree.fits - 11 < 10
