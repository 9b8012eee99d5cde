"""Contracts every target and every tuner keeps, checked over the registries (in the way
Optuna's sampler tests and scikit-learn's check_estimator work): a new target or tuner is
checked by being registered.

Targets: describe -> from_spec -> describe round-trips through JSON (what a stored campaign
and its resume rely on), unknown settings are refused, and the command line offers every
setting that has a flag. Tuners: they ask only valid configs, are deterministic in (seed,
history), and a fresh tuner told a stored history asks what the original would have next (what
`--resume` relies on).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TOY_SPACE

from stortune.errors import TargetError
from stortune.space import Space, parse_space
from stortune.targets import REGISTRY, make_target
from stortune.targets.base import Target
from stortune.tuners import make_tuner, tuner_names

# Targets whose default settings cannot make one (they need a file or a program) get an example
# here; every other registered target must be constructible from its defaults.
EXAMPLES: dict[str, Callable[[Path], dict]] = {
    "command": lambda tmp: {"command": [sys.executable, "-c", "print(1)"]},
    "table": lambda tmp: {"dataset": str(_table_file(tmp))},
    "surrogate": lambda tmp: {"model": str(_model_file(tmp))},
}

TABLE_SPACE = "name: t\nparameters:\n  a: {type: ordinal, values: [1, 2, 3], default: 1}\n"


def _table_file(tmp: Path) -> Path:
    path = tmp / "t.csv"
    pd.DataFrame({"a": [1, 2, 3], "y+": [1.0, 2.0, 3.0]}).to_csv(path, index=False)
    return path


def _model_file(tmp: Path) -> Path:
    from stortune.models import technique
    from stortune.models.surrogate import SurrogateModel

    X = pd.DataFrame({"a": [1, 2, 3]})
    estimator = technique("cart").make(minsplit=2).fit(X, [1.0, 2.0, 3.0])
    return SurrogateModel.from_fit(estimator, X, "y", "cart").save(tmp / "m.joblib")


def space_for(kind: str) -> Space | None:
    if kind in ("table", "surrogate"):
        return parse_space(TABLE_SPACE)
    return None  # the target's own default space, or none


@pytest.mark.parametrize("kind", sorted(REGISTRY))
def test_target_spec_round_trips(kind: str, tmp_path: Path) -> None:
    cls = REGISTRY[kind]
    values = EXAMPLES[kind](tmp_path) if kind in EXAMPLES else {}
    target: Target = cls(space_for(kind), **values)
    spec = json.loads(json.dumps(target.describe()))  # stored as JSON with the campaign
    assert spec["kind"] == kind
    again = make_target(spec, space_for(kind) or target.space)
    assert type(again) is cls
    assert again.describe() == spec
    with pytest.raises(TargetError, match="unknown setting"):
        make_target({**spec, "no_such_setting": 1}, space_for(kind) or target.space)


@pytest.mark.parametrize("kind", sorted(REGISTRY))
def test_target_options_come_from_its_settings(kind: str) -> None:
    from stortune.cli.targets import option_table

    table = option_table()
    for option in REGISTRY[kind].Settings.cli_options():
        assert table[option.name].flag == option.flag
        assert option.flag.startswith("--") and option.help


def test_the_command_line_offers_every_targets_options() -> None:
    from typer.main import get_command

    from stortune.cli import build_app

    command = get_command(build_app()).commands["run"]  # type: ignore[attr-defined]
    flags = {opt for p in command.params for opt in p.opts}
    for cls in REGISTRY.values():
        for option in cls.Settings.cli_options():
            assert option.flag in flags, (cls.kind, option.flag)
    assert {"--target", "--workload", "--runtime"} <= flags


# ---- tuners ------------------------------------------------------------------------------------
TUNERS = tuner_names()
STEPS = 8


def objective(config: dict) -> float | None:
    """A deterministic function of a toy config (None: a failed evaluation now and then)."""
    if config["journal"] == "journal" and config["commit"] > 100:
        return None
    value = math.log2(config["block_size"]) + math.log(config["commit"]) - config["ratio_a"]
    return value + (1.0 if config.get("barrier") else 0.0) + 0.01 * config["inode_size"] / 128


def drive(name: str, seed: int, steps: int) -> list[tuple[dict, float | None]]:
    space = parse_space(TOY_SPACE)
    tuner = make_tuner(name, space, "max", seed, budget=20)
    history = []
    for _ in range(steps):
        config = tuner.ask()
        assert space.validate(config) == config, f"{name} asked an invalid or untidy config"
        value = objective(config)
        tuner.tell(config, value)
        history.append((config, value))
    return history


@pytest.mark.parametrize("name", TUNERS)
def test_tuner_asks_valid_configs_deterministically_and_resumes(name: str) -> None:
    first = drive(name, seed=5, steps=STEPS)
    assert drive(name, seed=5, steps=STEPS) == first  # deterministic in (seed, history)
    # a fresh tuner told the stored history (asking along, as a resumed campaign does) asks
    # what the original asks next
    space = parse_space(TOY_SPACE)
    original = make_tuner(name, space, "max", 5, budget=20)
    for config, value in first[:5]:
        assert original.ask() == config
        original.tell(config, value)
    resumed = make_tuner(name, space, "max", 5, budget=20)
    for config, value in first[:5]:
        resumed.ask()
        resumed.tell(config, value)
    for _ in range(3):
        nxt = original.ask()
        assert resumed.ask() == nxt
        value = objective(nxt)
        original.tell(nxt, value)
        resumed.tell(nxt, value)


@pytest.mark.parametrize("name", TUNERS)
def test_tuner_copes_with_only_failures(name: str) -> None:
    space = parse_space(TOY_SPACE)
    tuner = make_tuner(name, space, "min", 1, budget=10)
    for _ in range(5):
        config = tuner.ask()
        space.validate(config)
        tuner.tell(config, None)
    assert tuner.best is None
    assert np.isfinite([float(v) for v in space.encode(tuner.ask())]).all()
