"""Summary statistics of repeated runs: mean, relative standard deviation, t-based confidence
interval. Used wherever repetitions are combined, so every number carries its uncertainty."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats as scipy_stats


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
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, n - 1)) * std / math.sqrt(n)
    return Summary(n, mean, std, rsd, mean - half, mean + half, confidence)


def rsd(values: Sequence[float]) -> float:
    """Relative standard deviation (sample std over |mean|)."""
    return summarize(values).rsd
