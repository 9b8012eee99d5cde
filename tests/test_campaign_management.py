"""Campaigns a user can manage: delete (asked first), rename (with their verifications), and a
run that is refused leaves nothing behind, neither a campaign nor a store file."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import STORTUNE

from stortune.store import Store

SPACE = "name: one\nparameters:\n  x: {type: int, low: 0, high: 9, default: 1}\n"
BENCH = 'import json, sys; print(json.dumps({"v": float(sys.argv[1])}))'


def stortune(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*STORTUNE, *args], capture_output=True, text=True, timeout=300, input=stdin
    )


def tune(tmp_path: Path, db: Path, name: str, verify: int = 0) -> subprocess.CompletedProcess[str]:
    (tmp_path / "s.yaml").write_text(SPACE)
    (tmp_path / "b.py").write_text(BENCH)
    return stortune(
        "tune", "-t", "command", "--command", f"{sys.executable} {tmp_path / 'b.py'} {{x}}",
        "-s", str(tmp_path / "s.yaml"), "-o", "v:max", "--tuner", "random", "--budget", "2",
        "-r", "1", "--verify", str(verify), "--store", str(db), "--name", name, "-q",
    )  # fmt: skip


def names(db: Path) -> list[str]:
    with Store(str(db), existing=True) as store:
        return [c.name for c in store.campaigns()]


def test_delete_asks_first_and_takes_the_verifications_along(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    assert tune(tmp_path, db, "old", verify=2).returncode == 0
    assert tune(tmp_path, db, "keep").returncode == 0
    assert names(db) == ["old", "old-verify", "keep"]
    unconfirmed = stortune("campaigns", "delete", "old", "--store", str(db), stdin="")
    assert unconfirmed.returncode == 2 and "--yes" in unconfirmed.stderr
    assert names(db) == ["old", "old-verify", "keep"]
    unknown = stortune("campaigns", "delete", "old", "nope", "--yes", "--store", str(db))
    assert unknown.returncode == 2 and "no campaign 'nope'" in unknown.stderr
    assert names(db) == ["old", "old-verify", "keep"]  # one unknown name deletes nothing
    done = stortune("campaigns", "delete", "old", "--yes", "--store", str(db))
    assert done.returncode == 0 and "deleted old, old-verify" in done.stdout
    assert names(db) == ["keep"]
    with Store(str(db), existing=True) as store:
        assert store.run_count(1) == 0 and store.trials(store.campaign("keep").id)
    # the name is free again
    assert tune(tmp_path, db, "old").returncode == 0


def test_rename_moves_the_verifications_and_refuses_a_taken_name(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    assert tune(tmp_path, db, "demo", verify=2).returncode == 0
    assert tune(tmp_path, db, "other").returncode == 0
    taken = stortune("campaigns", "rename", "demo", "other", "--store", str(db))
    assert taken.returncode == 2 and "already exists" in taken.stderr
    done = stortune("campaigns", "rename", "demo", "ext4-mail", "--store", str(db))
    assert done.returncode == 0, done.stderr
    assert names(db) == ["ext4-mail", "ext4-mail-verify", "other"]
    shown = stortune("recommend", "ext4-mail", "--store", str(db))
    assert shown.returncode == 0 and "default" in shown.stdout  # the gain is still found


def hold_the_benchmark_lock() -> int:
    path = Path(os.environ["STORTUNE_LOCK_DIR"]) / "benchmark.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"pid 1, another campaign\n")
    return fd


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting tmpfs needs root")
def test_a_run_refused_by_the_lock_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    assert tune(tmp_path, db, "earlier").returncode == 0
    fd = hold_the_benchmark_lock()
    try:
        for store in (db, tmp_path / "new.db"):
            refused = stortune(
                "run", "-t", "tmpfs", "-s", "tmpfs", "-w", "randread", "--runtime", "1",
                "-o", "total.iops:max", "--budget", "1", "--store", str(store), "--name", "x",
            )  # fmt: skip
            assert refused.returncode == 2 and "another stortune benchmark" in refused.stderr
    finally:
        os.close(fd)
    assert names(db) == ["earlier"]  # no failed, empty campaign took the name
    assert not (tmp_path / "new.db").exists()
