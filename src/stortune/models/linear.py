"""Linear regression models (LRM), with and without pairwise interaction terms (paper, 3.1)."""

from __future__ import annotations

from itertools import combinations

import numpy as np

from stortune.models.base import TabularRegressor


class LinearModel(TabularRegressor):
    """Least-squares linear model; `interactions=True` adds every pairwise product of parameters.

    Columns are standardised before products are formed: the fitted function is the same (the
    main effects absorb the centring), but the least-squares problem stays well conditioned when
    knobs span several orders of magnitude. Products of two one-hot columns of the same
    parameter are always zero and are left out.
    """

    def __init__(self, interactions: bool = False) -> None:
        self.interactions = interactions

    def _expand(self, Z: np.ndarray) -> np.ndarray:
        S = (Z - self.center_) / self.scale_
        columns = [np.ones((len(Z), 1)), S]
        if self.interactions:
            columns += [S[:, [i]] * S[:, [j]] for i, j in self.pairs_]
        return np.hstack(columns)

    def _fit_encoded(self, Z: np.ndarray, y: np.ndarray) -> None:
        self.center_ = Z.mean(axis=0)
        spread = Z.std(axis=0)
        self.scale_ = np.where(spread > 0, spread, 1.0)
        owner = self.encoder_.owner
        self.pairs_ = [
            (i, j) for i, j in combinations(range(Z.shape[1]), 2) if owner[i] != owner[j]
        ]
        self.coef_ = self._solve(self._expand(Z), y)

    def _solve(self, A: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Coefficients of the expanded design (its first column is the intercept)."""
        return np.linalg.lstsq(A, y, rcond=None)[0]

    def _predict_encoded(self, Z: np.ndarray) -> np.ndarray:
        return self._expand(Z) @ self.coef_
