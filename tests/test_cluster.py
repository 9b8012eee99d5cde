"""Campaigns on a Dask cluster: a scheduler and three nodes on 127.0.0.1 as separate processes,
each with its own state folder, measuring a command target whose optimum is known; a node
SIGKILLed mid-run; a coordinator SIGKILLed and resumed. (test_cluster_localfs: three loop
images.)"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import STORTUNE
from typer.testing import CliRunner

from stortune.cli import app
from stortune.cluster.local import LocalCluster, start_local

pytestmark = pytest.mark.slow

OPTIMUM = 100.0  # the program's score at x=7, y=3

SPACE = textwrap.dedent(
    """\
    name: bowl
    description: a score with one peak at x=7, y=3
    parameters:
      x: {type: int, low: 0, high: 15, default: 0}
      y: {type: int, low: 0, high: 7, default: 0}
    """
)
PROGRAM = textwrap.dedent(
    """\
    import json, os, pathlib, sys, time
    x, y = int(sys.argv[1]), int(sys.argv[2])
    marker = pathlib.Path(os.environ["STORTUNE_STATE_DIR"]) / "running"
    marker.write_text(f"{x} {y}")
    time.sleep(float(os.environ.get("BOWL_SLEEP", "0.2")))
    marker.unlink()
    print(json.dumps({"score": 100 - (x - 7) ** 2 - (y - 3) ** 2}))
    """
)


@pytest.fixture
def bowl(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "bowl.yaml").write_text(SPACE)
    (tmp_path / "bowl.py").write_text(PROGRAM)
    return {"space": tmp_path / "bowl.yaml", "program": tmp_path / "bowl.py", "root": tmp_path}


def command_args(bowl: dict[str, Path]) -> list[str]:
    return ["--target", "command", "--command", f"{sys.executable} {bowl['program']} {{x}} {{y}}"]


@pytest.fixture
def cluster(bowl: dict[str, Path]):
    nodes = start_local(3, bowl["root"] / "cluster", command_args(bowl))
    try:
        yield nodes
    finally:
        nodes.stop()
        assert all(p.poll() is not None for p in [*nodes.nodes.values(), nodes.scheduler])


def tune(bowl, cluster: LocalCluster, name: str, *extra: str, store: Path | None = None):
    store = store or bowl["root"] / f"{name}.db"
    argv = [
        *STORTUNE, "tune", *command_args(bowl), "--space", str(bowl["space"]),
        "-o", "score:max", "--scheduler", cluster.address, "--store", str(store),
        "--name", name, "--seed", "3", "--quiet", *extra,
    ]  # fmt: skip
    return argv, store


def stored(store: Path, name: str) -> tuple[dict[int, dict], list[tuple]]:
    """The campaign's trials (seq -> row) and runs (trial seq, workload, rep, status, node)."""
    with sqlite3.connect(store) as db:
        cid = db.execute("select id from campaigns where name = ?", (name,)).fetchone()[0]
        trials = {
            seq: {"config": json.loads(config), "status": status, "value": value,
                  "info": json.loads(info or "{}")}
            for seq, config, status, value, info in db.execute(
                "select seq, config, status, value, info from trials where campaign_id = ?",
                (cid,),
            )
        }  # fmt: skip
        runs = [
            (seq, workload, rep, status, json.loads(info or "{}").get("node"))
            for seq, workload, rep, status, info in db.execute(
                "select t.seq, r.workload, r.repetition, r.status, r.info from runs r "
                "join trials t on t.id = r.trial_id where t.campaign_id = ?",
                (cid,),
            )
        ]
    return trials, runs


def test_a_campaign_finds_the_known_optimum_on_three_nodes(bowl, cluster):
    argv, store = tune(bowl, cluster, "bowl", "--budget", "24", "--verify", "2",
                       "--verify-max", "3", "--json")  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["outcome"]["evaluations"] == 24
    assert result["outcome"]["best_value"] >= OPTIMUM - 2
    trials, runs = stored(store, "bowl")
    measured_on = {node for *_, status, node in runs if status == "ok"}
    assert measured_on == {"local-1", "local-2", "local-3"}
    references = [t for t in trials.values() if t["info"].get("source") == "reference"]
    assert sorted(t["info"]["node"] for t in references) == ["local-1", "local-2", "local-3"]
    shown = subprocess.run([*STORTUNE, "show", "bowl", "--store", str(store)],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "nodes" in shown.stdout and "local-3" in shown.stdout


def test_a_node_killed_mid_run_loses_and_repeats_nothing(bowl, cluster):
    argv, store = tune(bowl, cluster, "kill", "--budget", "18", "--no-intensify",
                       "--repetitions", "2")  # fmt: skip
    coordinator = subprocess.Popen(argv, env={**os.environ, "BOWL_SLEEP": "0.6"})
    marker = bowl["root"] / "cluster" / "local-2" / "running"
    victim = cluster.nodes["local-2"]
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() or _trials_done(store, "kill") < 2:
            assert time.monotonic() < deadline, "local-2 never measured"
            assert coordinator.poll() is None
            time.sleep(0.05)
        victim.send_signal(signal.SIGKILL)
        assert coordinator.wait(timeout=600) == 0
    finally:
        if coordinator.poll() is None:
            coordinator.kill()
    trials, runs = stored(store, "kill")
    evaluated = {s: t for s, t in trials.items() if s >= 0}
    assert sorted(evaluated) == list(range(18))
    assert all(t["status"] == "ok" for t in evaluated.values())
    results = Counter((seq, w, rep) for seq, w, rep, status, _ in runs if status == "ok")
    assert all(n == 1 for n in results.values())  # none duplicated
    assert all(len([k for k in results if k[0] == s]) == 2 for s in evaluated)  # none lost
    lost = [t for t in evaluated.values() if t["info"].get("lost_on")]
    assert lost and all(t["info"]["lost_on"] == ["local-2"] for t in lost)
    for seq in (s for s, t in evaluated.items() if t["info"].get("lost_on")):
        finished_on = {node for s, *_, status, node in runs if s == seq and status == "ok"}
        assert "local-2" not in finished_on or len(finished_on) > 1
    # with its three nodes busy on trials 0-2, the coordinator proposed trial 3 ahead, before
    # any of them ended: the node that frees first starts it at once
    with sqlite3.connect(store) as db:
        made, ended = dict(db.execute("select seq, created_at from trials")), {}
        for seq, end in db.execute("select t.seq, r.ended_at from runs r join trials t on "
                                   "t.id = r.trial_id where t.seq between 0 and 2"):  # fmt: skip
            ended[seq] = max(ended.get(seq, 0.0), end)
    assert made[3] < min(ended.values())


def test_a_scheduler_that_misses_requests_loses_no_visit(bowl, cluster, monkeypatch):
    """A scheduler busy (removing a dead worker, a loaded host) can fail to answer who is
    connected: the visits measuring meanwhile are not lost for that."""
    from distributed import Client

    answer = Client.scheduler_info
    asked = Counter()

    def every_other_fails(self, *args, **kwargs):
        asked["calls"] += 1
        if asked["calls"] > 2 and asked["calls"] % 2:
            raise OSError("the scheduler did not answer in time")
        return answer(self, *args, **kwargs)

    monkeypatch.setattr(Client, "scheduler_info", every_other_fails)
    argv, store = tune(bowl, cluster, "deaf", "--budget", "9", "--no-intensify",
                       "--repetitions", "1")  # fmt: skip
    done = CliRunner().invoke(app, argv[len(STORTUNE) :])
    assert done.exit_code == 0, done.output[-2000:]
    assert asked["calls"] > 10  # it was asked, and missed, many times mid-run
    trials, runs = stored(store, "deaf")
    evaluated = {s: t for s, t in trials.items() if s >= 0}
    assert sorted(evaluated) == list(range(9))
    assert not [t for t in evaluated.values() if t["info"].get("lost_on")]
    assert all(status == "ok" for *_, status, _node in runs)


def _trials_done(store: Path, name: str) -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(store) as db:
            row = db.execute(
                "select count(*) from trials t join campaigns c on c.id = t.campaign_id "
                "where c.name = ? and t.seq >= 0 and t.status != 'pending'",
                (name,),
            ).fetchone()
    except sqlite3.OperationalError:  # the store is being created
        return 0
    return int(row[0])


def test_a_killed_coordinator_resumes_to_the_uninterrupted_campaign(bowl, cluster):
    extra = ("--budget", "12", "--no-intensify", "--repetitions", "1", "--tuner", "bo")
    argv, whole = tune(bowl, cluster, "same", *extra)
    assert subprocess.run(argv, capture_output=True, timeout=600).returncode == 0
    argv, cut = tune(bowl, cluster, "same", *extra, store=bowl["root"] / "cut.db")
    coordinator = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while _trials_done(cut, "same") < 5:
            assert time.monotonic() < deadline and coordinator.poll() is None
            time.sleep(0.05)
        coordinator.send_signal(signal.SIGKILL)
        coordinator.wait()
    finally:
        if coordinator.poll() is None:
            coordinator.kill()
    resume = [*STORTUNE, "resume", "same", "--scheduler", cluster.address, "--store", str(cut),
              "--quiet"]  # fmt: skip
    env = {**os.environ, "STORTUNE_LEASE_STALE": "1"}  # the killed holder's lease is stale now
    done = subprocess.run(resume, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    uninterrupted, _ = stored(whole, "same")
    resumed, runs = stored(cut, "same")
    configs = {s: t["config"] for s, t in uninterrupted.items() if s >= 0}
    assert {s: t["config"] for s, t in resumed.items() if s >= 0} == configs
    assert Counter(seq for seq, *_, status, _ in runs if status == "ok" and seq >= 0) == Counter(
        range(12)
    )  # each trial's one run, none twice
