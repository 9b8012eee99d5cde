"""What stortune's own tuners share: an initial design that starts at the default, decoding
unit-cube points into valid configs, objective values turned into "larger is better", and when
a search has stalled."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stortune.enums import Direction
from stortune.errors import ConfigError
from stortune.sampling import config_key, latin_hypercube
from stortune.space import Config, Space
from stortune.tuners.base import Observation

STALL_PATIENCE = 10  # evaluations without a better value before a search counts as stalled


def stalled(history: Sequence[Observation], direction: str, patience: int = STALL_PATIENCE) -> bool:
    """Whether the last `patience` evaluations found nothing better than the best before them:
    a surrogate that only exploits (FLASH's tree, DDPG's actor) is then stuck in one region,
    and its caller mixes in random configs until the best improves again."""
    if len(history) <= patience:
        return False
    value = scores(history, direction)
    return bool(value[-patience:].max() <= value[:-patience].max())


def initial_size(budget: int | None, low: int = 3, high: int = 10) -> int:
    """Size of the initial design: a fifth of the budget, within [low, high]."""
    return high if budget is None else max(low, min(high, budget // 5))


def initial_design(space: Space, n: int, seed: int) -> list[Config]:
    """The default config, then an (n-1)-point Latin hypercube: the default is what a gain is
    measured against, and it is often a good point."""
    design = [space.default_config()]
    if n > 1:
        design += latin_hypercube(space, n - 1, seed).configs
    return design


def config_at(space: Space, point: Sequence[float]) -> Config | None:
    """The valid config at a unit-cube point, or None when it breaks a constraint."""
    try:
        config = space.decode(point)
        return config if space.first_violation(config) is None else None
    except ConfigError:
        return None


def random_valid(
    space: Space, rng: np.random.Generator, avoid: set[str], tries: int = 2000
) -> Config:
    """A uniformly drawn valid config not in `avoid` (one in it when the space has no other)."""
    fallback: Config | None = None
    for _ in range(tries):
        config = config_at(space, rng.random(len(space)))
        if config is None:
            continue
        if config_key(config) not in avoid:
            return space.validate(config)
        fallback = fallback or config
    return space.validate(fallback) if fallback is not None else space.default_config()


def scores(history: Sequence[Observation], direction: str) -> np.ndarray:
    """Observed values as "larger is better"; failed evaluations count as the worst seen."""
    sign = Direction(direction).sign
    ok = [sign * o.value for o in history if o.value is not None]
    worst = min(ok) if ok else 0.0
    return np.array([sign * o.value if o.value is not None else worst for o in history])
