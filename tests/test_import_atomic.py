"""An import is one transaction: a `stortune import` killed or stopped by a full disk leaves no
campaign behind, and the same import afterwards stores exactly the file's rows. A dataset
campaign that an older release left half-imported (still running) is replaced by the import."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import STORTUNE

from stortune.store import Store

DEADLINE = 300.0  # seconds a test waits for an import before it gives up (never reached)


def write_csv(path: Path, rows: int) -> Path:
    """A measured table: three parameters (4,800 configs), a metric to maximise."""
    rng = random.Random(1)
    with path.open("w") as f:
        f.write("a,b,c,thr+\n")
        for _ in range(rows):
            a, b, c = rng.randrange(40), rng.randrange(40), rng.choice("xyz")
            f.write(f"{a},{b},{c},{100 + a - b + rng.random():.4f}\n")
    return path


def import_command(csv: Path, store: Path) -> list[str]:
    return [*STORTUNE, "import", str(csv), "--name", "big", "--store", str(store)]


def campaigns_in(store: Path) -> list[tuple[str, str, int]]:
    """(name, status, runs) of each campaign; none when the store file is gone."""
    if not store.exists():
        return []
    with Store(str(store), existing=True) as db:
        return [(c.name, c.status, db.run_count(c.id)) for c in db.campaigns()]


def importing_rows(store: Path) -> bool:
    """Whether a process is storing the file's rows: it holds SQLite's write lock (so taking it
    without waiting fails) and has written megabytes to the write-ahead log, far more than the
    schema and the campaign's own row take."""
    wal = store.with_name(f"{store.name}-wal")
    with contextlib.suppress(OSError):
        if wal.stat().st_size > 4 * 2**20:
            with contextlib.closing(sqlite3.connect(store, timeout=0, isolation_level=None)) as db:
                try:
                    db.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    return "locked" in str(exc)
                db.execute("ROLLBACK")
    return False


def test_an_import_killed_midway_leaves_nothing_and_is_imported_again(tmp_path: Path) -> None:
    rows = 200_000
    csv = write_csv(tmp_path / "big.csv", rows)
    store = tmp_path / "s.db"
    proc = subprocess.Popen(
        import_command(csv, store),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + DEADLINE
        while not importing_rows(store):
            assert proc.poll() is None, ("the import ended before it could be killed",) + (
                proc.communicate()
            )
            assert time.monotonic() < deadline, "the import never began writing"
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert campaigns_in(store) == []  # killed mid-way: nothing of it is stored

    again = subprocess.run(
        import_command(csv, store), capture_output=True, text=True, timeout=DEADLINE
    )
    assert again.returncode == 0, again.stderr
    assert campaigns_in(store) == [("big", "finished", rows)]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, unmounted again afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    folder = tmp_path / "small"
    folder.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "stortune-test-disk", str(folder)],
        check=True,
        capture_output=True,
    )
    try:
        yield folder
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def test_an_import_onto_a_full_disk_says_so_in_one_line_and_leaves_nothing(
    tmp_path: Path, small_disk: Path
) -> None:
    csv = write_csv(tmp_path / "big.csv", 50_000)  # several MiB in the store: more than fits
    store = small_disk / "s.db"
    result = subprocess.run(
        import_command(csv, store), capture_output=True, text=True, timeout=DEADLINE
    )
    said = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert campaigns_in(store) == []
    assert len(said) == 1 and "full" in said[0] and "nothing was imported" in said[0], said


def test_a_half_imported_dataset_of_an_older_release_is_replaced(tmp_path: Path) -> None:
    csv = write_csv(tmp_path / "small.csv", 500)
    store = tmp_path / "s.db"
    with Store(str(store)) as db:  # what an import killed after its first commit left
        db.create_campaign(
            "big", kind="dataset", space_name="big", space_yaml="name: big\n",
            target={"kind": "table", "source": str(csv)}, workload={}, objective={"metric": "thr"},
        )  # fmt: skip
    assert campaigns_in(store) == [("big", "running", 0)]
    again = subprocess.run(
        import_command(csv, store), capture_output=True, text=True, timeout=DEADLINE
    )
    assert again.returncode == 0, again.stderr
    assert campaigns_in(store) == [("big", "finished", 500)]
    # a whole import is kept: importing it again is refused
    twice = subprocess.run(
        import_command(csv, store), capture_output=True, text=True, timeout=DEADLINE
    )
    assert twice.returncode == 2 and "already exists" in twice.stderr
    assert campaigns_in(store) == [("big", "finished", 500)]
