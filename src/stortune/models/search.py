"""Iterative split search for hyperparameters (Noorshams et al., ICPE'13, section 5, Algorithm 1).

Start at the lower corner of the box. Each iteration explores the n best points found so far:
around a pivot, the box reaches to the nearest values already evaluated on either side of it
(the whole range where there are none) and each parameter's interval is cut by k equidistant
splits; every corner of the resulting grid, (k+2)^l points, is evaluated unless it has been
already. Integer and categorical parameters are rounded to valid values, so grids collapse as
the search closes in. It stops after `max_iter` iterations, when an iteration improves the best
value by less than `tol` (relative), when `max_evals` or `max_seconds` is reached (checked
between evaluations; an objective may also return None when it runs out of time itself, as
`SplitSearchCV`'s does between folds), or when nothing is left to explore. An iteration's grid
points do not depend on each other, so with `n_jobs` > 1 they are scored in parallel worker
processes; the points, their order and the result are the same as with one. An objective with
a `score_round` method (a `RoundObjective`) is handed each iteration's grid whole instead and
parallelises as it likes. `split_search` works on any objective; `SplitSearchCV` is the paper's
use, the mean RMSE of a 10-fold cross-validation (`crossval.CrossValidation`, which parallelises
by fold), as a scikit-learn meta-estimator.
"""

from __future__ import annotations

import math
import sys
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any, Protocol

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils.validation import check_is_fitted

from stortune.models.crossval import CrossValidation, cv_folds


@dataclass(frozen=True)
class Real:
    """A continuous parameter in [low, high]."""

    low: float
    high: float

    def snap(self, x: float) -> float:
        # 12 significant digits: grids built from different pivots land on the same keys.
        return float(f"{min(max(x, self.low), self.high):.12g}")

    def value(self, x: float) -> float:
        return x


@dataclass(frozen=True)
class Integer:
    """An integer parameter in [low, high]; grid points are rounded to the nearest integer."""

    low: int
    high: int

    def snap(self, x: float) -> float:
        return float(min(max(round(x), self.low), self.high))

    def value(self, x: float) -> int:
        return int(x)


@dataclass(frozen=True)
class Choice:
    """A categorical parameter: searched as the index into `values`, rounded."""

    values: tuple[Any, ...]

    @property
    def low(self) -> int:
        return 0

    @property
    def high(self) -> int:
        return len(self.values) - 1

    def snap(self, x: float) -> float:
        return float(min(max(round(x), 0), self.high))

    def value(self, x: float) -> Any:
        return self.values[int(x)]


Dimension = Real | Integer | Choice


class RoundObjective(Protocol):
    """An objective that scores a list of points at once (None: ran out of time)."""

    def score_round(self, points: list[dict[str, Any]]) -> list[float | None]: ...


Objective = Callable[[dict[str, Any]], float | None] | RoundObjective


@dataclass
class SearchResult:
    """Best point, its value, and every evaluation in order (each point once)."""

    best_params: dict[str, Any]
    best_score: float
    history: list[tuple[dict[str, Any], float]] = field(default_factory=list)
    iterations: int = 0
    stop_reason: str = ""

    @property
    def n_evaluations(self) -> int:
        return len(self.history)


def split_search(
    objective: Objective,
    space: dict[str, Dimension],
    *,
    splits: int = 4,
    explorations: int = 5,
    max_iter: int = 10,
    tol: float | None = None,
    max_evals: int | None = None,
    max_seconds: float | None = None,
    n_jobs: int | None = None,
) -> SearchResult:
    """Minimise `objective` over the box `space` with Algorithm 1 (module doc).

    `splits` is the paper's k, `explorations` its n. A NaN objective value counts as +inf.
    With `n_jobs` (joblib's meaning: -1 is every CPU) the objective must be picklable. An
    objective that returns None has run out of time: the point stays unscored and the search
    stops ("max_seconds").
    """
    if splits < 1 or explorations < 1 or max_iter < 0:
        raise ValueError("splits and explorations must be >= 1, max_iter >= 0")
    with Parallel(n_jobs=n_jobs) as parallel:
        return _search(
            objective, space, splits, explorations, max_iter, tol, max_evals, max_seconds, parallel
        )


def _search(
    objective: Objective,
    space: dict[str, Dimension],
    splits: int,
    explorations: int,
    max_iter: int,
    tol: float | None,
    max_evals: int | None,
    max_seconds: float | None,
    parallel: Parallel,
) -> SearchResult:
    names, dims = list(space), list(space.values())
    evaluated: dict[tuple[float, ...], float] = {}
    result = SearchResult({}, math.inf)
    workers = effective_n_jobs(parallel.n_jobs)
    score_round = getattr(objective, "score_round", None)
    # Rounds of a few points per worker: fewer waits for the slowest point of a round. An
    # objective that scores rounds itself gets an iteration's whole grid at once.
    round_size = 1 if workers == 1 else 4 * workers
    if score_round is not None:
        round_size = sys.maxsize

    def decode(point: tuple[float, ...]) -> dict[str, Any]:
        return {name: dim.value(x) for name, dim, x in zip(names, dims, point, strict=True)}

    out_of_time = False

    def spent() -> str:
        """Which budget is used up, if any."""
        if out_of_time:
            return "max_seconds"
        if max_evals is not None and len(evaluated) >= max_evals:
            return "max_evals"
        if deadline is not None and time.monotonic() >= deadline:
            return "max_seconds"
        return ""

    def evaluate(points: list[tuple[float, ...]]) -> None:
        """Score the points in order, a round at a time, until a budget runs out (the
        search's first point is always tried)."""
        nonlocal out_of_time
        for start in range(0, len(points), round_size):
            if evaluated and spent():
                return
            batch = points[start : start + round_size]
            if max_evals is not None:
                batch = batch[: max_evals - len(evaluated)]
            params = [decode(point) for point in batch]
            if score_round is not None:
                values = score_round(params)
            elif workers == 1:
                values = [objective(p) for p in params]
            else:
                values = parallel(delayed(objective)(p) for p in params)
            for point, p, value in zip(batch, params, values, strict=True):
                if value is None:
                    out_of_time = True
                    continue
                score = float(value)
                evaluated[point] = math.inf if math.isnan(score) else score
                result.history.append((p, evaluated[point]))

    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    evaluate([tuple(dim.snap(dim.low) for dim in dims)])
    if not evaluated:  # the objective ran out of time on the very first point
        result.stop_reason = "max_seconds"
        return result
    pivots = list(evaluated)
    best = evaluated[pivots[0]]
    result.stop_reason = "max_iter"
    for iteration in range(1, max_iter + 1):
        seen = [sorted({point[i] for point in evaluated}) for i in range(len(dims))]
        grid: dict[tuple[float, ...], None] = {}  # an ordered set
        for pivot in pivots:
            axes = [_axis(dim, seen[i], pivot[i], splits) for i, dim in enumerate(dims)]
            grid.update((point, None) for point in product(*axes) if point not in evaluated)
        before = len(evaluated)
        evaluate(list(grid))
        fresh = len(evaluated) - before
        ranked = sorted(evaluated, key=evaluated.__getitem__)
        pivots = ranked[:explorations]
        improvement, best = best - evaluated[ranked[0]], evaluated[ranked[0]]
        result.iterations = iteration
        if spent():
            result.stop_reason = spent()
            break
        if fresh == 0:
            result.stop_reason = "exhausted"
            break
        if tol is not None and math.isfinite(best) and improvement < tol * abs(best + improvement):
            result.stop_reason = "tol"
            break
    winner = min(evaluated, key=evaluated.__getitem__)
    result.best_params, result.best_score = decode(winner), evaluated[winner]
    return result


def _axis(dim: Dimension, seen: Sequence[float], at: float, splits: int) -> list[float]:
    """Grid values of one parameter around a pivot: from the nearest evaluated value below to
    the nearest above (the range's ends where there is none), cut by `splits` points."""
    below = bisect_left(seen, at)
    above = bisect_right(seen, at)
    low = seen[below - 1] if below > 0 else dim.low
    high = seen[above] if above < len(seen) else dim.high
    step = (high - low) / (splits + 1)
    return sorted({dim.snap(low + m * step) for m in range(splits + 1)} | {dim.snap(high)})


class SplitSearchCV(RegressorMixin, BaseEstimator):
    """Tune `estimator` over `space` with the split search, scoring the mean cross-validated
    error (the paper: RMSE over 10 folds), then refit the best point on all the data.

    With `keep_defaults`, the estimator as given is scored on the same folds too and kept
    (`best_params_` empty) when no searched point beats it: a search cut short by its budget
    then never hands back something worse than the defaults. With `n_jobs` (joblib's meaning;
    None: this process) the folds are shared out to that many worker processes, each keeping
    its folds for the whole search (`crossval.CrossValidation`).
    """

    def __init__(
        self,
        estimator: BaseEstimator,
        space: dict[str, Dimension],
        splits: int = 4,
        explorations: int = 5,
        max_iter: int = 10,
        tol: float | None = None,
        max_evals: int | None = None,
        max_seconds: float | None = None,
        cv: int = 10,
        error: str | Callable = "rmse",
        random_state: int = 0,
        keep_defaults: bool = True,
        n_jobs: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.space = space
        self.splits = splits
        self.explorations = explorations
        self.max_iter = max_iter
        self.tol = tol
        self.max_evals = max_evals
        self.max_seconds = max_seconds
        self.cv = cv
        self.error = error
        self.random_state = random_state
        self.keep_defaults = keep_defaults
        self.n_jobs = n_jobs

    def fit(self, X: Any, y: Any) -> SplitSearchCV:
        folds = cv_folds(len(X), self.cv, self.random_state)
        # Wall-clock time: the worker processes of a parallel search share it.
        deadline = None if self.max_seconds is None else time.time() + self.max_seconds
        with CrossValidation(
            self.estimator, X, y, folds, self.error, deadline, self.n_jobs
        ) as cross_validation:
            self.search_ = split_search(
                cross_validation,
                self.space,
                splits=self.splits,
                explorations=self.explorations,
                max_iter=self.max_iter,
                tol=self.tol,
                max_evals=self.max_evals,
                max_seconds=self.max_seconds,
            )
            self.best_params_ = self.search_.best_params
            self.best_score_ = self.search_.best_score
            if self.keep_defaults:
                (default,) = cross_validation.scores([{}])
                assert default is not None  # no deadline
                if default <= self.best_score_:
                    self.best_params_, self.best_score_ = {}, default
        self.best_estimator_ = clone(self.estimator).set_params(**self.best_params_).fit(X, y)
        return self

    def predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X)
