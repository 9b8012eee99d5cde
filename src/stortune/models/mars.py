"""MARS (multivariate adaptive regression splines, paper 3.2) on top of py-earth2.

py-earth2 runs the forward pass. The pruning pass is ours, for two reasons: py-earth has no
`nprune` (the paper's third MARS knob, R earth's name), and its own pruning refits a least-squares
problem for every candidate term, O(terms^2) refits, which makes the large `nnodes` of the paper's
ranges far too slow for a hyperparameter search. Ours is the same backward elimination by
residual sum of squares, scored by GCV, but it works on the small triangular factor of the
basis matrix instead of refitting on all rows, then keeps the best-GCV model among those with
at most `nprune` terms.

The forward pass is greedy and its choices do not depend on `nnodes` or `thresh`: those only
decide when it stops. A pass run with more terms and a lower threshold therefore holds every
shallower one as a prefix, found by replaying py-earth's stopping rule on its record. The split
search fits the same folds at hundreds of (nnodes, thresh, nprune) points, so fitted passes are
memoised per data set (`ForwardPass.of`) and each point costs a truncation and a small
least-squares fit instead of a forward pass (seconds with interactions at 1,000 rows). A pass
that ended on its own, short of its term limit, serves every larger `nnodes` as well.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pyearth import Earth
from scipy.linalg import lstsq, qr, solve_triangular

from stortune.models.base import TabularRegressor
from stortune.models.memo import FitMemo, data_key

# py-earth's forward pass stops when R^2 drops below this generalised R^2 (its LOWGRSQ rule).
_LOWEST_GRSQ = -10.0


def default_nnodes(n_features: int) -> int:
    """R earth's default `nk`, the paper's derived standard (Table 2, footnote 5)."""
    return min(200, max(20, 2 * n_features)) + 1


def max_forward_terms(n_rows: int) -> int:
    """Most terms a forward pass on `n_rows` rows may grow: py-earth sizes its QR workspace at
    `max_terms + 4` columns of `n_rows` and never checks that they fit. Beyond that its LAPACK
    calls get illegal sizes (OpenBLAS prints "On entry to DGEMM ... illegal value" on stdout,
    thousands of times per search) and it reads past its arrays. A pass with more terms than
    rows has nothing left to fit anyway."""
    return max(n_rows - 4, 1)


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


class ForwardPass:
    """One unpruned py-earth forward pass on (Z, y), and every shallower pass it contains."""

    _memo: FitMemo[ForwardPass] = FitMemo()

    def __init__(
        self, Z: np.ndarray, y: np.ndarray, degree: int, penalty: float, nnodes: int, thresh: float
    ) -> None:
        self.nnodes, self.thresh, self.penalty = nnodes, thresh, penalty
        self.y = y
        self.earth = Earth(
            max_degree=degree,
            max_terms=max(nnodes, 1),
            thresh=thresh,
            penalty=penalty,
            enable_pruning=False,
        ).fit(Z, y)
        self.basis = self.earth.transform(Z)
        record = self.earth.forward_pass_record_
        steps = range(len(record))
        self.sizes = [record[i].get_size() for i in steps]
        self.rsq = [record.rsq(i) for i in steps]
        self.grsq = [record.grsq(i) for i in steps]
        self.mse = [record.mse(i) for i in steps]
        self.zero_tol = self.earth.zero_tol
        self.prunable = np.array(
            [bf.is_prunable() for bf in self.earth.basis_ if not bf.is_pruned()]
        )
        self._paths: dict[int, list[tuple[int, float]]] = {}
        self._fits: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def of(
        cls, Z: np.ndarray, y: np.ndarray, degree: int, penalty: float, nnodes: int, thresh: float
    ) -> ForwardPass:
        """A memoised pass deep enough for (nnodes, thresh); a deeper one replaces it."""
        key = (*data_key(Z, y), degree, penalty)
        known = cls._memo.get(key)
        if known is not None and known.covers(nnodes, thresh):
            return known
        if known is not None:
            nnodes, thresh = max(nnodes, known.nnodes), min(thresh, known.thresh)
        return cls._memo.put(key, cls(Z, y, degree, penalty, nnodes, thresh))

    @property
    def capped(self) -> bool:
        """Whether the pass stopped at its term limit; otherwise it ended on its own (the
        generalised R^2 fell too low, no candidates were left) and more terms would not change
        it: a search over growing `nnodes` then needs no deeper pass."""
        return (self.nnodes <= 1 and self.mse[0] != 0) or self.sizes[-1] > self.nnodes

    def covers(self, nnodes: int, thresh: float) -> bool:
        """Whether a pass with these knobs is a prefix of this one."""
        return thresh >= self.thresh and (nnodes <= self.nnodes or not self.capped)

    def terms(self, nnodes: int, thresh: float) -> int:
        """How many basis functions a pass with these knobs keeps: py-earth's stop rule,
        replayed on this deeper pass's record (`ForwardPasser.stop_check`)."""
        if nnodes <= 1 or self.mse[0] == 0:
            return 1
        for i in range(1, len(self.sizes)):
            if (
                self.sizes[i] > nnodes
                or self.rsq[i] > 1 - thresh
                or self.rsq[i] - self.rsq[i - 1] < thresh
                or self.grsq[i] < _LOWEST_GRSQ
                or self.mse[i] == self.zero_tol
            ):
                return self.sizes[i]
        return self.sizes[-1]

    def pruned(self, terms: int, nprune: int) -> tuple[np.ndarray, np.ndarray]:
        """(kept columns, coefficients): the best-GCV subset of the first `terms` columns
        with at most `nprune` of them, refitted by least squares."""
        if terms not in self._paths:
            self._paths[terms] = backward_path(self.basis[:, :terms], self.y, self.prunable[:terms])
        path = self._paths[terms]
        best_score, best_removed = float("inf"), 0
        for step, (_, rss) in enumerate(path):
            size = terms - step
            score = gcv(rss, len(self.y), size, self.penalty)
            if size <= max(nprune, 1) and score <= best_score:
                best_score, best_removed = score, step
        if (terms, best_removed) not in self._fits:
            removed = {column for column, _ in path[1 : best_removed + 1]}
            columns = np.array([c for c in range(terms) if c not in removed], dtype=int)
            coef = lstsq(self.basis[:, columns], self.y, lapack_driver="gelsy")[0]
            self._fits[terms, best_removed] = columns, coef
        return self._fits[terms, best_removed]


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
        nnodes = min(nnodes, max_forward_terms(len(y)))
        thresh = float(self.thresh)
        # Hinge models are unchanged by rescaling a variable (knots move along), and standard
        # units keep py-earth's sums of squares finite when knobs reach 1e9.
        self.center_ = Z.mean(axis=0)
        spread = Z.std(axis=0)
        self.scale_ = np.where(spread > 0, spread, 1.0)
        forward = ForwardPass.of(
            (Z - self.center_) / self.scale_, y, degree, penalty, nnodes, thresh
        )
        terms = forward.terms(nnodes, thresh)
        nprune = int(self.nprune) if self.nprune is not None else terms
        self.columns_, self.coef_ = forward.pruned(terms, nprune)
        self.earth_ = forward.earth

    def shared_fit_order(self, params: dict[str, Any]) -> tuple[float, ...]:
        """Sort key for a round of points (`crossval.round_errors`): per degree and penalty, the
        deepest forward pass first (most terms, lowest threshold), which then serves the
        shallower points of the round."""
        knobs = {**self.get_params(), **params}
        nnodes, penalty = knobs["nnodes"], knobs["penalty"]
        return (
            float(knobs["max_degree"]),
            -1.0 if penalty is None else float(penalty),
            -math.inf if nnodes is None else -float(nnodes),
            float(knobs["thresh"]),
        )

    @property
    def n_terms_(self) -> int:
        """Basis functions in the fitted model, intercept included."""
        return len(self.columns_)

    def _predict_encoded(self, Z: np.ndarray) -> np.ndarray:
        basis = self.earth_.transform((Z - self.center_) / self.scale_)
        return basis[:, self.columns_] @ self.coef_
