"""CART regression trees with rpart's knobs, `minsplit` and `cp` (paper, 3.3 and Table 2)."""

from __future__ import annotations

import numpy as np
from sklearn.tree import DecisionTreeRegressor

from stortune.models.base import TabularRegressor


def scaled_minsplit(n_rows: int) -> int:
    """rpart's minsplit 20 for 200 rows or more, a tenth of the rows below, at least 2."""
    return int(min(20, max(2, round(n_rows / 10))))


class CARTModel(TabularRegressor):
    """scikit-learn's tree, parameterised as R's rpart so that the paper's ranges apply.

    * `minsplit`: fewest rows a node needs to be split (`min_samples_split`); rpart's leaves
      then hold at least `round(minsplit / 3)` rows (its `minbucket` default).
    * `cp`: rpart's complexity parameter is relative: a split must lower the tree's error by
      `cp` times the root node's error. scikit-learn's `ccp_alpha` is absolute, in units of
      the mean squared error, so `ccp_alpha = cp * root impurity` (the variance of y).
    * `max_depth` is rpart's `maxdepth` default, 30.

    `minsplit=None` (the default) scales with the table: rpart's 20 from 200 rows on, a tenth
    of the rows below (at least 2). rpart's fixed 20 never splits a table of 19 rows, so at
    small n the default tree predicted a constant.
    """

    def __init__(self, minsplit: int | None = None, cp: float = 0.01, max_depth: int = 30) -> None:
        self.minsplit = minsplit
        self.cp = cp
        self.max_depth = max_depth

    def _fit_encoded(self, Z: np.ndarray, y: np.ndarray) -> None:
        minsplit = scaled_minsplit(len(y)) if self.minsplit is None else self.minsplit
        minsplit = self.minsplit_ = max(2, int(round(minsplit)))
        self.tree_ = DecisionTreeRegressor(
            min_samples_split=minsplit,
            min_samples_leaf=max(1, round(minsplit / 3)),
            max_depth=self.max_depth,
            ccp_alpha=float(self.cp) * float(np.var(y)),
            random_state=0,
        ).fit(Z, y)

    def _predict_encoded(self, Z: np.ndarray) -> np.ndarray:
        return self.tree_.predict(Z)
