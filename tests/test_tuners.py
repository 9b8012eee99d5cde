import numpy as np
import pytest

from stortune.errors import StortuneError
from stortune.sampling import config_key
from stortune.space import Space, parse_space
from stortune.tuners import make_tuner, tuner_names

SIX = (
    """
name: six
parameters:
"""
    + "".join(f"  x{i}: {{type: float, low: 0, high: 1, default: 0.5}}\n" for i in range(5))
    + """\
  c: {type: categorical, values: [a, b, c, d], default: a}
"""
)


def objective(config: dict) -> float:
    """Known optimum 0 at x_i = 0.8 and c = 'c'."""
    return -sum((config[f"x{i}"] - 0.8) ** 2 for i in range(5)) - (config["c"] != "c")


@pytest.mark.parametrize("name", ["random", "lhs", "tpe", "optuna-random", "qmc"])
def test_tuners_propose_valid_configs_and_track_the_best(name: str, toy_space: Space) -> None:
    tuner = make_tuner(name, toy_space, "min", seed=0, budget=15)
    for _ in range(15):
        config = tuner.ask()
        assert toy_space.is_valid(config)
        tuner.tell(config, config["commit"] + config["ratio_a"])
    values = [o.value for o in tuner.history]
    assert tuner.best.value == min(values)


def test_constraints_are_never_violated_across_many_proposals(toy_space: Space) -> None:
    tuner = make_tuner("tpe", toy_space, seed=1)
    for i in range(150):
        config = tuner.ask()
        assert toy_space.first_violation(config) is None
        tuner.tell(config, float(i % 7))


def test_tpe_beats_random_on_average() -> None:
    space = parse_space(SIX)
    gaps = {"tpe": [], "random": []}
    for seed in range(4):
        for name in gaps:
            tuner = make_tuner(name, space, "max", seed=seed, budget=60)
            for _ in range(60):
                config = tuner.ask()
                tuner.tell(config, objective(config))
            gaps[name].append(-tuner.best.value)
    assert np.mean(gaps["tpe"]) < np.mean(gaps["random"])


def test_failed_evaluations_and_foreign_configs_are_accepted(toy_space: Space) -> None:
    tuner = make_tuner("tpe", toy_space, seed=0)
    tuner.tell(toy_space.default_config(), 3.0)  # told without being asked (a replay)
    config = tuner.ask()
    tuner.tell(config, None)
    assert tuner.best.value == 3.0
    assert len(tuner.study.trials) >= 2


def test_random_avoids_repeats_in_a_small_space() -> None:
    space = parse_space(
        "name: s\nparameters:\n  a: {type: ordinal, values: [1, 2, 3, 4], default: 1}\n"
    )
    tuner = make_tuner("random", space, seed=0)
    keys = {config_key(tuner.ask()) for _ in range(4)}
    assert len(keys) == 4


def test_unknown_tuner_lists_the_choices(toy_space: Space) -> None:
    with pytest.raises(StortuneError, match="unknown tuner 'magic'.*tpe"):
        make_tuner("magic", toy_space)
    assert "lhs" in tuner_names()
