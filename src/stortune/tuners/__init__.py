"""Tuners: ask/tell optimisers over a space. `make_tuner(name, ...)` builds one by name."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from stortune.errors import StortuneError
from stortune.space import Config, Space
from stortune.tuners.base import Observation, Tuner
from stortune.tuners.baselines import LHSTuner, RandomTuner
from stortune.tuners.pool import PoolProjection

# A "module:Class" entry is imported when first built: torch and BoTorch cost nothing to a
# command that does not tune with them.
_OWN: dict[str, type[Tuner] | str] = {
    "bo": "stortune.tuners.bo:BOTuner",
    "ddpg": "stortune.tuners.ddpg:DDPGTuner",
    "bestconfig": "stortune.tuners.bestconfig:BestConfigTuner",
    "flash": "stortune.tuners.flash:FlashTuner",
    "random": RandomTuner,
    "lhs": LHSTuner,
}
# The tuner `stortune tune` uses unless told otherwise (bench/tuners.py compares them).
DEFAULT_TUNER = "bo"


def tuner_names() -> list[str]:
    from stortune.tuners.optuna_adapter import SAMPLERS

    return [*_OWN, *SAMPLERS]


def register_tuner(name: str, cls: type[Tuner] | str) -> None:
    """Have `make_tuner(name, ...)` build `cls` (a Tuner class taking space, direction, seed and
    budget, or "module:Class"): a tuner kept outside stortune (a benchmark's peer) then starts
    and resumes campaigns by name as stortune's own do."""
    _OWN[name] = cls


def make_tuner(
    name: str,
    space: Space,
    direction: str = "max",
    seed: int = 0,
    budget: int | None = None,
    pool: Sequence[Config] | None = None,
) -> Tuner:
    """The tuner called `name`; with a `pool`, one that proposes only the pool's configs (its
    own search over the pool where it has one, else its proposals moved to the nearest row)."""
    tuner: Tuner
    if name in _OWN:
        cls = _OWN[name]
        if isinstance(cls, str):
            module, _, attr = cls.partition(":")
            cls = getattr(importlib.import_module(module), attr)
        if pool is not None and cls.takes_pool:
            return cls(space, direction, seed, budget, pool=pool)  # type: ignore[call-arg]
        tuner = cls(space, direction, seed, budget)
    else:
        from stortune.tuners.optuna_adapter import SAMPLERS, OptunaTuner

        if name not in SAMPLERS:
            raise StortuneError(f"unknown tuner {name!r} (choose from {', '.join(tuner_names())})")
        tuner = OptunaTuner(space, direction, seed, budget, sampler=name)
    return tuner if pool is None else PoolProjection(tuner, pool)


__all__ = [
    "DEFAULT_TUNER",
    "LHSTuner",
    "Observation",
    "RandomTuner",
    "Tuner",
    "make_tuner",
    "register_tuner",
    "tuner_names",
]
