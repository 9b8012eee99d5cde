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

SAME = 1e-9  # a repeat this close to its first value shows a deterministic target
STALL_PATIENCE = 10  # evaluations without a better value before a search counts as stalled


def stalled(history: Sequence[Observation], direction: str, patience: int = STALL_PATIENCE) -> bool:
    """Whether the last `patience` evaluations found nothing better than the best before them:
    a surrogate that only exploits (FLASH's tree, DDPG's actor) is then stuck in one region,
    and its caller mixes in random configs until the best improves again."""
    if len(history) <= patience:
        return False
    value = scores(history, direction)
    return bool(value[-patience:].max() <= value[:-patience].max())


def explore_now(history: Sequence[Observation], direction: str) -> bool:
    """Whether a surrogate that only exploits should propose a random config now: every other
    step while the search has stalled (`stalled`), so the surrogate keeps the steps between."""
    return len(history) % 2 == 0 and stalled(history, direction)


def repeated_identically(history: Sequence[Observation]) -> bool:
    """Whether the last observation re-measured a config and got exactly its first value: the
    target is deterministic (a replayed table), and re-measuring there only spends budget."""
    if not history or history[-1].value is None:
        return False
    last = history[-1]
    first = next((o.value for o in history[:-1] if o.value is not None and o.key == last.key), None)
    return first is not None and abs(last.value - first) <= SAME * max(abs(first), 1e-12)


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
        return _valid_or_none(space, space.decode(point))
    except ConfigError:
        return None


def configs_at(space: Space, points: np.ndarray) -> list[Config | None]:
    """`config_at` of each row, decoded a parameter's column at a time (`Space.values_at`)."""
    out: list[Config | None] = []
    for values in space.values_at(points):
        try:
            out.append(_valid_or_none(space, space.with_conditions(values)))
        except ConfigError:
            out.append(None)
    return out


def _valid_or_none(space: Space, config: Config) -> Config | None:
    return config if space.first_violation(config) is None else None


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
