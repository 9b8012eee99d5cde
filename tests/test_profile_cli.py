"""`stortune profile` and `profile-compare` on a plain directory, with real fio runs kept small
(4 MiB per run, two small intervals, one repetition)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from fixtures.localfs import direct_io_dir, needs_fio
from typer.testing import CliRunner

from stortune.cli.profile import register
from stortune.errors import ConfigError, TargetError
from stortune.profile.design import PATTERNS
from stortune.report.context import stored_profile
from stortune.store import Store

QUICK = ["--file-size", "4m", "--intervals", "8k:32k:8k,32k:256k:32k", "--repetitions", "1"]

app = typer.Typer()
register(app)
cli = CliRunner()


def profile_json(*args: str) -> dict:
    result = cli.invoke(app, ["profile", *args, "--json"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return json.loads(result.stdout)


def test_every_command_has_an_example() -> None:
    for command in ("profile", "profile-compare"):
        result = cli.invoke(app, [command, "--help"])
        assert result.exit_code == 0
        assert "Example:" in result.stdout


@needs_fio
def test_profile_of_a_directory(tmp_path: Path, private_store: Path) -> None:
    data = direct_io_dir(tmp_path / "data")
    out = tmp_path / "out" / "estimated.json"
    profile = profile_json(str(data), *QUICK, "--seed", "3", "--out", str(out))
    assert profile["mode"] == "estimated" and profile["target"]["kind"] == "directory"
    picked = {s for sizes in profile["picked_sizes"] for s in sizes}
    measured = {(m["size"], m["pattern"]) for m in profile["measurements"]}
    assert measured == {(s, p) for s in picked for p in PATTERNS}
    assert all(m["access_ms"] > 0 for m in profile["measurements"])
    assert len(profile["fits"]) == 2 * len(PATTERNS)
    kib = (8, 16, 24, 32, 64, 96, 128, 160, 192, 224, 256)
    assert [row["size"] for row in profile["curve"]] == [k * 1024 for k in kib]
    assert all(row["ratio"]["read"] > 0 and row["ratio"]["write"] > 0 for row in profile["curve"])
    assert {"mean", "min", "max"} <= set(profile["summary"]["read"])
    assert json.loads(out.read_text())["runs"] == profile["runs"]
    assert out.with_suffix(".png").stat().st_size > 0 and out.with_suffix(".svg").exists()
    assert list(data.iterdir()) == []  # the test file is gone
    with Store(str(private_store)) as db:  # kept in the store, where the report looks
        stored, source = stored_profile(db)
    assert stored == json.loads(out.read_text()) and source.startswith("campaign profile-")


@needs_fio
def test_full_profile_and_the_comparison(tmp_path: Path) -> None:
    small = ["--file-size", "4m", "--intervals", "8k:16k:8k"]
    full_out, est_out = tmp_path / "full.json", tmp_path / "est.json"
    data = direct_io_dir(tmp_path / "data")
    full = profile_json(
        str(data), *small, "--full", "--min-runs", "2", "--max-runs", "3",
        "--out", str(full_out), "--no-plot",
    )  # fmt: skip
    assert full["mode"] == "full"
    for row in full["curve"]:
        assert set(row["n"]) == set(PATTERNS) and all(2 <= n <= 3 for n in row["n"].values())
    profile_json(str(data), *small, "--repetitions", "1", "--out", str(est_out), "--no-plot")
    result = cli.invoke(
        app, ["profile-compare", str(est_out), str(full_out), "--plot", str(tmp_path / "cmp")]
    )
    assert result.exit_code == 0, result.output
    assert "error of the sequential / random ratio" in result.stdout
    assert (tmp_path / "cmp.png").exists()
    result = cli.invoke(app, ["profile-compare", str(est_out), str(full_out), "--json"])
    compared = json.loads(result.stdout)
    assert compared["sizes"] == 2 and set(compared["ratio_error"]) == {"read", "write"}
    assert compared["time"]["full_runs"] == full["runs"]


def test_refusals(tmp_path: Path) -> None:
    result = cli.invoke(app, ["profile", "--device", "/dev/loop7"])
    assert isinstance(result.exception, ConfigError)
    assert "--destroy-data" in str(result.exception)
    result = cli.invoke(app, ["profile", str(tmp_path / "missing"), "--no-plot"])
    assert isinstance(result.exception, TargetError)
    result = cli.invoke(app, ["profile", str(tmp_path), "--intervals", "8k:64k"])
    assert isinstance(result.exception, ConfigError)
    result = cli.invoke(app, ["profile", str(tmp_path), "--max-requests", "-1"])
    assert isinstance(result.exception, ConfigError) and "--max-requests" in str(result.exception)
    result = cli.invoke(app, ["profile", str(tmp_path), "--mpi"])
    assert isinstance(result.exception, TargetError) and "mpi4py.futures" in str(result.exception)
    other = tmp_path / "other.json"
    other.write_text("{}")
    result = cli.invoke(app, ["profile-compare", str(other), str(other)])
    assert "not a stortune profile" in str(result.exception)


@pytest.mark.parametrize("size", ["0", "1x"])
def test_bad_file_size(tmp_path: Path, size: str) -> None:
    result = cli.invoke(app, ["profile", str(tmp_path), "--file-size", size])
    assert isinstance(result.exception, ConfigError)
