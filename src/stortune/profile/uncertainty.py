"""How sure a profile's ratios are: bootstrap intervals over the repetitions, and a verdict.

A ratio's interval comes from a parametric bootstrap: every (size, pattern) is measured again,
in simulation, as often as it was, with its pattern's run-to-run noise (the spread of the log
access times within each size, pooled over the pattern's sizes and widened by Student's t for
its degrees of freedom), and the profile is recomputed the same way as the point estimate: for
an estimated profile the lines are refitted (so the interval carries the fit's uncertainty
too), for a full one the means are retaken. Pooling is what makes two repetitions enough:
resampling two runs of one size on their own gives three possible means and far too narrow an
interval. One run per size gives no spread to pool: no interval, and the verdict says so.

What the interval does not carry is a line's misfit: two sizes per interval make any line pass
through their means, so a curve that is not straight inside an interval shows up as error
against the full profile that no interval announces (`bench/device_profile.py` measures how
often the full profile's ratio lies inside the estimate's interval).

The verdict of an operation reads the interval of its mean ratio over all sizes: a sequential
advantage is only claimed when the whole interval lies above 1 + `NEGLIGIBLE`; an interval that
reaches into [1 - NEGLIGIBLE, 1 + NEGLIGIBLE] means no advantage is measurable at these sizes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

Observations = list[tuple[int, str, float]]
RatioEstimator = Callable[[Observations], Mapping[str, Mapping[int, float]]]

DRAWS = 300
NEGLIGIBLE = 0.05  # a 5% difference is within the run-to-run drift of the devices measured here


class Advantage(StrEnum):
    """What the measurements say about sequential against random access."""

    SEQUENTIAL = "sequential"  # sequential throughput is higher, the interval says so
    NONE = "none"  # no difference measurable at these sizes
    RANDOM = "random"  # random is faster (rare: a device that reorders or caches)
    UNKNOWN = "unknown"  # no interval: one run per size


@dataclass(frozen=True)
class RatioIntervals:
    """Per operation: each size's interval, and the interval of the mean ratio over sizes."""

    confidence: float
    by_size: dict[str, dict[int, tuple[float, float]]]
    mean: dict[str, tuple[float, float]]


def pooled_log_sd(groups: Mapping[tuple[int, str], np.ndarray]) -> tuple[float, int]:
    """The within-group standard deviation of log access times, pooled over the groups, and
    its degrees of freedom."""
    squares = sum(float(np.sum((np.log(v) - np.log(v).mean()) ** 2)) for v in groups.values())
    df = sum(len(v) - 1 for v in groups.values())
    return (float(np.sqrt(squares / df)) if df else 0.0), df


def _spread_per_pattern(
    groups: Mapping[tuple[int, str], np.ndarray], confidence: float
) -> dict[str, float]:
    """Each pattern's pooled log spread, widened by Student's t for its degrees of freedom
    (random access is often noisier than sequential); the profile's when a pattern has none."""
    from scipy import stats as scipy_stats  # on use: the command line imports this module

    z = scipy_stats.norm.ppf(0.5 + confidence / 2)
    overall, overall_df = pooled_log_sd(groups)
    out = {}
    for pattern in {key[1] for key in groups}:
        mine = {k: v for k, v in groups.items() if k[1] == pattern}
        sd, df = pooled_log_sd(mine)
        if df == 0:
            sd, df = overall, overall_df
        out[pattern] = sd * scipy_stats.t.ppf(0.5 + confidence / 2, df) / z
    return out


def bootstrap(
    observations: Iterable[tuple[int, str, float]],
    estimator: RatioEstimator,
    confidence: float = 0.9,
    draws: int = DRAWS,
    seed: int = 0,
) -> RatioIntervals | None:
    """Percentile intervals of `estimator`'s ratios over simulated re-measurements (see the
    module doc); None when no (size, pattern) was measured twice."""
    collected: dict[tuple[int, str], list[float]] = defaultdict(list)
    for size, pattern, access in observations:
        collected[(size, pattern)].append(max(access, 1e-9))
    groups = {key: np.array(values) for key, values in collected.items()}
    if pooled_log_sd(groups)[1] == 0:
        return None
    keys = list(groups)
    spread = _spread_per_pattern(groups, confidence)
    centres = np.repeat([np.log(groups[k]).mean() for k in keys], [len(groups[k]) for k in keys])
    scales = np.repeat([spread[k[1]] for k in keys], [len(groups[k]) for k in keys])
    labels = [k for k in keys for _ in range(len(groups[k]))]
    rng = np.random.default_rng(seed)
    samples: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    means: dict[str, list[float]] = defaultdict(list)
    for _ in range(draws):
        values = np.exp(centres + scales * rng.standard_normal(len(centres)))
        simulated = [
            (size, pattern, v) for (size, pattern), v in zip(labels, values.tolist(), strict=True)
        ]
        for operation, by_size in estimator(simulated).items():
            for size, value in by_size.items():
                samples[operation][size].append(value)
            means[operation].append(sum(by_size.values()) / len(by_size))
    tail = 50 * (1 - confidence)
    return RatioIntervals(
        confidence,
        {
            op: {size: _percentiles(values, tail) for size, values in by_size.items()}
            for op, by_size in samples.items()
        },
        {op: _percentiles(values, tail) for op, values in means.items()},
    )


def _percentiles(values: list[float], tail: float) -> tuple[float, float]:
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def judge(interval: tuple[float, float] | None) -> Advantage:
    """The verdict for an interval of a sequential-to-random ratio (see the module doc)."""
    if interval is None:
        return Advantage.UNKNOWN
    low, high = interval
    if low > 1 + NEGLIGIBLE:
        return Advantage.SEQUENTIAL
    if high < 1 - NEGLIGIBLE:
        return Advantage.RANDOM
    return Advantage.NONE


def verdict_line(
    operation: str,
    mean: float,
    interval: tuple[float, float] | None,
    confidence: float,
    more_runs: str = "--repetitions 2",
) -> str:
    """One plain sentence for an operation's verdict; `more_runs` is the option that gives an
    interval when there is none."""
    advantage = judge(interval)
    if advantage is Advantage.UNKNOWN:
        return (
            f"{operation}: mean ratio {mean:.3g}, no interval from one run per size "
            f"(use {more_runs} or more before trusting it)"
        )
    low, high = interval or (mean, mean)
    ci = f"{confidence:.0%} CI {low:.3g}-{high:.3g}"
    if advantage is Advantage.SEQUENTIAL:
        return f"{operation}: sequential is {mean:.3g}x faster than random on average ({ci})"
    if advantage is Advantage.RANDOM:
        return f"{operation}: random is faster than sequential at these sizes ({mean:.3g}, {ci})"
    return f"{operation}: no sequential advantage measurable at these sizes ({mean:.3g}, {ci})"
