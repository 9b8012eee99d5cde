"""Optuna's samplers behind stortune's ask/tell interface: the peers a user would otherwise pick,
run through the same loop for side-by-side comparisons.

Conditional parameters are suggested only when active (define-by-run, in the space's condition
order). Optuna knows nothing of our constraints: a proposal that violates one is told to Optuna
as a failed trial and another is asked for; after 100 such misses a random valid config is used
instead (and reported to Optuna as an added trial when its value comes in).
"""

from __future__ import annotations

import warnings
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState

from stortune.enums import Direction
from stortune.errors import StortuneError
from stortune.sampling import config_key
from stortune.space import Config, Kind, Parameter, Space
from stortune.tuners.base import Tuner
from stortune.tuners.baselines import RandomTuner

optuna.logging.set_verbosity(optuna.logging.WARNING)

SAMPLERS = ("tpe", "optuna-random", "qmc", "gp", "cmaes")


def make_sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    # The peers are used as Optuna ships them; its "experimental" notices are noise for users.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return _sampler(name, seed)


def _sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    if name == "tpe":
        # the constant liar acts only on trials asked and not yet told: a cluster's in flight
        return optuna.samplers.TPESampler(seed=seed, constant_liar=True)
    if name == "optuna-random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "qmc":
        return optuna.samplers.QMCSampler(seed=seed, qmc_type="halton", scramble=True)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    raise StortuneError(f"unknown Optuna sampler {name!r} (choose from {', '.join(SAMPLERS)})")


def distribution(p: Parameter) -> BaseDistribution:
    if p.kind is Kind.INT:
        return IntDistribution(int(p.low), int(p.high), log=p.log)
    if p.kind is Kind.FLOAT:
        return FloatDistribution(float(p.low), float(p.high), log=p.log)
    return CategoricalDistribution(list(p.values))


class OptunaTuner(Tuner):
    asks_pending = True  # a study keeps asked trials running: several may be in flight

    def __init__(
        self,
        space: Space,
        direction: str = "max",
        seed: int = 0,
        budget: int | None = None,
        sampler: str = "tpe",
    ) -> None:
        super().__init__(space, direction, seed, budget)
        self.name = sampler
        self.study = optuna.create_study(
            direction="maximize" if direction == Direction.MAX else "minimize",
            sampler=make_sampler(sampler, seed),
        )
        self._pending: dict[str, optuna.trial.Trial] = {}
        self._fallback = RandomTuner(space, direction, seed + 7)

    def ask(self) -> Config:
        for _ in range(100):
            trial = self.study.ask()
            config = self._suggest(trial)
            if self.space.first_violation(config) is None:
                config = self.space.validate(config)
                self._pending[config_key(config)] = trial
                return config
            self.study.tell(trial, state=TrialState.FAIL)
        return self._fallback.ask()

    def _suggest(self, trial: optuna.trial.Trial) -> Config:
        config: Config = {}
        for p in self.space.parameters:
            if p.condition is not None and not self.space.is_active(p, config):
                continue
            config[p.name] = _suggest(trial, p)
        return config

    def withdraw(self, config: Config) -> None:
        """A proposal replaced by another config: Optuna's trial is closed as failed, which
        its samplers ignore, and the config measured instead comes in as an added trial."""
        trial = self._pending.pop(config_key(config), None)
        if trial is not None:
            self.study.tell(trial, state=TrialState.FAIL)

    def _observe(self, config: Config, value: float | None) -> None:
        trial = self._pending.pop(config_key(config), None)
        if trial is not None:
            if value is None:
                self.study.tell(trial, state=TrialState.FAIL)
            else:
                self.study.tell(trial, value)
            return
        if value is None:
            return
        self.study.add_trial(
            optuna.trial.create_trial(
                params=dict(config),
                distributions={k: distribution(self.space[k]) for k in config},
                value=value,
            )
        )


def _suggest(trial: optuna.trial.Trial, p: Parameter) -> Any:
    if p.kind is Kind.INT:
        return trial.suggest_int(p.name, int(p.low), int(p.high), log=p.log)
    if p.kind is Kind.FLOAT:
        return trial.suggest_float(p.name, float(p.low), float(p.high), log=p.log)
    return trial.suggest_categorical(p.name, list(p.values))
