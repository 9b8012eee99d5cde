"""What a campaign optimises: parsing, Magpie's weighted min-max scalarisation, the objective's
value in a run, the Pareto front; and the re-measured gain with its confidence interval."""

from __future__ import annotations

import math

import pytest

from stortune.errors import StortuneError
from stortune.measure.verify import gain
from stortune.objective import (
    SCORE,
    Objective,
    ObjectiveSpec,
    Scalarizer,
    dominates,
    pareto_front,
    parse_bounds,
)


def test_objectives_parse_with_direction_and_weight() -> None:
    assert ObjectiveSpec.parse("bw") == ObjectiveSpec("bw", "max", 1.0)
    assert ObjectiveSpec.parse("lat:min:2") == ObjectiveSpec("lat", "min", 2.0)
    for bad in ("", "bw:up", "bw:max:0", "bw:max:x", "a:max:1:2"):
        with pytest.raises(StortuneError, match="METRIC"):
            ObjectiveSpec.parse(bad)


def test_weighted_min_max_scalarisation() -> None:
    specs = [ObjectiveSpec("bw", "max", 3.0), ObjectiveSpec("lat", "min", 1.0)]
    s = Scalarizer(specs, {"bw": (100, 300), "lat": (1, 5)})
    # bw normalises to 0.5, lat (smaller is better) to 1 - 0.25 = 0.75
    assert s.score({"bw": 200, "lat": 2}) == pytest.approx((3 * 0.5 + 1 * 0.75) / 4)
    assert s.score({"bw": 300, "lat": 1}) == pytest.approx(1.0)
    around = Scalarizer(specs).around({"bw": 200.0, "lat": 4.0})
    assert around.score({"bw": 200, "lat": 4}) == pytest.approx(0.5)  # the default: 0.5
    assert around.bounds == {"bw": (0.0, 400.0), "lat": (0.0, 8.0)}
    data = Scalarizer.from_data(specs, [{"bw": 1, "lat": 2}, {"bw": 3, "lat": 6}])
    assert data.bounds == {"bw": (1.0, 3.0), "lat": (2.0, 6.0)}
    assert Scalarizer.from_dict(s.to_dict()).bounds == s.bounds
    assert not Scalarizer(specs, {"bw": (0, 1)}).complete  # lat's bounds come later
    with pytest.raises(StortuneError, match="LOW must be below HIGH"):
        Scalarizer(specs, {"bw": (1, 1)})


def test_pareto_front_keeps_the_undominated() -> None:
    directions = ["max", "min"]  # throughput up, latency down
    points = [[100, 5], [120, 6], [90, 4], [80, 7], [120, 5]]
    assert dominates([120, 5], [100, 5], directions)
    assert not dominates([100, 5], [100, 5], directions)
    assert pareto_front(points, directions) == [2, 4]


def test_an_objective_values_a_run_and_round_trips_through_the_store() -> None:
    single = Objective.of(["bw:min"])
    assert single == Objective("bw", "min") and single.measured == ["bw"]
    assert single.value({"bw": 3.0}) == 3.0
    assert single.value({"bw": float("nan")}) is None and single.value({}) is None
    several = Objective.of(["bw", "lat:min"], parse_bounds(["bw=0:200"]))
    assert several.metric == SCORE and several.direction == "max" and several.needs_bounds
    assert several.value({"bw": 100, "lat": 10}) is None  # lat's bounds are not known yet
    known = several.with_bounds_around({"bw": 100.0, "lat": 10.0})
    assert known.scalarizer.bounds == {"bw": (0.0, 200.0), "lat": (0.0, 20.0)}
    assert known.value({"bw": 100, "lat": 10}) == pytest.approx(0.5)
    assert known.value({"bw": 200, "lat": 0}) == pytest.approx(1.0)
    assert Objective.from_dict(known.to_dict()) == known
    for texts, bounds, message in (
        ([], [], "give an objective"),
        (["bw", "bw:min"], [], "named twice"),
        (["bw", "lat"], ["iops=0:1"], "no objective"),
        (["bw"], ["bw=0:1"], "several objectives"),
        (["bw", "lat"], ["bw=1:0"], "LOW must be below HIGH"),
        (["bw", "lat"], ["bw=a:b"], "METRIC=LOW:HIGH"),
    ):
        with pytest.raises(StortuneError, match=message):
            Objective.of(texts, parse_bounds(bounds))


def test_gain_and_its_interval_in_either_direction() -> None:
    up = gain("bw", "max", [100, 102, 98, 100], [110, 112, 108, 110])
    assert up.gain == pytest.approx(0.1)
    assert up.ci_low < 0.1 < up.ci_high and up.ci_low > 0
    down = gain("lat", "min", [10, 10.5, 9.5], [5, 5.2, 4.8])
    assert down.gain == pytest.approx(1.0)  # half the latency: a 100% gain
    assert down.ci_low < 1.0 < down.ci_high
    once = gain("bw", "max", [100], [120])
    assert once.gain == pytest.approx(0.2) and math.isinf(once.ci_high)
    assert "no CI" in once.text()
    with pytest.raises(StortuneError, match="no successful"):
        gain("bw", "max", [], [1.0])
