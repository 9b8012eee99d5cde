"""Disturbed runs: found by probes before and after, redone after the disturbance passed."""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import tune

from stortune.measure.disturbance import Limits, Probe, judge, other_benchmarks
from stortune.measure.runner import RunRules
from stortune.space import parse_space
from stortune.store import Store
from stortune.targets.command import CommandTarget

TICK = 100  # os.sysconf("SC_CLK_TCK") on Linux


def probe(t: float, user: int, own: int, benchmarks: tuple[str, ...] = ()) -> Probe:
    return Probe(t, user, own, benchmarks)


def test_judge_names_the_disturbance() -> None:
    limits = Limits(other_cpu_cores=0.5, other_io_mbs=5.0)
    quiet = judge(probe(0, 0, 0), probe(10, 10 * TICK, 9 * TICK), {}, limits)
    assert quiet is None  # 1 core of user time, 0.9 of it ours: 0.1 core of others
    busy = judge(probe(0, 0, 0), probe(10, 20 * TICK, 9 * TICK), {}, limits)
    assert busy == "other processes used 1.10 CPU cores during the run"
    other = judge(probe(0, 0, 0, ("42 fio",)), probe(10, 0, 0), {}, limits)
    assert other == "another benchmark was running: 42 fio"
    io = judge(probe(0, 0, 0), probe(10, 0, 0), {"sys.other_io_mb": 80.0}, limits)
    assert io == "other I/O of 8.0 MB/s on devices the run does not use"


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
    assert len(attempts) == 1 and "dd" in attempts[0]["reason"]
    assert first.status == "ok" and second.status == "ok"
    assert "disturbed_attempts" not in second.info
