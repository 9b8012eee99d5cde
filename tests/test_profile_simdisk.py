"""Profiles of the simulated disk (a FUSE file system whose files answer like a disk with a
head): a real sequential advantage is found with an interval above 1, equal sequential and
random times give no advantage of a practical size ("none" on a quiet machine). Real fio, real
FUSE; nothing stays mounted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from fixtures.localfs import needs_fio, needs_root
from typer.testing import CliRunner

from stortune.cli.profile import register
from stortune.profile.simdisk import DiskModel, is_mounted, mounted

pytestmark = [needs_root, needs_fio]
QUICK = ["--file-size", "2m", "--intervals", "8k:32k:8k,32k:256k:32k", "--repetitions", "2"]

app = typer.Typer()
register(app)
cli = CliRunner()


def fuse_available() -> bool:
    try:
        import fuse  # noqa: F401
    except (ImportError, OSError):
        return False
    return Path("/dev/fuse").exists()


pytestmark.append(pytest.mark.skipif(not fuse_available(), reason="FUSE is not available"))


def profile(directory: Path, tmp_path: Path, seed: int) -> dict:
    out = tmp_path / f"profile-{seed}.json"
    args = ["profile", str(directory), *QUICK, "--seed", str(seed), "--out", str(out)]
    result = cli.invoke(
        app, [*args, "--json", "--no-plot", "--store", f"sqlite:///{tmp_path}/s.db"]
    )
    assert result.exit_code == 0, result.output + repr(result.exception)
    return json.loads(result.stdout)


def test_a_disk_with_a_head_shows_its_sequential_advantage(tmp_path: Path) -> None:
    disk = DiskModel()
    mount = tmp_path / "disk"
    mount.mkdir()
    with mounted(mount, disk):
        found = profile(mount, tmp_path, seed=1)
        assert not list(mount.iterdir())  # the test file is removed
    assert not is_mounted(mount)
    for op in ("read", "write"):
        summary = found["summary"][op]
        assert summary["advantage"] == "sequential", summary["verdict"]
        assert summary["mean_ci"][0] > 1.5
    by_size = {row["size"]: row for row in found["curve"]}
    # the seek dominates small requests and fades behind the transfer of large ones
    assert by_size[8192]["ratio"]["read"] > 2 * by_size[256 * 1024]["ratio"]["read"] > 2
    expected = disk.expected_access_ms(8192, "randread") / disk.expected_access_ms(8192, "read")
    assert by_size[8192]["ratio"]["read"] < expected  # fio and FUSE add the same to both


def test_equal_sequential_and_random_times_show_no_practical_advantage(tmp_path: Path) -> None:
    mount = tmp_path / "flash"
    mount.mkdir()
    with mounted(mount, DiskModel(settle_ms=0.0, stroke_ms=0.0)):
        found = profile(mount, tmp_path, seed=2)
    for op in ("read", "write"):
        summary = found["summary"][op]
        # Quiet, the interval reaches into the negligible band ("none"). On a busy machine the
        # FUSE server's CPU time drifts between runs and a few percent can look measurable;
        # what must never appear is an advantage of a practical size, either way (a head gives
        # over 1.5, above).
        low, high = summary["mean_ci"]
        assert low < 1.2 and high > 1 / 1.2, summary["verdict"]


def test_the_disk_is_unmounted_when_the_block_fails(tmp_path: Path) -> None:
    mount = tmp_path / "disk"
    mount.mkdir()
    with pytest.raises(RuntimeError), mounted(mount):
        (mount / "f").write_bytes(b"x" * 4096)
        assert (mount / "f").stat().st_size == 4096
        raise RuntimeError("the test's block failed")
    assert not is_mounted(mount)
