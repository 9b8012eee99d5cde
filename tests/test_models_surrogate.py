"""A fitted model survives save and load, answers for single configs, and serves as the
`surrogate` target that tuners run against."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from typer.testing import CliRunner, Result

from stortune.cli.targets import TargetOptions
from stortune.errors import ConfigError, StortuneError, TargetError
from stortune.models import make_model, technique
from stortune.models.surrogate import SurrogateModel
from stortune.space import load_space, parse_space
from stortune.store import Store
from stortune.targets import make_target
from stortune.targets.surrogate import SurrogateTarget


@pytest.fixture
def surrogate():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"bs": rng.integers(1, 64, 100), "sched": rng.choice(["noop", "cfq"], 100)})
    y = 10.0 * X["bs"] + 100 * (X["sched"] == "cfq")
    model = make_model("linear").fit(X, y)
    return SurrogateModel.from_fit(model, X, "iops", "linear", source="test")


def test_save_load_round_trip(tmp_path, surrogate):
    path = surrogate.save(tmp_path / "sub" / "model.joblib")
    loaded = SurrogateModel.load(path)
    assert (loaded.params, loaded.metric, loaded.technique) == (["bs", "sched"], "iops", "linear")
    assert loaded.metadata["source"] == "test" and loaded.metadata["n_rows"] == 100
    assert loaded.metadata["ranges"]["sched"] == ["cfq", "noop"]
    config = {"bs": 8, "sched": "cfq"}
    assert loaded.predict_config(config) == pytest.approx(180.0)
    assert loaded.predict_config(config) == surrogate.predict_config(config)


def test_config_values_are_coerced_from_text(surrogate):
    assert surrogate.predict_config({"bs": "8", "sched": "noop"}) == pytest.approx(80.0)


def test_bad_configs_are_user_errors(surrogate):
    with pytest.raises(ConfigError, match="lacks sched"):
        surrogate.predict_config({"bs": 8})
    with pytest.raises(ConfigError, match="unknown nr"):
        surrogate.predict_config({"bs": 8, "sched": "noop", "nr": 4})
    with pytest.raises(ConfigError, match="expects a number"):
        surrogate.predict_config({"bs": "big", "sched": "noop"})


def test_loading_something_else_fails_cleanly(tmp_path):
    junk = tmp_path / "junk.joblib"
    junk.write_text("not a model")
    with pytest.raises(StortuneError, match="not a stortune model file"):
        SurrogateModel.load(junk)
    with pytest.raises(StortuneError, match="no such model file"):
        SurrogateModel.load(tmp_path / "missing.joblib")


# ---- the surrogate target: tuners run against a fitted model ------------------------------

GRID_SPACE = """\
name: synth
parameters:
  x: {type: int, low: 0, high: 8, default: 0}
  y: {type: int, low: 0, high: 8, default: 8}
  c: {type: categorical, values: [a, b], default: a}
"""


def synthetic_perf(x: float, y: float, c: str) -> float:
    """A known optimum: x = 6, y = 2, c = b (440); positive everywhere, as a throughput."""
    return 400.0 - 4.0 * (x - 6) ** 2 - 3.0 * (y - 2) ** 2 + (40.0 if c == "b" else 0.0)


@pytest.fixture
def fitted(tmp_path: Path) -> dict[str, Any]:
    rows = list(itertools.product(range(9), range(9), "ab"))
    X = pd.DataFrame(rows, columns=["x", "y", "c"])
    y = [synthetic_perf(*row) for row in rows]
    estimator = technique("cart").make(minsplit=4, cp=0.0)
    model = SurrogateModel.from_fit(estimator.fit(X, y), X, "perf", "cart")
    (tmp_path / "synth.yaml").write_text(GRID_SPACE)
    return {
        "model": str(model.save(tmp_path / "cart.joblib")),
        "space": str(tmp_path / "synth.yaml"),
        "store": str(tmp_path / "runs.db"),
        "tmp": tmp_path,
    }


def cli(*args: str) -> Result:
    from stortune.cli import app

    return CliRunner().invoke(app, list(args))


def cli_ok(*args: str) -> dict[str, Any]:
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output + repr(result.exception)
    return json.loads(result.output)


def test_the_target_predicts_the_applied_config(fitted: dict) -> None:
    target = SurrogateTarget(load_space(fitted["space"]), model=str(fitted["model"]))
    assert not target.measures_machine
    target.apply({"x": 6, "y": 2, "c": "b"})
    m = target.run(None)
    assert m.ok and m.metrics == {"perf": pytest.approx(440.0, abs=5)}
    target.apply({"x": 0, "y": 8, "c": "a"})
    assert target.run(None).metrics["perf"] < 300


def test_noise_is_multiplicative_and_seeded(fitted: dict) -> None:
    space = load_space(fitted["space"])
    config = {"x": 6, "y": 2, "c": "b"}

    def runs(seed: int) -> list[float]:
        target = SurrogateTarget(space, model=str(fitted["model"]), noise=0.1, seed=seed)
        target.apply(config)
        return [target.run(None).metrics["perf"] for _ in range(200)]

    values = runs(1)
    exact = SurrogateModel.load(fitted["model"]).predict_config(config)
    assert np.std(values) / exact == pytest.approx(0.1, rel=0.25)
    assert np.mean(values) == pytest.approx(exact, rel=0.03)
    assert runs(1) == values and runs(2) != values
    with pytest.raises(TargetError, match="noise"):
        SurrogateTarget(space, model=str(fitted["model"]), noise=-0.1)


def test_describe_and_from_spec_round_trip(fitted: dict) -> None:
    space = load_space(fitted["space"])
    target = SurrogateTarget(space, model=str(fitted["model"]), noise=0.05, seed=3)
    spec = json.loads(json.dumps(target.describe()))  # stored as JSON in the campaign
    assert spec["kind"] == "surrogate" and spec["model"] == str(Path(fitted["model"]).resolve())
    assert (spec["metric"], spec["technique"], spec["noise"], spec["seed"]) == (
        "perf",
        "cart",
        0.05,
        3,
    )
    again = make_target(spec, space)
    assert isinstance(again, SurrogateTarget) and again.describe() == spec
    config = {"x": 3, "y": 5, "c": "a"}
    target.apply(config)
    again.apply(config)
    assert again.run(None).metrics == target.run(None).metrics  # same seed, same noise


def test_a_pinned_subspace_keeps_its_held_values_in_the_spec(fitted: dict) -> None:
    space = load_space(fitted["space"])
    pinned = space.subspace(["x"], fixed={"y": 2, "c": "b"})
    target = SurrogateTarget(pinned, model=str(fitted["model"]))
    spec = target.describe()
    assert spec["held"] == {"y": 2, "c": "b"}
    # a resumed campaign's space is the stored YAML: the tuned parameter only
    stored = parse_space(yaml.safe_dump(pinned.to_dict()), "stored")
    again = make_target(spec, stored)
    target.apply({"x": 6})
    again.apply({"x": 6})
    assert again.run(None).metrics == target.run(None).metrics
    assert target.run(None).metrics["perf"] == pytest.approx(440.0, abs=5)


def test_a_model_of_other_parameters_is_refused(fitted: dict) -> None:
    other = parse_space(
        "name: other\nparameters:\n"
        "  x: {type: int, low: 0, high: 8, default: 0}\n"
        "  z: {type: int, low: 0, high: 8, default: 0}\n"
        "  c: {type: categorical, values: [a, b], default: a}\n"
    )
    with pytest.raises(TargetError, match="does not match space 'other'") as info:
        SurrogateTarget(other, model=str(fitted["model"]))
    message = str(info.value)
    assert "lacks y" in message and "does not know z" in message and "\n" not in message
    kinds = parse_space(
        "name: kinds\nparameters:\n"
        "  x: {type: categorical, values: [lo, hi], default: lo}\n"
        "  y: {type: int, low: 0, high: 8, default: 0}\n"
        "  c: {type: categorical, values: [a, b], default: a}\n"
    )
    with pytest.raises(TargetError, match="'x' is numeric in the model"):
        SurrogateTarget(kinds, model=str(fitted["model"]))
    # through the command line too
    other_file = fitted["tmp"] / "other.yaml"
    other_file.write_text(yaml.safe_dump(other.to_dict()))
    result = cli(
        "tune", "--space", str(other_file), "--model", fitted["model"], "-o", "perf:max",
        "--store", fitted["store"],
    )  # fmt: skip
    assert result.exit_code != 0  # the entry point prints it as one line, exit code 2
    assert isinstance(result.exception, TargetError)


def test_missing_corrupt_and_changed_model_files_are_refused(fitted: dict) -> None:
    space = load_space(fitted["space"])
    with pytest.raises(TargetError, match="no such model file"):
        SurrogateTarget(space, model=str(fitted["tmp"] / "missing.joblib"))
    junk = fitted["tmp"] / "junk.joblib"
    junk.write_bytes(b"\x80\x04 not a pickle")
    with pytest.raises(TargetError, match="not a stortune model file"):
        SurrogateTarget(space, model=str(junk))
    spec = SurrogateTarget(space, model=str(fitted["model"])).describe()
    model = SurrogateModel.load(fitted["model"])
    model.metadata["refit"] = True
    model.save(fitted["model"])  # refitted since: other bytes
    with pytest.raises(TargetError, match="changed since the campaign started"):
        make_target(spec, space)
    with pytest.raises(StortuneError, match="needs --model"):
        TargetOptions("surrogate").build(space)
    assert TargetOptions(values={"model": fitted["model"]}).kind == "surrogate"


def test_tuners_find_the_models_optimum_and_the_campaign_resumes(fitted: dict) -> None:
    common = ["--space", fitted["space"], "--model", fitted["model"], "--store", fitted["store"]]
    report = cli_ok(
        "tune", *common, "-o", "perf:max", "--tuner", "random", "--budget", "20", "-r", "1",
        "--verify", "2", "--name", "s1",
    )  # fmt: skip
    outcome = report["outcome"]
    assert outcome["evaluations"] == 20 and outcome["runs_failed"] == 0
    best = outcome["best_config"]
    assert best["c"] == "b" and abs(best["x"] - 6) <= 2 and abs(best["y"] - 2) <= 3
    assert outcome["best_value"] >= 400 and report["gain"]["gain"] > 0
    with Store(fitted["store"]) as db:
        assert db.campaign("s1").target["kind"] == "surrogate"

    resumed = cli_ok("tune", "--resume", "s1", "--budget", "24", "--store", fitted["store"])
    assert resumed["outcome"]["evaluations"] == 24
    assert resumed["outcome"]["best_value"] >= outcome["best_value"]

    torch.set_num_threads(1)
    report = cli_ok(
        "tune", *common, "-o", "perf:max", "--tuner", "bo", "--budget", "12", "-r", "1",
        "--verify", "0", "--name", "s2",
    )  # fmt: skip
    best = report["outcome"]["best_config"]
    assert best["c"] == "b" and abs(best["x"] - 6) <= 2 and abs(best["y"] - 2) <= 3


def test_run_and_sweep_take_the_model_too(fitted: dict) -> None:
    common = ["--space", fitted["space"], "--model", fitted["model"], "--store", fitted["store"]]
    outcome = cli_ok("run", *common, "-o", "perf:max", "--budget", "5", "-r", "2", "-q")
    assert outcome["evaluations"] == 5 and outcome["runs_failed"] == 0
    done = cli_ok(
        "sweep", *common, "-o", "perf:max", "--levels", "2", "-r", "1", "--reference-every", "0",
        "--name", "w1", "-q",
    )  # fmt: skip
    assert done["configs"] == 8 and done["runs_failed"] == 0
