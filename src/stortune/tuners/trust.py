"""A trust region counted in changed parameters, for bo's proposals among a table's rows.

TuRBO (Eriksson et al., 2019) keeps a GP's proposals inside a box around the incumbent that
halves after a run of failures and doubles after a run of successes; CASMOPOLITAN (Wan et al.,
2021) counts the box for categorical parameters as the number of parameters that differ from
the incumbent (a Hamming distance). On the many-binary and few-level tables of
bench/tuners.py a box in the unit cube would pin every binary parameter, so the region here is
CASMOPOLITAN's: at most `size` free parameters changed. It starts at half of them, halves after
`FAILURES` proposals without a better best, doubles after `SUCCESSES` with one, and, when it
would fall below one parameter, restarts at every free parameter: the incumbent's neighbourhood
is spent, so the search widens to the whole table and narrows again by the same rules.
"""

from __future__ import annotations

import math

import numpy as np

FAILURES = 2  # proposals without a better best before the region halves
SUCCESSES = 2  # proposals with a better best before it doubles
LEAST_ROWS = 30  # the region widens, a parameter at a time, until it holds this many rows


class TrustRegion:
    """The number of free parameters a proposal may change from the incumbent; `update` with
    the best score before each proposal, `inside` to select candidates."""

    def __init__(self, free_count: int) -> None:
        self.free_count = free_count
        self.size = max(2, math.ceil(free_count / 2))
        self._best: float | None = None
        self._successes = 0
        self._failures = 0

    def update(self, best: float) -> None:
        """Count the proposal since the last update a success when the best score grew."""
        if self._best is None:
            self._best = best
            return
        if best > self._best:
            self._successes, self._failures = self._successes + 1, 0
            self._best = best
        else:
            self._successes, self._failures = 0, self._failures + 1
        if self._successes >= SUCCESSES:
            self.size, self._successes = min(self.free_count, self.size * 2), 0
        elif self._failures >= FAILURES:
            self.size, self._failures = self.size // 2, 0
            if self.size < 1:  # collapsed: the next proposals search the whole table
                self.size = self.free_count

    def inside(self, points: np.ndarray, centre: np.ndarray, free: list[int]) -> np.ndarray:
        """Which of `points` (unit-cube rows) change at most `size` free coordinates of
        `centre`, the region widened until at least `LEAST_ROWS` of them are in it."""
        changed = (np.abs(points[:, free] - centre[free]) > 1e-9).sum(axis=1)
        size = self.size
        while np.count_nonzero(changed <= size) < LEAST_ROWS and size < len(free):
            size += 1
        return changed <= size
