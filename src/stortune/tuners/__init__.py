"""Tuners: ask/tell optimisers over a space. `make_tuner(name, ...)` builds one by name."""

from __future__ import annotations

import importlib

from stortune.errors import StortuneError
from stortune.space import Space
from stortune.tuners.base import Observation, Tuner
from stortune.tuners.baselines import LHSTuner, RandomTuner

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


def make_tuner(
    name: str, space: Space, direction: str = "max", seed: int = 0, budget: int | None = None
) -> Tuner:
    if name in _OWN:
        cls = _OWN[name]
        if isinstance(cls, str):
            module, _, attr = cls.partition(":")
            cls = getattr(importlib.import_module(module), attr)
        return cls(space, direction, seed, budget)
    from stortune.tuners.optuna_adapter import SAMPLERS, OptunaTuner

    if name in SAMPLERS:
        return OptunaTuner(space, direction, seed, budget, sampler=name)
    raise StortuneError(f"unknown tuner {name!r} (choose from {', '.join(tuner_names())})")


__all__ = [
    "DEFAULT_TUNER",
    "LHSTuner",
    "Observation",
    "RandomTuner",
    "Tuner",
    "make_tuner",
    "tuner_names",
]
