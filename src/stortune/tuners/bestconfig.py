"""BestConfig (SoCC '17): divide-and-diverge sampling and recursive bound-and-search.

* Divide and diverge (DDS): each round samples `round_size` points so that every parameter's
  range, divided into that many intervals, is hit once (a Latin hypercube), and among
  `DESIGNS` random such designs the one whose closest pair is farthest apart is kept (maximin):
  few samples, spread over the whole box.
* Recursive bound and search (RBS): after a round, the box shrinks around the best point to its
  nearest evaluated neighbours on each side, per parameter, and the next round samples inside.
  A round that does not improve on the best sends the next one back to the whole space; so
  does one that improves by less than 1% of the spread of the values seen, since rounds in
  ever smaller boxes would otherwise spend the budget on gains no benchmark can tell apart.
* The default config is evaluated first (BestConfig's baseline and often a good point).

Every parameter is bounded on its unit-cube encoding, categorical ones by the index of their
value, as BestConfig maps every parameter to a numeric range. Proposals are valid: points that
break a constraint are redrawn inside the box, or anywhere when the box holds none.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import pdist
from scipy.stats import qmc

from stortune.sampling import config_key
from stortune.space import Config, Space
from stortune.tuners.base import Tuner
from stortune.tuners.common import config_at, random_valid
from stortune.tuners.topk import free_indices

DESIGNS = 20
REDRAWS = 200
MIN_GAIN = 0.01


def round_size(budget: int | None) -> int:
    """Samples per round: about a quarter of the budget, between 3 and 10."""
    return 6 if budget is None else max(3, min(10, budget // 4))


class BestConfigTuner(Tuner):
    """DDS rounds inside boxes chosen by RBS (module doc)."""

    name = "bestconfig"

    def __init__(
        self, space: Space, direction: str = "max", seed: int = 0, budget: int | None = None
    ) -> None:
        super().__init__(space, direction, seed, budget)
        self.round_size = round_size(budget)
        self.free = free_indices(space)
        self._rng = np.random.default_rng(seed)
        self._queue: list[Config] = [space.default_config()]
        self._round_start_best: float | None = None
        self._round: list[Config] = []
        self._seen: set[str] = set()
        self.box: tuple[np.ndarray, np.ndarray] = self._whole()

    def _whole(self) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(len(self.space)), np.ones(len(self.space))

    def ask(self) -> Config:
        seen = self._seen
        while True:
            while self._queue:
                config = self._queue.pop(0)
                if config_key(config) not in seen:
                    return config
            if not self.free:
                return random_valid(self.space, self._rng, seen)
            self._plan_round(seen)
            if not self._queue:
                return random_valid(self.space, self._rng, seen)

    def _observe(self, config: Config, value: float | None) -> None:
        self._seen.add(config_key(config))

    def _plan_round(self, seen: set[str]) -> None:
        """Bound (or go global after a round without improvement), then diverge."""
        best = self.best
        improved = best is not None and (
            self._round_start_best is None
            or self.better(best.value, self._round_start_best + self._min_gain())
        )
        self.box = self._bound(best.config) if improved and best is not None else self._whole()
        self._round_start_best = best.value if best is not None else None
        self._queue = self._dds(seen)
        self._round = list(self._queue)

    def _min_gain(self) -> float:
        values = [o.value for o in self.history if o.value is not None]
        gain = MIN_GAIN * (max(values) - min(values)) if values else 0.0
        return gain * self.direction.sign

    def _bound(self, best: Config) -> tuple[np.ndarray, np.ndarray]:
        """Per free dimension: the nearest values below and above the best's among the last
        round's points (BestConfig's scaleDownDetour; the whole range on a side with none)."""
        low, high = self._whole()
        points = self.space.encode_many([*self._round, best])
        centre = self.space.encode(best)
        for i in self.free:
            column = points[:, i]
            below, above = column[column < centre[i]], column[column > centre[i]]
            low[i] = below.max() if below.size else 0.0
            high[i] = above.min() if above.size else 1.0
        return low, high

    def _dds(self, seen: set[str]) -> list[Config]:
        """The maximin choice among random Latin hypercubes in the box, made valid."""
        low, high = self.box
        free = np.array(self.free)
        best_design, best_spread = None, -1.0
        for _ in range(DESIGNS):
            unit = qmc.LatinHypercube(d=len(free), rng=self._rng).random(self.round_size)
            spread = float(pdist(unit).min()) if len(unit) > 1 else 0.0
            if spread > best_spread:
                best_design, best_spread = unit, spread
        assert best_design is not None
        points = np.full((self.round_size, len(self.space)), 0.5)  # pinned dimensions
        points[:, free] = low[free] + best_design * (high[free] - low[free])
        out: list[Config] = []
        keys = set(seen)
        for point in points:
            config = self._valid_near(point, low, high, keys)
            if config is not None:
                keys.add(config_key(config))
                out.append(config)
        return out

    def _valid_near(
        self, point: np.ndarray, low: np.ndarray, high: np.ndarray, keys: set[str]
    ) -> Config | None:
        """The config at `point`, or one drawn in the box when that is invalid or a repeat."""
        candidate = point
        for _ in range(REDRAWS):
            config = config_at(self.space, candidate)
            if config is not None and config_key(config) not in keys:
                return self.space.validate(config)
            candidate = point.copy()
            free = np.array(self.free)
            candidate[free] = low[free] + self._rng.random(len(free)) * (high[free] - low[free])
        return None
