"""FLASH: a CART surrogate choosing the next config from a pool, one at a time."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from stortune.errors import StortuneError
from stortune.sampling import config_key
from stortune.space import parse_space
from stortune.tuners import make_tuner
from stortune.tuners.flash import FlashTuner

SPACE = parse_space(
    """
name: grid
parameters:
  a: {type: int, low: 0, high: 19, default: 0}
  b: {type: int, low: 0, high: 19, default: 0}
  c: {type: categorical, values: [x, y, z], default: x}
"""
)


def value(config: dict) -> float:
    """A narrow peak at a=13, b=7, c=z: few configs are near the best."""
    peak = -((config["a"] - 13) ** 2) - (config["b"] - 7) ** 2
    return peak + (30 if config["c"] == "z" else 0)


def pool(n: int, seed: int) -> list[dict]:
    """A measured table that is not a full grid: n of its 1,200 configs."""
    grid = [
        {"a": a, "b": b, "c": c}
        for a, b, c in itertools.product(range(20), range(20), ["x", "y", "z"])
    ]
    rng = np.random.default_rng(seed)
    return [grid[i] for i in rng.choice(len(grid), n, replace=False)]


def test_flash_picks_only_pool_rows_and_never_repeats_one() -> None:
    rows = pool(40, seed=3)
    tuner = FlashTuner(SPACE, "max", seed=1, budget=40, pool=rows)
    asked = []
    for _ in range(40):
        config = tuner.ask()
        asked.append(config_key(config))
        tuner.tell(config, value(config))
    assert set(asked) == {config_key(r) for r in rows} and len(asked) == 40
    with pytest.raises(StortuneError, match="every one of the 40 configs of the pool is measured"):
        tuner.ask()


def test_flash_is_reproducible_by_seed_and_built_by_name() -> None:
    def run(seed: int) -> list[str]:
        tuner = make_tuner("flash", SPACE, "max", seed, budget=15)
        out = []
        for _ in range(15):
            config = tuner.ask()
            out.append(config_key(config))
            tuner.tell(config, value(config))
        return out

    assert run(4) == run(4) and run(4) != run(5)


def test_flash_finds_a_narrow_peak_sooner_than_random_search() -> None:
    """Over 10 seeds and a pool of 600, the best of 30 evaluations, median distance to the
    optimum: FLASH's surrogate beats 30 rows drawn at random from the same pool."""
    flash, drawn = [], []
    for seed in range(10):
        rows = pool(600, seed)  # in random order already
        optimum = max(value(r) for r in rows)
        tuner = FlashTuner(SPACE, "max", seed, budget=30, pool=rows)
        found = []
        for _ in range(30):
            config = tuner.ask()
            found.append(value(config))
            tuner.tell(config, found[-1])
        flash.append(optimum - max(found))
        drawn.append(optimum - max(value(r) for r in rows[:30]))
    assert np.median(flash) < np.median(drawn)
