"""`stortune noise`: raw vs reference-normalised RSD on a drifting target; repetitions needed."""

import json
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stortune.cli import app
from stortune.measure.noise import repetitions_needed

# Each run drifts 1% from the last: counted in runs rather than seconds, so the drift does not
# shrink when a busy machine starts the runs later or spaces them differently.
DRIFTING = """\
import json, random, sys
counter = open(sys.argv[2], "r+")
runs = int(counter.read() or 0)
counter.seek(0)
counter.write(str(runs + 1))
drift = 1.01**runs
print(json.dumps({"mbs": float(sys.argv[1]) * 100 * drift * random.gauss(1, 0.002)}))
"""

SPACE = "name: drift\nparameters:\n  level: {type: ordinal, values: [1.0, 2.0], default: 1.0}\n"


def test_repetitions_needed_by_hand() -> None:
    # t(0.95, 11) = 1.796 x 0.10 / sqrt(12) = 5.18% > 5%; t(0.95, 12) = 1.782 x 0.10 / sqrt(13)
    # = 4.94%: 13 repetitions for a +-5% interval at 10% RSD.
    assert repetitions_needed(0.10, 0.05) == 13
    assert repetitions_needed(0.01, 0.05) == 2
    assert repetitions_needed(5.0, 0.05, most=50) is None
    assert repetitions_needed(float("nan")) is None


def test_noise_command_separates_drift_from_noise(tmp_path: Path) -> None:
    script = tmp_path / "drift.py"
    script.write_text(DRIFTING)
    counter = tmp_path / "runs"
    counter.write_text("0")
    (tmp_path / "s.yaml").write_text(SPACE)
    result = CliRunner().invoke(
        app,
        [
            "noise",
            "--space",
            str(tmp_path / "s.yaml"),
            "-c",
            "level=2.0",
            "--command",
            f"{sys.executable} {script} {{level}} {counter}",
            "-o",
            "mbs",
            "--seconds",
            "80",
            "--runtime",
            "0.01",
            "--no-check-disturbance",
            "--store",
            str(tmp_path / "n.db"),
            "--plots",
            str(tmp_path / "plots"),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["runs"] == 13  # 80 s / (2 x (0.01 s + 3 s estimated overhead))
    assert report["raw_rsd"] > 0.05  # the drift shows in the raw repetitions
    assert report["normalised_rsd"] < 0.02  # and is gone relative to the reference
    assert report["normalised_rsd"] < report["raw_rsd"] / 3
    assert report["repetitions_for_target_normalised"] == 2
    assert [Path(p).suffix for p in report["plots"]] == [".png", ".svg"]
    assert all(Path(p).stat().st_size > 1000 for p in report["plots"])
    relative = [n for _, _, n in report["drift"]]
    assert relative == pytest.approx([2.0] * len(relative), rel=0.03)


def test_noise_seconds_are_a_hard_limit(tmp_path: Path) -> None:
    """Three repetitions are the least a study plans; at 2 s a run they need 12 s, so a
    5-second study stops early with what it measured rather than running on."""
    slow = tmp_path / "slow.py"
    slow.write_text('import json, time\ntime.sleep(2)\nprint(json.dumps({"mbs": 100.0}))\n')
    (tmp_path / "s.yaml").write_text(SPACE)
    started = time.monotonic()
    result = CliRunner().invoke(
        app,
        [
            "noise", "--space", str(tmp_path / "s.yaml"), "-c", "level=2.0",
            "--command", f"{sys.executable} {slow}", "-o", "mbs", "--seconds", "5",
            "--runtime", "2", "--no-check-disturbance", "--store", str(tmp_path / "n.db"),
            "--name", "slow-study", "--json",
        ],
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert 1 <= report["runs"] < 3 and report["campaign"] == "slow-study"
    assert elapsed < 9, elapsed
