"""The DeepPerf-style network: deterministic, learns from few rows, pickles, takes tables."""

from __future__ import annotations

import joblib
import numpy as np
import pandas as pd
import pytest
import torch

from stortune.models import make_model
from stortune.models.network import NetworkModel

# Fewer epochs than the default keep the file fast; the behaviours tested hold at either.
FAST = {"epochs": 400, "n_neurons": 64}


def table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"x{i}": rng.random(n) for i in range(5)})
    frame["sched"] = rng.choice(["noop", "cfq", "bfq"], n)
    return frame


def truth(t: pd.DataFrame) -> np.ndarray:
    """Nonlinear, with interactions (also with the categorical option); x4 does not matter."""
    return np.asarray(
        10
        + 5 * np.sin(3 * t.x0)
        + 4 * t.x1 * t.x2
        + 3 * (t.sched == "cfq") * t.x0
        + 2 * np.maximum(0, t.x3 - 0.5),
        dtype=float,
    )


@pytest.fixture(scope="module")
def fitted() -> NetworkModel:
    train = table(100, 1)
    return NetworkModel().fit(train, truth(train))


def test_a_seed_fixes_the_fit():
    train = table(40, 3)
    y = truth(train)
    test = table(50, 4)
    first = NetworkModel(**FAST, random_state=7).fit(train, y).predict(test)
    again = NetworkModel(**FAST, random_state=7).fit(train, y).predict(test)
    other = NetworkModel(**FAST, random_state=8).fit(train, y).predict(test)
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, other)


def test_fitting_leaves_torch_threads_and_global_seed_alone():
    threads = torch.get_num_threads()
    state = torch.get_rng_state()
    train = table(20, 5)
    NetworkModel(**FAST).fit(train, truth(train))
    assert torch.get_num_threads() == threads
    assert torch.equal(torch.get_rng_state(), state)


def test_ten_rows_do_not_give_a_constant():
    train, test = table(10, 6), table(200, 7)
    y = truth(train)
    model = NetworkModel().fit(train, y)
    assert np.std(model.predict(test)) > 0.1 * np.std(y)
    # It follows the training rows it saw, far better than their mean does.
    assert np.mean((model.predict(train) - y) ** 2) < 0.1 * np.var(y)


def test_a_nonlinear_function_is_learnt_better_than_the_mean(fitted):
    test = table(1000, 2)
    y = truth(test)
    assert fitted.score(test, y) > 0.8
    relative = np.mean(np.abs(fitted.predict(test) - y) / y)
    baseline = np.mean(np.abs(y.mean() - y) / y)
    assert relative < 0.5 * baseline


def first_layer_mass(model: NetworkModel) -> dict[str, float]:
    """The absolute first-layer weight on each encoded column, summed over the neurons."""
    weight = model.layers_[0][0]  # (neurons, encoded columns)
    return dict(zip(model.encoder_.columns, np.abs(weight).sum(axis=0), strict=True))


def test_the_penalty_starves_the_option_that_does_not_matter(fitted):
    mass = first_layer_mass(fitted)
    assert mass["x4"] < min(mass[c] for c in ("x0", "x1", "x2", "x3"))
    train = table(100, 1)
    free = first_layer_mass(NetworkModel(l1=0.0).fit(train, truth(train)))
    assert mass["x4"] < 0.1 * free["x4"]


def test_a_joblib_round_trip_predicts_the_same(fitted, tmp_path):
    path = tmp_path / "network.joblib"
    joblib.dump(fitted, path)
    loaded = joblib.load(path)
    test = table(50, 8)
    np.testing.assert_array_equal(loaded.predict(test), fitted.predict(test))


def test_the_technique_takes_a_table_with_a_string_column():
    model = make_model("network", **FAST)
    assert isinstance(model, NetworkModel) and model.get_params()["l1"] == 0.01
    train = table(60, 9)
    model.fit(train, truth(train))
    fresh = table(5, 10).assign(sched="deadline")  # an unseen category encodes as zeros
    assert model.predict(fresh).shape == (5,)
    assert np.all(np.isfinite(model.predict(fresh)))


def test_the_search_picks_depth_and_penalty_from_its_grids():
    train = table(40, 11)
    model = NetworkModel(epochs=150, n_neurons=32, search=True).fit(train, truth(train))
    assert model.n_layers_ in (2, 3, 4) and model.l1_ in (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
    assert model.search and model.get_params()["n_layers"] == 3  # the parameters stay as set
