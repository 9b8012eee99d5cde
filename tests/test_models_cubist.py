"""Cubist (optional GPL-3 extra): recovery of a known function, and the memoised committee fit
whose narrowed models must be the models a direct fit with the same knobs would give."""

from __future__ import annotations

import re
import sys

import numpy as np
import pandas as pd
import pytest

from stortune.errors import StortuneError
from stortune.models import available_techniques
from stortune.models.cubist_model import CommitteeFit, CubistModel, _named, cubist_available

needs_cubist = pytest.mark.skipif(
    not cubist_available(), reason="optional extra cubist (GPL-3) not installed; make test adds it"
)


def table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {"a": rng.random(n), "b": rng.random(n), "sched": rng.choice(["noop", "cfq"], n)}
    )


def piecewise(t: pd.DataFrame) -> np.ndarray:
    return np.where(t.a < 0.5, 2 * t.a + t.b, 1.0 + t.b - 3 * (t.a - 0.5)) + (t.sched == "cfq")


def wiggly(t: pd.DataFrame, seed: int) -> np.ndarray:
    """Enough structure that every committee member holds several rules."""
    noise = np.random.default_rng(seed).normal(0, 0.05, len(t))
    return piecewise(t) + np.sin(9 * t.b) * t.a + noise


def comparable(text: str) -> list[str]:
    """Model text without what legitimately differs between two equal models: the creation
    date, the committee's error reduction (training printout only) and `maxd`, the neighbour
    distance Cubist estimates from random pairs of a generator it never reseeds."""
    lines = [line for line in text.splitlines() if not line.startswith("id=")]
    lines = [line[line.index("entries=") :] if "entries=" in line else line for line in lines]
    return [re.sub(r'maxd="[^"]*"', "maxd", line) for line in lines]


@pytest.fixture
def fresh_memo():
    CommitteeFit._memo.clear()
    yield CommitteeFit._memo
    CommitteeFit._memo.clear()


@needs_cubist
def test_cubist_recovers_a_piecewise_linear_function(fresh_memo):
    train, test = table(400, 1), table(1000, 2)
    noise = np.random.default_rng(3).normal(0, 0.01, 400)
    model = CubistModel(committees=5, neighbors=0).fit(train, piecewise(train) + noise)
    assert model.score(test, piecewise(test)) > 0.97


@needs_cubist
def test_narrowed_models_are_the_direct_fits(fresh_memo):
    from cubist import Cubist

    train, test = table(500, 4), table(200, 5)
    y = wiggly(train, 6)
    deep = CubistModel(n_rules=12, committees=8, neighbors=0).fit(train, y)
    Z, Z_test = deep.encoder_.transform(train), deep.encoder_.transform(test)
    members = re.findall(r'^rules="(\d+)"', deep.model_.model_, flags=re.M)
    assert len(members) == 8 and min(int(m) for m in members) >= 2
    for committees in (1, 3, 8):
        for neighbors in (0, 2, 9):
            model = CubistModel(n_rules=12, committees=committees, neighbors=neighbors)
            narrowed = model.fit(train, y).model_
            direct = Cubist(
                n_rules=12,
                n_committees=committees,
                neighbors=neighbors or None,
                random_state=0,
            ).fit(_named(Z), y)
            assert comparable(narrowed.model_) == comparable(direct.model_)
            # Same neighbour distance, then the two must predict alike on unseen rows too.
            direct.model_ = (
                re.sub(
                    r'maxd="[^"]*"',
                    re.search(r'maxd="[^"]*"', narrowed.model_ + 'maxd=""')[0],
                    direct.model_,
                )
                if neighbors
                else direct.model_
            )
            np.testing.assert_array_equal(model.predict(test), direct.predict(_named(Z_test)))
    assert len(fresh_memo) == 1  # one Cubist fit served all nine


@needs_cubist
def test_a_larger_committee_replaces_the_memoised_fit(fresh_memo):
    train = table(200, 7)
    y = wiggly(train, 8)
    CubistModel(committees=3).fit(train, y)
    (first,) = fresh_memo.values()
    CubistModel(committees=2, neighbors=4).fit(train, y)
    assert fresh_memo.values() == [first]
    CubistModel(committees=5).fit(train, y)
    (grown,) = fresh_memo.values()
    assert grown is not first and grown.committees == 5
    CubistModel(n_rules=5, committees=3).fit(train, y)  # rules change the fit: its own entry
    assert len(fresh_memo) == 2


@needs_cubist
def test_a_round_is_scored_most_committees_first(fresh_memo):
    from stortune.models.crossval import cv_folds, round_errors

    train = table(120, 10)
    y = wiggly(train, 11)
    points = [{"committees": c, "neighbors": k} for c in (1, 4, 9) for k in (0, 3)]
    errors = round_errors(CubistModel(), points, train, y, cv_folds(len(train), 3))
    assert all(e is not None and len(e) == 3 for e in errors)
    # One fit per fold, at the round's most committees, served all six points.
    assert len(fresh_memo) == 3 and {f.committees for f in fresh_memo.values()} == {9}


@needs_cubist
@pytest.mark.parametrize("knobs", [{"neighbors": 10}, {"committees": 101}])
def test_knobs_outside_cubists_limits_are_refused(fresh_memo, knobs):
    train = table(50, 9)
    with pytest.raises(ValueError, match=next(iter(knobs))):
        CubistModel(**knobs).fit(train, piecewise(train))


def test_cubist_missing_says_how_to_install(monkeypatch, fresh_memo):
    monkeypatch.setitem(sys.modules, "cubist", None)  # as if the extra were not installed
    assert not cubist_available()
    with pytest.raises(StortuneError, match="stortune\\[cubist\\]"):
        CubistModel().fit(table(20, 1), np.arange(20.0))
    assert "cubist" not in available_techniques()
