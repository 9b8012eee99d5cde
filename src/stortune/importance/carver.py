"""Carver's variance-based parameter importance (Cao et al., FAST '20, sections 4.1 and 4.3).

* PI (eq. 2): how much splitting the configurations by one parameter's values reduces the
  (population) variance of the metric: ``Var(S) - sum_i |S_i|/|S| Var(S_i)``, which equals the
  between-group sum of squares divided by ``|S|``.
* CPI (eqs. 3-4): the same reduction inside each subset that fixes the already-selected
  parameters, maximised over all their value combinations (eq. 4 takes the max over the values of
  one parameter; with several selected parameters, over their joint combinations).
* Greedy selection (Algorithm 1): pick the parameter with the largest PI, then repeatedly the one
  with the largest CPI given those selected, until a stop rule fires.

Splitting rows removes variance even by a parameter that does nothing, and the more levels, the
more: on small sets, eq. 2 favours many-level parameters (a null 8-level one takes 7/25 of the
variance of 26 rows on average, a null binary one 1/25). Under a random permutation of the
metric over n rows split into k fixed groups, the between-group sum of squares SSB has the exact
expectation (k - 1) SST / (n - 1) (each group mean is a sample without replacement: E[n_i (m_i -
m)^2] = (1 - n_i/n) SST/(n - 1), summed over the k groups). The ``levels`` correction (the
default, `PiCorrection`) subtracts it::

    PI = (SSB - (k - 1) SST / (n - 1)) / n  =  raw PI - (k - 1)/(n - 1) Var(S)

with k the levels present in the set, and CPI the same inside each cell, with the levels present
in that cell. A null parameter then scores 0 on average whatever its levels (simulated, 100,000
draws: |mean| < 0.001 of the noise variance for k = 2, 5, 8 on 12 and 26 rows), a score <= 0
means "no more than chance", and so the no-reduction stop fires once nothing beats chance. A cell
with one level, or one row per level, tells nothing: CPI's max leaves it out (no such cell at
all: 0). Epsilon-squared subtracts (k - 1) SSW / (n - k) instead, (n - 1)/(n - k) times this
correction: unbiased for a real effect, but it lets a many-level null's noise through more: on
26 rows, a binary parameter shifting the mean by 1.5 noise SD beats a null 8-level one in about
96% of draws here, 94% with epsilon-squared, 71% uncorrected. The price is that a real
many-level effect is shrunk by (n - k)/(n - 1) on small sets. ``none`` gives eqs. 2-4 as
published.

Carver's parameters are categorical. A numeric column with more than ``bins`` distinct values is
cut into ``bins`` quantile bins (right-closed, like ``pandas.qcut``; tied quantiles merge bins),
a numeric column with at most ``bins`` distinct values keeps its values, anything else is a
category. Missing values form their own level ("NA").

The computation works on integer codes with ``numpy.bincount`` over a partition of rows into
cells (one cell per trial and combination of selected values), so the same code ranks one
dataset or a thousand subsets at once (`greedy_batch`, used by the subsample study).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from stortune.datasets import Dataset
from stortune.enums import Direction
from stortune.errors import DatasetError
from stortune.importance.common import jsonable, metric_frame

DEFAULT_BINS = 4
DEFAULT_RSD = 0.02
STOP_RULES = ("rsd", "top-n", "none")
# A reduction below this fraction of the set's variance is rounding noise, not an effect.
REL_TOL = 1e-9
# Scores this close are ties (aliased parameters, e.g. two complementary 0/1 columns, give the
# same split, and so do all parameters on a 2-row subset): the first parameter in column order
# wins, whatever the rounding, unless a random generator breaks ties (the subsample study).
TIE_TOL = 1e-9


class PiCorrection(StrEnum):
    """Whether PI/CPI discount the variance a split removes by chance (module doc)."""

    LEVELS = "levels"  # subtract the chance reduction of the levels present
    NONE = "none"  # eqs. 2-4 as published


@dataclass(frozen=True)
class Encoding:
    """Integer codes for each parameter (column j of `codes` is parameter `params[j]`)."""

    params: list[str]
    codes: np.ndarray
    labels: list[list[str]]
    edges: dict[str, list[float]] = field(default_factory=dict)

    @property
    def levels(self) -> np.ndarray:
        return np.array([len(lab) for lab in self.labels], dtype=np.int64)


def encode(frame: pd.DataFrame, params: Sequence[str], bins: int = DEFAULT_BINS) -> Encoding:
    """Code every parameter as small integers following the module's binning rule."""
    if bins < 2:
        raise DatasetError(f"bins must be at least 2 (got {bins})")
    codes = np.empty((len(frame), len(params)), dtype=np.int64)
    labels: list[list[str]] = []
    edges: dict[str, list[float]] = {}
    for j, name in enumerate(params):
        codes[:, j], lab, cut = _encode_column(frame[name], bins)
        labels.append(lab)
        if cut is not None:
            edges[name] = cut
    return Encoding(list(params), codes, labels, edges)


def _encode_column(col: pd.Series, bins: int) -> tuple[np.ndarray, list[str], list[float] | None]:
    missing = col.isna().to_numpy()
    numeric = pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)
    cut = None
    if numeric:
        x = col.to_numpy(dtype=float)
        distinct = np.unique(x[~missing])
        if len(distinct) <= bins:
            code = np.searchsorted(distinct, x)
            labels = [f"{v:g}" for v in distinct]
        else:
            edges = np.unique(np.quantile(x[~missing], np.linspace(0, 1, bins + 1)))
            code = np.searchsorted(edges[1:-1], x, side="left")
            labels = [
                f"{'[' if i == 0 else '('}{lo:g}, {hi:g}]"
                for i, (lo, hi) in enumerate(itertools.pairwise(edges))
            ]
            cut = [float(e) for e in edges]
    else:
        text = col.astype(str).to_numpy()
        labels = sorted(set(text[~missing]))
        code = pd.Index(labels, dtype=object).get_indexer(text)
    code = np.where(missing, len(labels), code).astype(np.int64)
    if missing.any():
        labels = [*labels, "NA"]
    return code, labels, cut


class Partition:
    """Rows of the metric `y` split into cells; cell ids are compact and grouped by trial
    (trial-major order)."""

    def __init__(self, cell: np.ndarray, cell_trial: np.ndarray, y: np.ndarray) -> None:
        self.cell = cell
        self.cell_trial = cell_trial
        self.y = y
        n_trials = int(cell_trial[-1]) + 1
        self.trial_start = np.searchsorted(cell_trial, np.arange(n_trials))

    @classmethod
    def whole(cls, y: np.ndarray) -> Partition:
        """One cell per trial (a row of `y`): nothing fixed yet."""
        n_trials, rows_per_trial = y.shape
        trials = np.arange(n_trials)
        return cls(np.repeat(trials, rows_per_trial), trials, _centered(y).ravel())

    @property
    def n_cells(self) -> int:
        return len(self.cell_trial)

    @cached_property
    def size(self) -> np.ndarray:
        return np.bincount(self.cell, minlength=self.n_cells)

    @cached_property
    def mean(self) -> np.ndarray:
        return np.bincount(self.cell, weights=self.y, minlength=self.n_cells) / self.size

    @cached_property
    def sum_squares(self) -> np.ndarray:
        """Each cell's sum of squared deviations from its mean (|S| Var(S))."""
        deviation = self.y - self.mean[self.cell]
        return np.bincount(self.cell, weights=deviation**2, minlength=self.n_cells)

    def cell_cpi(
        self, code: np.ndarray, n_levels: int, correction: PiCorrection = PiCorrection.LEVELS
    ) -> np.ndarray:
        """Eq. 3 for every cell: variance reduction from splitting the cell by `code`.

        With the levels correction, the chance share is subtracted (module doc) and a cell
        with one level, or with one row per level, is -inf: it tells nothing.
        """
        key = self.cell * n_levels + code
        size = self.n_cells * n_levels
        count = np.bincount(key, minlength=size).reshape(self.n_cells, n_levels)
        total = np.bincount(key, weights=self.y, minlength=size).reshape(self.n_cells, n_levels)
        # Deviations of level means from the cell mean, not sums of squares: no cancellation.
        shift = total / np.maximum(count, 1) - self.mean[:, None]
        between = (count * shift**2).sum(axis=1)
        if correction == PiCorrection.NONE:
            return between / self.size
        k = (count > 0).sum(axis=1)
        chance = (k - 1) * self.sum_squares / np.maximum(self.size - 1, 1)
        informative = (k >= 2) & (self.size > k)
        return np.where(informative, (between - chance) / self.size, -np.inf)

    def per_trial_max(self, per_cell: np.ndarray) -> np.ndarray:
        """Eq. 4: the best cell of each trial (0 when no cell tells anything)."""
        best = np.maximum.reduceat(per_cell, self.trial_start)
        return np.where(np.isneginf(best), 0.0, best)

    def split(self, code: np.ndarray, n_levels: int) -> Partition:
        """Fix one more parameter: every cell splits by its value (empty cells dropped)."""
        key = self.cell * n_levels + code
        present = np.zeros(self.n_cells * n_levels, dtype=bool)
        present[key] = True
        new_id = np.cumsum(present) - 1
        kept = np.flatnonzero(present)
        return Partition(new_id[key], self.cell_trial[kept // n_levels], self.y)


def _centered(y: np.ndarray) -> np.ndarray:
    """Subtract each trial's mean so the sums of squares do not lose precision."""
    return y - y.mean(axis=-1, keepdims=True)


def greedy_batch(
    codes: np.ndarray,
    levels: np.ndarray,
    y: np.ndarray,
    index: np.ndarray,
    depth: int,
    rng: np.random.Generator | None = None,
    correction: PiCorrection = PiCorrection.LEVELS,
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1 (top-`depth`, no RSD stop) on many subsets at once.

    `index` is a (trials, rows) array of row numbers into `codes`/`y`. Returns the selected
    parameter numbers (trials, depth), -1 once nothing reduces the variance, and the score of
    every parameter at every step (trials, depth, params), -inf for ones already selected.
    With `rng`, ties go to a random one of the tied parameters rather than the first, so that
    column order does not count as evidence in a study of tiny subsets.
    """
    n_trials = index.shape[0]
    n_params = codes.shape[1]
    rows_y = y[index]
    tol = REL_TOL * rows_y.var(axis=1)
    part = Partition.whole(rows_y)
    selected = np.full((n_trials, depth), -1, dtype=np.int64)
    scores = np.full((n_trials, depth, n_params), -np.inf)
    active = np.ones(n_trials, dtype=bool)
    taken = np.zeros((n_trials, n_params), dtype=bool)
    for step in range(depth):
        for j in range(n_params):
            cpi = part.cell_cpi(codes[index, j].ravel(), int(levels[j]), correction)
            scores[:, step, j] = part.per_trial_max(cpi)
        scores[:, step][taken] = -np.inf
        best = _pick_best(scores[:, step], rng)
        active &= scores[np.arange(n_trials), step, best] > tol
        if not active.any():
            break
        selected[active, step] = best[active]
        taken[active, best[active]] = True
        fixed = np.where(active[:, None], codes[index, best[:, None]], 0)
        part = part.split(fixed.ravel(), int(levels.max()))
    return selected, scores


def _pick_best(scores: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
    """Per row, the first column within `TIE_TOL` of the row's maximum (random one with `rng`)."""
    top = scores.max(axis=1, keepdims=True)
    tied = scores >= top - TIE_TOL * np.abs(top)
    if rng is None:
        return tied.argmax(axis=1)
    return np.where(tied, rng.random(scores.shape), -1.0).argmax(axis=1)


def parse_correction(value: PiCorrection | str) -> PiCorrection:
    """A `PiCorrection` from its name, or a user error naming the choices."""
    try:
        return PiCorrection(value)
    except ValueError:
        names = ", ".join(c.value for c in PiCorrection)
        raise DatasetError(f"unknown PI correction {value!r} (use one of: {names})") from None


def parameter_importance(
    values: Sequence[Any], y: Sequence[float], correction: PiCorrection = PiCorrection.LEVELS
) -> float:
    """PI (eq. 2) of one categorical parameter given its value on each row and the metric."""
    return conditional_importance(values, y, given=[], correction=correction)


def conditional_importance(
    values: Sequence[Any],
    y: Sequence[float],
    given: Sequence[Sequence[Any]],
    correction: PiCorrection = PiCorrection.LEVELS,
) -> float:
    """CPI (eqs. 3-4): max over the value combinations of the `given` parameters."""
    part = Partition.whole(np.asarray(y, dtype=float)[None, :])
    for col in given:
        code, uniques = pd.factorize(pd.Series(list(col)), use_na_sentinel=False)
        part = part.split(code, len(uniques))
    code, uniques = pd.factorize(pd.Series(list(values)), use_na_sentinel=False)
    per_cell = part.cell_cpi(code, len(uniques), parse_correction(correction))
    return float(part.per_trial_max(per_cell)[0])


def rsd(y: np.ndarray) -> float:
    """Eq. 5: sample standard deviation over |mean| (NaN with fewer than 2 rows or mean 0)."""
    if len(y) < 2 or np.mean(y) == 0:
        return float("nan")
    return float(np.std(y, ddof=1) / abs(np.mean(y)))


@dataclass
class CarverStep:
    """One greedy step: the chosen parameter, its PI/CPI and every candidate's."""

    param: str
    score: float
    scores: dict[str, float]
    at: dict[str, str]
    best_values: dict[str, str]
    best_mean: float
    best_rsd: float
    best_size: int

    @property
    def kind(self) -> str:
        return "CPI" if self.at else "PI"


@dataclass
class CarverResult:
    """Greedy selection of one metric; `direction` tells a report whether lower is better."""

    metric: str
    direction: str
    params: list[str]
    steps: list[CarverStep]
    stop: str
    stop_rule: str
    variance: float
    rsd: float
    n_rows: int
    bins: int
    edges: dict[str, list[float]]
    correction: PiCorrection = PiCorrection.LEVELS
    source: str = ""

    @property
    def selected(self) -> list[str]:
        return [s.param for s in self.steps]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["method"] = "carver"
        data["selected"] = self.selected
        return jsonable(data)


def rank_carver(
    dataset: Dataset,
    metric: str | None = None,
    stop: str = "rsd",
    top: int | None = None,
    rsd_threshold: float = DEFAULT_RSD,
    bins: int = DEFAULT_BINS,
    correction: PiCorrection | str = PiCorrection.LEVELS,
) -> CarverResult:
    """Greedy selection (Algorithm 1) with a stop rule.

    Stop rules: ``rsd`` (eq. 5: stop once the best-performing cell of the selected parameters,
    in the metric's direction, has an RSD below `rsd_threshold`; checked before the first pick
    too, so a flat metric selects nothing, the '-' cells of Carver's Table 2), ``top-n`` (stop
    after `top`, default 3) and ``none``. Whatever the rule, selection also stops when no
    remaining parameter reduces the variance of any cell ("no-reduction") or none remain
    ("exhausted"); `top` caps every rule. Repetitions of a configuration are averaged first.
    With the levels `correction`, "reduces" means more than chance would (module doc).
    """
    if stop not in STOP_RULES:
        raise DatasetError(f"unknown stop rule {stop!r} (use one of: {', '.join(STOP_RULES)})")
    correction = parse_correction(correction)
    name, frame = metric_frame(dataset, metric)
    direction = dataset.direction(name)
    if stop == "top-n" and top is None:
        top = 3
    limit = len(dataset.params) if top is None else min(top, len(dataset.params))
    enc = encode(frame, dataset.params, bins)
    y = frame[name].to_numpy(dtype=float)
    steps, reason = _greedy_steps(enc, y, direction, stop, limit, rsd_threshold, correction)
    return CarverResult(
        metric=name,
        direction=direction,
        params=list(dataset.params),
        steps=steps,
        stop=reason,
        stop_rule=stop,
        variance=float(np.var(y)),
        rsd=rsd(y),
        n_rows=len(y),
        bins=bins,
        edges=enc.edges,
        correction=correction,
        source=dataset.source,
    )


def _greedy_steps(
    enc: Encoding,
    y: np.ndarray,
    direction: str,
    stop: str,
    limit: int,
    threshold: float,
    correction: PiCorrection,
) -> tuple[list[CarverStep], str]:
    levels = enc.levels
    tol = REL_TOL * float(np.var(y))
    part = Partition.whole(y[None, :])
    chosen: list[int] = []
    steps: list[CarverStep] = []
    if stop == "rsd" and rsd(y) < threshold:
        return steps, "rsd"
    while len(chosen) < len(enc.params):
        if len(chosen) >= limit:
            return steps, "top-n"
        per_cell = {
            j: part.cell_cpi(enc.codes[:, j], int(levels[j]), correction)
            for j in range(len(enc.params))
            if j not in chosen
        }
        scores = {j: float(part.per_trial_max(c)[0]) for j, c in per_cell.items()}
        candidates = list(scores)
        best = candidates[int(_pick_best(np.array([[scores[j] for j in candidates]]))[0])]
        if scores[best] <= tol:
            return steps, "no-reduction"
        at = _cell_values(enc, part, chosen, int(per_cell[best].argmax()))
        chosen.append(best)
        part = part.split(enc.codes[:, best], int(levels[best]))
        steps.append(_step(enc, part, chosen, best, scores, at, y, direction))
        if stop == "rsd" and steps[-1].best_rsd < threshold:
            return steps, "rsd"
    return steps, "exhausted"


def _cell_values(enc: Encoding, part: Partition, chosen: list[int], cell: int) -> dict[str, str]:
    """The values of the selected parameters that define one cell."""
    row = int(np.flatnonzero(part.cell == cell)[0])
    return {enc.params[j]: enc.labels[j][enc.codes[row, j]] for j in chosen}


def _step(
    enc: Encoding,
    part: Partition,
    chosen: list[int],
    best: int,
    scores: dict[int, float],
    at: dict[str, str],
    y: np.ndarray,
    direction: str,
) -> CarverStep:
    """Record a pick and the best-performing cell it leaves (for the RSD stop and reports)."""
    count = np.bincount(part.cell, minlength=part.n_cells)
    mean = np.bincount(part.cell, weights=y, minlength=part.n_cells) / count
    usable = np.flatnonzero(count >= 2)
    if len(usable):
        order = mean[usable] if direction == Direction.MIN else -mean[usable]
        cell = int(usable[np.argmin(order)])
    else:
        cell = int(np.argmax(mean) if direction != Direction.MIN else np.argmin(mean))
    return CarverStep(
        param=enc.params[best],
        score=scores[best],
        scores={enc.params[j]: s for j, s in scores.items()},
        at=at,
        best_values=_cell_values(enc, part, chosen, cell),
        best_mean=float(mean[cell]),
        best_rsd=rsd(y[part.cell == cell]),
        best_size=int(count[cell]),
    )


def fixed_sets(
    dataset: Dataset,
    params: Sequence[str] | None = None,
    max_fixed: int = 2,
    metric: str | None = None,
    bins: int = DEFAULT_BINS,
) -> pd.DataFrame:
    """Mean and RSD of every set made by fixing 1..`max_fixed` parameters (Carver Fig. 3)."""
    name, frame = metric_frame(dataset, metric)
    names = list(params) if params is not None else list(dataset.params)
    enc = encode(frame, names, bins)
    y = frame[name].to_numpy(dtype=float)
    rows = []
    for n_fixed in range(1, max_fixed + 1):
        for combo in itertools.combinations(range(len(names)), n_fixed):
            groups = pd.Series(y).groupby([enc.codes[:, j] for j in combo])
            for key, vals in groups:
                key = key if isinstance(key, tuple) else (key,)
                rows.append(
                    {
                        "n_fixed": n_fixed,
                        "params": [names[j] for j in combo],
                        "values": [enc.labels[j][k] for j, k in zip(combo, key, strict=True)],
                        "size": len(vals),
                        "mean": float(vals.mean()),
                        "rsd": rsd(vals.to_numpy()),
                    }
                )
    return pd.DataFrame(rows)
