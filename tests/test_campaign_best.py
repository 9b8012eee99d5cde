"""Which trial a campaign calls its best: with racing the last incumbent, never a challenger
that did not win its race; otherwise the best value. And the in-loop gain of a race winner
from the runs it got defending its place, not from the race it won."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from stortune.measure.results import campaign_best
from stortune.measure.verify import in_loop_gain
from stortune.store import Campaign, Store

# (x, verdict, [(value, race the run belongs to)]); race None: the first incumbent's own runs
Trial = tuple[int, str | None, Sequence[tuple[float, int | None]]]


def campaign(
    store: Store, trials: Sequence[Trial], intensify: bool = True, direction: str = "max"
) -> Campaign:
    made = store.create_campaign(
        "c",
        kind="tune",
        space_name="s",
        space_yaml="name: s\nparameters:\n  x: {type: int, low: 0, high: 9, default: 0}\n",
        target={"kind": "command"},
        workload={},
        objective={"metric": "v", "direction": direction},
        settings={"intensify": intensify},
    )
    for seq, (x, verdict, runs) in enumerate(trials):
        info = {"source": "default"} if seq == 0 else {}
        if verdict is not None:
            info["race"] = {"verdict": verdict}
        trial = store.add_trial(made.id, seq, {"x": x}, info)
        for rep, (value, race) in enumerate(runs):
            now = time.time()
            store.add_run(
                made.id, trial, workload="default", repetition=rep, status="ok",
                metrics={"v": value}, started_at=now, ended_at=now + 1,
                info={} if race is None else {"race": race, "step": rep},
            )  # fmt: skip
        mean = sum(v for v, _ in runs) / len(runs)
        store.finish_trial(trial, "ok", mean)
    return store.campaign("c")


def best_x(store: Store, made: Campaign, only: set[int] | None = None) -> int | None:
    trials = [t for t in store.trials(made.id) if only is None or t.config["x"] in only]
    best = campaign_best(made, trials)
    return None if best is None else best.config["x"]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    with Store(str(tmp_path / "s.db")) as opened:
        yield opened


def test_a_challenger_that_did_not_win_is_not_the_best_however_high_its_mean(
    store: Store,
) -> None:
    made = campaign(
        store,
        [
            (0, "first", [(100, None), (101, None), (99, 1), (100, 2), (98, 3)]),
            (1, "unproven", [(112, 1), (95, 1), (104, 1)]),  # the highest mean: not proven
            (2, "wins", [(120, 2), (118, 2)]),
            (3, "loses", [(70, 3)]),
        ],
    )
    assert best_x(store, made) == 2  # the last incumbent
    assert best_x(store, made, only={0, 1, 3}) == 0  # the last incumbent among these


def test_without_races_the_best_is_the_best_value_in_the_objectives_direction(
    tmp_path: Path,
) -> None:
    runs = [(0, None, [(100.0, None)]), (1, None, [(90.0, None)]), (2, None, [(110.0, None)])]
    with Store(str(tmp_path / "min.db")) as store:
        assert best_x(store, campaign(store, runs, intensify=False, direction="min")) == 1
    # a raced campaign stopped before its first verdict, or a subset without an incumbent
    with Store(str(tmp_path / "raced.db")) as store:
        assert best_x(store, campaign(store, runs, intensify=True)) == 2


def test_a_winner_is_judged_by_its_runs_after_the_win(store: Store) -> None:
    made = campaign(
        store,
        [
            (0, "first", [(100, None), (100, None), (100, 1)]),
            (1, "wins", [(130, 1), (130, 1), (101, 2), (99, 3)]),  # lucky in its race
            (2, "loses", [(80, 2)]),
            (3, "loses", [(80, 3)]),
        ],
    )
    gain = in_loop_gain(store, made)
    assert gain is not None and gain.gain == pytest.approx(0.0)  # 100 after the win, not 115


def test_on_a_cluster_values_are_compared_through_each_nodes_reference(store: Store) -> None:
    """x=1 ran on a node twice as fast as x=2's: its higher value is the node, not the config."""
    made = campaign(store, [(0, None, [(50.0, None)])], intensify=False)
    for seq, (x, node, value) in enumerate([(1, "fast", 180.0), (2, "slow", 100.0)], start=1):
        trial = store.add_trial(made.id, seq, {"x": x}, {"node": node})
        store.finish_trial(trial, "ok", value)
    for seq, (node, value) in enumerate([("fast", 200.0), ("slow", 100.0)], start=1):
        reference = store.add_trial(made.id, -seq, {"x": 0}, {"source": "reference", "node": node})
        store.finish_trial(reference, "ok", value)
    assert best_x(store, made) == 2
    assert best_x(store, made, only={1, 2}) == 1  # a subset without the references: raw values
