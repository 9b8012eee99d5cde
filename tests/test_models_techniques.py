"""Each technique recovers a function it can represent, from a table with a categorical column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyearth import Earth
from sklearn.base import clone, is_regressor
from sklearn.model_selection import cross_val_score

from stortune.models import TECHNIQUES, CARTModel, available_techniques, make_model
from stortune.models.m5 import M5Model
from stortune.models.mars import ForwardPass, MARSModel


def table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "a": rng.random(n),
            "b": rng.random(n),
            "sched": rng.choice(["noop", "cfq"], n),
        }
    )


def r2_on_fresh_rows(model, truth, noise=0.0, n=400) -> float:
    train, test = table(n, 1), table(1000, 2)
    rng = np.random.default_rng(3)
    model.fit(train, truth(train) + rng.normal(0, noise, n))
    return model.score(test, truth(test))


def test_linear_with_interactions_recovers_a_product_term():
    def truth(t):
        return 3 + 2 * t.a - t.b + 4 * t.a * t.b + 5 * (t.sched == "cfq")

    assert r2_on_fresh_rows(make_model("linear-int"), truth) > 0.999999
    assert r2_on_fresh_rows(make_model("linear"), truth) < 0.99


def test_mars_recovers_a_hinge():
    def truth(t):
        return 4 * np.maximum(0, t.a - 0.5) + t.b + 2 * (t.sched == "noop")

    assert r2_on_fresh_rows(make_model("mars"), truth, noise=0.01) > 0.995


def test_mars_with_interactions_recovers_a_hinge_times_a_variable():
    def truth(t):
        return 4 * np.maximum(0, t.a - 0.5) * t.b + t.b

    assert r2_on_fresh_rows(make_model("mars-int"), truth, noise=0.01) > 0.99
    assert r2_on_fresh_rows(make_model("mars"), truth, noise=0.01) < 0.99


def test_mars_nprune_caps_the_terms():
    train = table(300, 1)
    y = 4 * np.maximum(0, train.a - 0.5) + np.maximum(0, 0.3 - train.b)
    model = MARSModel(nnodes=21, thresh=0.0, nprune=2).fit(train, y)
    assert model.n_terms_ <= 2


def test_mars_grows_no_more_terms_than_the_rows_hold(capfd):
    """py-earth does not check that its terms fit the rows: with as many terms as rows it
    called LAPACK with illegal sizes (OpenBLAS wrote hundreds of lines) and read past its
    arrays. A search explores such points on small training sets."""
    rng = np.random.default_rng(2)
    knobs = pd.DataFrame(rng.integers(0, 2, (8, 12)), columns=[f"k{i}" for i in range(12)])
    y = 100 + knobs.to_numpy() @ rng.normal(0, 1, 12) + rng.normal(0, 0.01, 8)
    model = MARSModel(max_degree=2, nnodes=8, thresh=0.0).fit(knobs, y)
    out, err = capfd.readouterr()  # the file descriptors: BLAS writes past sys.stdout
    assert "illegal value" not in out + err
    assert len(model.earth_.basis_) <= 8 and np.all(np.isfinite(model.predict(knobs)))


@pytest.mark.parametrize("degree", [1, 2])
def test_a_deep_forward_pass_holds_every_shallower_one(degree):
    """The memoised pass replays py-earth's stop rule: truncating one deep pass keeps exactly
    the terms a direct py-earth run with the smaller knobs keeps, in the same order."""
    rng = np.random.default_rng(4)
    Z = rng.random((300, 4))
    y = 4 * np.maximum(0, Z[:, 0] - 0.5) * Z[:, 1] + np.sin(6 * Z[:, 2]) + rng.normal(0, 0.1, 300)
    deep = ForwardPass(Z, y, degree, 3.0, nnodes=200, thresh=0.0)
    for nnodes, thresh in [
        (3, 0.0),
        (11, 0.0),
        (40, 0.0),
        (200, 0.0),
        (60, 1e-3),
        (60, 0.02),
        (9, 0.5),
    ]:
        direct = Earth(
            max_degree=degree, max_terms=nnodes, thresh=thresh, penalty=3.0, enable_pruning=False
        ).fit(Z, y)
        terms = deep.terms(nnodes, thresh)
        assert terms == len(direct.basis_)
        np.testing.assert_allclose(deep.basis[:, :terms], direct.transform(Z))
    # 200 terms is more than 300 rows allow: the pass ended on its own and serves any limit.
    assert not deep.capped and deep.covers(10_000, 0.0) and not deep.covers(50, -1.0)
    assert deep.terms(10_000, 0.0) == deep.sizes[-1] < 200


def test_mars_fits_share_one_forward_pass_and_match_a_fresh_fit():
    train, test = table(300, 5), table(100, 6)
    y = 4 * np.maximum(0, train.a - 0.5) * train.b + train.b
    ForwardPass._memo.clear()
    deep = MARSModel(max_degree=2, nnodes=60, thresh=0.0).fit(train, y)
    shallow = MARSModel(max_degree=2, nnodes=9, thresh=0.0, nprune=5).fit(train, y)
    assert shallow.earth_ is deep.earth_ and len(ForwardPass._memo) == 1
    (first_pass,) = ForwardPass._memo.values()
    wider = MARSModel(max_degree=2, nnodes=300, thresh=0.0).fit(train, y)
    assert (wider.earth_ is deep.earth_) == (not first_pass.capped)
    ForwardPass._memo.clear()
    fresh = MARSModel(max_degree=2, nnodes=9, thresh=0.0, nprune=5).fit(train, y)
    assert fresh.earth_ is not deep.earth_
    np.testing.assert_allclose(shallow.predict(test), fresh.predict(test), rtol=1e-9, atol=1e-9)


def test_cart_recovers_a_step_function():
    def truth(t):
        return 10.0 * (t.a > 0.5) + 5.0 * (t.sched == "cfq")

    assert r2_on_fresh_rows(CARTModel(), truth) > 0.99


def test_cart_cp_is_relative_to_the_root_error():
    train = table(300, 1)
    y = 10.0 * (train.a > 0.5) + 0.5 * (train.b > 0.5)
    small = CARTModel(cp=0.001).fit(train, y)
    scaled = CARTModel(cp=0.001).fit(train, 1000 * y)
    assert small.tree_.get_n_leaves() == scaled.tree_.get_n_leaves() >= 4
    # The b step explains about 0.2% of the variance: cp = 0.01 prunes it, as rpart would.
    assert CARTModel(cp=0.01).fit(train, y).tree_.get_n_leaves() == 2


def piecewise(t):
    return np.where(t.a < 0.5, 2 * t.a + t.b, 1.0 + t.b - 3 * (t.a - 0.5)) + (t.sched == "cfq")


@pytest.mark.parametrize("pruning", [True, False])
def test_m5_recovers_a_piecewise_linear_function(pruning):
    assert r2_on_fresh_rows(M5Model(pruning=pruning, smoothing=False), piecewise, 0.01) > 0.98
    # Smoothing pulls small leaves towards their ancestors' models (k = 15): on a crisp
    # function that costs accuracy, on noisy measurements it is what avoids overfitting.
    assert r2_on_fresh_rows(M5Model(pruning=pruning), piecewise, noise=0.01) > 0.9


def test_m5_pruning_leaves_linear_models_in_few_leaves():
    train = table(300, 1)
    y = 1.0 + 2.0 * train.a - train.b
    model = M5Model().fit(train, y)
    assert model.n_leaves_ == 1
    np.testing.assert_allclose(model.coef_[0][:2], [2.0, -1.0], atol=1e-9)


def test_boosting_fits_a_smooth_function():
    def truth(t):
        return np.sin(3 * t.a) + t.b

    assert r2_on_fresh_rows(make_model("boosting"), truth) > 0.95


@pytest.mark.parametrize("name", sorted(TECHNIQUES))
def test_every_technique_is_a_scikit_learn_regressor(name):
    if name not in available_techniques():
        pytest.skip(f"{name} is not installed")
    model = make_model(name)
    assert is_regressor(model)
    params = model.get_params()
    assert clone(model).get_params() == params
    train = table(60, 1)
    y = train.a + (train.sched == "cfq")
    scores = cross_val_score(model, train, y, cv=3)
    assert np.all(np.isfinite(scores))
    # An unseen category and a numpy array both predict.
    fresh = table(5, 9).assign(sched="deadline")
    assert np.all(np.isfinite(clone(model).fit(train, y).predict(fresh)))


def test_numpy_arrays_work_too():
    X = np.random.default_rng(0).random((100, 2))
    model = M5Model().fit(X, X[:, 0] * 2)
    assert model.predict(X[:3]).shape == (3,)


def test_categories_are_those_seen_at_fit():
    train = table(50, 1)
    model = make_model("linear").fit(train, (train.sched == "cfq").astype(float))
    assert model.encoder_.categories == {"sched": ["cfq", "noop"]}
    assert model.encoder_.columns == ["a", "b", "sched=cfq", "sched=noop"]
    np.testing.assert_allclose(model.predict(train.iloc[:4].assign(sched="cfq")), 1.0, atol=1e-9)
