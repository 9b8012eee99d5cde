"""A sweep's design is stored whole or not at all, so a resume measures all of it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from conftest import STORTUNE

from stortune.enums import CampaignKind
from stortune.measure.campaigns import new_campaign
from stortune.objective import Objective
from stortune.space import parse_space
from stortune.store import Store
from stortune.targets.command import CommandTarget

CONFIGS = 200  # each trial committed on its own took seconds to store: a kill found it half done
ECHO = "echo '{\"score\": 1.0}'"


def stored_trials(db: Path) -> int:
    """Trials in the store as another process sees them (0 before it has any)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return int(conn.execute("SELECT count(*) FROM trials").fetchone()[0])
    except sqlite3.OperationalError:  # no file or no table yet
        return 0


def stortune(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*STORTUNE, *args], capture_output=True, text=True, timeout=300, env=env, check=False
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "STORTUNE_LOCK_DIR": str(tmp_path / "lock")}


def test_a_sweep_killed_once_its_design_shows_resumes_the_whole_design(
    toy_space_file: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    db = tmp_path / "sweep.db"
    sweep = subprocess.Popen(
        [*STORTUNE, "sweep", "--space", str(toy_space_file), "--command", ECHO,
         "-o", "score:max", "--design", "random", "-n", str(CONFIGS), "-r", "1",
         "--reference-every", "0", "--name", "big", "--store", str(db), "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while stored_trials(db) == 0 and sweep.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        sweep.kill()  # SIGKILL as soon as any trial of the design can be seen
    finally:
        sweep.kill()
        sweep.wait()
    assert stored_trials(db) == CONFIGS + 1  # the reference and every config, never a part

    resumed = stortune("resume", "big", "--store", str(db), "-q", env=env)
    assert resumed.returncode == 0, resumed.stderr
    with Store(str(db)) as s:
        campaign = s.campaign("big")
        trials = s.trials(campaign.id)
        assert campaign.status == "finished"
    design = [t for t in trials if t.seq > 0]
    assert len(design) == CONFIGS
    assert all(t.value == 1.0 and [r.status for r in t.runs] == ["ok"] for t in design)


def test_a_sweep_without_its_design_is_not_resumed_as_if_empty(
    store: Store, env: dict[str, str]
) -> None:
    """What a kill between the campaign's row and its design's transaction leaves."""
    space = parse_space("name: s\nparameters:\n  x: {type: int, low: 1, high: 4, default: 1}\n")
    target = CommandTarget(space, command=["echo", '{"score": 1.0}'])
    new_campaign(
        store, "cut", CampaignKind.SWEEP, space, target, [None], Objective("score"),
        {"repetitions": 1, "reference_every": 0},
    )  # fmt: skip
    result = stortune("resume", "cut", "--store", store.url, env=env)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "sweep 'cut' has no stored design" in line
    assert "stortune campaigns delete cut" in line
    assert store.run_count(store.campaign("cut").id) == 0
