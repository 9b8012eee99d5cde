"""M5 model trees (Quinlan 1992; paper 3.4), our own implementation.

No maintained M5 works with current scikit-learn, and the algorithm is small:

1. Grow: split on the test that maximises the standard deviation reduction
   sd(T) - sum |T_i|/|T| sd(T_i); a node stays a leaf when it has fewer than 2*M rows (each
   leaf keeps at least M) or its sd is below 5% of the root's.
2. Models: every node gets a linear model, simplified greedily (paper 3.4): drop the term
   whose removal gives the lowest estimated error, while that is no higher than before. The
   estimate is the paper's: mean absolute residual times (n + v) / (n - v), v the number of
   parameters (infinite when n <= v). Leaves start from all attributes; an internal node from
   the attributes tested in its subtree or used by its children's models (Quinlan's rule, as
   extended in M5' by Wang and Witten 1997), so that it competes with its subtree fairly.
3. Prune (bottom-up): a subtree becomes a leaf holding its node's linear model when that model's
   estimated error is no worse than the subtree's (v counting every leaf model's parameters
   plus one per split), or is practically exact (below 1e-5 of the root's sd, as in Weka).
4. Smooth (optional): along the path to a leaf, each parent's model is blended in as
   p' = (n p + k q) / (n + k), n the rows below, k = 15 (Quinlan); the blend is linear, so it
   is folded into one linear model per leaf at fit time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import qr, solve_triangular

from stortune.models.base import TabularRegressor

SMOOTHING_K = 15.0
DEVIATION_FRACTION = 0.05


def estimated_error(abs_residual_mean: float, n: int, v: int) -> float:
    """The M5 error estimate: training error inflated for the number of parameters."""
    if n <= v:
        return float("inf")
    return abs_residual_mean * (n + v) / (n - v)


@dataclass
class _Node:
    rows: np.ndarray
    feature: int = -1
    threshold: float = 0.0
    left: int = -1
    right: int = -1
    parent: int = -1
    tested: set[int] = field(default_factory=set)
    terms: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    coef: np.ndarray = field(default_factory=lambda: np.zeros(0))
    intercept: float = 0.0
    n_params: int = 1


def best_split(Z: np.ndarray, y: np.ndarray, min_leaf: int) -> tuple[int, float] | None:
    """(feature, threshold) maximising the standard deviation reduction, or None."""
    n = len(y)
    order = np.argsort(Z, axis=0, kind="stable")
    xs = np.take_along_axis(Z, order, axis=0)
    ys = (y - y.mean())[order]
    s1, s2 = np.cumsum(ys, axis=0), np.cumsum(ys * ys, axis=0)
    left = np.arange(min_leaf, n - min_leaf + 1)
    if len(left) == 0:
        return None
    nl, nr = left[:, None], (n - left)[:, None]
    sl, ql = s1[left - 1], s2[left - 1]
    sr, qr_ = s1[-1] - sl, s2[-1] - ql
    sd_l = np.sqrt(np.maximum(ql / nl - (sl / nl) ** 2, 0.0))
    sd_r = np.sqrt(np.maximum(qr_ / nr - (sr / nr) ** 2, 0.0))
    reduction = y.std() - (nl / n) * sd_l - (nr / n) * sd_r
    reduction[xs[left - 1] >= xs[left]] = -np.inf
    position, feature = np.unravel_index(int(np.argmax(reduction)), reduction.shape)
    if not reduction[position, feature] > 1e-12 * max(y.std(), 1e-300):
        return None
    i = left[position]
    return int(feature), float((xs[i - 1, feature] + xs[i, feature]) / 2)


def simplified_linear_model(
    Z: np.ndarray, y: np.ndarray, candidates: list[int]
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(terms, coefficients, intercept, estimated error) after greedy term elimination.

    Columns are standardised and those that are linear combinations of others dropped first.
    Drop-one residuals come from one QR factorisation: removing term j moves the residuals by
    Q (R^-T)_j beta_j / ||(R^-1)_j||^2, so every candidate is scored with one matrix product.
    """
    n = len(y)
    terms = [j for j in candidates if np.ptp(Z[:, j]) > 0]
    center, scale = Z[:, terms].mean(axis=0), Z[:, terms].std(axis=0)
    S = (Z[:, terms] - center) / scale
    if terms:
        _, R, order = qr(S, mode="economic", pivoting=True)
        diag = np.abs(np.diag(R))
        independent = np.sort(order[: int(np.sum(diag > 1e-8 * diag[0]))])
        terms, center, scale = (
            [terms[k] for k in independent],
            center[independent],
            scale[independent],
        )
        S = S[:, independent]
    A = np.column_stack([np.ones(n), S])
    beta, residual, error = _least_squares(A, y)
    while terms:
        Q, R = qr(A, mode="economic")
        rinv = solve_triangular(R, np.eye(R.shape[0]))
        weight = np.sum(rinv**2, axis=1)
        shifts = Q @ (rinv.T[:, 1:] * (beta[1:] / weight[1:]))
        trial = np.mean(np.abs(residual[:, None] + shifts), axis=0)
        scores = [estimated_error(float(m), n, len(terms)) for m in trial]
        if error == float("inf"):
            drop = int(np.argmin(trial))
        else:
            drop = int(np.argmin(scores))
            if scores[drop] > error:
                break
        terms.pop(drop)
        center, scale = np.delete(center, drop), np.delete(scale, drop)
        A = np.delete(A, drop + 1, axis=1)
        beta, residual, error = _least_squares(A, y)
    coef = beta[1:] / scale
    return np.array(terms, dtype=int), coef, float(beta[0] - coef @ center), error


def _least_squares(A: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    beta = np.linalg.lstsq(A, y, rcond=None)[0]
    residual = y - A @ beta
    return beta, residual, estimated_error(float(np.mean(np.abs(residual))), len(y), A.shape[1])


class M5Model(TabularRegressor):
    """M5 model tree (module doc) with Weka M5P's knobs.

    * `min_instances` (Weka's M): fewest training rows in a leaf.
    * `pruning`: replace subtrees by linear models where that is estimated to be no worse.
    * `smoothing`: blend the models along the path to a leaf (Quinlan's k = 15).
    """

    def __init__(self, min_instances: int = 4, pruning: bool = True, smoothing: bool = True):
        self.min_instances = min_instances
        self.pruning = pruning
        self.smoothing = smoothing

    def _fit_encoded(self, Z: np.ndarray, y: np.ndarray) -> None:
        nodes = self._grow(Z, y, max(1, int(round(self.min_instances))))
        self._fit_models(nodes, Z, y)
        self._install(nodes, Z.shape[1])

    def _grow(self, Z: np.ndarray, y: np.ndarray, min_leaf: int) -> list[_Node]:
        """Nodes in creation order: a parent always precedes its children."""
        floor = DEVIATION_FRACTION * y.std()
        nodes = [_Node(rows=np.arange(len(y)))]
        stack = [0]
        while stack:
            index = stack.pop()
            node = nodes[index]
            rows = node.rows
            if len(rows) < 2 * min_leaf or not y[rows].std() > floor:
                continue
            split = best_split(Z[rows], y[rows], min_leaf)
            if split is None:
                continue
            node.feature, node.threshold = split
            goes_left = Z[rows, node.feature] <= node.threshold
            for part, side in ((rows[goes_left], "left"), (rows[~goes_left], "right")):
                nodes.append(_Node(rows=part, parent=index))
                setattr(node, side, len(nodes) - 1)
                stack.append(len(nodes) - 1)
        return nodes

    def _fit_models(self, nodes: list[_Node], Z: np.ndarray, y: np.ndarray) -> None:
        """Bottom-up: a simplified linear model per node, then pruning if asked."""
        subtree_prediction = np.empty(len(y))
        # A model this exact is kept whatever the noise in comparing it (Weka's guard, too).
        exact = 1e-5 * y.std()
        for node in reversed(nodes):
            rows, target = node.rows, y[node.rows]
            if node.feature < 0:
                node.terms, node.coef, node.intercept, _ = simplified_linear_model(
                    Z[rows], target, list(range(Z.shape[1]))
                )
                node.n_params = len(node.terms) + 1
                node.tested = set(node.terms.tolist())
                subtree_prediction[rows] = node.intercept + Z[rows][:, node.terms] @ node.coef
                continue
            left, right = nodes[node.left], nodes[node.right]
            node.tested = {node.feature} | left.tested | right.tested
            node.terms, node.coef, node.intercept, model_error = simplified_linear_model(
                Z[rows], target, sorted(node.tested)
            )
            subtree_params = left.n_params + right.n_params + 1
            subtree_error = estimated_error(
                float(np.mean(np.abs(target - subtree_prediction[rows]))), len(rows), subtree_params
            )
            if self.pruning and (model_error <= subtree_error or model_error <= exact):
                node.feature, node.left, node.right = -1, -1, -1
                node.n_params = len(node.terms) + 1
                subtree_prediction[rows] = node.intercept + Z[rows][:, node.terms] @ node.coef
            else:
                node.n_params = subtree_params

    def _install(self, nodes: list[_Node], width: int) -> None:
        """Compact arrays of the reachable tree; leaves carry their (smoothed) linear model."""
        kept: list[int] = []
        stack = [0]
        while stack:
            index = stack.pop()
            kept.append(index)
            if nodes[index].feature >= 0:
                stack += [nodes[index].right, nodes[index].left]
        position = {index: k for k, index in enumerate(kept)}
        self.feature_ = np.array([nodes[i].feature for i in kept], dtype=int)
        self.threshold_ = np.array([nodes[i].threshold for i in kept])
        self.left_ = np.array([position.get(nodes[i].left, -1) for i in kept], dtype=int)
        self.right_ = np.array([position.get(nodes[i].right, -1) for i in kept], dtype=int)
        self.coef_ = np.zeros((len(kept), width))
        self.intercept_ = np.zeros(len(kept))
        for k, index in enumerate(kept):
            if nodes[index].feature >= 0:
                continue
            coef, intercept = self._full(nodes[index], width)
            current = nodes[index]
            while self.smoothing and current.parent >= 0:
                parent = nodes[current.parent]
                parent_coef, parent_intercept = self._full(parent, width)
                n = len(current.rows)
                coef = (n * coef + SMOOTHING_K * parent_coef) / (n + SMOOTHING_K)
                intercept = (n * intercept + SMOOTHING_K * parent_intercept) / (n + SMOOTHING_K)
                current = parent
            self.coef_[k], self.intercept_[k] = coef, intercept
        self.n_leaves_ = int(np.sum(self.feature_ < 0))

    @staticmethod
    def _full(node: _Node, width: int) -> tuple[np.ndarray, float]:
        coef = np.zeros(width)
        coef[node.terms] = node.coef
        return coef, node.intercept

    def _predict_encoded(self, Z: np.ndarray) -> np.ndarray:
        leaf = np.zeros(len(Z), dtype=int)
        while True:
            rows = np.nonzero(self.feature_[leaf] >= 0)[0]
            if len(rows) == 0:
                break
            at = leaf[rows]
            goes_left = Z[rows, self.feature_[at]] <= self.threshold_[at]
            leaf[rows] = np.where(goes_left, self.left_[at], self.right_[at])
        return np.einsum("ij,ij->i", Z, self.coef_[leaf]) + self.intercept_[leaf]
