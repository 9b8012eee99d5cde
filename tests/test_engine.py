"""The experiment loop on the real `command` target: failures, timeouts, resume after SIGKILL."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import STORTUNE

from stortune.errors import StortuneError
from stortune.experiment import Experiment, LoopSettings, Objective, combine_workloads
from stortune.reference import is_reference
from stortune.space import parse_space
from stortune.stats import summarize
from stortune.store import Store
from stortune.targets.command import CommandTarget

BENCH = textwrap.dedent(
    """\
    import json, sys, time
    x, mode, sleep = float(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    time.sleep(sleep)
    if mode == "crash":
        sys.exit("benchmark crashed: out of cheese")
    if mode == "hang":
        time.sleep(60)
    if mode == "garbage":
        print("no json here")
        sys.exit(0)
    print(json.dumps({"score": 10 - (x - 3) ** 2, "side": {"x": x}}))
    """
)

SPACE = """
name: loop
parameters:
  x: {type: float, low: 0, high: 6, default: 1}
  mode: {type: categorical, values: [ok, crash, hang, garbage], default: ok}
"""


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    path = tmp_path / "bench.py"
    path.write_text(BENCH)
    return path


def command(bench: Path, sleep: float = 0.0) -> list[str]:
    return [sys.executable, str(bench), "{x}", "{mode}", str(sleep)]


def start(
    store: Store,
    bench: Path,
    tuner: str = "random",
    budget: int = 4,
    reps: int = 2,
    timeout: float = 20,
    name: str = "c",
    space_text: str = SPACE,
) -> Experiment:
    space = parse_space(space_text)
    return Experiment.start(
        store,
        name,
        space,
        CommandTarget(command(bench)),
        [None],
        Objective("score", "max"),
        tuner,
        LoopSettings(budget=budget, repetitions=reps, timeout=timeout),
        seed=1,
    )


OK_ONLY = SPACE.replace("values: [ok, crash, hang, garbage]", "values: [ok]")


def test_loop_records_every_repetition(store: Store, bench: Path) -> None:
    outcome = start(store, bench, space_text=OK_ONLY).run()
    trials = store.trials(store.campaign("c").id)
    assert outcome.trials == 4 and outcome.runs_ok == 8 and outcome.runs_failed == 0
    assert [len(t.runs) for t in trials] == [2, 2, 2, 2]
    for t in trials:
        assert t.status == "ok"
        assert t.value == pytest.approx(10 - (t.config["x"] - 3) ** 2)
        assert t.summary["default"]["n"] == 2
        assert t.runs[0].metrics["side.x"] == pytest.approx(t.config["x"])
    assert outcome.best_value == max(t.value for t in trials)
    assert store.campaign("c").status == "finished"
    assert store.environments(store.campaign("c").id)[0]["target"]["kind"] == "command"


def test_crash_timeout_and_garbage_are_recorded_and_the_loop_goes_on(
    store: Store, bench: Path
) -> None:
    space = parse_space(SPACE)
    exp = Experiment.start(
        store,
        "f",
        space,
        CommandTarget(command(bench)),
        [None],
        Objective("score"),
        "lhs",
        LoopSettings(budget=8, repetitions=1, timeout=2),
        seed=4,
    )
    started = time.monotonic()
    exp.run()
    assert time.monotonic() - started < 30  # the hanging benchmark was killed, not waited for
    trials = store.trials(store.campaign("f").id)
    by_mode = {t.config["mode"]: t for t in trials}
    assert set(by_mode) == {"ok", "crash", "hang", "garbage"}
    assert by_mode["ok"].status == "ok"
    crash = by_mode["crash"].runs[0]
    assert crash.status == "failed" and "out of cheese" in crash.error
    hang = by_mode["hang"].runs[0]
    assert hang.status == "timeout" and "2 s time limit" in hang.error
    garbage = by_mode["garbage"].runs[0]
    assert garbage.status == "failed" and "no JSON object" in garbage.error
    for mode in ("crash", "hang", "garbage"):
        assert by_mode[mode].status == "failed" and by_mode[mode].value is None
    assert len(trials) == 8


def test_missing_objective_metric_fails_the_run(store: Store, bench: Path) -> None:
    space = parse_space(OK_ONLY)
    exp = Experiment.start(
        store,
        "m",
        space,
        CommandTarget(command(bench)),
        [None],
        Objective("nope"),
        "random",
        LoopSettings(budget=1, repetitions=1),
        seed=0,
    )
    exp.run()
    [trial] = store.trials(store.campaign("m").id)
    assert trial.status == "failed"
    assert "no metric 'nope' (it has: score, side.x)" in trial.runs[0].error


def test_apply_failure_fails_the_trial(store: Store, tmp_path: Path) -> None:
    space = parse_space(OK_ONLY)
    target = CommandTarget([sys.executable, "-c", "print(1)", "{missing}"])
    exp = Experiment.start(
        store,
        "a",
        space,
        target,
        [None],
        Objective("score"),
        "random",
        LoopSettings(budget=2, repetitions=1),
        seed=0,
    )
    exp.run()
    trials = store.trials(store.campaign("a").id)
    assert [t.status for t in trials] == ["failed", "failed"]
    assert "{missing}" in trials[0].error


def test_combine_workloads_uses_the_geometric_mean() -> None:
    assert combine_workloads([100.0, 1.0]) == pytest.approx(10.0)
    assert combine_workloads([-1.0, 3.0]) == pytest.approx(1.0)


def test_settings_are_checked() -> None:
    with pytest.raises(StortuneError, match="at least 1 evaluation"):
        LoopSettings(budget=0)
    with pytest.raises(StortuneError, match="repetitions must be at least 1"):
        LoopSettings(repetitions=0)
    with pytest.raises(StortuneError, match="budget in evaluations or in seconds"):
        LoopSettings(budget=None, seconds=None)


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*STORTUNE, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_resume_after_sigkill_loses_and_repeats_nothing(tmp_path: Path, bench: Path) -> None:
    (tmp_path / "space.yaml").write_text(OK_ONLY)
    db = tmp_path / "r.db"
    cmd = " ".join(command(bench, sleep=0.25))
    common = [
        "--space",
        "space.yaml",
        "--command",
        cmd,
        "-o",
        "score:max",
        "--budget",
        "6",
        "-r",
        "3",
        "--tuner",
        "tpe",
        "--seed",
        "5",
        "--store",
        str(db),
        "-q",
        "--no-check-disturbance",
    ]
    proc = subprocess.Popen(
        [*STORTUNE, "run", *common, "--name", "k"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            time.sleep(0.2)
            if db.exists():
                with Store(str(db)) as s:
                    if s.campaigns() and s.run_count(s.campaign("k").id) >= 7:
                        break
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    with Store(str(db)) as s:
        before = {r.id: r for t in s.trials(s.campaign("k").id) for r in t.runs}
        status = s.campaign("k").status
    assert 7 <= len(before) < 18 + 3  # 6 configs x 3 repetitions, and reference visits
    assert status == "running"  # it was killed: no chance to say anything

    result = run_cli("run", "--resume", "k", "--store", str(db), "-q", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    with Store(str(db)) as s:
        stored = s.trials(s.campaign("k").id)
        after = {r.id: r for t in stored for r in t.runs}
        assert s.campaign("k").status == "finished"
    trials = [t for t in stored if not is_reference(t)]
    reference = [t for t in stored if is_reference(t)]  # visits at 0, 5 and the end
    assert [r.info["at_seq"] for r in reference[0].runs] == [0, 5, 6]
    assert len(trials) == 6 and all(len(t.runs) == 3 for t in trials)
    assert all(sorted(r.repetition for r in t.runs) == [0, 1, 2] for t in trials)
    for run_id, run in before.items():  # every run from before the kill is still there as it was
        assert after[run_id].started_at == run.started_at
        assert after[run_id].metrics == run.metrics

    # resuming replays the seeded tuner: the configs are those of an uninterrupted campaign
    result = run_cli("run", *common, "--name", "straight", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    with Store(str(db)) as s:
        straight = [t for t in s.trials(s.campaign("straight").id) if not is_reference(t)]
    assert [t.config for t in straight] == [t.config for t in trials]


def test_baseline_is_trial_zero_and_verify_states_the_gain(store: Store, bench: Path) -> None:
    from stortune.verify import remeasure

    space = parse_space(OK_ONLY)
    exp = Experiment.start(
        store,
        "b",
        space,
        CommandTarget(command(bench)),
        [None],
        Objective("score", "max"),
        "random",
        LoopSettings(budget=4, repetitions=1, baseline=True),
        seed=2,
    )
    outcome = exp.run()
    trials = store.trials(store.campaign("b").id)
    assert trials[0].config == space.default_config() and trials[0].info == {"source": "default"}
    assert len(trials) == 4
    gain = remeasure(
        store,
        store.campaign("b"),
        CommandTarget(command(bench)),
        [None],
        {"default": space.default_config(), "best": outcome.best_config},
        repetitions=3,
    )["best"]
    default_score = 10 - (1 - 3) ** 2
    best_score = 10 - (outcome.best_config["x"] - 3) ** 2
    assert gain.gain == pytest.approx(best_score / default_score - 1)
    assert gain.n_default == 3 and gain.n_best == 3
    runs = store.trials(store.campaign("b-verify").id)
    assert [len(t.runs) for t in runs] == [3, 3]
    # interleaved: default, best, default, best, ...
    order = sorted((r.started_at, t.info["label"]) for t in runs for r in t.runs)
    assert [label for _, label in order][:4] == ["default", "best", "default", "best"]


NOISY = textwrap.dedent(
    """\
    import json, sys
    # a noisy benchmark with a fixed sequence: values alternate around 100 by +-spread
    counter = sys.argv[2] + ".n"
    try:
        n = int(open(counter).read())
    except FileNotFoundError:
        n = 0
    open(counter, "w").write(str(n + 1))
    spread = float(sys.argv[1])
    print(json.dumps({"score": 100 + (spread if n % 2 else -spread)}))
    """
)


@pytest.mark.parametrize(("spread", "expected"), [(0.5, 2), (4.0, 5), (30.0, 8)])
def test_adaptive_repetitions_stop_when_confident(
    store: Store, tmp_path: Path, spread: float, expected: int
) -> None:
    # 90% t-intervals by hand. +-0.5 around 100: two runs, t(1)=6.314 x s 0.707 / sqrt 2 =
    # 3.16%: within 5% at once. +-4: four runs, t(3)=2.353 x s 4.619 / 2 = 5.43% (not yet);
    # five runs (mean 99.2), t(4)=2.132 x s 4.382 / sqrt 5 / 99.2 = 4.21%: stop at 5.
    # +-30: still 21% after 8 runs, so the maximum of 8 applies.
    script = tmp_path / "noisy.py"
    script.write_text(NOISY)
    space = parse_space("name: s\nparameters:\n  x: {type: int, low: 1, high: 1, default: 1}\n")
    target = CommandTarget([sys.executable, str(script), str(spread), str(tmp_path / "c")])
    settings = LoopSettings(budget=1, repetitions=8, target_ci=0.05, min_repetitions=2)
    Experiment.start(
        store, "ad", space, target, [None], Objective("score"), "random", settings, seed=0
    ).run()
    [trial] = store.trials(store.campaign("ad").id)
    values = [r.metrics["score"] for r in trial.runs]
    assert len(values) == expected, values
    achieved = trial.summary["default"]["ci_rel"]
    assert achieved == pytest.approx(summarize(values).ci_half_width_rel)
    if expected < 8:
        assert achieved <= 0.05
    assert len(values) == 2 or summarize(values[:-1]).ci_half_width_rel > 0.05
