"""FLASH (Nair, Menzies, Siegmund, Apel: "Finding faster configurations using FLASH", IEEE TSE
2018): sequential model-based search over a pool of candidate configs with a CART surrogate.

Each ask fits a regression tree to every evaluation so far and proposes the unmeasured pool
config the tree predicts best (the paper's "maximum mean" acquisition), one at a time. A tree
predicts in steps, so many candidates tie: ties are broken at random (seeded), which keeps the
search moving inside the best leaf. No config is proposed twice.

The pool is the measured table's rows when the caller has them (`pool`), as in the paper's
protocol; otherwise a seeded sample of valid configs of the space stands for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.tree import DecisionTreeRegressor

from stortune.sampling import latin_hypercube
from stortune.space import Config, Space
from stortune.tuners.base import Tuner
from stortune.tuners.common import explore_now, initial_size, scores
from stortune.tuners.pool import Pool

SAMPLED_POOL = 2000  # candidates drawn when no pool is given


class FlashTuner(Tuner):
    name = "flash"
    takes_pool = True

    def __init__(
        self,
        space: Space,
        direction: str = "max",
        seed: int = 0,
        budget: int | None = None,
        pool: Sequence[Config] | None = None,
    ) -> None:
        super().__init__(space, direction, seed, budget)
        self.rng = np.random.default_rng(seed)
        if pool is None:
            pool = [space.default_config(), *latin_hypercube(space, SAMPLED_POOL, seed).configs]
        self.pool = Pool(space, pool)
        self._initial = initial_size(budget)

    def _observe(self, config: Config, value: float | None) -> None:
        self.pool.close(config)

    def ask(self) -> Config:
        open_rows = self.pool.open_rows()
        if len(self.history) < self._initial or not any(o.value is not None for o in self.history):
            return self._initial_config()
        if explore_now(self.history, self.direction):
            return self.pool.random_open(self.rng)
        tree = DecisionTreeRegressor(random_state=self.seed)
        tree.fit(
            np.array([self.space.encode(o.config) for o in self.history]),
            scores(self.history, self.direction),
        )
        predicted = tree.predict(self.pool.points[open_rows])
        best = np.flatnonzero(predicted == predicted.max())
        return dict(self.pool.configs[int(open_rows[int(self.rng.choice(best))])])

    def _initial_config(self) -> Config:
        """The first asks: the space's default when it is in the pool, then random rows."""
        default = self.space.default_config()
        if self.pool.is_open(default):
            return self.pool.nearest_open(default)
        return self.pool.random_open(self.rng)
