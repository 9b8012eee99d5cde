"""MARS (multivariate adaptive regression splines, paper 3.2) on top of py-earth2.

py-earth2 runs the forward pass. The pruning pass is ours, for two reasons: py-earth has no
`nprune` (the paper's third MARS knob, R earth's name), and its own pruning refits a least-squares
problem for every candidate term, O(terms^2) refits, which makes the large `nnodes` of the paper's
ranges far too slow for a hyperparameter search. Ours is the same backward elimination by
residual sum of squares, scored by GCV, but it works on the small triangular factor of the
basis matrix instead of refitting on all rows, then keeps the best-GCV model among those with
at most `nprune` terms.
"""

from __future__ import annotations

import numpy as np
from pyearth import Earth
from scipy.linalg import qr, solve_triangular

from stortune.models.base import TabularRegressor


def default_nnodes(n_features: int) -> int:
    """R earth's default `nk`, the paper's derived standard (Table 2, footnote 5)."""
    return min(200, max(20, 2 * n_features)) + 1


def gcv(rss: float, n_rows: int, n_terms: int, penalty: float) -> float:
    """Generalised cross-validation: RSS/n inflated for the effective number of parameters."""
    effective = n_terms + penalty * (n_terms - 1) / 2
    if effective >= n_rows:
        return float("inf")
    return rss / n_rows / (1 - effective / n_rows) ** 2


def backward_path(B: np.ndarray, y: np.ndarray, prunable: np.ndarray) -> list[tuple[int, float]]:
    """Friedman's backward elimination: (column removed, RSS after) per step, (-1, RSS) first.

    Each step drops the prunable column whose removal raises the RSS least. Columns that are
    linear combinations of others (MARS bases often hold some) go first, at no cost. The rest
    works on the k x k triangular factor R of B instead of its n rows: dropping column j of the
    kept set raises the RSS by beta_j^2 / ||row j of T^-1||^2, T the triangular factor of the
    kept columns of R.
    """
    _, R0, order = qr(B, mode="economic", pivoting=True)
    diag = np.abs(np.diag(R0))
    rank = int(np.sum(diag > 1e-10 * diag[0])) if len(diag) and diag[0] > 0 else 0
    dependent = [int(c) for c in order[rank:] if prunable[c]]
    active = [c for c in range(B.shape[1]) if c not in dependent]
    Q, R = qr(B[:, active], mode="economic")
    z = Q.T @ y
    outside = float(np.sum((y - Q @ z) ** 2))
    kept = list(range(len(active)))
    removed: list[int] = []
    path: list[tuple[int, float]] = []
    while True:
        Qs, Ts = qr(R[:, kept], mode="economic")
        w = Qs.T @ z
        rss = outside + float(np.sum((z - Qs @ w) ** 2))
        if path:
            path.append((removed[-1], rss))
        else:
            path = [(-1, rss)] + [(c, rss) for c in dependent]
        candidates = [i for i, k in enumerate(kept) if prunable[active[k]]]
        if not candidates:
            return path
        beta = solve_triangular(Ts, w)
        inverse_rows = np.sum(solve_triangular(Ts, np.eye(len(kept))) ** 2, axis=1)
        increase = beta[candidates] ** 2 / inverse_rows[candidates]
        removed.append(active[kept.pop(candidates[int(np.argmin(increase))])])


class MARSModel(TabularRegressor):
    """MARS with the paper's knobs (Table 2); `max_degree=1` is additive, 2 allows interactions.

    * `nnodes`: most terms of the forward pass (py-earth's `max_terms`; None: R earth's default).
    * `thresh`: the forward pass stops when R^2 improves by less than this.
    * `nprune`: most terms, intercept included, after pruning (None: no limit).
    * `penalty`: GCV cost per knot (None: R earth's default, 3 with interactions, else 2).
    """

    def __init__(
        self,
        max_degree: int = 1,
        nnodes: int | None = None,
        thresh: float = 0.001,
        nprune: int | None = None,
        penalty: float | None = None,
    ) -> None:
        self.max_degree = max_degree
        self.nnodes = nnodes
        self.thresh = thresh
        self.nprune = nprune
        self.penalty = penalty

    def _fit_encoded(self, Z: np.ndarray, y: np.ndarray) -> None:
        degree = int(self.max_degree)
        penalty = float(self.penalty if self.penalty is not None else (3 if degree > 1 else 2))
        nnodes = int(self.nnodes) if self.nnodes is not None else default_nnodes(Z.shape[1])
        earth = Earth(
            max_degree=degree,
            max_terms=max(nnodes, 1),
            thresh=float(self.thresh),
            penalty=penalty,
            enable_pruning=False,
        )
        # Hinge models are unchanged by rescaling a variable (knots move along), and standard
        # units keep py-earth's sums of squares finite when knobs reach 1e9.
        self.center_ = Z.mean(axis=0)
        spread = Z.std(axis=0)
        self.scale_ = np.where(spread > 0, spread, 1.0)
        Z = (Z - self.center_) / self.scale_
        earth.fit(Z, y)
        unpruned = [bf for bf in earth.basis_ if not bf.is_pruned()]
        B = earth.transform(Z)
        path = backward_path(B, y, np.array([bf.is_prunable() for bf in unpruned]))
        limit = int(self.nprune) if self.nprune is not None else len(unpruned)
        removed: list[int] = []
        best_score, best_removed = float("inf"), 0
        for step, (column, rss) in enumerate(path):
            if column >= 0:
                removed.append(column)
            size = len(unpruned) - step
            score = gcv(rss, len(y), size, penalty)
            if size <= max(limit, 1) and score <= best_score:
                best_score, best_removed = score, len(removed)
        for column in removed[:best_removed]:
            unpruned[column].prune()
        earth.linear_fit(Z, y)
        self.earth_ = earth

    def _predict_encoded(self, Z: np.ndarray) -> np.ndarray:
        return self.earth_.predict((Z - self.center_) / self.scale_)
