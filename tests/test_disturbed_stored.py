"""A disturbed run is stored, marked disturbed, before the runner waits for a quiet machine:
a kill during the wait loses nothing, and no value ever counts it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import tune

from stortune.errors import Interrupted
from stortune.measure.campaigns import open_campaign
from stortune.measure.runner import RunRules
from stortune.space import parse_space
from stortune.store import Run, Store
from stortune.system import disturbance
from stortune.targets.command import CommandTarget

SPACE = parse_space("name: s\nparameters:\n  x: {type: int, low: 1, high: 4, default: 1}\n")
SPOILT_SCORE, CLEAN_SCORE = 100.0, 10.0
# the first run scores high (the one the fake disturbance spoils), every later one low
BENCH = f"""\
import json, os, sys
counter = sys.argv[1]
calls = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(calls + 1))
print(json.dumps({{"score": {SPOILT_SCORE} if calls == 0 else {CLEAN_SCORE}}}))
"""
RULES = RunRules(check_disturbance=True, settle_seconds=0.0, busy_wait=60)
REASON = "another benchmark was running: 4242 fio"


class FakeMachine:
    """The runs judged `spoilt` (counted from 0 in the order judged) were disturbed; after
    each, the machine is busy for one check, during which `while_busy` runs."""

    def __init__(self, spoilt: set[int], while_busy: Callable[[], None]) -> None:
        self.spoilt = spoilt
        self.while_busy = while_busy
        self.judged = 0
        self.busy = False

    def judge(self, *_args: Any) -> str | None:
        index, self.judged = self.judged, self.judged + 1
        self.busy = index in self.spoilt
        return REASON if self.busy else None

    def busy_now(self, *_args: Any, **_kwargs: Any) -> str | None:
        if not self.busy:
            return None
        self.busy = False
        self.while_busy()
        return "another benchmark is running: 4242 fio"


@pytest.fixture
def target(tmp_path: Path) -> CommandTarget:
    script = tmp_path / "bench.py"
    script.write_text(BENCH)
    return CommandTarget(SPACE, command=[sys.executable, str(script), str(tmp_path / "calls")])


def fake(monkeypatch: pytest.MonkeyPatch, machine: FakeMachine) -> None:
    monkeypatch.setattr(disturbance, "judge", machine.judge)
    monkeypatch.setattr(disturbance, "busy_now", machine.busy_now)


def all_runs(store: Store, name: str) -> list[Run]:
    return [r for t in store.trials(store.campaign(name).id) for r in t.runs]


def test_a_disturbed_run_is_stored_during_the_wait_and_replaced_after_it(
    store: Store, target: CommandTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[Run]] = []
    fake(monkeypatch, FakeMachine({0}, lambda: seen.append(all_runs(store, "d"))))
    outcome = tune(store, "d", SPACE, target, budget=1, repetitions=1, rules=RULES).outcome
    [[waiting]] = seen  # what the store held while the runner waited
    assert (waiting.status, waiting.error) == ("disturbed", REASON)
    assert waiting.metrics["score"] == SPOILT_SCORE
    [trial] = store.trials(store.campaign("d").id)
    [run] = trial.runs  # the clean run took the placeholder's slot
    assert run.status == "ok" and run.metrics["score"] == CLEAN_SCORE
    assert run.info["replaced_disturbed"][0]["metrics"]["score"] == SPOILT_SCORE
    assert trial.value == pytest.approx(CLEAN_SCORE)  # not the mean with the disturbed run's
    assert outcome.best_value == pytest.approx(CLEAN_SCORE) and outcome.runs_disturbed == 0
    assert list(store.runs_frame("d", include_failed=False)["metric.score"]) == [CLEAN_SCORE]


def test_a_campaign_stopped_during_the_wait_keeps_the_run_and_measures_it_again(
    store: Store, target: CommandTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupt() -> None:
        raise KeyboardInterrupt  # what Ctrl-C or SIGTERM does; a SIGKILL stops it harder

    fake(monkeypatch, FakeMachine({0}, interrupt))
    with pytest.raises(Interrupted):
        tune(store, "k", SPACE, target, budget=1, repetitions=1, rules=RULES)
    [kept] = all_runs(store, "k")
    assert kept.status == "disturbed" and kept.metrics["score"] == SPOILT_SCORE
    [pending] = store.trials(store.campaign("k").id)
    assert pending.value is None  # a disturbed run is no value

    fake(monkeypatch, FakeMachine(set(), lambda: None))
    outcome = open_campaign(store, "k").run()
    [trial] = store.trials(store.campaign("k").id)
    assert [(r.status, r.metrics["score"]) for r in trial.runs] == [("ok", CLEAN_SCORE)]
    assert trial.value == outcome.best_value == pytest.approx(CLEAN_SCORE)


def test_a_race_stopped_during_the_incumbents_wait_measures_the_incumbent_again(
    store: Store, target: CommandTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupt() -> None:
        raise KeyboardInterrupt

    # judged in order: the default's two runs, the challenger's first step, the incumbent's
    fake(monkeypatch, FakeMachine({3}, interrupt))
    with pytest.raises(Interrupted):
        tune(
            store, "r", SPACE, target, budget=2, repetitions=2, rules=RULES, intensify=True,
            baseline=True,
        )  # fmt: skip
    fake(monkeypatch, FakeMachine(set(), lambda: None))
    open_campaign(store, "r").run()
    default, challenger = store.trials(store.campaign("r").id)
    step0 = [r for r in default.runs if r.info.get("race") == 1 and r.info.get("step") == 0]
    assert sorted(r.status for r in step0) == ["disturbed", "ok"]  # measured again, kept apart
    assert challenger.info["race"]["pairs"] >= 1
    assert default.value == pytest.approx(
        sum(r.metrics["score"] for r in default.runs if r.status == "ok")
        / sum(r.status == "ok" for r in default.runs)
    )
