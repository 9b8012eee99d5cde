"""Profiles of an ext4 file system on a loop device and of a raw (scratch) loop device; the
device guard refuses a mounted one. Needs root; everything is undone even when a test fails."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from fixtures.localfs import loop_devices_of, mounts_under, needs_fio, needs_root
from typer.testing import CliRunner

from stortune.cli.profile import register
from stortune.errors import TargetError
from stortune.system import loopdev

pytestmark = [needs_root, needs_fio]
QUICK = ["--file-size", "4m", "--intervals", "8k:32k:8k,32k:256k:32k", "--repetitions", "1"]
IMAGE_SIZE = 48 << 20

app = typer.Typer()
register(app)
cli = CliRunner()


@pytest.fixture
def loop_images(tmp_path: Path) -> Iterator[dict[str, str]]:
    """Two loop devices over fully allocated images: ``fs`` holds ext4 mounted at ``mount``,
    ``raw`` is blank. Unmounted and detached afterwards whatever happened."""
    made: dict[str, str] = {}
    try:
        for name in ("fs", "raw"):
            image = tmp_path / f"{name}.img"
            loopdev.allocate(image, IMAGE_SIZE)
            made[name] = loopdev.attach(image)
        subprocess.run(
            ["mkfs.ext4", "-q", "-F", "-E", "nodiscard", made["fs"]], check=True, timeout=60
        )
        mount = tmp_path / "mnt"
        mount.mkdir()
        subprocess.run(["mount", made["fs"], str(mount)], check=True, timeout=60)
        made["mount"] = str(mount)
        yield made
    finally:
        for point in sorted(mounts_under(tmp_path), reverse=True):
            if subprocess.run(["umount", point], check=False).returncode:
                subprocess.run(["umount", "--lazy", point], check=False)
        for device, image in loop_devices_of(tmp_path).items():
            with contextlib.suppress(Exception):
                loopdev.detach(device, image)


def profile_json(*args: str) -> dict:
    result = cli.invoke(app, ["profile", *args, "--json", "--no-plot"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return json.loads(result.stdout)


def test_profile_of_ext4_on_a_loop_device(loop_images: dict[str, str], tmp_path: Path) -> None:
    mount = Path(loop_images["mount"])
    profile = profile_json(str(mount), *QUICK, "--seed", "1", "--out", str(tmp_path / "p.json"))
    assert profile["target"] == {
        "kind": "directory",
        "path": str(mount),
        "file_size": 4 << 20,
        "max_requests": 256,
    }
    assert profile["runs"] >= 4 * 3 and all(m["access_ms"] > 0 for m in profile["measurements"])
    assert not [p for p in mount.iterdir() if p.name.startswith("stortune-profile-")]


def test_profile_of_a_scratch_device(loop_images: dict[str, str], tmp_path: Path) -> None:
    device = loop_images["raw"]
    out = str(tmp_path / "dev.json")
    profile = profile_json(
        "--device", device, "--destroy-data", *QUICK, "--seed", "2", "--out", out
    )
    assert profile["target"]["kind"] == "device" and profile["target"]["path"] == device
    assert set(profile["summary"]) == {"read", "write"}


def test_a_mounted_device_is_refused(loop_images: dict[str, str]) -> None:
    args = ["profile", "--device", loop_images["fs"], "--destroy-data", *QUICK, "--no-plot"]
    result = cli.invoke(app, args)
    assert isinstance(result.exception, TargetError)
    assert "mounted" in str(result.exception)
