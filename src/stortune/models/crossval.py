"""Cross-validation as the split search uses it: the same folds for every point, scored a
round of points at a time, in parallel by fold.

The paper's objective is the mean RMSE of a 10-fold cross-validation. Techniques whose fits
share work within a fold (MARS's forward passes, Cubist's committees) memoise it per process
and data set, so a parallel search must send each fold to the same process every time, or
every process rebuilds every fold's fits. `CrossValidation` therefore deals the folds out to
long-lived worker processes (worker w owns folds w, w + W, ...) and sends each of them the
whole round of points; a worker scores its points in the estimator's `shared_fit_order`,
which puts the points that build a memoised fit first (the most Cubist committees, say).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from joblib import effective_n_jobs
from joblib.externals.loky.process_executor import BrokenProcessPool, ProcessPoolExecutor
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

from stortune.errors import StortuneError
from stortune.models.metrics import error_function

# A failed fit scores this: a hyperparameter point the estimator rejects is merely a bad point.
FIT_FAILURES = (ValueError, ArithmeticError, np.linalg.LinAlgError)

Folds = list[tuple[np.ndarray, ...]]


class OutOfTime(Exception):
    """A cross-validation stopped at its deadline."""


def cv_folds(n_rows: int, cv: int = 10, random_state: int = 0) -> Folds:
    """The same shuffled k folds for every evaluation, so that scores are paired."""
    if n_rows < 2:
        raise ValueError("cross-validation needs at least 2 rows")
    splitter = KFold(n_splits=min(cv, n_rows), shuffle=True, random_state=random_state)
    return list(splitter.split(np.arange(n_rows)))


def cv_errors(
    estimator: BaseEstimator,
    X: Any,
    y: Any,
    folds: Folds,
    error: str | Callable = "rmse",
    deadline: float | None = None,
) -> np.ndarray:
    """The error of `estimator` on each held-out fold.

    With a `deadline` (a `time.time()` value) it raises `OutOfTime` before a fold that would
    start after it: one evaluation of a slow model (MARS with interactions, hundreds of terms)
    takes minutes, so a time budget checked only between evaluations overruns by that much.
    BLAS and OpenMP run single-threaded here: the least-squares problems are small, and on a
    shared machine their threads cost far more than they save (40x on 2 busy cores).
    """
    measure = error_function(error)
    table = X if isinstance(X, pd.DataFrame) else np.asarray(X)
    target = np.asarray(y, dtype=float)

    def rows(index: np.ndarray) -> Any:
        return table.iloc[index] if isinstance(table, pd.DataFrame) else table[index]

    scores = []
    with threadpool_limits(limits=1):
        for train, test in folds:
            if deadline is not None and time.time() >= deadline:
                raise OutOfTime
            model = clone(estimator).fit(rows(train), target[train])
            scores.append(measure(target[test], model.predict(rows(test))))
    return np.asarray(scores, dtype=float)


def round_errors(
    estimator: BaseEstimator,
    points: Sequence[dict[str, Any]],
    X: Any,
    y: Any,
    folds: Folds,
    error: str | Callable = "rmse",
    deadline: float | None = None,
) -> list[np.ndarray | None]:
    """Each point's errors on `folds` (None: not scored before the deadline).

    Points are scored in the estimator's `shared_fit_order` when it has one; a point whose fit
    fails scores +inf on every fold.
    """
    order = list(range(len(points)))
    ordering = getattr(estimator, "shared_fit_order", None)
    if ordering is not None:
        order.sort(key=lambda i: ordering(points[i]))
    errors: list[np.ndarray | None] = [None] * len(points)
    for i in order:
        candidate = clone(estimator).set_params(**points[i])
        try:
            errors[i] = cv_errors(candidate, X, y, folds, error, deadline)
        except OutOfTime:
            break
        except FIT_FAILURES:
            errors[i] = np.full(len(folds), math.inf)
    return errors


# What a worker process scores on: its share of the folds, set once by `_own_folds`.
_worker_folds: tuple[Any, Any, Folds, str | Callable] | None = None


def _own_folds(X: Any, y: Any, folds: Folds, error: str | Callable) -> None:
    global _worker_folds
    _worker_folds = (X, y, folds, error)


def _score_own_folds(
    estimator: BaseEstimator, points: list[dict[str, Any]], deadline: float | None
) -> list[np.ndarray | None]:
    assert _worker_folds is not None, "worker started without its folds"
    X, y, folds, error = _worker_folds
    return round_errors(estimator, points, X, y, folds, error, deadline)


class CrossValidation:
    """Mean cross-validated error of `estimator` at rounds of hyperparameter points.

    With `n_jobs` (joblib's meaning; None or 1: in this process) the folds are dealt out to
    that many worker processes, which live until `close` (or the end of a `with` block).
    A point is scored when every fold is; with a `deadline` (a `time.time()` value) the
    points left unscored when it passes come back as None.
    """

    def __init__(
        self,
        estimator: BaseEstimator,
        X: Any,
        y: Any,
        folds: Folds,
        error: str | Callable = "rmse",
        deadline: float | None = None,
        n_jobs: int | None = None,
    ) -> None:
        self.estimator, self.X, self.y, self.folds, self.error = estimator, X, y, folds, error
        self.deadline = deadline
        workers = min(effective_n_jobs(n_jobs), len(folds))
        # Worker w owns folds w, w + workers, ...; each is sent the table once, at start.
        self.shares = [list(range(w, len(folds), workers)) for w in range(workers)]
        self.pools: list[ProcessPoolExecutor] = []
        if workers > 1:
            # loky's executors (joblib's): fresh interpreters, and unlike multiprocessing's
            # spawn they do not re-run a calling script that lacks a __main__ guard.
            for share in self.shares:
                owned = [folds[k] for k in share]
                self.pools.append(
                    ProcessPoolExecutor(1, initializer=_own_folds, initargs=(X, y, owned, error))
                )

    def score_round(self, points: list[dict[str, Any]]) -> list[float | None]:
        """What the split search calls: the round's scores, by the search's own deadline."""
        return self.scores(points, self.deadline)

    def scores(
        self, points: list[dict[str, Any]], deadline: float | None = None
    ) -> list[float | None]:
        if not self.pools:
            parts = [
                round_errors(
                    self.estimator, points, self.X, self.y, self.folds, self.error, deadline
                )
            ]
        else:
            futures = [
                pool.submit(_score_own_folds, self.estimator, points, deadline)
                for pool in self.pools
            ]
            try:
                parts = [future.result() for future in futures]
            except BrokenProcessPool as error:
                self.close()
                first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
                raise StortuneError(
                    f"a cross-validation worker process died ({first_line.rstrip('.')}); "
                    "with --jobs 1 the fits run in this process"
                ) from None
        scores: list[float | None] = []
        for i in range(len(points)):
            shares = [part[i] for part in parts]
            if any(errors is None for errors in shares):
                scores.append(None)
                continue
            # Back in fold order, so the mean is the one a serial cross-validation computes.
            by_fold = np.empty(len(self.folds))
            for share, errors in zip(self.shares, shares, strict=True):
                by_fold[share] = errors
            scores.append(float(np.mean(by_fold)))
        return scores

    def close(self) -> None:
        for pool in self.pools:
            pool.shutdown(kill_workers=True)
        self.pools = []

    def __enter__(self) -> CrossValidation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
