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

from stortune.errors import StortuneError
from stortune.sampling import config_key, latin_hypercube
from stortune.space import Config, Space
from stortune.tuners.base import Tuner
from stortune.tuners.common import initial_size, scores

SAMPLED_POOL = 2000  # candidates drawn when no pool is given


class FlashTuner(Tuner):
    name = "flash"

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
            drawn = [space.default_config(), *latin_hypercube(space, SAMPLED_POOL, seed).configs]
        else:
            drawn = list(pool)
        unique = {config_key(c): dict(c) for c in drawn}  # each distinct config once, in order
        if not unique:
            raise StortuneError("FLASH needs a pool of at least one config")
        self._keys = list(unique)
        self.pool: list[Config] = list(unique.values())
        self._points = np.array([space.encode(c) for c in self.pool])
        self._measured: set[str] = set()
        self._initial = initial_size(budget)

    def _observe(self, config: Config, value: float | None) -> None:
        self._measured.add(config_key(config))

    def ask(self) -> Config:
        open_rows = [i for i, key in enumerate(self._keys) if key not in self._measured]
        if not open_rows:
            raise StortuneError(
                f"FLASH has measured every one of the {len(self.pool)} pool configs"
            )
        if len(self.history) < self._initial or not any(o.value is not None for o in self.history):
            return dict(self.pool[self._initial_row(open_rows)])
        tree = DecisionTreeRegressor(random_state=self.seed)
        tree.fit(
            np.array([self.space.encode(o.config) for o in self.history]),
            scores(self.history, self.direction),
        )
        predicted = tree.predict(self._points[open_rows])
        best = np.flatnonzero(predicted == predicted.max())
        return dict(self.pool[open_rows[int(self.rng.choice(best))]])

    def _initial_row(self, open_rows: list[int]) -> int:
        """The first asks: the space's default when it is in the pool, then random rows."""
        default = config_key(self.space.default_config())
        if default in self._keys and default not in self._measured:
            return self._keys.index(default)
        return open_rows[int(self.rng.integers(len(open_rows)))]
