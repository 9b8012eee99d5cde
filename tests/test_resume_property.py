"""Resume is the uninterrupted campaign: for bo, tpe and random, with racing on and off, a
campaign stopped at three random points and resumed each time measures the same configs, the
same runs and recommends the same config as one that ran straight through (the table target,
with noise, so that racing re-measures and a race winner's value moves as it defends)."""

import itertools
from pathlib import Path

import numpy as np
import pytest
from conftest import tune

from stortune.errors import Interrupted
from stortune.measure.campaigns import open_campaign
from stortune.measure.results import campaign_best
from stortune.space import parse_space
from stortune.store import Store
from stortune.targets.table import TableSettings, TableTarget

SPACE = parse_space(
    """
name: grid
parameters:
  a: {type: int, low: 0, high: 9, default: 0}
  b: {type: int, low: 0, high: 9, default: 0}
  c: {type: categorical, values: [x, y, z], default: x}
"""
)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    rows = ["a,b,c,thr"]
    for a, b, c in itertools.product(range(10), range(10), "xyz"):
        rows.append(f"{a},{b},{c},{100.0 + 10 * a - (b - 6) ** 2 + (25 if c == 'z' else 0)}")
    path = tmp_path / "grid.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def target(path: Path) -> TableTarget:
    settings = TableSettings(dataset=str(path), noise=0.05, noise_seed=4)  # type: ignore[call-arg]
    return TableTarget(SPACE, settings)


def content(store: Store, name: str) -> tuple:
    campaign = store.campaign(name)
    trials = store.trials(campaign.id)
    runs = sorted(
        (t.seq, r.repetition, r.status, round(r.metrics.get("thr", 0.0), 9))
        for t in trials
        for r in t.runs
    )
    best = campaign_best(campaign, trials)
    return [(t.seq, sorted(t.config.items())) for t in trials], runs, best and best.config


class StopAt:
    """Interrupts the campaign once its `at`-th run (counted over every sitting) is stored."""

    def __init__(self, store: Store, name: str, at: int) -> None:
        self.store, self.name, self.at = store, name, at

    def __call__(self, event: object) -> None:
        stored = self.store.run_count(self.store.campaign(self.name).id)
        if getattr(event, "kind", "") == "run" and stored >= self.at:
            raise KeyboardInterrupt


@pytest.mark.slow
@pytest.mark.parametrize("intensify", [True, False], ids=["racing", "no-racing"])
@pytest.mark.parametrize("tuner", ["bo", "tpe", "random"])
def test_a_campaign_stopped_three_times_and_resumed_equals_one_run_straight(
    tmp_path: Path, table: Path, tuner: str, intensify: bool
) -> None:
    settings = dict(
        tuner=tuner, seed=3, budget=10, repetitions=3, intensify=intensify, baseline=intensify
    )
    with Store(str(tmp_path / "s.db")) as store:
        tune(store, "straight", SPACE, target(table), "thr", **settings)
        straight = content(store, "straight")
        total = len(straight[1])
        rng = np.random.default_rng(abs(hash((tuner, intensify))) % 2**32)
        stops = sorted(rng.choice(np.arange(2, total), 3, replace=False).tolist())
        with pytest.raises(Interrupted):
            tune(
                store, "resumed", SPACE, target(table), "thr",
                on_event=StopAt(store, "resumed", stops[0]), **settings,
            )  # fmt: skip
        for at in stops[1:]:
            with pytest.raises(Interrupted):
                open_campaign(store, "resumed", target=target(table)).run(
                    StopAt(store, "resumed", at)
                )
        open_campaign(store, "resumed", target=target(table)).run()
        assert content(store, "resumed") == straight, (tuner, intensify, stops)
