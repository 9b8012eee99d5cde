"""A fitted model survives save and load, and answers for single configs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from stortune.errors import ConfigError, StortuneError
from stortune.models import make_model
from stortune.models.surrogate import SurrogateModel


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
