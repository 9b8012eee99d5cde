"""The measuring engine on the real `command` target: the runner's rules for failures, timeouts,
missing metrics, apply failures, adaptive repetitions, verification and resume after SIGKILL."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import STORTUNE, tune

from stortune.errors import StortuneError
from stortune.measure.reference import is_reference
from stortune.measure.runner import RunRules
from stortune.measure.tuning import TuneSettings
from stortune.objective import combine_workloads
from stortune.space import parse_space
from stortune.stats import summarize
from stortune.store import Store
from stortune.targets.command import CommandTarget
from stortune.workloads.base import Measurement, Need, Venue, Workload

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


def target(bench: Path, sleep: float = 0.0) -> CommandTarget:
    return CommandTarget(command=command(bench, sleep))


OK_ONLY = SPACE.replace("values: [ok, crash, hang, garbage]", "values: [ok]")


def test_loop_records_every_repetition(store: Store, bench: Path) -> None:
    space = parse_space(OK_ONLY)
    outcome = tune(store, "c", space, target(bench), budget=4, repetitions=2, seed=1).outcome
    trials = store.trials(store.campaign("c").id)
    assert outcome.evaluations == 4 and outcome.runs_ok == 8 and outcome.runs_failed == 0
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
    started = time.monotonic()
    tune(
        store, "f", space, target(bench), tuner="lhs", seed=4, budget=8, repetitions=1,
        rules=RunRules(timeout=2),
    )  # fmt: skip
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
    tune(store, "m", space, target(bench), "nope", budget=1, repetitions=1)
    [trial] = store.trials(store.campaign("m").id)
    assert trial.status == "failed"
    assert "no metric 'nope' (it has: score, side.x)" in trial.runs[0].error


def test_apply_failure_fails_the_trial_and_the_loop_goes_on(store: Store) -> None:
    space = parse_space(OK_ONLY)
    broken = CommandTarget(command=[sys.executable, "-c", "print(1)", "{missing}"])
    outcome = tune(store, "a", space, broken, budget=2, repetitions=3).outcome
    trials = store.trials(store.campaign("a").id)
    assert [t.status for t in trials] == ["failed", "failed"]
    assert "{missing}" in trials[0].error
    # one failed run records why; no repetition is tried on a config that does not apply
    assert [len(t.runs) for t in trials] == [1, 1]
    assert trials[0].runs[0].error.startswith("apply: ")
    assert outcome.stopped_by == "budget" and store.campaign("a").status == "finished"


def stops_iterating(*args: Any, **kwargs: Any) -> Any:
    """A run that leaks a StopIteration, as a bare next() over an empty sequence would."""
    raise StopIteration


def test_a_stop_iteration_from_a_run_fails_the_campaign_instead_of_ending_its_budget(
    store: Store, bench: Path
) -> None:
    space = parse_space(OK_ONLY)
    leaking = target(bench)
    leaking.run = stops_iterating  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="measuring ended an iterator"):
        tune(store, "leak", space, leaking, budget=3, repetitions=1)
    assert store.campaign("leak").status == "failed"


def test_a_zombie_process_has_no_usage() -> None:
    from stortune.ceph.perf import process_usage

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child.pid}/stat").read_text().split(")")[-1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    try:
        assert process_usage(child.pid) is None  # exited, not reaped: no VmRSS line
        assert process_usage(os.getpid()) is not None
    finally:
        child.wait()


def test_combine_workloads_uses_the_geometric_mean() -> None:
    assert combine_workloads([100.0, 1.0]) == pytest.approx(10.0)
    assert combine_workloads([264.2]) == 264.2  # one workload: exactly its mean
    assert combine_workloads([-1.0, 3.0]) == pytest.approx(1.0)


def test_settings_are_checked() -> None:
    with pytest.raises(StortuneError, match="at least 1 evaluation"):
        TuneSettings(budget=0)
    with pytest.raises(StortuneError, match="repetitions must be from 1 to"):
        TuneSettings(repetitions=0)
    with pytest.raises(StortuneError, match="budget in evaluations or in seconds"):
        TuneSettings(budget=None, seconds=None)
    with pytest.raises(StortuneError, match="timeout must be a positive number"):
        RunRules(timeout=float("nan"))


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
        env={**os.environ, "TMPDIR": str(tmp_path)},  # what the killed process leaves is ours
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

    result = run_cli("resume", "k", "--store", str(db), "-q", cwd=tmp_path)
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
    space = parse_space(OK_ONLY)
    result = tune(
        store, "b", space, target(bench), seed=2, budget=4, repetitions=1, baseline=True, verify=3
    )
    outcome, gain = result.outcome, result.gain
    trials = store.trials(store.campaign("b").id)
    assert trials[0].config == space.default_config() and trials[0].info == {"source": "default"}
    assert len(trials) == 4
    default_score = 10 - (1 - 3) ** 2
    best_score = 10 - (outcome.best_config["x"] - 3) ** 2
    assert gain.gain == pytest.approx(best_score / default_score - 1)
    assert gain.n_default == 3 and gain.n_best == 3
    runs = store.trials(store.campaign("b-verify").id)
    assert [len(t.runs) for t in runs] == [3, 3]
    # interleaved, the order turning each round: default, best, best, default, default, best
    order = sorted((r.started_at, t.info["label"]) for t in runs for r in t.runs)
    assert [label for _, label in order] == [
        "default", "best", "best", "default", "default", "best"
    ]  # fmt: skip


def test_a_scalarised_verification_states_each_metrics_gain_from_the_same_runs(
    store: Store, bench: Path
) -> None:
    from stortune.measure.verify import stored_gains
    from stortune.objective import Objective

    space = parse_space(OK_ONLY)
    tune(
        store, "pair", space, target(bench), ["score:max", "side.x:max"], seed=2, budget=4,
        repetitions=1, baseline=True, verify=3,
    )  # fmt: skip
    tuned = store.campaign("pair")
    best = next(
        t for t in store.trials(store.campaign("pair-verify").id) if t.info["label"] == "best"
    )
    x = best.config["x"]  # the default's x is 1: its score is 6
    score = stored_gains(store, tuned, Objective("score"))["best"]
    side = stored_gains(store, tuned, Objective("side.x"))["best"]
    assert score.gain == pytest.approx((10 - (x - 3) ** 2) / 6 - 1)
    assert side.gain == pytest.approx(x / 1 - 1)
    assert score.n_best == side.n_best == 3
    scalarised = stored_gains(store, tuned)["best"]  # the campaign's own objective
    assert scalarised.gain not in (pytest.approx(score.gain), pytest.approx(side.gain))


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
    noisy = CommandTarget(command=[sys.executable, str(script), str(spread), str(tmp_path / "c")])
    tune(store, "ad", space, noisy, budget=1, repetitions=8, target_ci=0.05, min_repetitions=2)
    [trial] = store.trials(store.campaign("ad").id)
    values = [r.metrics["score"] for r in trial.runs]
    assert len(values) == expected, values
    achieved = trial.summary["default"]["ci_rel"]
    assert achieved == pytest.approx(summarize(values).ci_half_width_rel)
    if expected < 8:
        assert achieved <= 0.05
    assert len(values) == 2 or summarize(values[:-1]).ci_half_width_rel > 0.05


# ---- one set of rules for every plan --------------------------------------------------------
REPO_DATA = Path(__file__).resolve().parents[1] / "data" / "localfs.csv"


def campaign_content(store: Store, name: str) -> list[tuple]:
    """What a campaign measured, without ids and times: each trial's config, status and value,
    and each run's slot, status and metrics."""
    out = []
    for t in store.trials(store.campaign(name).id):
        runs = sorted(
            (r.workload, r.repetition, r.status, sorted(r.metrics.items())) for r in t.runs
        )
        out.append((t.seq, sorted(t.config.items()), t.status, t.value, runs))
    return out


def test_a_table_campaign_killed_and_resumed_equals_an_uninterrupted_one(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    common = [
        "--space", "localfs", "--target", "table", "--dataset", str(REPO_DATA), "--nearest",
        "-o", "total.bw_mbs:max", "-r", "1", "--tuner", "random", "--seed", "3",
        "--budget", "800", "--store", str(db), "-q",
    ]  # fmt: skip
    proc = subprocess.Popen(
        [*STORTUNE, "run", *common, "--name", "killed"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        runs = 0
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
            if db.exists():
                with Store(str(db)) as s:
                    runs = s.run_count(s.campaign("killed").id) if s.campaigns() else 0
                if runs >= 100:
                    break
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    with Store(str(db)) as s:
        killed_at = s.run_count(s.campaign("killed").id)
        assert s.campaign("killed").status == "running"
    assert 100 <= killed_at < 1600, "the campaign was not killed in its middle"
    result = run_cli("run", "--resume", "killed", "--store", str(db), "-q", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    result = run_cli("run", *common, "--name", "straight", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    with Store(str(db)) as s:
        assert s.campaign("killed").status == "finished"
        resumed, straight = campaign_content(s, "killed"), campaign_content(s, "straight")
    assert len(resumed) == 800 and all(t[2] == "ok" for t in resumed)
    assert resumed == straight


def test_a_multi_objective_campaign_resumes_with_the_bounds_it_found(
    store: Store, bench: Path
) -> None:
    from stortune.measure.runner import Interrupted
    from stortune.workflows.tune import resume_tuning

    space = parse_space(OK_ONLY)
    objectives = ["score:max", "side.x:min:2"]
    seen = []

    def stop_on_fifth_run(event: Any) -> None:
        seen.append(event)
        if sum(e.kind == "run" for e in seen) == 5:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted):
        tune(
            store, "mo", space, target(bench), objectives, tuner="tpe", seed=7, budget=6,
            repetitions=1, on_event=stop_on_fifth_run,
        )  # fmt: skip
    assert store.campaign("mo").status == "interrupted"
    stored = store.campaign("mo").objective
    assert stored["metric"] == "score" and set(stored["scalarizer"]["bounds"]) == {
        "score",
        "side.x",
    }
    resumed = resume_tuning(store, "mo")
    straight = tune(
        store, "mo2", space, target(bench), objectives, tuner="tpe", seed=7, budget=6,
        repetitions=1,
    )  # fmt: skip
    assert resumed.outcome.evaluations == 6 and store.campaign("mo").status == "finished"
    assert [c[1:] for c in campaign_content(store, "mo")] == [
        c[1:] for c in campaign_content(store, "mo2")
    ]
    # the default config came first: the bounds are [0, 2 x] its values, so it scores 0.5
    first = store.trials(store.campaign("mo").id)[0]
    assert first.info == {"source": "default"} and first.value == pytest.approx(0.5)
    assert resumed.pareto and all(row["seq"] >= 0 for row in resumed.pareto)
    assert straight.pareto == resumed.pareto


def test_a_sweep_records_a_config_that_cannot_be_applied_and_finishes(
    store: Store, tmp_path: Path
) -> None:
    from conftest import sweep

    space = parse_space(
        "name: s\nparameters:\n  x: {type: int, low: 1, high: 4, default: 1}\n"
        "  mode: {type: categorical, values: [ok, broken], default: ok}\n"
    )
    script = tmp_path / "b.py"
    script.write_text("import json, sys\nprint(json.dumps({'v': float(sys.argv[1])}))\n")
    # the {missing} placeholder makes apply fail for... every config: use a per-config check
    fussy = FussyTarget(command=[sys.executable, str(script), "{x}"])
    configs = [{"x": 2, "mode": "ok"}, {"x": 3, "mode": "broken"}, {"x": 4, "mode": "ok"}]
    measuring = sweep(store, "sw", space, fussy, "v", configs, repetitions=2, reference_every=2)
    outcome = measuring.run()
    trials = {t.seq: t for t in store.trials(store.campaign("sw").id)}
    assert store.campaign("sw").status == "finished" and outcome.stopped_by == "budget"
    broken = trials[2]
    assert broken.status == "failed" and "apply: mode broken" in broken.error
    assert sorted(r.repetition for r in broken.runs) == [0, 1]  # each slot recorded, once
    assert all(r.status == "failed" for r in broken.runs)
    assert trials[1].status == "ok" and trials[3].status == "ok"
    assert len(trials[1].runs) == 2 and len(trials[3].runs) == 2


class FussyTarget(CommandTarget):
    """A command target that refuses one value (as a kernel refuses a mount option)."""

    kind = ""  # not registered: a test's stand-in

    def apply(self, config: dict) -> None:
        from stortune.errors import TargetError

        if config.get("mode") == "broken":
            raise TargetError("mode broken is refused")
        super().apply(config)


def test_an_interrupted_verification_is_recorded_and_resumes(store: Store, bench: Path) -> None:
    from stortune.measure.campaigns import open_campaign
    from stortune.measure.runner import Interrupted
    from stortune.measure.verify import stored_gain
    from stortune.workflows.verify import verify

    space = parse_space(OK_ONLY)
    tune(store, "v", space, target(bench), budget=3, repetitions=1, seed=1)
    tuned = store.campaign("v")
    runs = []

    class StopAfterFour:
        def note(self, text: str) -> None:
            pass

        def measuring(self, label: str, measuring: Any) -> Any:
            from contextlib import nullcontext

            def on_event(event: Any) -> None:
                if event.kind == "run":
                    runs.append(event)
                    if len(runs) == 4:
                        raise KeyboardInterrupt

            return nullcontext(on_event)

    configs = {"default": space.default_config(), "best": {"x": 3.0, "mode": "ok"}}
    with pytest.raises(Interrupted):
        verify(store, tuned, target(bench), configs, 4, space, StopAfterFour())
    check = store.campaign("v-verify")
    assert check.status == "interrupted" and store.run_count(check.id) == 4
    open_campaign(store, "v-verify").run()
    assert store.campaign("v-verify").status == "finished" and store.run_count(check.id) == 8
    gain = stored_gain(store, tuned)
    assert gain is not None and gain.n_default == 4 and gain.n_best == 4
    assert gain.gain == pytest.approx(10 / 6 - 1)


def test_tune_resume_continues_a_stopped_verification_instead_of_a_new_one(
    store: Store, bench: Path
) -> None:
    from stortune.errors import Interrupted
    from stortune.workflows.tune import resume_tuning

    space = parse_space(OK_ONLY)
    runs = []

    class StopAfterThree:
        def note(self, text: str) -> None:
            pass

        def measuring(self, label: str, measuring: Any) -> Any:
            from contextlib import nullcontext

            def on_event(event: Any) -> None:
                if event.kind == "run" and label.startswith("re-measuring"):
                    runs.append(event)
                    if len(runs) == 3:
                        raise KeyboardInterrupt

            return nullcontext(on_event)

    from stortune.objective import Objective
    from stortune.workflows.tune import TuneJob, start_tuning

    job = TuneJob(
        space=space, target=target(bench), workloads=[None], objective=Objective("score"),
        settings=TuneSettings(budget=3, repetitions=1), name="v", verify=4,
    )  # fmt: skip
    with pytest.raises(Interrupted):
        start_tuning(store, job, StopAfterThree())
    assert store.campaign("v-verify").status == "interrupted"
    result = resume_tuning(store, "v", verify_repetitions=4)
    assert result.verification is not None and result.verification.campaign.name == "v-verify"
    assert store.campaign("v-verify").status == "finished"
    assert store.run_count(store.campaign("v-verify").id) == 8  # 3 kept, 5 more: none again
    assert "v-verify-2" not in {c.name for c in store.campaigns()}
    # a finished verification is not continued: asking again verifies anew, as before
    again = resume_tuning(store, "v", verify_repetitions=4)
    assert again.verification is not None and again.verification.campaign.name == "v-verify-2"


def test_a_time_budget_is_a_hard_limit(store: Store, bench: Path) -> None:
    space = parse_space(OK_ONLY)
    started = time.monotonic()
    result = tune(
        store, "t", space, target(bench, sleep=0.6), budget=None, seconds=4.0, repetitions=2
    )
    spent = time.monotonic() - started
    assert result.outcome.stopped_by == "time"
    assert result.outcome.runs_ok >= 2 and spent < 4.0 + 1.5
    last_end = max(r.ended_at for t in store.trials(store.campaign("t").id) for r in t.runs)
    first_start = min(r.started_at for t in store.trials(store.campaign("t").id) for r in t.runs)
    assert last_end - first_start <= 4.0


class Scripted(Workload):
    """A workload whose runs fail or succeed as told, and that remembers each run."""

    kind = ""  # not registered: a test's stand-in
    needs = Need.DIRECTORY

    def __init__(self, name: str, fails: bool, ran: list[str]) -> None:
        self.name, self.fails, self.ran = name, fails, ran

    def describe(self) -> dict[str, Any]:
        return {"kind": "scripted", "name": self.name}

    @classmethod
    def from_spec(cls, spec: Any) -> Workload:
        raise NotImplementedError

    def run(self, venue: Venue, timeout: float | None = None) -> Measurement:
        self.ran.append(f"{self.name}/{venue.repetition}")
        if self.fails:
            return Measurement.failed("the OSD stopped answering", "timeout")
        return Measurement({"score": 1.0})


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting tmpfs needs root")
def test_a_failed_workload_ends_its_repetition_so_a_hung_config_costs_one_time_limit(
    store: Store, private_state_dir: Path
) -> None:
    from stortune.space import load_space
    from stortune.targets.tmpfs import TmpfsTarget

    ran: list[str] = []
    workloads = [Scripted("write", True, ran), Scripted("read", False, ran)]
    space = load_space("tmpfs")
    tune(
        store, "hung", space, TmpfsTarget(space), budget=1, repetitions=2, workloads=workloads,
        reference_every=0,
    )  # fmt: skip
    assert ran == ["write/0", "write/1"]  # the read after a hung write never started
    [trial] = store.trials(store.campaign("hung").id)
    skipped = [r for r in trial.runs if r.workload == "read"]
    assert [r.status for r in skipped] == ["failed", "failed"]
    assert all(r.error.startswith("not run: write failed first") for r in skipped)
    assert trial.status == "failed"
