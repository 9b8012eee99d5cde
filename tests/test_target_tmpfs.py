"""The tmpfs target, end to end from the command line: its mount options reach the kernel, fio
runs in it, and nothing stays mounted afterwards, also after a crash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import STORTUNE

from stortune.store import Store
from stortune.system.mounts import mount_table
from stortune.targets import registry
from stortune.targets.tmpfs import TmpfsTarget

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root")


def tmpfs_mounts(state_dir: Path) -> list[str]:
    return [e.super_options for e in mount_table() if e.mount_point.startswith(str(state_dir))]


def test_a_campaign_on_tmpfs_from_the_command_line(tmp_path: Path, private_state_dir: Path) -> None:
    assert registry()["tmpfs"] is TmpfsTarget  # found as a module of stortune.targets
    db = tmp_path / "t.db"
    proc = subprocess.run(
        [
            *STORTUNE,
            "run",
            "--target",
            "tmpfs",
            "--space",
            "tmpfs",
            "-w",
            "randread",
            "--runtime",
            "1",
            "-o",
            "total.bw_mbs:max",
            "--tuner",
            "random",
            "--budget",
            "3",
            "-r",
            "1",
            "--reference-every",
            "0",
            "--no-check-disturbance",
            "--store",
            str(db),
            "--name",
            "ram",
            "--json",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout)
    assert outcome["evaluations"] == 3 and outcome["runs_ok"] == 3
    with Store(str(db)) as store:
        trials = store.trials(store.campaign("ram").id)
        spec = store.campaign("ram").target
    assert spec == {"kind": "tmpfs", "state_dir": str(private_state_dir)}
    for trial in trials:
        [run] = trial.runs
        assert run.metrics["read.bw_mbs"] > 0
        options = run.info["mount_options"]
        assert f"size={trial.config['size']}" in options
        assert f"huge={trial.config['huge']}" in options
    assert tmpfs_mounts(private_state_dir) == []  # teardown unmounted it


def test_the_options_reach_the_kernel_and_a_crash_is_undone(private_state_dir: Path) -> None:
    script = (
        "import os, sys\n"
        "from stortune.targets.tmpfs import TmpfsTarget\n"
        "t = TmpfsTarget()\n"
        "t.apply({'size': '512m', 'nr_inodes': 16384, 'huge': 'within_size'})\n"
        "print('mounted', flush=True)\n"
        "os._exit(9)  # dies without teardown\n"
    )
    env = {**os.environ, "STORTUNE_STATE_DIR": str(private_state_dir)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert proc.stdout.strip() == "mounted", proc.stderr
    [options] = tmpfs_mounts(private_state_dir)
    assert "size=524288k" in options and "nr_inodes=16384" in options
    assert "huge=within_size" in options
    target = TmpfsTarget()  # the next target undoes what the dead one left
    with target:
        assert tmpfs_mounts(private_state_dir) == []
        target.apply({"huge": "advise"})
        assert "huge=advise" in tmpfs_mounts(private_state_dir)[0]
    assert tmpfs_mounts(private_state_dir) == []
