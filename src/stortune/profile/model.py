"""From measured access times to a profile: per-interval lines, the estimated curve, the ratios.

Each access pattern in each interval gets its own least-squares line of access time against
request size, fitted to every repetition (not to their means, so that repetitions give the test
degrees of freedom). R² says how much of the variation the line explains; the p-value is the
t-test of a zero slope (NaN when there is nothing left to test: two observations make any line
exact). The full reference profile instead takes each size's mean and stops repeating it once
the t confidence interval is narrow enough (`needs_more`), as the paper's baseline did.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from stortune.profile.design import OPERATIONS, PATTERNS, Interval
from stortune.stats import summarize


@dataclass(frozen=True)
class Fit:
    """access_ms = intercept_ms + slope_ms_per_mib * size / MiB over `interval`, for `pattern`."""

    pattern: str
    interval: Interval
    sizes: tuple[int, ...]  # the distinct sizes measured
    n: int  # observations (sizes x repetitions)
    intercept_ms: float
    slope_ms_per_mib: float
    r2: float
    p_value: float

    def line(self, size: int) -> float:
        return self.intercept_ms + self.slope_ms_per_mib * size / 2**20

    def predict(self, size: int) -> tuple[float, bool]:
        """The estimated access time and whether it was clamped: a line that reaches zero or
        below is held at its value at the nearest measured size (time cannot be negative)."""
        value = self.line(size)
        if value > 0:
            return value, False
        nearest = min(max(size, self.sizes[0]), self.sizes[-1])
        return max(self.line(nearest), 1e-6), True

    def to_dict(self) -> dict[str, object]:
        return {
            "pattern": self.pattern,
            "interval": self.interval.to_list(),
            "sizes": list(self.sizes),
            "n": self.n,
            "intercept_ms": self.intercept_ms,
            "slope_ms_per_mib": self.slope_ms_per_mib,
            "r2": finite(self.r2),
            "p_value": finite(self.p_value),
        }


def fit_line(pattern: str, interval: Interval, points: Sequence[tuple[int, float]]) -> Fit:
    """Least squares over (size, access_ms) observations; one distinct size gives a flat line."""
    if not points:
        raise ValueError(f"no measurements of {pattern} in {interval.label}")
    x = np.array([p[0] for p in points], dtype=float) / 2**20
    y = np.array([p[1] for p in points], dtype=float)
    sizes = tuple(sorted({p[0] for p in points}))
    if len(sizes) < 2:
        return Fit(pattern, interval, sizes, len(y), float(y.mean()), 0.0, math.nan, math.nan)
    result = scipy_stats.linregress(x, y)
    residual_df = len(y) - 2
    r2 = float(result.rvalue**2) if np.ptp(y) > 0 else 1.0
    p_value = float(result.pvalue) if residual_df > 0 else math.nan
    return Fit(
        pattern,
        interval,
        sizes,
        len(y),
        float(result.intercept),
        float(result.slope),
        r2,
        p_value,
    )


def fit_profile(
    intervals: Sequence[Interval],
    picks: Sequence[Sequence[int]],
    observations: Iterable[tuple[int, str, float]],
) -> list[Fit]:
    """One line per (interval, pattern), from the observations (size, pattern, access_ms) at
    that interval's picked sizes."""
    by_key: dict[tuple[int, str], list[float]] = defaultdict(list)
    for size, pattern, access in observations:
        by_key[(size, pattern)].append(access)
    fits = []
    for interval, sizes in zip(intervals, picks, strict=True):
        for pattern in PATTERNS:
            points = [(s, a) for s in sizes for a in by_key.get((s, pattern), [])]
            fits.append(fit_line(pattern, interval, points))
    return fits


def estimate_curve(fits: Sequence[Fit]) -> tuple[dict[str, dict[int, float]], int]:
    """Access time of every pattern at every size of the fits' intervals (a size in two
    intervals gets the mean of both lines), and how many values were clamped."""
    sums: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    clamped = 0
    for fit in fits:
        for size in fit.interval.sizes:
            value, was_clamped = fit.predict(size)
            clamped += was_clamped
            sums[fit.pattern][size].append(value)
    curve = {
        p: {s: float(np.mean(v)) for s, v in sorted(sizes.items())} for p, sizes in sums.items()
    }
    return curve, clamped


def measured_curve(
    observations: Iterable[tuple[int, str, float]], confidence: float = 0.9
) -> dict[str, dict[int, dict[str, float]]]:
    """Per pattern and size: n, mean, RSD and the confidence interval's relative half-width."""
    values: dict[tuple[str, int], list[float]] = defaultdict(list)
    for size, pattern, access in observations:
        values[(pattern, size)].append(access)
    out: dict[str, dict[int, dict[str, float]]] = defaultdict(dict)
    for (pattern, size), runs in sorted(values.items()):
        summary = summarize(runs, confidence)
        out[pattern][size] = {
            "n": summary.n,
            "mean_ms": summary.mean,
            "rsd": summary.rsd,
            "ci_rel": summary.ci_half_width_rel,
        }
    return dict(out)


def needs_more(
    runs: Sequence[float], min_runs: int, max_runs: int, confidence: float, max_error: float
) -> bool:
    """The baseline's stopping rule: repeat until at least `min_runs` and the `confidence` t
    interval's half-width is within `max_error` of the mean, or `max_runs` were made."""
    if len(runs) >= max_runs:
        return False
    if len(runs) < min_runs:
        return True
    return summarize(runs, confidence).ci_half_width_rel > max_error


def ratios(curve: Mapping[str, Mapping[int, float]]) -> dict[str, dict[int, float]]:
    """Sequential-to-random throughput ratio per operation and size: the random access time
    over the sequential one (same bytes per request, so throughputs are inverse to times)."""
    out: dict[str, dict[int, float]] = {}
    for operation, (seq, rand) in OPERATIONS.items():
        if seq in curve and rand in curve:
            common = sorted(set(curve[seq]) & set(curve[rand]))
            out[operation] = {s: curve[rand][s] / curve[seq][s] for s in common}
    return out


def summarize_ratios(by_size: Mapping[int, float]) -> dict[str, float]:
    """Average, minimum and maximum of an operation's ratios, with the sizes of the extremes."""
    if not by_size:
        return {}
    sizes = sorted(by_size)
    low = min(sizes, key=lambda s: by_size[s])
    high = max(sizes, key=lambda s: by_size[s])
    return {
        "mean": float(np.mean([by_size[s] for s in sizes])),
        "min": by_size[low],
        "min_size": low,
        "max": by_size[high],
        "max_size": high,
    }


def finite(value: float) -> float | None:
    """JSON has no NaN or infinity: None instead."""
    return value if math.isfinite(value) else None
