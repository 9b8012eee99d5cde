"""stortune's own tuners on synthetic objectives with known optima: better than random search at
equal budget, dynamic bounds, constraints, and replays of configs they did not propose."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import tune
from fixtures.synthetic import SIX, six

from stortune.errors import ConfigError
from stortune.space import Space, parse_space
from stortune.store import Store
from stortune.targets.command import CommandTarget
from stortune.tuners import DEFAULT_TUNER, make_tuner, tuner_names
from stortune.tuners import bo as bo_module
from stortune.tuners import ddpg as ddpg_module
from stortune.tuners.bo import BOTuner
from stortune.tuners.bounds import GrowableSpace

torch.set_num_threads(1)

OWN = ["bo", "ddpg", "bestconfig"]


def best_found(name: str, space: Space, objective, budget: int, seed: int) -> float:
    tuner = make_tuner(name, space, "max", seed, budget)
    for _ in range(budget):
        config = tuner.ask()
        tuner.tell(config, objective(config))
    return tuner.best.value


@pytest.mark.parametrize("name", OWN)
def test_each_tuner_beats_random_search_at_equal_budget(name: str) -> None:
    seeds, budget = range(3), 30
    mine = [best_found(name, SIX, six, budget, s) for s in seeds]
    random = [best_found("random", SIX, six, budget, s) for s in seeds]
    assert np.mean(mine) > np.mean(random)


def test_the_default_tuner_is_one_of_ours() -> None:
    assert DEFAULT_TUNER in OWN
    assert set(OWN) <= set(tuner_names())


EXTENDABLE = parse_space(
    """
name: grow
parameters:
  x: {type: float, low: 0, high: 1, default: 0.5, extendable: true, hard_high: 8}
  k: {type: int, low: 1, high: 16, default: 4, log: true, extendable: true, hard_low: 1,
      hard_high: 1024}
  y: {type: float, low: 0, high: 1, default: 0.5}
"""
)


def test_dynamic_bounds_move_when_the_optimum_lies_outside_the_initial_box() -> None:
    def objective(config: dict) -> float:  # best at x = 3, k = 128: both outside the box
        return -((config["x"] - 3) ** 2) - (math.log2(config["k"]) - 7) ** 2 - config["y"] ** 2

    tuner = BOTuner(EXTENDABLE, "max", seed=0, budget=24)
    for _ in range(24):
        config = tuner.ask()
        assert tuner.search_space.first_violation(config) is None
        tuner.tell(config, objective(config))
    grown = tuner.search_space
    assert grown["x"].high > 1 and grown["k"].high > 16
    assert grown["x"].high <= 8 and grown["k"].high <= 1024  # hard limits hold
    assert tuner.best.config["x"] > 1 and tuner.best.config["k"] > 16
    assert EXTENDABLE["x"].high == 1 and EXTENDABLE["k"].high == 16  # the user's space is as given


def test_bounds_grow_by_half_their_width_and_stop_at_hard_limits() -> None:
    grow = GrowableSpace(EXTENDABLE)
    grow.widen_near({"x": 1.0, "k": 16, "y": 1.0})
    assert grow.space["x"].high == pytest.approx(1.5)
    assert grow.space["k"].high == 64  # log units: 16 * 2^(0.5 * log2(16))
    assert grow.space["y"].high == 1  # not extendable
    for _ in range(20):
        grow.widen_near({"x": grow.space["x"].high, "k": grow.space["k"].high})
    assert grow.space["x"].high == 8 and grow.space["k"].high == 1024
    grow.widen_near({"x": 0.0})
    assert grow.space["x"].low < 0  # no hard_low: the low side may grow without limit


def test_bo_proposals_respect_constraints_and_conditions(toy_space: Space) -> None:
    tuner = make_tuner("bo", toy_space, "min", seed=3, budget=12)
    for _ in range(12):
        config = tuner.ask()
        assert toy_space.is_valid(config)
        tuner.tell(config, config["commit"] * (1.5 - config["ratio_a"]))


def test_bo_acquisition_search_never_picks_an_invalid_config(
    toy_space: Space, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,000 proposals of the candidate search under a random acquisition (the GP only ranks
    candidates; validity is the search's job)."""
    monkeypatch.setattr(bo_module, "RANDOM_CANDIDATES", 16)
    monkeypatch.setattr(bo_module, "NEIGHBOURS", 4)
    tuner = BOTuner(toy_space, "max", seed=0, budget=50)
    for _ in range(5):
        config = tuner.ask()
        tuner.tell(config, float(config["ratio_a"]))
    space = tuner.search_space
    encoded = np.array([space.encode(o.config) for o in tuner.history])
    y = np.arange(len(encoded), dtype=float)
    free = list(range(len(space)))
    rng = np.random.default_rng(0)

    def score(points: np.ndarray) -> np.ndarray:
        return rng.random(len(points))

    for _ in range(1000):
        config, _point = tuner._maximise(score, space, free, encoded, y)
        assert toy_space.first_violation(config) is None
        assert toy_space.is_valid(config)


@pytest.mark.parametrize("name", ["ddpg", "bestconfig"])
def test_constraints_are_never_violated_across_1000_proposals(
    name: str, toy_space: Space, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ddpg_module, "TRAIN_STEPS", 1)  # learning speed is not under test
    tuner = make_tuner(name, toy_space, "max", seed=2, budget=1000)
    rng = np.random.default_rng(0)
    for _ in range(1000):
        config = tuner.ask()
        assert toy_space.first_violation(config) is None
        assert toy_space.is_valid(config)
        tuner.tell(config, float(rng.random()))


@pytest.mark.parametrize("name", OWN)
def test_told_configs_they_did_not_propose_and_failures(name: str, toy_space: Space) -> None:
    """A resumed campaign replays stored trials: ask, then tell the stored config."""
    tuner = make_tuner(name, toy_space, "min", seed=0, budget=12)
    other = make_tuner("random", toy_space, seed=9)
    stored = [toy_space.default_config(), *(other.ask() for _ in range(4))]
    for i, config in enumerate(stored):
        tuner.ask()
        tuner.tell(config, None if i == 2 else float(i))
    for _ in range(2):
        config = tuner.ask()
        assert toy_space.is_valid(config)
        tuner.tell(config, 10.0)
    assert tuner.best.value == 0.0
    tuner.observe_state({})  # the state hook is there for every tuner


def test_configs_beyond_the_declared_box_but_within_hard_limits_are_valid() -> None:
    assert EXTENDABLE.validate({"x": 3.0, "k": 128, "y": 0.5})["x"] == 3.0
    with pytest.raises(ConfigError, match=r"'x': 9.0 is out of range \[-inf, 8\] \(hard limits\)"):
        EXTENDABLE.validate({"x": 9.0})
    with pytest.raises(ConfigError, match="out of range"):
        EXTENDABLE.validate({"y": 1.5})  # not extendable: the declared range holds


def test_widened_proposals_are_measured_by_the_loop_not_refused(tmp_path: Path) -> None:
    script = tmp_path / "objective.py"
    script.write_text(
        "import json, math, sys\n"
        "x, k = float(sys.argv[1]), float(sys.argv[2])\n"
        "print(json.dumps({'score': -(x - 3) ** 2 - (math.log2(k) - 7) ** 2}))\n"
    )
    target = CommandTarget(command=[sys.executable, str(script), "{x}", "{k}"])
    with Store(str(tmp_path / "grow.db")) as db:
        tune(db, "g", EXTENDABLE, target, "score:max", tuner="bo", budget=16, repetitions=1)
        trials = db.trials(db.campaign("g").id)
    assert {t.status for t in trials} == {"ok"}
    assert max(t.config["x"] for t in trials) > 1 or max(t.config["k"] for t in trials) > 16


def test_bo_sees_a_categorical_value_as_one_column_of_its_own() -> None:
    """Each value of a many-valued categorical is its own 0/1 input to the GP: any two values
    lie equally far apart, whatever their order in the space file."""
    space = parse_space(
        """
name: methods
parameters:
  method: {type: categorical, values: [a, b, c, d, e], default: a}
  threads: {type: int, low: 1, high: 8, default: 4}
  sync: {type: bool, default: true}
"""
    )
    inputs = bo_module.GPInputs(space)
    configs = [{"method": m, "threads": 4, "sync": True} for m in "abcde"]
    x = inputs(np.array([space.encode(c) for c in configs])).numpy()
    assert x.shape == (5, 5 + 1 + 1)
    distances = {
        round(float(np.linalg.norm(x[i] - x[j])), 9) for i in range(5) for j in range(i + 1, 5)
    }
    assert distances == {round(math.sqrt(2), 9)}


def test_bo_neighbours_reach_across_an_ordinal_range() -> None:
    """A neighbour of a config at an ordinal's lowest level can land at its upper levels: a
    narrow peak beyond a plateau (7z's Xval) is otherwise never a candidate near the best."""
    rng = np.random.default_rng(0)
    start = np.full(3, 1 / 12)  # the lowest of six levels
    points = bo_module._neighbours(start, 500, [0, 1, 2], np.zeros(3, dtype=bool), rng)
    assert (points[:, 0] >= 4 / 6).any()
