"""Baselines every tuner is compared against: uniform random search and a Latin hypercube."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stortune.sampling import config_key, latin_hypercube
from stortune.space import Config, Space
from stortune.tuners.base import Tuner
from stortune.tuners.pool import Pool


class RandomTuner(Tuner):
    """Uniform random valid configs, avoiding repeats while the space has unseen ones; with a
    pool, uniform among its unmeasured configs."""

    name = "random"
    takes_pool = True
    asks_pending = True  # its proposals never depend on values: each ask is a new draw

    def __init__(
        self,
        space: Space,
        direction: str = "max",
        seed: int = 0,
        budget: int | None = None,
        pool: Sequence[Config] | None = None,
    ) -> None:
        super().__init__(space, direction, seed, budget)
        self._rng = np.random.default_rng(seed)
        self._asked: set[str] = set()
        self.pool = None if pool is None else Pool(space, pool)

    def _observe(self, config: Config, value: float | None) -> None:
        if self.pool is not None:
            self.pool.close(config)

    def ask(self) -> Config:
        if self.pool is not None:
            return self.pool.random_open(self._rng)
        config: Config = {}
        for _ in range(200):
            config = self._draw()
            if config_key(config) not in self._asked:
                break
        self._asked.add(config_key(config))
        return config

    def _draw(self) -> Config:
        for _ in range(10_000):
            candidate = self.space.decode(self._rng.random(len(self.space)))
            if self.space.first_violation(candidate) is None:
                return self.space.validate(candidate)
        return self.space.default_config()


class LHSTuner(Tuner):
    """A Latin hypercube design of `budget` configs, in order; random once it is used up. With
    a pool, each design point picks an unmeasured row through the rows' conditional quantiles
    (`Pool.open_row_at`): rows drawn as random search draws them, stratified, where points
    moved to their nearest rows fell below random search on tables whose columns depend on
    each other (a platform as four one-hot columns)."""

    name = "lhs"
    takes_pool = True
    asks_pending = True  # the design's next point, whatever was told

    def __init__(
        self,
        space: Space,
        direction: str = "max",
        seed: int = 0,
        budget: int | None = None,
        pool: Sequence[Config] | None = None,
    ) -> None:
        super().__init__(space, direction, seed, budget)
        design = latin_hypercube(space, budget or 20, seed)
        self.pool = None if pool is None else Pool(space, pool)
        self._design = design.configs
        self._points = design.points
        self._fallback = RandomTuner(space, direction, seed + 1)
        self._pool_rng = np.random.default_rng(seed + 1)
        self._asked = 0

    def _observe(self, config: Config, value: float | None) -> None:
        if self.pool is not None:
            self.pool.close(config)

    def ask(self) -> Config:
        self._asked += 1
        if self.pool is None:
            if self._asked <= len(self._design):
                return dict(self._design[self._asked - 1])
            return self._fallback.ask()
        if self._asked <= len(self._points):
            return self.pool.open_row_at(self._points[self._asked - 1])
        return self.pool.random_open(self._pool_rng)
