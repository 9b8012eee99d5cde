"""Lasso with pairwise interactions, for tables with few rows.

With interactions a linear model has more columns than a small table has rows (18 binary
options give 171 columns), and least squares then interpolates the training rows and predicts
wildly elsewhere. The lasso, its penalty chosen by cross-validation inside the fit
(scikit-learn's LassoCV), keeps the few terms that matter, at any size and without a search:
the default adapts to the data. (A ridge penalty, tried too, spreads the weight over every
interaction and at 10 rows shrank to a constant: its leave-one-out choice was the largest
penalty.)
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LassoCV

from stortune.models.linear import LinearModel

LASSO_FOLDS = 5


class LassoModel(LinearModel):
    """`LinearModel`'s standardised design (interactions by default), fitted by LassoCV."""

    def __init__(self, interactions: bool = True) -> None:
        super().__init__(interactions=interactions)

    def _solve(self, A: np.ndarray, y: np.ndarray) -> np.ndarray:
        design = A[:, 1:]  # LassoCV fits its own intercept
        if design.shape[1] == 0 or len(y) < 3:
            return np.concatenate([[float(np.mean(y))], np.zeros(design.shape[1])])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = LassoCV(
                cv=min(LASSO_FOLDS, len(y)), alphas=30, max_iter=5000, random_state=0
            ).fit(design, y)
        self.alpha_ = float(model.alpha_)
        return np.concatenate([[float(model.intercept_)], np.ravel(model.coef_)])
