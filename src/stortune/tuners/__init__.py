"""Tuners: ask/tell optimisers over a space. `make_tuner(name, ...)` builds one by name."""

from __future__ import annotations

from stortune.errors import StortuneError
from stortune.space import Space
from stortune.tuners.base import Observation, Tuner
from stortune.tuners.baselines import LHSTuner, RandomTuner

_OWN = {"random": RandomTuner, "lhs": LHSTuner}


def tuner_names() -> list[str]:
    from stortune.tuners.optuna_adapter import SAMPLERS

    return [*_OWN, *SAMPLERS]


def make_tuner(
    name: str, space: Space, direction: str = "max", seed: int = 0, budget: int | None = None
) -> Tuner:
    if name in _OWN:
        return _OWN[name](space, direction, seed, budget)
    from stortune.tuners.optuna_adapter import SAMPLERS, OptunaTuner

    if name in SAMPLERS:
        return OptunaTuner(space, direction, seed, budget, sampler=name)
    raise StortuneError(f"unknown tuner {name!r} (choose from {', '.join(tuner_names())})")


__all__ = ["LHSTuner", "Observation", "RandomTuner", "Tuner", "make_tuner", "tuner_names"]
