"""The ask/tell interface every tuner and sampler speaks.

`ask()` proposes a valid config; `tell(config, value)` reports its measured objective (None when
the evaluation failed). Tuners keep the history and the best config; `direction` says whether
larger values are better. A tuner may be told configs it did not propose: that is how a resumed
campaign replays its stored history, and how runs measured earlier (by a sweep, say) seed it.
`recommend()` is the config the tuner would hand a user: the best mean over its observations,
unless the tuner knows better (a model that sees through the noise).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from statistics import fmean

from stortune.enums import Direction
from stortune.sampling import config_key
from stortune.space import Config, Space


@dataclass
class Observation:
    config: Config
    value: float | None

    @cached_property
    def key(self) -> str:
        """The config's `config_key`, made once: tuners group their whole history by it at
        every step, which made a 1,000-evaluation campaign quadratic in JSON encoding."""
        return config_key(self.config)


class Tuner(ABC):
    name: str = ""
    takes_pool: bool = False  # searches a finite pool of configs itself (`pool` argument)
    # asked several times before any tell, proposes configs that know of each other (else a
    # plan with several in flight asks a copy told the pending ones: `measure.parallel`)
    asks_pending: bool = False

    def __init__(
        self, space: Space, direction: str = "max", seed: int = 0, budget: int | None = None
    ) -> None:
        self.space = space
        self.direction = Direction.parse(direction)
        self.seed = seed
        self.budget = budget
        self.history: list[Observation] = []

    @abstractmethod
    def ask(self) -> Config:
        """Propose the next config to evaluate (always valid in `space`)."""

    def tell(self, config: Config, value: float | None) -> None:
        """Record the objective of `config`; failed evaluations come as None."""
        if value is not None and not math.isfinite(value):
            value = None
        self.history.append(Observation(dict(config), value))
        self._observe(config, value)

    def _observe(self, config: Config, value: float | None) -> None:  # noqa: B027
        """Hook for subclasses that learn from observations."""

    def withdraw(self, config: Config) -> None:  # noqa: B027
        """A proposal that will not be measured (a pool answered it with another config):
        tuners that keep asked proposals pending drop it here."""

    def adopt(self, fork: Tuner) -> None:  # noqa: B027
        """Keep what a copy of this tuner learnt while proposing with pending configs told as
        lies (`measure.parallel`): a model's fitted hyperparameters, say, as the next fit's
        start. Never its history: the lies stay with the copy."""

    def leave_repeats_to_caller(self) -> None:  # noqa: B027
        """The caller re-measures configs itself (racing): a tuner that would propose repeats
        of its leaders stops doing so."""

    def recommend(self) -> Config | None:
        """The config to recommend: the best mean value over repeated observations."""
        means = self.config_means()
        if not means:
            return None
        return dict(max(means, key=lambda o: self.direction.sign * o.value).config)

    def config_means(self) -> list[Observation]:
        """One observation per measured config, its value the mean of the config's runs, in
        the order the configs were first measured (failed runs left out)."""
        groups: dict[str, list[Observation]] = {}
        for obs in self.history:
            if obs.value is not None:
                groups.setdefault(obs.key, []).append(obs)
        return [Observation(g[0].config, fmean(o.value for o in g)) for g in groups.values()]

    def observe_state(self, state: Mapping[str, float]) -> None:  # noqa: B027
        """The target's system metrics after a config was measured, given just before that
        config's `tell` (DDPG's state). Optional: tuners that ignore state keep this no-op, and
        a tuner must cope with tells that come without it (a replayed campaign)."""

    def better(self, a: float, b: float) -> bool:
        return self.direction.better(a, b)

    @property
    def best(self) -> Observation | None:
        best: Observation | None = None
        for obs in self.history:
            if obs.value is not None and (best is None or self.better(obs.value, best.value)):
                best = obs
        return best
