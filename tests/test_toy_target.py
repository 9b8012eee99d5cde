"""The toy target: a formula standing in for a device, reached from the command line without
--space or --objective (it declares both), its optimum known."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import STORTUNE

from stortune.sampling import sample
from stortune.space import load_space
from stortune.targets import target_class
from stortune.targets.toy import ToyTarget, toy_metrics


def optimum() -> float:
    space = load_space("toy")
    configs = sample(space, "factorial", 500, 0).configs
    assert len(configs) == 420  # every config of the space
    return max(toy_metrics(c)["bw_mbs"] for c in configs)


def stortune(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STORTUNE, *args], capture_output=True, text=True, timeout=300)


def test_run_takes_the_targets_own_space_and_objective_and_nears_the_optimum(
    tmp_path: Path,
) -> None:
    store = str(tmp_path / "toy.db")
    result = stortune(
        "run", "--target", "toy", "--budget", "30", "--toy-noise", "0", "--store", store,
        "--name", "toy1", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["best_value"] >= 0.95 * optimum()
    shown = stortune("show", "toy1", "--store", store)
    assert shown.returncode == 0 and "block_kb" in shown.stdout


def test_rank_and_sweep_need_no_space_either(tmp_path: Path) -> None:
    store = str(tmp_path / "toy.db")
    ranked = stortune("rank", "--budget", "12", "--target", "toy", "--store", store, "--json")
    assert ranked.returncode == 0, ranked.stderr
    dry = stortune("sweep", "--target", "toy", "--design", "random", "-n", "4", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "4 configs" in dry.stdout


def test_a_target_without_a_space_of_its_own_says_so() -> None:
    result = stortune("run", "--command", "true", "--budget", "2")
    assert result.returncode == 2
    assert "needs --space: the command target has no space of its own" in result.stderr


def test_its_noise_is_seeded_and_its_files_are_plain_lines() -> None:
    space = load_space("toy")
    runs = []
    for _ in range(2):
        target = ToyTarget(space, toy_noise=0.05, toy_seed=3)
        target.apply(space.default_config())
        runs.append([target.run().metrics["bw_mbs"] for _ in range(3)])
    assert runs[0] == runs[1] and len(set(runs[0])) == 3
    best = {"block_kb": 16, "queue_depth": 16, "scheduler": "none", "read_ahead_kb": 128}
    [conf] = target_class("toy").install_files(best, space)
    assert conf.text == "block_kb = 16\nqueue_depth = 16\nscheduler = none\n"
    with pytest.raises(Exception, match="toy-noise"):
        ToyTarget(space, toy_noise=-1)
