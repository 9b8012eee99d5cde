"""Noise-aware incumbents: a challenger replaces the incumbent only after winning paired runs
with confidence, the best is the last incumbent, and a noisy target's true
best is found more often than by picking the best single run."""

from __future__ import annotations

import math
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import tune

from stortune.measure.racing import PRIOR_SPREAD, Verdict, decide, log_ratio, pooled_spread
from stortune.measure.verify import in_loop_gain
from stortune.space import parse_space
from stortune.store import Store
from stortune.targets.command import CommandTarget


def test_a_race_rejects_early_and_accepts_only_with_confidence() -> None:
    spread, dof = pooled_spread([])
    assert spread == pytest.approx(PRIOR_SPREAD) and dof == 3
    # one pair 40% worse: rejected at once
    assert decide([math.log(0.6)], spread, dof, 4).verdict == Verdict.LOSES
    # one pair 40% better: not enough, one pair never wins
    assert decide([math.log(1.4)], spread, dof, 4).verdict is None
    assert decide([math.log(1.4)] * 2, spread, dof, 4).verdict == Verdict.WINS
    # a 2% edge within 10% noise: unproven when the pairs are used up
    assert decide([0.02, 0.03, 0.01, 0.02], spread, dof, 4).verdict == Verdict.UNPROVEN
    # the pooled spread learns the noise of the races run so far
    quiet, df = pooled_spread([[0.01, -0.01, 0.0]] * 10)
    assert quiet < 0.04 and df == 23  # from 10% towards the 1% the races show
    assert decide([0.05, 0.05], quiet, df, 4).verdict == Verdict.WINS
    assert log_ratio(110, 100, maximise=True) == pytest.approx(math.log(1.1))
    assert log_ratio(110, 100, maximise=False) == pytest.approx(-math.log(1.1))
    assert log_ratio(-1, 100, maximise=True) is None


# True value 100 at x = 6, 80 + x elsewhere; 10% Gaussian noise, drawn from a seeded stream so
# that a campaign is the same every time it runs.
NOISY = textwrap.dedent(
    """\
    import json, random, sys
    x, counter, seed = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    try:
        n = int(open(counter).read())
    except FileNotFoundError:
        n = 0
    open(counter, "w").write(str(n + 1))
    rng = random.Random(seed * 100003 + n)
    true = 100.0 if x == 6 else 80.0 + x
    print(json.dumps({"v": true * (1 + 0.10 * rng.gauss(0, 1))}))
    """
)


def true_value(x: int) -> float:
    return 100.0 if x == 6 else 80.0 + x


SPACE = "name: s\nparameters:\n  x: {type: int, low: 0, high: 9, default: 0}\n"


def noisy_target(tmp_path: Path, seed: int) -> CommandTarget:
    script = tmp_path / "noisy.py"
    script.write_text(NOISY)
    counter = tmp_path / f"counter-{seed}"
    argv = [sys.executable, "-S", str(script), "{x}", str(counter), str(seed)]
    return CommandTarget(command=argv)


def test_racing_finds_the_true_best_more_often_than_the_best_single_run(tmp_path: Path) -> None:
    space = parse_space(SPACE)
    found = {True: 0, False: 0}
    covered = 0
    for seed in range(10):
        for intensify in (False, True):
            folder = tmp_path / f"{seed}-{intensify}"
            folder.mkdir()
            with Store(str(folder / "s.db")) as store:
                result = tune(
                    store, "c", space, noisy_target(folder, seed), "v:max", seed=seed,
                    budget=12, repetitions=4 if intensify else 1, intensify=intensify,
                    baseline=True,
                )  # fmt: skip
                found[intensify] += result.outcome.best_config == {"x": 6}
                if intensify:
                    trials = store.trials(store.campaign("c").id)
                    verdicts = [(t.info or {}).get("race", {}).get("verdict") for t in trials]
                    assert verdicts[0] == "first" and "wins" in verdicts
                    # the best is the last incumbent, not a challenger that did not win
                    holders = [t for t in trials if t.info["race"]["verdict"] in ("first", "wins")]
                    best = holders[-1]
                    assert best.config == result.outcome.best_config
                    assert len(best.runs) >= 2  # never a single run
                    # and its in-loop interval holds its true gain: no winner's curse
                    in_loop = in_loop_gain(store, store.campaign("c"))
                    assert in_loop is not None
                    covered += (
                        in_loop.ci_low <= true_value(best.config["x"]) / 80 - 1 <= in_loop.ci_high
                    )
    assert found[True] >= 8 and found[True] > found[False], found
    assert covered >= 8, covered  # of 10 campaigns, at 90% confidence


def test_an_intensified_campaign_resumes_to_the_same_races(tmp_path: Path) -> None:
    from stortune.measure.campaigns import open_campaign
    from stortune.measure.runner import Interrupted

    space = parse_space(SPACE)
    runs = []

    def stop_on_twentieth_run(event: object) -> None:
        if getattr(event, "kind", "") == "run":
            runs.append(event)
            if len(runs) == 20:
                raise KeyboardInterrupt

    with Store(str(tmp_path / "s.db")) as store:
        with pytest.raises(Interrupted):
            tune(
                store, "k", space, noisy_target(tmp_path / "k", 1), "v:max", seed=1, budget=8,
                repetitions=4, intensify=True, baseline=True, on_event=stop_on_twentieth_run,
            )  # fmt: skip
        open_campaign(store, "k").run()
        tune(
            store, "s", space, noisy_target(tmp_path / "s", 1), "v:max", seed=1, budget=8,
            repetitions=4, intensify=True, baseline=True,
        )  # fmt: skip

        def races(name: str) -> list[tuple]:
            trials = store.trials(store.campaign(name).id)
            return [(t.seq, t.config["x"], (t.info or {}).get("race"), len(t.runs)) for t in trials]

        assert races("k") == races("s")


def test_the_challenger_and_the_incumbent_take_turns_at_running_first(tmp_path: Path) -> None:
    """A side that always ran first in its pair would carry that place's effect into the race."""
    space = parse_space(SPACE)
    with Store(str(tmp_path / "s.db")) as store:
        tune(
            store, "o", space, noisy_target(tmp_path / "k", 2), "v:max", seed=2, budget=8,
            repetitions=4, intensify=True, baseline=True,
        )  # fmt: skip
        trials = store.trials(store.campaign("o").id)
        firsts: dict[int, bool] = {}  # step -> the challenger ran first
        for challenger in trials:
            steps: dict[int, list[tuple[float, bool]]] = {}
            for other in trials:
                for run in other.runs:
                    info = run.info or {}
                    if info.get("race") == challenger.seq and challenger.seq > 0:
                        steps.setdefault(info["step"], []).append(
                            (run.started_at, other.id == challenger.id)
                        )
            for step, runs in steps.items():
                if len(runs) == 2:
                    firsts.setdefault(step, min(runs)[1])
                    assert min(runs)[1] == (step % 2 == 0), (challenger.seq, step, runs)
    assert firsts.get(0) is True and firsts.get(1) is False  # both orders were seen


@pytest.fixture(autouse=True)
def counters(tmp_path: Path) -> None:
    (tmp_path / "k").mkdir()
    (tmp_path / "s").mkdir()
