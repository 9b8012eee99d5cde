"""Several objectives: parsing, Magpie's weighted min-max scalarisation, the Pareto front, the
scalarising target wrapper; and the re-measured gain with its confidence interval."""

from __future__ import annotations

import math

import pytest

from stortune.errors import StortuneError
from stortune.space import Config
from stortune.targets.base import Measurement, Target
from stortune.tuners.multiobjective import (
    SCORE,
    ObjectiveSpec,
    ScalarizedTarget,
    Scalarizer,
    dominates,
    pareto_front,
)
from stortune.verify import gain


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
    around = Scalarizer.around(specs, {"bw": 200.0, "lat": 4.0})
    assert around.score({"bw": 200, "lat": 4}) == pytest.approx(0.5)  # the default: 0.5
    assert around.bounds == {"bw": (0.0, 400.0), "lat": (0.0, 8.0)}
    data = Scalarizer.from_data(specs, [{"bw": 1, "lat": 2}, {"bw": 3, "lat": 6}])
    assert data.bounds == {"bw": (1.0, 3.0), "lat": (2.0, 6.0)}
    assert Scalarizer.from_dict(s.to_dict()).bounds == s.bounds
    with pytest.raises(StortuneError, match="bounds"):
        Scalarizer(specs, {"bw": (0, 1)})


def test_pareto_front_keeps_the_undominated() -> None:
    directions = ["max", "min"]  # throughput up, latency down
    points = [[100, 5], [120, 6], [90, 4], [80, 7], [120, 5]]
    assert dominates([120, 5], [100, 5], directions)
    assert not dominates([100, 5], [100, 5], directions)
    assert pareto_front(points, directions) == [2, 4]


class Fake(Target):
    kind = "fake"
    measures_machine = False

    def __init__(self) -> None:
        self.config: Config = {}

    @classmethod
    def from_spec(cls, spec: dict, space: object) -> Fake:
        return cls()

    def apply(self, config: Config) -> None:
        self.config = config

    def run(self, workload: object = None, timeout: float | None = None) -> Measurement:
        x = self.config["x"]
        return Measurement({"bw": 100 + x, "lat": 10 - x})

    def describe(self) -> dict:
        return {"kind": self.kind}


def test_the_wrapper_adds_the_score_to_every_run() -> None:
    specs = [ObjectiveSpec("bw", "max"), ObjectiveSpec("lat", "min")]
    target = ScalarizedTarget(Fake(), Scalarizer.around(specs, {"bw": 100, "lat": 10}))
    target.apply({"x": 0})
    assert target.run(None).metrics[SCORE] == pytest.approx(0.5)
    target.apply({"x": 5})
    assert target.run(None).metrics[SCORE] > 0.5
    spec = target.describe()
    assert spec["kind"] == "scalarized" and spec["inner"] == {"kind": "fake"}
    assert target.measures_machine is False


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
