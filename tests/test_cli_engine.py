"""The measuring commands as a user meets them: SIGTERM says how to resume, --verbose says what
is done to the system, a refusal of a device is not hidden behind the benchmark lock, and a
campaign that achieves nothing exits non-zero."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import STORTUNE

from stortune.store import Store

SPACE = "name: s\nparameters:\n  x: {type: int, low: 1, high: 5, default: 1}\n"
SLOW = "import json, sys, time\ntime.sleep(0.5)\nprint(json.dumps({'v': float(sys.argv[1])}))\n"


def run_command(space: Path, command: str, db: Path, *extra: str) -> list[str]:
    """`stortune run` of a command target over the toy space, quietly, without the disturbance
    check (these tests are about the command, not the machine)."""
    return [
        *STORTUNE, "run", "--space", str(space), "--command", command, "-o", "v:max",
        "--no-check-disturbance", "--store", str(db), "-q", *extra,
    ]  # fmt: skip


def files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "s.yaml").write_text(SPACE)
    script = tmp_path / "slow.py"
    script.write_text(SLOW)
    return tmp_path / "s.yaml", script


def test_sigterm_marks_the_campaign_interrupted_and_says_how_to_resume(tmp_path: Path) -> None:
    space, script = files(tmp_path)
    db = tmp_path / "c.db"
    proc = subprocess.Popen(
        run_command(
            space,
            f"{sys.executable} {script} {{x}}",
            db,
            "--budget",
            "30",
            "-r",
            "1",
            "--reference-every",
            "0",
            "--name",
            "slow",
        ),  # fmt: skip
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if db.exists():
            with Store(str(db)) as s:
                if s.campaigns() and s.run_count(s.campaign("slow").id) >= 2:
                    break
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err
    assert "interrupted: campaign 'slow' keeps every finished run" in lines[0]
    assert f"continue with: stortune resume slow --store {db}" in lines[0]
    with Store(str(db)) as s:
        assert s.campaign("slow").status == "interrupted"
        kept = s.run_count(s.campaign("slow").id)
    done = subprocess.run(
        [*STORTUNE, "resume", "slow", "--store", str(db), "--budget", str(kept + 1), "-q"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    with Store(str(db)) as s:
        assert s.campaign("slow").status == "finished"
        assert len(s.trials(s.campaign("slow").id)) == kept + 1


def test_a_campaign_without_a_successful_evaluation_exits_non_zero(tmp_path: Path) -> None:
    space, _ = files(tmp_path)
    result = subprocess.run(
        run_command(
            space,
            f"{sys.executable} -c 'import sys; sys.exit(3)' {{x}}",
            tmp_path / "f.db",
            "--budget",
            "2",
            "-r",
            "1",
        ),  # fmt: skip
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "none of its 2 evaluations succeeded" in last and "exit status 3" in last


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--budget", "1000000000", "'--budget': must be a whole number from 1 to 1,000,000"),
        ("-r", "5000", "'-r': must be a whole number from 1 to 1,000,"),
    ],
)
def test_a_budget_or_repetitions_no_campaign_could_finish_is_refused(
    tmp_path: Path, option: str, value: str, said: str
) -> None:
    space, script = files(tmp_path)
    db = tmp_path / "big.db"
    result = subprocess.run(
        run_command(space, f"{sys.executable} {script} {{x}}", db, option, value),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0]
    # refused before anything was stored
    assert not db.exists() or Store(str(db)).campaigns() == []


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


@needs_root
def test_verbose_says_what_is_done_to_the_system(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            *STORTUNE,
            "-v",
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
            "--budget",
            "1",
            "-r",
            "1",
            "--reference-every",
            "0",
            "--no-check-disturbance",
            "--store",
            str(tmp_path / "v.db"),
            "-q",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "mounting tmpfs on" in result.stderr and "undoing" not in result.stdout


HOLDER = textwrap.dedent(
    """\
    import time
    from stortune.system.lock import BenchmarkLock
    with BenchmarkLock("campaign 'other'"):
        print("locked", flush=True)
        time.sleep(60)
    """
)


@needs_root
def test_a_refused_device_is_said_before_the_lock_is_asked_for(tmp_path: Path) -> None:
    from stortune.system.devguard import root_disks

    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        disk = sorted(root_disks())[0]
        result = subprocess.run(
            [
                *STORTUNE,
                "run",
                "--space",
                "localfs",
                "--device",
                f"/dev/{disk}",
                "--destroy-data",
                "-o",
                "total.bw_mbs:max",
                "--budget",
                "1",
                "--store",
                str(tmp_path / "d.db"),
                "-q",
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 2
    assert "root file system's disk" in result.stderr
    assert "another stortune benchmark" not in result.stderr
