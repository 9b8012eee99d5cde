"""The bundled local-storage spaces against the real tools: every default config formats, mounts
and runs a workload, and every value of every parameter is accepted by mkfs, mount or the
kernel (in a valid config as close to the default as the constraints allow)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.localfs import QUICK, guarded_state_dir, needs_fio, needs_root

from stortune.space import Config, Space, load_space
from stortune.targets.localfs import LocalFsTarget
from stortune.workloads import FioWorkload

SPACES = ("localfs", "ext4", "xfs", "btrfs", "block", "vm")


@pytest.fixture
def system(tmp_path: Path) -> Iterator[Path]:
    yield from guarded_state_dir(tmp_path)


def nearest_configs(space: Space) -> Iterator[tuple[str, object, Config]]:
    """For each parameter value, the valid config holding it with the fewest changes from the
    default (one pass over the full factorial)."""
    default = space.default_config()
    best: dict[tuple[str, str], tuple[int, Config]] = {}
    for config in space.grid():
        distance = sum(config.get(k) != v for k, v in default.items()) + len(
            config.keys() ^ default.keys()
        )
        for name, value in config.items():
            key = (name, repr(value))
            if key not in best or distance < best[key][0]:
                best[key] = (distance, config)
    for p in space.parameters:
        for value in p.grid():
            found = best.get((p.name, repr(value)))
            assert found is not None, f"{space.name}: no valid config has {p.name}={value!r}"
            yield p.name, value, found[1]


def test_bundled_spaces_load_with_options_and_layers() -> None:
    for name in SPACES:
        space = load_space(name)
        for p in space.parameters:
            assert p.layer in ("mkfs", "mount", "block", "vm"), (name, p.name)
            assert p.extra.get("option"), (name, p.name)
            assert p.description, (name, p.name)
    assert 100 <= load_space("localfs").grid_size() <= 500
    assert len(load_space("localfs")) >= 5


@needs_root
@needs_fio
@pytest.mark.parametrize("name", SPACES)
def test_default_config_formats_mounts_and_runs(name: str, system: Path) -> None:
    with LocalFsTarget(name, image_size="512m", state_dir=system) as target:
        target.apply(target.space.default_config())
        measurement = target.run(FioWorkload("fileserver", **QUICK), timeout=60)
    assert measurement.ok, measurement.error
    assert measurement.metrics["total.iops"] > 0


@needs_root
@pytest.mark.parametrize("name", SPACES)
def test_every_value_is_accepted(name: str, system: Path) -> None:
    """On the default 4 GiB image (the XFS log constraint is written for it); the image is only
    allocated, so this costs mkfs and mount time, not 4 GiB of writes."""
    with LocalFsTarget(name, state_dir=system) as target:
        for param, value, config in nearest_configs(target.space):
            try:
                target.apply(config)
            except Exception as exc:  # name the value in the failure
                pytest.fail(f"{name}: {param}={value!r} in {config}: {exc}")
