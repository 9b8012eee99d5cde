"""Summary statistics of repeated runs: mean, relative standard deviation, t-based confidence
interval. Used wherever repetitions are combined, so every number carries its uncertainty."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    std: float
    rsd: float
    ci_low: float
    ci_high: float
    confidence: float

    @property
    def ci_half_width_rel(self) -> float:
        """Half-width of the confidence interval relative to the mean (inf when undefined)."""
        if self.n < 2 or self.mean == 0 or not math.isfinite(self.ci_high):
            return math.inf
        return (self.ci_high - self.ci_low) / 2 / abs(self.mean)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def summarize(values: Sequence[float], confidence: float = 0.9) -> Summary:
    """Mean, sample standard deviation, RSD (std/|mean|) and the t confidence interval."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = len(x)
    if n == 0:
        nan = math.nan
        return Summary(0, nan, nan, nan, nan, nan, confidence)
    mean = float(x.mean())
    if n == 1:
        return Summary(1, mean, 0.0, 0.0, -math.inf, math.inf, confidence)
    std = float(x.std(ddof=1))
    rsd = std / abs(mean) if mean != 0 else math.inf
    half = t_quantile(0.5 + confidence / 2, n - 1) * std / math.sqrt(n)
    return Summary(n, mean, std, rsd, mean - half, mean + half, confidence)


def rsd(values: Sequence[float]) -> float:
    """Relative standard deviation (sample std over |mean|)."""
    return summarize(values).rsd


@dataclass(frozen=True)
class Ratio:
    """How `b` compares with `a`: mean ratio b/a and its confidence interval."""

    ratio: float
    ci_low: float
    ci_high: float
    confidence: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def ratio_ci(a: Sequence[float], b: Sequence[float], confidence: float = 0.9) -> Ratio:
    """Ratio of means mean(b)/mean(a) with a delta-method interval on the log scale (Welch
    degrees of freedom), so that it stays positive and symmetric in relative terms."""
    sa, sb = summarize(a, confidence), summarize(b, confidence)
    if sa.n == 0 or sb.n == 0 or sa.mean <= 0 or sb.mean <= 0:
        return Ratio(math.nan, math.nan, math.nan, confidence)
    ratio = sb.mean / sa.mean
    if sa.n < 2 or sb.n < 2:
        return Ratio(ratio, 0.0, math.inf, confidence)
    va = sa.std**2 / (sa.n * sa.mean**2)
    vb = sb.std**2 / (sb.n * sb.mean**2)
    if va + vb == 0:
        return Ratio(ratio, ratio, ratio, confidence)
    dof = (va + vb) ** 2 / (va**2 / (sa.n - 1) + vb**2 / (sb.n - 1))
    half = t_quantile(0.5 + confidence / 2, dof) * math.sqrt(va + vb)
    return Ratio(ratio, ratio * math.exp(-half), ratio * math.exp(half), confidence)


def t_quantile(q: float, dof: float) -> float:
    """Student's t quantile (scipy.stats is imported here, not at start-up: it is slow)."""
    from scipy import stats as scipy_stats

    return float(scipy_stats.t.ppf(q, dof))


@dataclass(frozen=True)
class PairedRatio:
    """How a candidate compares with a baseline measured beside it in the same rounds: the
    geometric mean of the per-round ratios, oriented so that above 1 is better, and its t
    interval. Drift between rounds hits both sides of a pair alike, so it cancels here, where
    it widens an unpaired interval (`ratio_ci`)."""

    ratio: float
    ci_low: float
    ci_high: float
    confidence: float
    n: int  # pairs (rounds) behind it
    mean_log: float = math.nan  # mean log-ratio
    sd_log: float = math.nan  # standard deviation of the log-ratios

    @property
    def half_width(self) -> float:
        """The interval's half-width as a share of the ratio (on the log scale: 0.1 means the
        interval reaches 10% either way)."""
        if self.n < 2 or not (math.isfinite(self.ci_low) and math.isfinite(self.ci_high)):
            return math.inf
        return math.exp((math.log(self.ci_high) - math.log(self.ci_low)) / 2) - 1

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def log_ratio_interval(
    logs: Sequence[float], confidence: float = 0.9, one_sided: bool = False
) -> tuple[float, float, float]:
    """Mean of log-ratios, their standard deviation and the t half-width of the mean's
    interval (two-sided at `confidence`, or one-sided); inf without two values. Racing and
    verification judge pairs with this one rule."""
    x = [v for v in logs if math.isfinite(v)]
    n = len(x)
    if n == 0:
        return math.nan, math.nan, math.inf
    mean = sum(x) / n
    if n == 1:
        return mean, math.nan, math.inf
    sd = math.sqrt(sum((v - mean) ** 2 for v in x) / (n - 1))
    q = confidence if one_sided else 0.5 + confidence / 2
    return mean, sd, t_quantile(q, n - 1) * sd / math.sqrt(n)


def paired_ratio(
    pairs: Sequence[tuple[float, float]], confidence: float = 0.9, maximise: bool = True
) -> PairedRatio:
    """Ratio of `candidate` to `baseline` over (baseline, candidate) pairs, each measured in one
    round, as `PairedRatio` (pairs with a value at or below 0 cannot be compared by ratio and
    are left out). For a minimised metric the ratio is baseline over candidate."""
    sign = 1.0 if maximise else -1.0
    logs = [sign * math.log(c / b) for b, c in pairs if b > 0 and c > 0]
    mean, sd, half = log_ratio_interval(logs, confidence)
    if not logs:
        return PairedRatio(math.nan, math.nan, math.nan, confidence, 0)
    if not math.isfinite(half):
        return PairedRatio(math.exp(mean), 0.0, math.inf, confidence, len(logs), mean, sd)
    return PairedRatio(
        math.exp(mean), math.exp(mean - half), math.exp(mean + half), confidence, len(logs), mean,
        sd,
    )  # fmt: skip
