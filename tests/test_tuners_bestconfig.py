"""BestConfig: default first, divide-and-diverge rounds, bound-and-search boxes; and pinning
all but the top-K parameters of a ranking."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from stortune.space import Space, parse_space
from stortune.tuners.bestconfig import BestConfigTuner, round_size
from stortune.tuners.topk import free_indices, pin, top_k

SPACE = parse_space(
    """
name: box
parameters:
  x: {type: float, low: 0, high: 1, default: 0.5}
  y: {type: float, low: 0, high: 1, default: 0.5}
  n: {type: int, low: 1, high: 64, default: 8}
"""
)


def test_default_first_then_a_spread_out_latin_hypercube_round() -> None:
    tuner = BestConfigTuner(SPACE, "max", seed=0, budget=24)
    assert tuner.ask() == SPACE.default_config()
    tuner.tell(SPACE.default_config(), 0.0)
    k = round_size(24)
    points = []
    for _ in range(k):
        config = tuner.ask()
        points.append(SPACE.encode(config))
        tuner.tell(config, 0.0)
    strata = np.floor(np.array(points)[:, :2] * k)  # floats: one point per interval
    for column in strata.T:
        assert sorted(column) == list(range(k))


def test_a_better_round_bounds_the_box_around_the_best_and_a_worse_one_goes_global() -> None:
    def objective(config: dict) -> float:
        return -((config["x"] - 0.9) ** 2) - (config["y"] - 0.1) ** 2

    tuner = BestConfigTuner(SPACE, "max", seed=1, budget=40)
    for _ in range(1 + tuner.round_size):
        config = tuner.ask()
        tuner.tell(config, objective(config))
    tuner.ask()  # plans the second round around the best point
    low, high = tuner.box
    best = SPACE.encode(tuner.best.config)
    assert ((low <= best) & (best <= high)).all()
    assert (high - low)[:2].max() < 1  # shrunk to the nearest neighbours
    for config in tuner._round:  # the floats (ints round to their cell's centre)
        point = SPACE.encode(config)[:2]
        assert ((low[:2] - 1e-9 <= point) & (point <= high[:2] + 1e-9)).all()
    tuner._queue.clear()  # a round that brings nothing better: the next goes global
    tuner._round_start_best = tuner.best.value
    tuner.ask()
    assert (tuner.box[0] == 0).all() and (tuner.box[1] == 1).all()


def test_minimising_finds_a_corner() -> None:
    tuner = BestConfigTuner(SPACE, "min", seed=0, budget=40)
    for _ in range(40):
        config = tuner.ask()
        tuner.tell(config, config["x"] + config["y"] + config["n"] / 64)
    assert tuner.best.value < 0.5


def test_pinned_space_varies_only_the_top_parameters(toy_space: Space) -> None:
    held = {"journal": "writeback", "commit": 30, "ratio_b": 0.6, "block_size": 2048}
    pinned = pin(toy_space, ["ratio_a", "inode_size"], held)
    assert [pinned.parameters[i].name for i in free_indices(pinned)] == ["inode_size", "ratio_a"]
    default = pinned.default_config()
    assert default["journal"] == "writeback" and default["commit"] == 30
    assert "barrier" not in default  # inactive with journal=writeback
    again = parse_space(yaml.safe_dump(pinned.to_dict(), sort_keys=False))
    assert again.default_config() == default  # a stored campaign resumes with it
    tuner = BestConfigTuner(pinned, "max", seed=0, budget=20)
    for _ in range(20):
        config = tuner.ask()
        assert toy_space.is_valid(config)  # full configs of the original space
        assert config["ratio_a"] + 0.6 <= 1  # the constraint sees the pinned ratio_b
        assert config["block_size"] == 2048 and config["inode_size"] <= 2048
        tuner.tell(config, config["ratio_a"])


def test_top_k_of_a_carver_selection_is_filled_by_importance() -> None:
    class Step:
        def __init__(self, param: str) -> None:
            self.param = param
            self.scores = {"a": 0.5, "b": 0.9, "c": 0.1, "d": 0.3}

    class Carver:
        params = ["a", "b", "c", "d", "e"]
        steps = [Step("b")]
        selected = ["b"]

    assert top_k(Carver(), 3) == ["b", "a", "d"]
    assert top_k(Carver(), 9) == ["b", "a", "d", "c", "e"]
    with pytest.raises(Exception, match="top-k"):
        top_k(Carver(), 0)
