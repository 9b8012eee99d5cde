"""From measured access times to a profile: per-interval lines, the estimated curve, the ratios.

Each access pattern in each interval gets its own least-squares line of access time against
request size, fitted to every repetition (not to their means, so that repetitions give the test
degrees of freedom). The line is constrained to a non-negative intercept and slope: a request
cannot take negative time, nor less time for more bytes. R² says how much of the variation the
line explains; the p-value is the t-test of a zero slope of the unconstrained line (NaN when
there is nothing left to test: two observations make any line exact).

A ratio is never a quotient of two extrapolations alone: it is held inside the range the
measured points allow (`time_bounds`) and marked when it was extrapolated or held there. The full
reference profile instead takes each size's mean and stops repeating it once the t confidence
interval is narrow enough (`needs_more`), as the paper's baseline did.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from stortune.profile.design import OPERATIONS, PATTERNS, Interval
from stortune.stats import summarize


class Estimate(StrEnum):
    """How an estimated profile got a size's value."""

    INTERPOLATED = "interpolated"  # between the measured sizes of its lines
    EXTRAPOLATED = "extrapolated"  # beyond them, inside the bounds the measurements allow
    CLAMPED = "clamped"  # the lines' ratio left those bounds and was held at the nearest


@dataclass(frozen=True)
class Fit:
    """access_ms = intercept_ms + slope_ms_per_mib * size / MiB over `interval`, for `pattern`;
    both coefficients >= 0 (`constrained` says whether the bound was active)."""

    pattern: str
    interval: Interval
    sizes: tuple[int, ...]  # the distinct sizes measured
    n: int  # observations (sizes x repetitions)
    intercept_ms: float
    slope_ms_per_mib: float
    r2: float
    p_value: float
    constrained: bool = False

    def line(self, size: int) -> float:
        return self.intercept_ms + self.slope_ms_per_mib * size / 2**20

    def predict(self, size: int) -> tuple[float, bool]:
        """The estimated access time and whether `size` lies outside the measured sizes."""
        return max(self.line(size), 1e-9), not self.sizes[0] <= size <= self.sizes[-1]

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
            "constrained": self.constrained,
        }


def nonnegative_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float, bool]:
    """Least squares y = a + b x with a >= 0 and b >= 0, and whether a bound was active. With
    two coefficients the constrained optimum, when the free one is infeasible, lies on a face:
    a line through the origin or a flat line, whichever fits better."""
    if np.ptp(x) == 0:
        return max(float(y.mean()), 0.0), 0.0, bool(y.mean() < 0)
    slope, intercept = np.polyfit(x, y, 1)
    if intercept >= 0 and slope >= 0:
        return float(intercept), float(slope), False
    through_origin = (0.0, max(float(x @ y / (x @ x)), 0.0))
    flat = (max(float(y.mean()), 0.0), 0.0)
    a, b = min(through_origin, flat, key=lambda ab: float(np.sum((y - ab[0] - ab[1] * x) ** 2)))
    return a, b, True


def fit_line(
    pattern: str, interval: Interval, points: Sequence[tuple[int, float]], test_slope: bool = True
) -> Fit:
    """The constrained least-squares line over (size, access_ms) observations; one distinct
    size gives a flat line. `test_slope=False` skips the p-value (bootstrap refits)."""
    if not points:
        raise ValueError(f"no measurements of {pattern} in {interval.label}")
    x = np.array([p[0] for p in points], dtype=float) / 2**20
    y = np.array([p[1] for p in points], dtype=float)
    sizes = tuple(sorted({p[0] for p in points}))
    intercept, slope, constrained = nonnegative_line(x, y)
    if len(sizes) < 2:
        return Fit(pattern, interval, sizes, len(y), intercept, slope, math.nan, math.nan)
    residual = float(np.sum((y - intercept - slope * x) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - residual / total if total > 0 else 1.0
    p_value = slope_p_value(x, y) if test_slope and len(y) > 2 else math.nan
    return Fit(pattern, interval, sizes, len(y), intercept, slope, r2, p_value, constrained)


def fit_profile(
    intervals: Sequence[Interval],
    picks: Sequence[Sequence[int]],
    observations: Iterable[tuple[int, str, float]],
    test_slope: bool = True,
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
            fits.append(fit_line(pattern, interval, points, test_slope))
    return fits


def estimate_curve(fits: Sequence[Fit]) -> tuple[dict[str, dict[int, float]], set[int]]:
    """Access time of every pattern at every size of the fits' intervals (a size in two
    intervals gets the mean of both lines), and the sizes some line extrapolated to."""
    sums: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    extrapolated: set[int] = set()
    for fit in fits:
        for size in fit.interval.sizes:
            value, outside = fit.predict(size)
            if outside:
                extrapolated.add(size)
            sums[fit.pattern][size].append(value)
    curve = {p: {s: sum(v) / len(v) for s, v in sorted(sizes.items())} for p, sizes in sums.items()}
    return curve, extrapolated


def time_bounds(
    observations: Iterable[tuple[int, str, float]], sizes: Iterable[int]
) -> dict[str, dict[int, tuple[float, float]]]:
    """Per pattern and size, the access times the measured points allow, assuming only what
    holds on any device: a larger request takes no less time, and moves its bytes no slower
    (time over size does not grow with size). A measured size m with times in [lo, hi] then
    bounds a size s by lo <= t(s) when m <= s and lo * s / m <= t(s) when m > s, and by
    t(s) <= hi when m >= s and t(s) <= hi * s / m when m < s. Noisy points can contradict
    these assumptions and make the bounds cross (a larger size measured faster than a smaller
    one); there the bounds widen to the runs of the nearest measured size on each side, so they
    always contain a measured size's own runs."""
    spread: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for size, pattern, access in observations:
        spread[pattern][size].append(access)
    wanted = np.array(sorted(set(sizes)), dtype=float)[:, None]
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for pattern, by_size in spread.items():
        measured = np.array(sorted(by_size), dtype=float)[None, :]
        low = np.array([[min(by_size[int(m)]) for m in measured[0]]])
        high = np.array([[max(by_size[int(m)]) for m in measured[0]]])
        lower = np.where(measured <= wanted, low, low * wanted / measured).max(axis=1)
        upper = np.where(measured >= wanted, high, high * wanted / measured).min(axis=1)
        # where they cross: no tighter than the runs of the nearest measured size on each side
        last = measured.shape[1] - 1
        below = np.clip(np.searchsorted(measured[0], wanted[:, 0], "right") - 1, 0, last)
        above = np.clip(np.searchsorted(measured[0], wanted[:, 0], "left"), 0, last)
        near_low = np.minimum(low[0, below], low[0, above])
        near_high = np.maximum(high[0, below], high[0, above])
        crossed = lower > upper
        lower, upper = (
            np.where(crossed, np.minimum(np.minimum(lower, upper), near_low), lower),
            np.where(crossed, np.maximum(np.maximum(lower, upper), near_high), upper),
        )
        out[pattern] = {
            int(size): (float(lo), float(hi))
            for size, lo, hi in zip(wanted[:, 0], lower, upper, strict=True)
        }
    return out


def bounded_ratios(
    curve: Mapping[str, Mapping[int, float]],
    bounds: Mapping[str, Mapping[int, tuple[float, float]]],
) -> tuple[dict[str, dict[int, float]], dict[str, set[int]]]:
    """`ratios` of the curve, each held inside [random low / sequential high, random high /
    sequential low] of the bounds; and, per operation, the sizes whose ratio was held."""
    raw = ratios(curve)
    held: dict[str, set[int]] = {}
    for operation, (seq, rand) in OPERATIONS.items():
        held[operation] = set()
        for size, value in raw.get(operation, {}).items():
            (seq_lo, seq_hi), (rand_lo, rand_hi) = bounds[seq][size], bounds[rand][size]
            low, high = rand_lo / seq_hi, rand_hi / seq_lo
            if not low <= value <= high:
                raw[operation][size] = float(min(max(value, low), high))
                held[operation].add(size)
    return raw, held


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


def slope_p_value(x: np.ndarray, y: np.ndarray) -> float:
    """The p-value of the least-squares slope (scipy.stats is imported here: it takes a second,
    and the command line imports this module to start)."""
    from scipy import stats

    return float(stats.linregress(x, y).pvalue)
