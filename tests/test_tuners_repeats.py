"""bo's repeats of its leaders on noisy targets: they sharpen the leaders' means, stop on a
deterministic target, give way to a caller that races configs, and the recommendation is the
best lower bound, not a lucky single run."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import torch
from fixtures.synthetic import SIX, six

from stortune.sampling import config_key
from stortune.tuners import make_tuner
from stortune.tuners.bo import MAX_RUNS

torch.set_num_threads(1)
BUDGET = 30


def asked(tuner, objective) -> Counter:
    """Run `BUDGET` asks against `objective`; how often each config was measured."""
    counts: Counter = Counter()
    for _ in range(BUDGET):
        config = tuner.ask()
        counts[config_key(config)] += 1
        tuner.tell(config, objective(config))
    return counts


def noisy(seed: int):
    rng = np.random.default_rng(seed)
    return lambda config: math.exp(six(config)) * rng.lognormal(0.0, 0.07)


def test_on_a_noisy_target_bo_repeats_its_leaders_up_to_a_cap() -> None:
    tuner = make_tuner("bo", SIX, "max", seed=1, budget=BUDGET)
    counts = asked(tuner, noisy(1))
    repeated = [n for n in counts.values() if n > 1]
    assert len(repeated) >= 2
    assert max(counts.values()) <= MAX_RUNS
    assert sum(n - 1 for n in repeated) <= BUDGET // 3  # the search goes on beside them


def test_a_repeat_that_returns_the_same_value_ends_the_repeats() -> None:
    tuner = make_tuner("bo", SIX, "max", seed=1, budget=BUDGET)
    counts = asked(tuner, lambda config: math.exp(six(config)))
    assert sum(n - 1 for n in counts.values()) == 1  # one repeat showed the target exact


def test_a_caller_that_races_configs_gets_no_repeats() -> None:
    tuner = make_tuner("bo", SIX, "max", seed=1, budget=BUDGET)
    tuner.leave_repeats_to_caller()
    assert max(asked(tuner, noisy(1)).values()) == 1


def test_bo_recommends_the_best_lower_bound_not_the_lucky_run() -> None:
    tuner = make_tuner("bo", SIX, "max", seed=0, budget=BUDGET)
    steady, lucky, third = (dict(SIX.default_config(), a=a) for a in (0.1, 0.2, 0.3))
    # the lucky config once measured 9.0 and once 5.0; the steady one about 7.3 each time
    for config, value in [(lucky, 9.0), (steady, 7.2), (third, 4.0), (lucky, 5.0)]:
        tuner.tell(config, value)
    for value in (7.4, 7.3, 7.3):
        tuner.tell(steady, value)
    assert max(tuner.history, key=lambda o: o.value).config == lucky
    assert tuner.recommend() == steady
