"""Baselines every tuner is compared against: uniform random search and a Latin hypercube."""

from __future__ import annotations

import numpy as np

from stortune.sampling import config_key, latin_hypercube
from stortune.space import Config, Space
from stortune.tuners.base import Tuner


class RandomTuner(Tuner):
    """Uniform random valid configs, avoiding repeats while the space has unseen ones."""

    name = "random"

    def __init__(
        self, space: Space, direction: str = "max", seed: int = 0, budget: int | None = None
    ) -> None:
        super().__init__(space, direction, seed, budget)
        self._rng = np.random.default_rng(seed)
        self._asked: set[str] = set()

    def ask(self) -> Config:
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
    """A Latin hypercube design of `budget` configs, in order; random once it is used up."""

    name = "lhs"

    def __init__(
        self, space: Space, direction: str = "max", seed: int = 0, budget: int | None = None
    ) -> None:
        super().__init__(space, direction, seed, budget)
        self._design = latin_hypercube(space, budget or 20, seed).configs
        self._fallback = RandomTuner(space, direction, seed + 1)
        self._asked = 0

    def ask(self) -> Config:
        self._asked += 1
        if self._asked <= len(self._design):
            return dict(self._design[self._asked - 1])
        return self._fallback.ask()
