"""Scratch folders a killed process left in the temporary folder are removed by the next start;
a live process's are kept."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import STORTUNE

# a command target's program that says it started, then sleeps until it is killed
SLEEPER = "import os, sys, time\nopen(sys.argv[1], 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
QUICK = "import json\nprint(json.dumps({'score': 1.0}))\n"
SPACE = "name: s\nparameters:\n  x: {type: int, low: 1, high: 1, default: 1}\n"


class Runs:
    """`stortune run` processes in a private temporary folder; each one started is ended."""

    def __init__(self, tmp_path: Path) -> None:
        self.folder = tmp_path
        self.temp = tmp_path / "tmp"
        self.temp.mkdir()
        (tmp_path / "s.yaml").write_text(SPACE)
        self.started: list[subprocess.Popen[bytes]] = []
        self.programs: list[int] = []  # the sleepers, in sessions of their own

    def start(self, name: str, script: str) -> subprocess.Popen[bytes]:
        program = self.folder / f"{name}.py"
        program.write_text(script)
        marker = self.folder / f"{name}.pid"
        command = f"{sys.executable} {program} {marker}"
        env = {**os.environ, "TMPDIR": str(self.temp), "STORTUNE_LOCK_DIR": str(self.folder / name)}
        proc = subprocess.Popen(
            [*STORTUNE, "run", "--space", str(self.folder / "s.yaml"), "--command", command,
             "-o", "score:max", "--budget", "1", "-r", "1", "--reference-every", "0",
             "--name", name, "--store", str(self.folder / f"{name}.db"), "-q"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.started.append(proc)
        return proc

    def sleeping(self, name: str) -> subprocess.Popen[bytes]:
        """A run whose program has started (so its scratch folder exists) and sleeps."""
        proc = self.start(name, SLEEPER)
        marker = self.folder / f"{name}.pid"
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            assert proc.poll() is None, f"{name} ended early"
            time.sleep(0.05)
        self.programs.append(int(marker.read_text()))
        return proc

    def folders(self) -> set[Path]:
        return set(self.temp.glob("stortune-cmd-*"))

    def close(self) -> None:
        for proc in self.started:
            proc.kill()
            proc.wait()
        for pid in self.programs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Runs]:
    made = Runs(tmp_path)
    yield made
    made.close()


def test_a_killed_runs_folder_is_removed_by_the_next_and_a_live_ones_kept(runs: Runs) -> None:
    killed = runs.sleeping("killed")
    [stale] = runs.folders()
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    live = runs.sleeping("live")
    [alive] = runs.folders() - {stale}
    finished = runs.start("next", QUICK)
    assert finished.wait(timeout=120) == 0
    assert not stale.exists()  # its owner is dead
    assert alive.is_dir() and live.poll() is None  # its owner still runs
    assert runs.folders() == {alive}  # the finished run removed its own


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder scratch folders go to, this test's own."""
    import tempfile

    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def renamed(folder: Path, ns: int | None = None, start_delta: int = 0) -> Path:
    """`folder`, a scratch folder of this process, renamed as if another pid namespace (ns) or
    an earlier process of the same pid (a start time `start_delta` ticks away) had made it."""
    kind, own_ns, pid, start, tail = folder.name.removeprefix("stortune-").split("-")
    ns_text = own_ns if ns is None else str(ns)
    other = folder.with_name(f"stortune-{kind}-{ns_text}-{pid}-{int(start) + start_delta}-{tail}")
    folder.rename(other)
    return other


def test_only_folders_whose_owner_is_certainly_gone_are_removed(temp_root: Path) -> None:
    from stortune.system.scratch import ScratchKind, make_scratch_folder, remove_stale

    own = make_scratch_folder(ScratchKind.FIO)
    reused = renamed(make_scratch_folder(ScratchKind.FIO), start_delta=-1)  # the pid came back
    other_ns = renamed(make_scratch_folder(ScratchKind.COMMAND), ns=1)
    older = temp_root / "stortune-cmd-ab12cd34"  # an older release's: no owner to tell by
    older.mkdir()
    last = "y" if reused.name.endswith("x") else "x"  # not the reused folder's own name
    link = temp_root / f"{reused.name[:-1]}{last}"
    link.symlink_to(older)  # named like a stale folder, but no folder of its own
    assert remove_stale(temp_root) == [reused]
    assert own.is_dir() and other_ns.is_dir() and older.is_dir() and link.is_symlink()
