"""Magpie's DDPG: the action mapping and reward formulas, state, replay buffer, re-measuring
the top configs, and saving/loading the agent for progressive tuning."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from stortune.errors import StortuneError
from stortune.space import Kind, Parameter, parse_space
from stortune.tuners import ddpg
from stortune.tuners.ddpg import (
    DDPGTuner,
    action_value,
    magpie_reward,
    normalised_objective,
    value_action,
)

torch.set_num_threads(1)

SPACE = parse_space(
    """
name: lustre
parameters:
  stripe_count: {type: int, low: 1, high: 8, default: 1}
  stripe_size: {type: float, low: 1, high: 64, default: 1}
  scheduler: {type: categorical, values: [none, mq-deadline, bfq], default: none}
  readahead: {type: ordinal, values: [0, 128, 512, 4096], default: 128}
"""
)


def test_action_mapping_is_magpies_formula() -> None:
    count, size = SPACE["stripe_count"], SPACE["stripe_size"]
    for a in np.linspace(0, 1, 23):
        assert action_value(size, a) == pytest.approx(a * (64 - 1) + 1)  # continuous
        assert action_value(count, a) == math.floor(a * (8 - 1) + 1 + 0.5)  # discrete
    assert action_value(count, 0.5) == 5  # 4.5 rounds up: floor(x + 0.5)
    assert action_value(SPACE["scheduler"], 0.49) == "mq-deadline"  # by index, rounded
    assert action_value(SPACE["readahead"], 1.0) == 4096
    assert action_value(count, 1.7) == 8  # actions outside [0, 1] are clipped


def test_told_configs_map_back_to_their_actions() -> None:
    for p in SPACE.parameters:
        for value in p.values or (p.low, p.default, p.high):
            assert action_value(p, value_action(p, value)) == value
    logp = Parameter("x", Kind.FLOAT, 10.0, low=1.0, high=1000.0, log=True)
    assert action_value(logp, 0.5) == pytest.approx(math.sqrt(1000))  # log units


def test_reward_is_magpies_relative_change_of_the_weighted_sum() -> None:
    before, after, w = [0.2, 0.5], [0.3, 0.4], [2.0, 1.0]
    expected = ((2 * 0.3 + 0.4) - (2 * 0.2 + 0.5)) / (2 * 0.2 + 0.5)
    assert magpie_reward(before, after, w) == pytest.approx(expected)
    assert magpie_reward([0.5], [0.75]) == pytest.approx(0.5)
    # the first value scores 0.5; twice as good scores 1 (max) and half the latency 0.75 (min)
    assert normalised_objective(100.0, 100.0, "max") == 0.5
    assert normalised_objective(200.0, 100.0, "max") == 1.0
    assert normalised_objective(50.0, 100.0, "min") == 0.75


def test_the_tuner_learns_from_magpies_reward() -> None:
    tuner = DDPGTuner(SPACE, "max", seed=0, budget=10)
    tuner.tell(SPACE.default_config(), 100.0)
    config = tuner.ask()
    tuner.tell(config, 150.0)
    state, action, reward, _next = tuner.buffer[-1]
    assert reward == pytest.approx(magpie_reward([0.5], [0.75]))
    assert action == pytest.approx(tuner.action_of(config))
    # no system metrics (a table target): the state is the last action and objective
    assert len(state) == len(SPACE) + 1 and _next[-1] == pytest.approx(0.75)


def test_system_metrics_are_the_state_normalised_to_the_range_seen() -> None:
    tuner = DDPGTuner(SPACE, "max", seed=0, budget=10)
    for i, value in enumerate([100.0, 120.0, 90.0]):
        tuner.observe_state({"cpu_idle": 10.0 * i, "client.dirty_mb": 5.0})
        tuner.tell(tuner.ask(), value)
    _state, _action, _reward, after = tuner.buffer[-1]
    assert list(after) == [0.5, 1.0]  # sorted names: client.dirty_mb (constant), cpu_idle (max)


def test_replay_buffer_is_fifo_of_limited_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ddpg, "BUFFER", 4)
    monkeypatch.setattr(ddpg, "TRAIN_STEPS", 1)
    tuner = DDPGTuner(SPACE, "max", seed=1, budget=30)
    configs = []
    for i in range(9):
        config = tuner.ask()
        configs.append(config)
        tuner.tell(config, float(i + 1))
    assert len(tuner.buffer) == 4
    assert tuner.buffer[-1][1] == pytest.approx(tuner.action_of(configs[-1]))
    assert tuner.buffer[0][1] == pytest.approx(tuner.action_of(configs[-4]))


def test_top_configs_are_measured_again_and_judged_by_their_mean(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ddpg, "TRAIN_STEPS", 1)
    budget = 20
    tuner = DDPGTuner(SPACE, "max", seed=0, budget=budget)
    assert tuner.remeasure == 2
    values = iter(np.linspace(1, 10, budget - 2))
    for _ in range(budget - 2):
        config = tuner.ask()
        tuner.tell(config, float(next(values)))
    top = [o.config for o in sorted(tuner.history, key=lambda o: -o.value)[:2]]
    again = [tuner.ask() for _ in range(2)]
    assert again == top
    tuner.tell(again[0], 0.0)  # the lucky best is worse the second time
    tuner.tell(again[1], 9.0)
    assert tuner.best.config == again[1]


def test_saved_agent_continues_in_a_new_campaign(tmp_path: Path) -> None:
    tuner = DDPGTuner(SPACE, "max", seed=0, budget=12)
    for i in range(6):
        tuner.tell(tuner.ask(), float(i))
    path = tmp_path / "agent.pt"
    tuner.save(path)
    again = DDPGTuner(SPACE, "max", seed=5, budget=12)
    again.load(path)
    state = np.full(len(SPACE) + 1, 0.5)
    assert again._agent.act(state) == pytest.approx(tuner._agent.act(state))
    assert len(again.buffer) == len(tuner.buffer)
    assert again.ask() == SPACE.default_config()  # the reference, then the policy acts
    other = parse_space("name: o\nparameters:\n  z: {type: int, low: 1, high: 3, default: 1}\n")
    with pytest.raises(StortuneError, match="tuned"):
        DDPGTuner(other, "max").load(path)


SQUARE = parse_space(
    """
name: square
parameters:
  a: {type: int, low: 0, high: 100, default: 50}
  b: {type: int, low: 0, high: 100, default: 50}
"""
)


def test_every_third_proposal_after_the_design_is_a_random_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An actor that keeps improving still shares the campaign with random configs: its slow
    learning keeps its proposals near where its initial weights put them."""
    tuner = DDPGTuner(SQUARE, "max", seed=4, budget=60)
    drawn: list[int] = []
    draw = tuner._random
    monkeypatch.setattr(tuner, "_random", lambda: drawn.append(len(tuner.history)) or draw())
    for step in range(45):
        tuner.tell(tuner.ask(), float(step))  # every evaluation beats the last: never stalled
    after_design = [s for s in drawn if s >= tuner.n_init]
    assert after_design == [s for s in range(tuner.n_init, 45) if s % ddpg.EXPLORE_EVERY == 0]


def test_a_stalled_ddpg_sets_its_actor_aside_for_random_configs_and_moves_near_the_best(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing beats the default (the centre): after ten evaluations without a gain the actor
    is not asked, and the proposals alternate between random configs and configs near the
    best."""
    tuner = DDPGTuner(SQUARE, "max", seed=4, budget=80)
    for _ in range(12):
        config = tuner.ask()
        tuner.tell(config, 2.0 if config == SQUARE.default_config() else 1.0)
    assert tuner.best is not None and tuner.best.config == SQUARE.default_config()

    def no_actor(_state: np.ndarray) -> np.ndarray:
        raise AssertionError("the actor was asked while stalled")

    assert tuner._agent is not None
    monkeypatch.setattr(tuner._agent, "act", no_actor)
    distance: dict[int, list[float]] = {0: [], 1: []}
    for _ in range(40):
        config = tuner.ask()
        distance[len(tuner.history) % 2].append(max(abs(config["a"] - 50), abs(config["b"] - 50)))
        tuner.tell(config, 1.0)
    near, random = np.median(distance[1]), np.median(distance[0])
    assert near < 25 < random  # steps of a fifth of the range, against uniform draws
