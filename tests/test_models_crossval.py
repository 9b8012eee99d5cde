"""Cross-validation by rounds: parallel by fold, each fold always in the same worker process."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from stortune.errors import StortuneError
from stortune.models import CARTModel
from stortune.models.crossval import CrossValidation, cv_errors, cv_folds


def data(n: int = 120) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(4)
    X = pd.DataFrame({"a": rng.random(n), "b": rng.random(n)})
    return X, np.where(X.a > 0.5, 10.0, 0.0) + X.b.to_numpy()


POINTS = [{"cp": cp, "minsplit": m} for cp in (0.0, 0.01, 0.2) for m in (2, 20)]


class LoggedTree(CARTModel):
    """A tree that notes which process fitted which training set."""

    def __init__(self, cp: float = 0.01, minsplit: int = 20, log: str = "") -> None:
        super().__init__(cp=cp, minsplit=minsplit)
        self.log = log

    def _fit_encoded(self, Z, y):
        with open(self.log, "a") as out:
            out.write(f"{os.getpid()} {len(y)} {float(np.sum(y))!r}\n")
        super()._fit_encoded(Z, y)


class BrokenTree(CARTModel):
    def _fit_encoded(self, Z, y):
        if self.cp > 0.1:
            raise ValueError("rejected")
        super()._fit_encoded(Z, y)


def test_parallel_scores_equal_serial_ones_and_a_plain_cross_validation():
    X, y = data()
    folds = cv_folds(len(X), 10)
    with CrossValidation(CARTModel(), X, y, folds) as serial:
        expected = serial.scores(POINTS)
    with CrossValidation(CARTModel(), X, y, folds, n_jobs=2) as parallel:
        assert parallel.scores(POINTS) == expected
    for point, score in zip(POINTS, expected, strict=True):
        assert score == float(np.mean(cv_errors(CARTModel(**point), X, y, folds)))


def test_each_fold_is_fitted_in_one_worker_only(tmp_path: Path):
    X, y = data()
    log = tmp_path / "fits.log"
    estimator = LoggedTree(log=str(log))
    with CrossValidation(estimator, X, y, cv_folds(len(X), 10), n_jobs=2) as cv:
        cv.scores(POINTS[:3])
        cv.scores(POINTS[3:])
    fits = [line.split(" ", 1) for line in log.read_text().splitlines()]
    assert len(fits) == len(POINTS) * 10
    workers_of_fold: dict[str, set[str]] = {}
    for pid, training_set in fits:
        workers_of_fold.setdefault(training_set, set()).add(pid)
    assert len(workers_of_fold) == 10
    assert all(len(pids) == 1 for pids in workers_of_fold.values())
    assert len(set().union(*workers_of_fold.values())) == 2 and str(os.getpid()) not in {
        pid for pid, _ in fits
    }


def test_a_failed_fit_scores_inf_and_a_passed_deadline_scores_nothing():
    X, y = data()
    folds = cv_folds(len(X), 5)
    with CrossValidation(BrokenTree(), X, y, folds, n_jobs=2) as cv:
        scores = cv.scores(POINTS)
        assert [math.isinf(s) for s in scores] == [p["cp"] > 0.1 for p in POINTS]
        assert cv.scores(POINTS, deadline=time.time() - 1) == [None] * len(POINTS)


class DyingTree(CARTModel):
    """Kills the worker process it is fitted in, as the OOM killer would."""

    def _fit_encoded(self, Z, y):
        if str(os.getpid()) != os.environ["TEST_PARENT_PID"]:
            os._exit(9)
        super()._fit_encoded(Z, y)


def test_a_dead_worker_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("TEST_PARENT_PID", str(os.getpid()))  # the workers inherit it
    X, y = data()
    cv = CrossValidation(DyingTree(), X, y, cv_folds(len(X), 4), n_jobs=2)
    with pytest.raises(StortuneError, match="worker process died.*--jobs 1") as raised:
        cv.scores(POINTS[:2])
    assert "\n" not in str(raised.value)
    assert cv.pools == []  # closed: nothing left running
