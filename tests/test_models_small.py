"""Models at small n: defaults that scale with the table, penalised linear models, AutoModel
within its budget, and the small-sample protocol."""

from __future__ import annotations

import time

import joblib
import numpy as np
import pandas as pd
import pytest

from stortune.models import make_model
from stortune.models.auto import ANCHOR, AutoModel, Candidate, Score, _anchored, folds_for
from stortune.models.metrics import mean_relative_error
from stortune.models.smallsample import small_sample_protocol, train_subsets


def table(n: int, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Eight binary options and a scheduler; a time that multiplies per option, with noise."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.integers(0, 2, size=(n, 8)), columns=[f"o{i}" for i in range(8)])
    X["scheduler"] = rng.choice(["none", "mq-deadline", "bfq"], size=n)
    y = (
        10.0
        * np.exp(0.9 * X["o0"] - 0.6 * X["o1"] + 0.5 * X["o2"] * X["o3"])
        * np.where(X["scheduler"] == "bfq", 1.4, 1.0)
        * rng.lognormal(0, 0.02, size=n)
    )
    return X, y.to_numpy()


@pytest.mark.parametrize("technique", ["cart", "boosting", "lasso-int", "network"])
def test_defaults_do_not_predict_a_constant_at_ten_rows(technique: str) -> None:
    X, y = table(10)
    test, _ = table(200, seed=1)
    prediction = make_model(technique).fit(X, y).predict(test)
    assert np.ptp(prediction) > 0.1 * np.ptp(y)


def test_the_lasso_with_interactions_beats_least_squares_with_more_columns_than_rows() -> None:
    X, y = table(30)
    test, truth = table(500, seed=1)
    errors = {
        name: mean_relative_error(truth, make_model(name).fit(X, y).predict(test))
        for name in ("linear-int", "lasso-int")
    }
    assert errors["lasso-int"] < errors["linear-int"]


def test_auto_keeps_its_budget_and_beats_the_mean() -> None:
    X, y = table(60)
    test, truth = table(500, seed=1)
    started = time.monotonic()
    model = AutoModel(budget_seconds=8).fit(X, y)
    elapsed = time.monotonic() - started
    # The budget bounds the search; one candidate fit may run past the deadline.
    assert elapsed < 8 + 2
    error = mean_relative_error(truth, model.predict(test))
    assert error < 0.5 * mean_relative_error(truth, np.full(len(truth), y.mean()))
    assert model.leaderboard_ and model.chosen_
    assert 0 <= model.cv_mre_ < 0.5


def test_auto_ranks_candidates_on_the_same_folds_and_reproduces() -> None:
    X, y = table(20)
    a = AutoModel(budget_seconds=60).fit(X, y)
    b = AutoModel(budget_seconds=60).fit(X, y)
    assert a.chosen_ == b.chosen_
    test, _ = table(50, seed=2)
    np.testing.assert_allclose(a.predict(test), b.predict(test))
    repetitions = {row["candidate"]: row["repetitions"] for row in a.leaderboard_}
    # The finalists, and both scales of the anchor, on every repetition.
    assert max(repetitions.values()) == len(folds_for(20)[0]) == 6
    assert repetitions[ANCHOR] == repetitions[f"log {ANCHOR}"] == 6


def _scored(label: str, relative_error: float, y: np.ndarray) -> Score:
    return Score(Candidate(label, lambda: None), predictions=[y * (1 + relative_error)])


@pytest.mark.parametrize(
    ("rows", "challenger_error", "kept"),
    [(10, 0.85, ANCHOR), (10, 0.75, "m5"), (100, 0.97, "m5"), (100, 0.99, ANCHOR)],
)
def test_the_anchor_gives_way_only_to_a_clearly_lower_cv_error(
    rows: int, challenger_error: float, kept: str
) -> None:
    """The CV winner among many candidates flatters itself, the more so the fewer the rows:
    it replaces gradient boosting only with an error below 1 - min(0.2, 2/n) of boosting's."""
    y = np.linspace(1.0, 2.0, rows)
    anchor, challenger = _scored(ANCHOR, 0.10, y), _scored("m5", 0.10 * challenger_error, y)
    chosen = _anchored([(challenger, 1.0)], [anchor], y)
    assert [score.candidate.label for score, _ in chosen] == [kept]


def test_auto_fits_on_the_log_scale_only_when_every_value_is_positive() -> None:
    X, y = table(15)
    model = AutoModel(budget_seconds=10).fit(X, y - y.mean())
    assert not any(row["candidate"].startswith("log ") for row in model.leaderboard_)


def test_auto_survives_joblib(tmp_path) -> None:
    X, y = table(30)
    model = AutoModel(budget_seconds=5).fit(X, y)
    path = tmp_path / "auto.joblib"
    joblib.dump(model, path)
    np.testing.assert_allclose(joblib.load(path).predict(X), model.predict(X))


def test_small_sample_protocol_pairs_subsets_and_tests_on_the_rest() -> None:
    X, y = table(80)
    subsets = train_subsets(len(X), 20, 3, seed=4)
    again = train_subsets(len(X), 20, 3, seed=4)
    assert all(np.array_equal(a, b) for a, b in zip(subsets, again, strict=True))
    result = small_sample_protocol(lambda: make_model("cart"), X, y, 20, subsets=subsets)
    assert len(result.mre) == 3 and len(result.fit_seconds) == 3
    low, high = result.ci95
    assert low <= result.mean <= high
    with pytest.raises(ValueError):
        train_subsets(len(X), len(X), 1)
