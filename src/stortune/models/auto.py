"""Automatic model choice for tables of tens to a few hundred measured configurations.

Which technique predicts best depends on the system (a tree on one, a sparse linear model on
another), and the paper's split search needs minutes to tell. `AutoModel` instead races a fixed
portfolio of candidates that are good at small n, within a time budget:

* candidates: the lasso with interactions, CART at several minsplits, M5, random and
  extremely randomised forests, gradient boosting, MARS and the DeepPerf-style network, each
  with hyperparameters that scale with n; on a positive metric each is tried on the raw and on
  the log scale (performance effects multiply: a log model of a time spanning 100x is additive
  and errs relatively, as the mean relative error counts);
* scoring: cross-validated mean relative error, 5-fold repeated 6 times below 30 rows, 3 times
  below 60 and twice below 150, 10-fold above (the fewer the rows, the noisier one split);
* racing: heats score every candidate on the first repetition, cheapest first, until 60% of
  the search budget is spent; the best four, and gradient boosting, the anchor, are scored on
  the other repetitions;
* ensemble: Caruana's greedy selection with replacement over the out-of-fold predictions of the
  best candidates, kept when it lowers the cross-validated error;
* the anchor: the winner of some twenty candidates looks better in cross-validation than it is,
  the more so the fewer the rows. So it replaces gradient boosting (the most dependable
  technique at defaults on the benchmark's tables) only when its error is below
  1 - min(0.2, 2/n) times boosting's: by a fifth at 10 rows, by 3% at 60;
* refit of the chosen candidates on all rows. No fold fit starts that is expected to end past
  the search's deadline, and an ensemble whose refit would overrun the budget gives way to its
  quickest member, so the whole fit keeps within `budget_seconds` but for misestimates.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import RepeatedKFold
from threadpoolctl import threadpool_limits

from stortune.models.base import TabularRegressor
from stortune.models.crossval import FIT_FAILURES
from stortune.models.metrics import mean_relative_error

ENSEMBLE_STEPS = 20
FINALISTS = 4
# The share of the budget spent on the first repetition before the race narrows the field.
FIRST_ROUND_SHARE = 0.6
# Kept for the final refit on all rows (a fraction of the budget).
REFIT_SHARE = 0.15
# A refit on all rows costs about this many fold fits (a fold trains on 80-90% of them).
REFIT_COST = 1.3
ANCHOR = "boosting"


def anchor_margin(n_rows: int) -> float:
    """How much lower than the anchor's a challenger's CV error must be: the winner's curse of
    cross-validation grows as the rows shrink."""
    return min(0.2, 2.0 / n_rows)


@dataclass(frozen=True)
class Candidate:
    """One estimator configuration of the portfolio, fitted on raw or on log values."""

    label: str
    make: Callable[[], BaseEstimator]
    log_target: bool = False


@dataclass
class Score:
    """A candidate's out-of-fold predictions per repetition and their cost."""

    candidate: Candidate
    predictions: list[np.ndarray] = field(default_factory=list)
    fit_seconds: float = 0.0
    fits: int = 0

    @property
    def mean_fit(self) -> float:
        """Seconds per fold fit so far (0 before the first)."""
        return self.fit_seconds / self.fits if self.fits else 0.0

    def error(self, y: np.ndarray) -> float:
        if not self.predictions:
            return math.inf
        return float(np.mean([_mre(y, p) for p in self.predictions]))


class LogTargetModel(TabularRegressor):
    """Fits its estimator to log(y) and predicts exp of it (for metrics that are all positive)."""

    def __init__(self, estimator: BaseEstimator | None = None) -> None:
        self.estimator = estimator

    def fit(self, X: Any, y: Any) -> LogTargetModel:
        target = np.asarray(y, dtype=float)
        if np.any(target <= 0):
            raise ValueError("a log-scale model needs positive values")
        self.estimator_ = clone(self.estimator).fit(X, np.log(target))
        self.encoder_ = self.estimator_.encoder_
        return self

    def predict(self, X: Any) -> np.ndarray:
        return np.exp(np.clip(self.estimator_.predict(X), -700, 700))


def _mre(y: np.ndarray, prediction: np.ndarray) -> float:
    value = mean_relative_error(y, prediction)
    return value if math.isfinite(value) else math.inf


def folds_for(n_rows: int, random_state: int = 0) -> tuple[list[list[tuple]], str]:
    """Repetitions of shuffled 5-fold splits (10-fold from 150 rows on): the fewer the rows,
    the more repetitions, so that the choice does not hang on one lucky split."""
    k, repeats = (
        (5, 6) if n_rows < 30 else (5, 3) if n_rows < 60 else (5, 2) if n_rows < 150 else (10, 1)
    )
    reps = RepeatedKFold(n_splits=k, n_repeats=repeats, random_state=random_state)
    folds = list(reps.split(np.arange(n_rows)))
    described = f"{k}-fold" + (f" x {repeats}" if repeats > 1 else "")
    return [folds[r * k : (r + 1) * k] for r in range(repeats)], described


def portfolio(n_rows: int, positive: bool, random_state: int = 0) -> list[Candidate]:
    """The candidates, cheapest first; hyperparameters scale with `n_rows`."""
    from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor

    from stortune.models import TECHNIQUES
    from stortune.models.forest import ForestModel

    def tech(name: str, **params: Any) -> Callable[[], BaseEstimator]:
        return lambda: TECHNIQUES[name].make(**params)

    splits = sorted({2, max(2, n_rows // 10)})
    base: list[tuple[str, Callable[[], BaseEstimator]]] = [
        *[(f"cart(minsplit={m}, cp=0)", tech("cart", minsplit=m, cp=0.0)) for m in splits],
        ("lasso-int", tech("lasso-int")),
        ("m5", tech("m5", min_instances=max(2, min(4, n_rows // 10)))),
        (
            "random forest",
            lambda: ForestModel(RandomForestRegressor, random_state=random_state),
        ),
        (
            "extra trees",
            lambda: ForestModel(ExtraTreesRegressor, random_state=random_state),
        ),
        ("boosting", tech("boosting")),
        ("mars-int", tech("mars-int")),
    ]
    candidates = []
    for label, make in base:
        if positive:
            candidates.append(Candidate(f"log {label}", make, log_target=True))
        candidates.append(Candidate(label, make))
    if "network" in TECHNIQUES:  # 10-50x a tree's fit: one scale, last, if time is left
        candidates.append(
            Candidate("log network" if positive else "network", tech("network"), positive)
        )
    return candidates


def _build(candidate: Candidate) -> BaseEstimator:
    estimator = candidate.make()
    return LogTargetModel(estimator) if candidate.log_target else estimator


class AutoModel(TabularRegressor):
    """Chooses a technique, its hyperparameters and an ensemble within `budget_seconds`.

    After `fit`: `chosen_` names the model (members and weights), `cv_mre_` is its
    cross-validated mean relative error, `leaderboard_` lists every candidate scored
    (label, CV MRE, repetitions, seconds), `cv_` names the folds used.
    """

    def __init__(self, budget_seconds: float = 30.0, random_state: int = 0) -> None:
        self.budget_seconds = budget_seconds
        self.random_state = random_state

    def fit(self, X: Any, y: Any) -> AutoModel:
        started = time.monotonic()
        frame, target = self._fit_frame(X, y)
        if len(target) < 3:
            raise ValueError("AutoModel needs at least 3 rows")
        budget = float(self.budget_seconds)
        search_deadline = started + budget * (1 - REFIT_SHARE)
        reps, self.cv_ = folds_for(len(target), self.random_state)
        candidates = portfolio(len(target), bool(np.all(target > 0)), self.random_state)
        scores = [Score(c) for c in candidates]
        # A candidate that overflows or fails to converge scores badly or not at all; its
        # numerical warnings would only bury the result.
        with threadpool_limits(limits=1), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # Heats: every candidate on the first repetition, cheapest first.
            heat_deadline = started + budget * (1 - REFIT_SHARE) * FIRST_ROUND_SHARE
            for score in scores:
                self._score(score, frame, target, reps[0], heat_deadline)
            ranked = sorted((s for s in scores if s.predictions), key=lambda s: s.error(target))
            if not ranked:
                raise ValueError("no candidate model could be fitted to this table")
            # Final: the best few and the anchor on the other repetitions, repetition by
            # repetition and the quickest first, so that a deadline leaves them compared on the
            # same folds.
            anchors = [s for s in ranked if s.candidate.label.endswith(ANCHOR)]
            pool = ranked[:FINALISTS] + [s for s in anchors if s not in ranked[:FINALISTS]]
            finalists = sorted(pool, key=lambda s: s.fit_seconds)
            for repetition in reps[1:]:
                for score in finalists:
                    self._score(score, frame, target, repetition, search_deadline)
            common = min(len(s.predictions) for s in finalists)
            for score in finalists:
                del score.predictions[common:]
            weights = _anchored(_ensemble(finalists, target), anchors, target)
            left = started + budget - time.monotonic()
            if sum(REFIT_COST * s.mean_fit for s, _ in weights) > left:
                # The ensemble's refit would overrun: its quickest member alone.
                weights = [(min((s for s, _ in weights), key=lambda s: s.mean_fit), 1.0)]
            self.members_ = []
            for score, weight in weights:
                model = _build(score.candidate).fit(frame, target)
                self.members_.append((score.candidate.label, weight, model))
        self.leaderboard_ = [
            {
                "candidate": s.candidate.label,
                "cv_mre": s.error(target),
                "repetitions": len(s.predictions),
                "seconds": s.fit_seconds,
            }
            for s in sorted(scores, key=lambda s: s.error(target))
            if s.predictions
        ]
        self.cv_mre_ = _ensemble_error(weights, target)
        self.chosen_ = (
            self.members_[0][0]
            if len(self.members_) == 1
            else " + ".join(f"{w:.2f} {label}" for label, w, _ in self.members_)
        )
        self.fit_seconds_ = time.monotonic() - started
        return self

    def predict(self, X: Any) -> np.ndarray:
        frame = self._predict_frame(X)
        with threadpool_limits(limits=1):
            return sum(w * model.predict(frame) for _, w, model in self.members_)

    @staticmethod
    def _score(
        score: Score, frame: pd.DataFrame, y: np.ndarray, folds: list[tuple], deadline: float
    ) -> None:
        """Out-of-fold predictions of one repetition; nothing when the deadline interrupts."""
        prediction = np.empty(len(y))
        for train, test in folds:
            # A fold expected to end past the deadline is not started (a network's fold takes
            # seconds on a busy machine).
            if time.monotonic() + score.mean_fit >= deadline:
                return
            tick = time.monotonic()
            try:
                model = _build(score.candidate).fit(frame.iloc[train], y[train])
                prediction[test] = model.predict(frame.iloc[test])
            except FIT_FAILURES:
                prediction[test] = np.nan
            score.fit_seconds += time.monotonic() - tick
            score.fits += 1
        if np.all(np.isfinite(prediction)):
            score.predictions.append(prediction)


def _ensemble(finalists: list[Score], y: np.ndarray) -> list[tuple[Score, float]]:
    """Caruana's greedy ensemble selection (with replacement) over out-of-fold predictions of
    the best `FINALISTS` (the anchor rides along as a finalist, not as a member)."""
    pool = sorted(finalists, key=lambda s: s.error(y))[:FINALISTS]
    best_single = [(pool[0], 1.0)]
    counts = [0] * len(pool)
    total: list[np.ndarray] | None = None
    chosen_error = math.inf
    for _ in range(ENSEMBLE_STEPS):
        trials = []
        for i, s in enumerate(pool):
            summed = (
                s.predictions
                if total is None
                else [a + b for a, b in zip(total, s.predictions, strict=True)]
            )
            size = sum(counts) + 1
            trials.append((float(np.mean([_mre(y, p / size) for p in summed])), i, summed))
        error, i, summed = min(trials, key=lambda t: t[0])
        if error >= chosen_error - 1e-12:
            break
        chosen_error, total = error, summed
        counts[i] += 1
    if chosen_error >= pool[0].error(y) or sum(counts) <= 1:
        return best_single
    size = sum(counts)
    return [(s, c / size) for s, c in zip(pool, counts, strict=True) if c]


def _anchored(
    weights: list[tuple[Score, float]], anchors: list[Score], y: np.ndarray
) -> list[tuple[Score, float]]:
    """The chosen model, or the best-scored anchor when the choice's CV error is not clearly
    lower."""
    if not anchors:
        return weights
    anchor = min(anchors, key=lambda s: s.error(y))
    if _ensemble_error(weights, y) < (1 - anchor_margin(len(y))) * anchor.error(y):
        return weights
    return [(anchor, 1.0)]


def _ensemble_error(weights: list[tuple[Score, float]], y: np.ndarray) -> float:
    repetitions = len(weights[0][0].predictions)
    blended = [sum(w * s.predictions[r] for s, w in weights) for r in range(repetitions)]
    return float(np.mean([_mre(y, p) for p in blended]))
