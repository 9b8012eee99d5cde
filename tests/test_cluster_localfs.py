"""A short localfs campaign on a Dask cluster of three nodes on this machine, each formatting
its own loop image in its own state folder; every node tears its file system down when it
stops."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import STORTUNE
from test_cluster import stored

from stortune.cluster.local import start_local

pytestmark = pytest.mark.slow


@pytest.mark.root
def test_a_localfs_campaign_on_three_loop_images(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("needs root: loop devices and mounts")
    target = ["--target", "localfs", "--image-size", "256m", "--memory-limit", "128m"]
    root = tmp_path / "cluster"
    with start_local(3, root, target) as nodes:
        argv = [
            *STORTUNE, "tune", *target, "--space", "localfs", "-w", "webserver", "--runtime", "1",
            "-o", "total.iops:max", "--budget", "3", "--no-intensify", "--repetitions", "1",
            "--no-check-disturbance", "--verify", "2", "--verify-max", "2",
            "--scheduler", nodes.address,
            "--store", str(tmp_path / "fs.db"), "--name", "fs", "--quiet",
        ]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
        mounts = Path("/proc/mounts").read_text()
        assert str(root) in mounts or "stortune" in mounts  # the nodes hold their file systems
    trials, runs = stored(tmp_path / "fs.db", "fs")
    assert sorted(s for s in trials if s >= 0) == [0, 1, 2]
    assert all(t["status"] == "ok" for s, t in trials.items() if s < 0)  # each node's default
    assert any(t["status"] == "ok" for s, t in trials.items() if s >= 0)  # some apply on 256m
    assert {node for *_, status, node in runs if status == "ok"} <= {"local-1", "local-2",
                                                                     "local-3"}  # fmt: skip
    assert str(root) not in Path("/proc/mounts").read_text()  # every node tore its target down
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert str(root) not in loops
