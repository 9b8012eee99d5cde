"""Carver's subsample study (section 5.4, Figure 5): how small a sample finds the same ranking?

The ranking of the full dataset is the ground truth. For each fraction, `trials` random subsets
of that share of the configurations (at least 2 rows) are ranked, and the study reports how
often the subset's k-th pick is the truth's k-th parameter, for k = 1..`depth`. Selection runs to
`depth` picks with no RSD stop, so that every rank has an answer to compare.

Carver's subsets were constrained to be LHS-compatible; these are plain random subsets without
replacement (the stored data need not be a full grid). Continuous parameters are binned once on
the full dataset (Carver's bins and Lasso's log/standardise decisions then do not move with the
subset), and the Carver rankings of all trials of a fraction run at once in numpy
(`carver.greedy_batch`). Lasso, fANOVA and custom rankers run one subset at a time; fANOVA
(a random forest per subset, 0.1-2 s each on a few hundred rows) ranks at most `FANOVA_TRIALS`
subsets per fraction. On tiny subsets
many parameters tie (on 2 rows every parameter that differs splits them the same way); ties
are broken at random, so the first column is not favoured. Carver's PI/CPI are corrected for
the variance any split removes by chance unless ``correction="none"`` (`carver.PiCorrection`):
a subset too small for any parameter to beat chance then gets no pick at that rank.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stortune.datasets import Dataset
from stortune.errors import DatasetError
from stortune.importance.carver import (
    DEFAULT_BINS,
    PiCorrection,
    encode,
    greedy_batch,
    parse_correction,
)
from stortune.importance.common import jsonable, metric_frame
from stortune.importance.lasso import entry_order, prepare, standardise

Ranker = Callable[[Dataset], Sequence[str]]
METHODS = ("carver", "lasso", "fanova")
FANOVA_TRIALS = 20
# Rows (trials x subset size) ranked per numpy batch: bounds memory at a few hundred MB.
BATCH_ROWS = 2_000_000


def study_dataset(dataset: Dataset, metric: str | None = None) -> Dataset:
    """The rows a study samples from: configurations with the metric, repetitions averaged."""
    name, frame = metric_frame(dataset, metric)
    return Dataset(frame, list(dataset.params), [name], dict(dataset.directions), dataset.source)


def subset_size(n_rows: int, fraction: float) -> int:
    """Rows in a subset of `fraction` of the data: rounded, at least 2, at most all."""
    if not 0 < fraction <= 1:
        raise DatasetError(f"fraction {fraction} is not in (0, 1]")
    return int(min(n_rows, max(2, round(fraction * n_rows))))


def draw_subsets(n_rows: int, size: int, trials: int, seed: int = 0) -> np.ndarray:
    """`trials` random subsets of `size` distinct row numbers, one per row of the result.

    Seeded by (seed, size), and drawn trial after trial: a run with fewer trials gets the first
    subsets of a run with more, so methods given different trial counts share subsets.
    """
    if size >= n_rows:
        return np.tile(np.arange(n_rows), (trials, 1))
    rng = np.random.default_rng((seed, size))
    step = max(1, BATCH_ROWS // n_rows)
    return np.concatenate(
        [
            np.argpartition(rng.random((min(step, trials - i), n_rows)), size, axis=1)[:, :size]
            for i in range(0, trials, step)
        ]
    )


def rank_subsets(
    data: Dataset,
    subsets: np.ndarray,
    method: str | Ranker = "carver",
    depth: int = 3,
    bins: int = DEFAULT_BINS,
    seed: int | None = 0,
    correction: PiCorrection | str = PiCorrection.LEVELS,
) -> np.ndarray:
    """Top-`depth` parameter numbers for each subset (trials, depth); -1 where none is found.

    `data` comes from `study_dataset`; `subsets` holds row numbers into it. Ties between
    parameters (common on tiny subsets) are broken at random from `seed`, or by column order
    with ``seed=None`` (custom rankers break their own ties).
    """
    rng = None if seed is None else np.random.default_rng((seed, subsets.shape[1], 1))
    if callable(method):
        return _rank_each(data, subsets, method, depth)
    if method == "carver":
        return _rank_carver(data, subsets, depth, bins, rng, parse_correction(correction))
    if method == "lasso":
        return _rank_lasso(data, subsets, depth, rng)
    if method == "fanova":
        from stortune.importance.fanova import subset_ranker  # Optuna only when asked for

        return _rank_each(data, subsets, subset_ranker(data), depth)
    raise DatasetError(f"unknown ranking method {method!r} (use one of: {', '.join(METHODS)})")


def _rank_carver(
    data: Dataset,
    subsets: np.ndarray,
    depth: int,
    bins: int,
    rng: np.random.Generator | None,
    correction: PiCorrection,
) -> np.ndarray:
    enc = encode(data.frame, data.params, bins)
    y = data.y().to_numpy(dtype=float)
    chunk = max(1, BATCH_ROWS // max(1, subsets.shape[1]))
    parts = [
        greedy_batch(enc.codes, enc.levels, y, subsets[i : i + chunk], depth, rng, correction)[0]
        for i in range(0, len(subsets), chunk)
    ]
    return np.concatenate(parts)


def _rank_lasso(
    data: Dataset, subsets: np.ndarray, depth: int, rng: np.random.Generator | None
) -> np.ndarray:
    _, design = prepare(data)
    out = np.full((len(subsets), depth), -1, dtype=np.int64)
    for t, rows in enumerate(subsets):
        try:
            x, y, keep = standardise(design.matrix[rows], design.y[rows])
        except DatasetError:
            continue
        if len(keep):
            order = entry_order(x, y, design.owner[keep], len(data.params), rng=rng)[0]
            out[t, : min(depth, len(order))] = order[:depth]
    return out


def _rank_each(data: Dataset, subsets: np.ndarray, ranker: Ranker, depth: int) -> np.ndarray:
    position = {p: i for i, p in enumerate(data.params)}
    out = np.full((len(subsets), depth), -1, dtype=np.int64)
    for t, rows in enumerate(subsets):
        sub = Dataset(
            data.frame.iloc[rows].reset_index(drop=True),
            data.params,
            data.metrics,
            data.directions,
            data.source,
        )
        names = list(ranker(sub))[:depth]
        out[t, : len(names)] = [position[n] for n in names]
    return out


@dataclass
class StudyResult:
    """Per fraction, the top-`depth` picks of every trial, and the full-data truth.

    `correction` is Carver's PI correction (None for the other methods).
    """

    source: str
    metric: str
    method: str
    params: list[str]
    truth: list[str]
    fractions: list[float]
    sizes: list[int]
    rankings: list[np.ndarray]
    seconds: list[float]
    correction: str | None = None

    @property
    def depth(self) -> int:
        return self.rankings[0].shape[1] if self.rankings else 0

    def success(self, truth: Sequence[str] | None = None) -> np.ndarray:
        """(fractions, depth): share of trials whose k-th pick is `truth`'s k-th (NaN: no k-th)."""
        reference = list(self.truth if truth is None else truth)
        rates = np.full((len(self.fractions), self.depth), np.nan)
        for k, name in enumerate(reference[: self.depth]):
            target = self.params.index(name)
            rates[:, k] = [float(np.mean(r[:, k] == target)) for r in self.rankings]
        return rates

    def to_dict(self) -> dict[str, Any]:
        return jsonable(
            {
                "source": self.source,
                "metric": self.metric,
                "method": self.method,
                "correction": self.correction,
                "truth": self.truth,
                "rows": [
                    {
                        "fraction": f,
                        "size": n,
                        "trials": len(r),
                        "success": rates,
                        "seconds_per_ranking": s / max(1, len(r)),
                    }
                    for f, n, r, s, rates in zip(
                        self.fractions,
                        self.sizes,
                        self.rankings,
                        self.seconds,
                        self.success().tolist(),
                        strict=True,
                    )
                ],
            }
        )


def full_ranking(
    data: Dataset,
    method: str | Ranker = "carver",
    depth: int = 3,
    bins: int = DEFAULT_BINS,
    correction: PiCorrection | str = PiCorrection.LEVELS,
) -> list[str]:
    """The ground truth: the method's top-`depth` on all rows of `data`."""
    everything = np.arange(len(data.frame))[None, :]
    picks = rank_subsets(data, everything, method, depth, bins, None, correction)[0]
    return [data.params[k] for k in picks if k >= 0]


def subsample_study(
    dataset: Dataset,
    fractions: Sequence[float],
    trials: int = 1000,
    method: str | Ranker = "carver",
    metric: str | None = None,
    depth: int = 3,
    bins: int = DEFAULT_BINS,
    seed: int = 0,
    correction: PiCorrection | str = PiCorrection.LEVELS,
) -> StudyResult:
    """Run the study (module doc). The same seed draws the same subsets for every method."""
    if trials < 1:
        raise DatasetError(f"trials must be at least 1 (got {trials})")
    correction = parse_correction(correction)
    if method == "fanova":
        trials = min(trials, FANOVA_TRIALS)
    data = study_dataset(dataset, metric)
    n = len(data.frame)
    sizes = [subset_size(n, f) for f in fractions]
    rankings, seconds = [], []
    for size in sizes:
        subsets = draw_subsets(n, size, trials, seed)
        start = time.perf_counter()
        rankings.append(rank_subsets(data, subsets, method, depth, bins, seed, correction))
        seconds.append(time.perf_counter() - start)
    return StudyResult(
        source=data.source,
        metric=data.metrics[0],
        method=method if isinstance(method, str) else getattr(method, "__name__", "custom"),
        params=list(data.params),
        truth=full_ranking(data, method, depth, bins, correction),
        fractions=[float(f) for f in fractions],
        sizes=sizes,
        rankings=rankings,
        seconds=seconds,
        correction=correction.value if method == "carver" else None,
    )
