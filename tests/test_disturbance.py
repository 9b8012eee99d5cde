"""Disturbed runs: found by probes before and after, redone after the disturbance passed."""

import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import tune

from stortune.measure.runner import RunRules
from stortune.space import parse_space
from stortune.store import Store
from stortune.system.disturbance import Limits, Probe, judge, other_benchmarks
from stortune.targets.command import CommandTarget

pytestmark = pytest.mark.quiet  # judges other processes' load: runs alone (tests/conftest.py)

TICK = 100  # os.sysconf("SC_CLK_TCK") on Linux


def probe(
    t: float, user: int, own: int, benchmarks: tuple[str, ...] = (), io: dict | None = None
) -> Probe:
    return Probe(t, user, own, benchmarks, io or {})


def test_judge_names_the_disturbance() -> None:
    limits = Limits(other_cpu_cores=0.5, other_io_mbs=5.0)
    quiet = judge(probe(0, 0, 0), probe(10, 10 * TICK, 9 * TICK), limits)
    assert quiet is None  # 1 core of user time, 0.9 of it ours: 0.1 core of others
    busy = judge(probe(0, 0, 0), probe(10, 20 * TICK, 9 * TICK), limits)
    assert busy == "other processes used 1.10 CPU cores during the run"
    other = judge(probe(0, 0, 0, ("42 fio",)), probe(10, 0, 0), limits)
    assert other == "another benchmark was running: 42 fio"
    io = judge(probe(0, 0, 0, io={7: 5_000_000}), probe(10, 0, 0, io={7: 85_000_000}), limits)
    assert io == "other processes read or wrote 8.0 MB/s during the run"


def test_own_children_are_not_other_benchmarks(tmp_path: Path) -> None:
    fake = tmp_path / "fio"
    shutil.copy("/bin/sleep", fake)
    child = subprocess.Popen([str(fake), "5"])
    try:
        assert not any(entry.startswith(f"{child.pid} ") for entry in other_benchmarks())
    finally:
        child.kill()
        child.wait()


# The benchmark's first run starts a competing writer (dd, detached: not our descendant, and
# not holding the benchmark's output pipe) that outlives it by a moment; later runs are left
# alone.
BENCH = textwrap.dedent(
    """\
    import json, os, subprocess, sys, time
    flag = sys.argv[1] + ".started"
    if not os.path.exists(flag):
        open(flag, "w").close()
        subprocess.run(["sh", "-c", f"timeout 1.5 dd if=/dev/zero of={sys.argv[1]} bs=1M "
                        "count=100000 conv=fsync status=none </dev/null >/dev/null 2>&1 &"])
        time.sleep(0.3)
    print(json.dumps({"score": 1.0}))
    """
)


def test_a_run_disturbed_by_competing_io_is_redone(store: Store, tmp_path: Path) -> None:
    script = tmp_path / "bench.py"
    script.write_text(BENCH)
    target = CommandTarget(command=[sys.executable, str(script), str(tmp_path / "competitor.dat")])
    space = parse_space("name: s\nparameters:\n  x: {type: int, low: 1, high: 1, default: 1}\n")
    # The competing process is what is tested here (CPU use has its own test above), so other
    # processes' CPU, which a busy developer machine has plenty of, is allowed.
    rules = RunRules(check_disturbance=True, settle_seconds=2.5, max_other_cpu=64)
    if other_benchmarks():
        pytest.skip(f"the machine is busy with other benchmarks: {other_benchmarks()[:2]}")
    tune(store, "d", space, target, budget=1, repetitions=2, rules=rules)
    [trial] = store.trials(store.campaign("d").id)
    first, second = sorted(trial.runs, key=lambda r: r.repetition)
    attempts = first.info["disturbed_attempts"]
    # the competitor disturbed the first attempt; another benchmark's I/O beside the suite may
    # disturb a later one too, and that is redone by the same rule
    assert attempts and "dd" in attempts[0]["reason"]
    assert first.status == "ok" and second.status == "ok"
    assert "disturbed_attempts" not in second.info


def competitor(tmp_path: Path, seconds: float) -> Path:
    """A process named fio that is not ours (its shell parent exits at once), for `seconds`."""
    fake = tmp_path / "fio"
    shutil.copy("/bin/sleep", fake)
    subprocess.run(["sh", "-c", f"{fake} {seconds} >/dev/null 2>&1 </dev/null &"], check=True)
    return fake


def quick_target(tmp_path: Path) -> CommandTarget:
    script = tmp_path / "q.py"
    script.write_text("import json, time\ntime.sleep(0.3)\nprint(json.dumps({'score': 1.0}))\n")
    return CommandTarget(command=[sys.executable, str(script), "{x}"])


SPACE = "name: s\nparameters:\n  x: {type: int, low: 1, high: 4, default: 1}\n"


def test_a_busy_machine_is_waited_out_without_spending_the_budget(
    store: Store, tmp_path: Path
) -> None:
    if other_benchmarks():
        pytest.skip(f"the machine is busy with other benchmarks: {other_benchmarks()[:2]}")
    waits = []

    def seen(event: object) -> None:
        if getattr(event, "kind", "") == "wait":
            waits.append(event)

    competitor(tmp_path, 4)
    rules = RunRules(check_disturbance=True, settle_seconds=1.0, max_other_cpu=64, busy_wait=60)
    space = parse_space(SPACE)
    outcome = tune(
        store, "w", space, quick_target(tmp_path), budget=2, repetitions=1, rules=rules,
        on_event=seen,
    ).outcome  # fmt: skip
    trials = store.trials(store.campaign("w").id)
    assert outcome.evaluations == 2 and outcome.runs_ok == 2 and outcome.runs_disturbed == 0
    first = trials[0].runs[0]
    assert "another benchmark was running" in first.info["disturbed_attempts"][0]["reason"]
    assert outcome.waited_seconds >= 2.0  # waited for the competitor to end ...
    busy = [w for w in waits if "machine busy" in w.message]
    assert busy and all(w.seconds_left <= 60 for w in busy)  # ... counting down from the limit
    assert store.campaign("w").status == "finished"


def test_a_machine_that_stays_busy_stops_the_campaign_resumable(tmp_path: Path) -> None:
    if other_benchmarks():
        pytest.skip(f"the machine is busy with other benchmarks: {other_benchmarks()[:2]}")
    from conftest import STORTUNE

    fake = competitor(tmp_path, 60)
    (tmp_path / "s.yaml").write_text(SPACE)
    script = tmp_path / "q.py"
    script.write_text("import json, sys\nprint(json.dumps({'score': float(sys.argv[1])}))\n")
    db = tmp_path / "b.db"
    try:
        result = subprocess.run(
            [
                *STORTUNE,
                "run",
                "--space",
                str(tmp_path / "s.yaml"),
                "--command",
                f"{sys.executable} {script} {{x}}",
                "-o",
                "score:max",
                "--budget",
                "3",
                "-r",
                "1",
                "--check-disturbance",
                "--busy-wait",
                "3",
                "--reference-every",
                "0",
                "--store",
                str(db),
                "--name",
                "busy",
                "-q",
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        subprocess.run(["pkill", "-f", str(fake)], check=False)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "none of its 1 evaluations succeeded" in last
    assert "the machine stayed busy (another benchmark" in last and "fio" in last
    with Store(str(db)) as s:
        assert s.campaign("busy").status == "interrupted"  # `stortune resume busy` goes on
        assert len(s.trials(s.campaign("busy").id)) == 1  # the budget was not burnt


# Each of the first four runs starts a competing writer, as a test suite's bursts beside a
# campaign do: more than the runner's tries of one visit (1 + Limits.retries).
SPOILT = textwrap.dedent(
    """\
    import json, os, subprocess, sys, time
    counter = sys.argv[1] + ".runs"
    runs = int(open(counter).read()) if os.path.exists(counter) else 0
    open(counter, "w").write(str(runs + 1))
    if runs < 4:
        subprocess.run(["sh", "-c", f"timeout 1 dd if=/dev/zero of={sys.argv[1]} bs=1M "
                        "count=100000 conv=fsync status=none </dev/null >/dev/null 2>&1 &"])
        time.sleep(0.3)
    print(json.dumps({"score": 1.0}))
    """
)


@pytest.mark.parametrize("intensify", [False, True])
def test_a_run_spoilt_past_its_tries_is_visited_again_not_told_as_a_failure(
    store: Store, tmp_path: Path, intensify: bool
) -> None:
    deadline = time.monotonic() + 10  # the competitors of the tests before end by then
    while other_benchmarks() and time.monotonic() < deadline:
        time.sleep(0.5)
    if other_benchmarks():
        pytest.skip(f"the machine is busy with other benchmarks: {other_benchmarks()[:2]}")
    script = tmp_path / "bench.py"
    script.write_text(SPOILT)
    target = CommandTarget(command=[sys.executable, str(script), str(tmp_path / "competitor.dat")])
    space = parse_space("name: s\nparameters:\n  x: {type: int, low: 1, high: 1, default: 1}\n")
    rules = RunRules(check_disturbance=True, settle_seconds=1.5, max_other_cpu=64)
    outcome = tune(
        store, "v", space, target, budget=1, repetitions=1, rules=rules, intensify=intensify
    ).outcome
    [trial] = store.trials(store.campaign("v").id)
    # the first visit's placeholder was replaced by the next visit's run
    assert trial.runs and all(run.status == "ok" for run in trial.runs)
    assert trial.value == 1.0 and outcome.runs_failed == 0
    # five runs at least: four spoilt, then the good one (other work beside the suite may spoil
    # more, and those are measured again by the same rule)
    assert int((tmp_path / "competitor.dat.runs").read_text()) >= 4 + len(trial.runs)


def test_a_run_whose_settings_another_process_changed_is_redone(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = quick_target(tmp_path)
    checks = []

    def rewritten_once() -> list[str]:
        # what the localfs target's `reassert` says when another process wrote its sysctl
        # during the first run (its own test does that for real, in /proc/sys)
        checks.append(1)
        return ["vm.dirty_ratio = 20 (applied: 33)"] if len(checks) == 1 else []

    monkeypatch.setattr(target, "reassert", rewritten_once)
    rules = RunRules(check_disturbance=True, settle_seconds=0.5, max_other_cpu=64)
    if other_benchmarks():
        pytest.skip(f"the machine is busy with other benchmarks: {other_benchmarks()[:2]}")
    tune(store, "s", parse_space(SPACE), target, budget=1, repetitions=1, rules=rules)
    [trial] = store.trials(store.campaign("s").id)
    [run] = trial.runs
    reasons = [a["reason"] for a in run.info["disturbed_attempts"]]
    assert "another process changed vm.dirty_ratio = 20 (applied: 33)" in reasons
    assert run.status == "ok"
