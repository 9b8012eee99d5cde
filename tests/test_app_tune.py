"""The flow a database user runs, end to end on a loop-mounted file system: `stortune tune
--space postgres-stack -w pgbench` tunes, verifies with each risky PostgreSQL option measured
beside the result, and `recommend` prints the postgresql.conf lines beside the stack's files,
the risky options listed with their gains and never applied; `space clean` starts the server
with each PostgreSQL value and washes out what it refuses."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from fixtures.localfs import guarded_state_dir, needs_root
from typer.testing import CliRunner

from stortune.cli import tune
from stortune.space import parse_space
from stortune.space.parts import PART_LABELS
from stortune.targets.localfs import LocalFsTarget
from stortune.workflows.clean import clean_space

PG_BIN = Path("/usr/lib/postgresql/15/bin")
needs_postgres = pytest.mark.skipif(
    not (PG_BIN / "pgbench").exists(), reason="PostgreSQL 15 is not installed"
)
pytestmark = [needs_root, needs_postgres]


@pytest.fixture
def system() -> Iterator[Path]:
    """A state folder the postgres user can pass through (pytest's are private to root);
    every mount, loop device and setting made there undone afterwards, the folder removed."""
    base = Path(tempfile.mkdtemp(prefix="stortune-apptest-"))
    base.chmod(0o755)
    try:
        yield from guarded_state_dir(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def postgres_processes() -> list[str]:
    found = subprocess.run(["pgrep", "-a", "-u", "postgres", "postgres"], capture_output=True)
    return [line for line in found.stdout.decode().splitlines() if "stortune" in line]


def invoke(*args: str) -> str:
    app = typer.Typer()
    tune.register(app)
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def test_tune_verifies_risky_options_beside_the_best_and_recommends_postgresql_conf(
    system: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STORTUNE_STATE_DIR", str(system))  # its mounts undone by the guard
    store = str(tmp_path / "runs.db")
    out = invoke(
        "tune", "--space", "postgres-stack", "-w", "pgbench:scale=1,clients=2",
        "--runtime", "2", "--image-size", "1g", "--memory-limit", "512m",
        "--tuner", "random", "--budget", "2", "--verify", "2", "--verify-max", "2",
        "--no-check-disturbance", "--name", "pg", "--store", store, "--json",
    )  # fmt: skip
    result = json.loads(out[out.index("{") :])
    compared = result["compared"]
    assert {"risky fsync=false", "risky synchronous_commit=off"} <= set(compared)
    # never a risky one: the default, the best, or a part of the best
    assert result["verification"]["recommended"] in ("default", "best", *PART_LABELS)
    text = invoke("recommend", "pg", "--store", store)
    assert "risky synchronous_commit=off" in text
    assert "RISK of risky synchronous_commit=off" in text
    if "# ==> postgresql.conf" in text:  # the recommended config changes a server option
        conf = text.split("# ==> postgresql.conf", 1)[1]
        assert "synchronous_commit" not in conf and "fsync" not in conf
    assert postgres_processes() == []


SPACE = textwrap.dedent(
    """\
    name: pgsync
    parameters:
      wal_sync_method:
        type: categorical
        values: [fdatasync, fsync_writethrough]
        default: fdatasync
        layer: postgres
        option: wal_sync_method
    """
)


def test_space_clean_starts_the_server_with_each_value_and_washes_what_it_refuses(
    system: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    space = parse_space(SPACE)
    monkeypatch.setenv("STORTUNE_STATE_DIR", str(system))  # the template cache, reachable
    target = LocalFsTarget(space, fs="ext4", image_size="512m", state_dir=system)
    result = clean_space(space, target)
    washed = {(w["parameter"], w["value"]): w["reason"] for w in result.washed}
    assert list(washed) == [("wal_sync_method", "fsync_writethrough")]
    assert "wal_sync_method" in washed[("wal_sync_method", "fsync_writethrough")]
    assert postgres_processes() == []
