"""Prediction errors as the paper reports them (section 6): R^2, RMSE, relative errors."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sklearn.metrics import r2_score

from stortune.errors import StortuneError


def rmse(y: np.ndarray, prediction: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.asarray(y, float) - np.asarray(prediction, float)) ** 2)))


def mae(y: np.ndarray, prediction: np.ndarray) -> float:
    return float(np.mean(np.abs(np.asarray(y, float) - np.asarray(prediction, float))))


def relative_errors(y: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    """|prediction - y| / |y| per point; points measured as exactly 0 have none and are left out."""
    y, prediction = np.asarray(y, float), np.asarray(prediction, float)
    keep = y != 0
    return np.abs(prediction[keep] - y[keep]) / np.abs(y[keep])


def mean_relative_error(y: np.ndarray, prediction: np.ndarray) -> float:
    """The paper's accuracy measure (Figures 9 to 13), as a fraction (0.07 is 7%)."""
    errors = relative_errors(y, prediction)
    return float(np.mean(errors)) if len(errors) else float("nan")


def r2(y: np.ndarray, prediction: np.ndarray) -> float:
    """Coefficient of determination, 1 - SSE/SST (Table 3)."""
    return float(r2_score(np.asarray(y, float), np.asarray(prediction, float)))


ERRORS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "rmse": rmse,
    "mae": mae,
    "mre": mean_relative_error,
}


def error_function(error: str | Callable[[np.ndarray, np.ndarray], float]) -> Callable:
    """An error by name (rmse, mae, mre) or a callable error(y, prediction) to minimise."""
    if callable(error):
        return error
    if error not in ERRORS:
        raise StortuneError(f"unknown error {error!r} (have: {', '.join(ERRORS)})")
    return ERRORS[error]
