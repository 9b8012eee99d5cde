"""Did a run reach the device? The accounting of bytes at the device against the bytes the
workload moved (pure), the raw bandwidth kept per device, and real localfs runs on loop devices:
one served from the page cache, one with direct I/O."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.localfs import guarded_state_dir, needs_fio, needs_root

from stortune.errors import TargetError
from stortune.targets import device
from stortune.targets.device import RawBandwidth, accounting, device_reached, workload_mib
from stortune.targets.localfs import LocalFsTarget
from stortune.workloads import FioWorkload

RAW = RawBandwidth(
    seq_read_mbs=2000.0,
    rand_read_iops=30000.0,
    seq_write_mbs=1500.0,
    measured="2026-11-29T09:00:00+00:00",
    device="/dev/loop9",
    size_bytes=256 << 20,
    backing="vda",
)


# ---- the accounting, pure ---------------------------------------------------------------------
def test_share_is_device_bytes_over_workload_bytes() -> None:
    run = {"workload.read_mb": 300.0, "workload.write_mb": 100.0}
    out = accounting({**run, "device.read_mb": 290.0, "device.write_mb": 110.0})
    assert out == {"device.share": pytest.approx(1.0), "device.cache_served": 0.0}
    out = accounting({**run, "device.read_mb": 20.0, "device.write_mb": 0.0})
    assert out["device.share"] == pytest.approx(0.05) and out["device.cache_served"] == 1.0


def test_cache_served_below_half_of_the_workload_bytes() -> None:
    def served(at_device: float) -> float:
        run = {"workload.read_mb": 100.0, "device.read_mb": at_device, "device.write_mb": 0.0}
        return accounting(run)["device.cache_served"]

    assert device.CACHE_SHARE == 0.5
    assert served(49.9) == 1.0
    assert served(50.0) == 0.0
    assert served(250.0) == 0.0  # read-ahead and metadata may add bytes: still the device


def test_workload_bytes_prefer_the_workload_metrics_over_fio_bandwidth() -> None:
    fio = {"read.bw_mbs": 100.0, "write.bw_mbs": 50.0, "runtime_s": 2.0}
    assert workload_mib(fio) == pytest.approx(300.0)  # fallback: MiB/s times seconds
    assert workload_mib({**fio, "workload.read_mb": 10.0, "workload.write_mb": 0.0}) == 10.0
    assert workload_mib({**fio, "workload.write_mb": 7.0}) == 7.0  # one side reported


def test_missing_workload_bytes_give_no_share() -> None:
    at_device = {"device.read_mb": 100.0, "device.write_mb": 0.0}
    assert accounting(at_device) == {}
    assert accounting({**at_device, "read.bw_mbs": 10.0}) == {}  # no runtime_s
    assert accounting({**at_device, "workload.read_mb": 0.0, "workload.write_mb": 0.0}) == {}
    assert accounting({**at_device, "workload.read_mb": math.nan}) == {}
    # nothing counted at the device (a tmpfs run): nothing to say either
    assert accounting({"workload.read_mb": 100.0, "total.bw_mbs": 50.0}) == {}


def test_above_raw_compares_total_bandwidth_with_raw_sequential_reads() -> None:
    run = {"workload.read_mb": 100.0, "device.read_mb": 100.0, "device.write_mb": 0.0}
    below = accounting({**run, "total.bw_mbs": 1900.0}, RAW)
    assert below["device.raw_seq_mbs"] == 2000.0 and below["device.raw_rand_iops"] == 30000.0
    assert below["device.above_raw"] == 0.0
    assert accounting({**run, "total.bw_mbs": 2617.0}, RAW)["device.above_raw"] == 1.0
    assert "device.above_raw" not in accounting(run, RAW)  # no total bandwidth


def test_device_reached_reads_both_verdicts() -> None:
    assert device_reached({}) is None
    assert device_reached({"total.bw_mbs": 100.0, "sys.disk_read_mb": 5.0}) is None
    assert device_reached({"device.cache_served": 0.0}) is True
    assert device_reached({"device.cache_served": 0.0, "device.above_raw": 0.0}) is True
    assert device_reached({"device.cache_served": 1.0, "device.above_raw": 0.0}) is False
    assert device_reached({"device.cache_served": 0.0, "device.above_raw": 1.0}) is False
    assert device_reached({"device.above_raw": 1.0}) is False
    assert device_reached({"device.cache_served": math.nan}) is None


# ---- the raw bandwidth, kept ------------------------------------------------------------------
def test_kept_raw_bandwidth_is_reused_without_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def measure(dev: str, size: int, backing: str | None = None, **_: object) -> RawBandwidth:
        calls.append(dev)
        return RAW

    monkeypatch.setattr(device, "measure_raw", measure)
    key = device.image_key(tmp_path / "localfs-1-0.img", 256 << 20, "vda")
    # a target's own image is named after its process: the next campaign's key is the same
    assert key == device.image_key(tmp_path / "localfs-2-0.img", 256 << 20, "vda")
    assert key != device.image_key(tmp_path / "localfs-2-0.img", 512 << 20, "vda")
    assert device.raw_bandwidth(tmp_path, key, "/dev/loop9", 256 << 20, "vda") == RAW
    assert device.raw_bandwidth(tmp_path, key, "/dev/loop5", 256 << 20, "vda") == RAW
    assert calls == ["/dev/loop9"]
    stored = json.loads((tmp_path / device.RAW_FILE).read_text())
    assert stored[key]["seq_read_mbs"] == 2000.0 and stored[key]["measured"].startswith("2026")


def test_an_unreadable_kept_file_is_measured_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / device.RAW_FILE).write_text("{not json")
    monkeypatch.setattr(device, "measure_raw", lambda *a, **k: RAW)
    assert device.raw_bandwidth(tmp_path, "k", "/dev/loop9", 1 << 20) == RAW
    assert device.kept(tmp_path) == {"k": RAW}


# ---- real runs on loop devices ----------------------------------------------------------------
@pytest.fixture
def system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A state folder whose targets measure raw bandwidth (1 s per phase); every loop device,
    mount and setting made under it is undone afterwards, also when a test fails."""
    monkeypatch.setenv(device.RAW_ENV, "1")
    monkeypatch.setattr(device, "RAW_SECONDS", 1)
    yield from guarded_state_dir(tmp_path)


@needs_root
@needs_fio
@pytest.mark.slow
def test_cache_served_and_direct_runs_and_the_raw_bandwidth_kept_once(
    system: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = system.parent / "under-test.img"
    with LocalFsTarget("localfs", image=image, image_size="256m", state_dir=system) as target:
        raw = target._raw
        assert raw is not None and raw.seq_read_mbs > 0 and raw.rand_read_iops > 0
        assert raw.backing == target._backing and raw.size_bytes == 256 << 20
        target.apply(target.space.default_config())
        # 16 MiB of small files read again and again, no memory cap: the page cache serves
        # them (seqread would not do: its invalidate=1 drops the file's pages at every pass)
        cached = target.run(FioWorkload("webserver", runtime=2, size="16m"), timeout=120)
        assert cached.ok, cached.error
        m = cached.metrics
        assert m["device.cache_served"] == 1.0 and m["device.share"] < device.CACHE_SHARE
        assert m["device.read_mb"] + m["device.write_mb"] < workload_mib(m) / 2
        assert m["device.raw_seq_mbs"] == raw.seq_read_mbs
        assert "device.above_raw" in m
        assert device_reached(m) is False
        assert cached.info["device_raw_measured"] == raw.measured
    kept = (system / device.RAW_FILE).read_text()
    assert len(json.loads(kept)) == 1

    def no_fio(*args: object, **kwargs: object) -> RawBandwidth:
        raise AssertionError("the kept raw bandwidth was measured again")

    monkeypatch.setattr(device, "measure_raw", no_fio)
    with LocalFsTarget("localfs", image=image, image_size="256m", state_dir=system) as again:
        assert again._raw == raw
        again.apply(again.space.default_config())
        direct = again.run(FioWorkload("rand4k", runtime=2, size="64m"), timeout=120)
        assert direct.ok, direct.error
        m = direct.metrics
        assert m["device.cache_served"] == 0.0 and m["device.share"] >= 0.9
        assert m["device.read_mb"] > 0 and m["device.write_mb"] > 0
        assert m["device.above_raw"] == 0.0  # 4 KiB random I/O stays far below 1 MiB reads
        assert device_reached(m) is True
        if again._backing is not None:
            assert m["device.backing_read_mb"] >= 0 and m["device.backing_write_mb"] >= 0
    assert (system / device.RAW_FILE).read_text() == kept


@needs_root
def test_a_target_whose_raw_measurement_fails_still_runs(
    system: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> RawBandwidth:
        raise TargetError("fio cannot measure it")

    monkeypatch.setattr(device, "measure_raw", broken)
    with LocalFsTarget("localfs", image_size="256m", state_dir=system) as target:
        target.setup()
        assert target._raw is None and target._dev is not None
    assert not (system / device.RAW_FILE).exists()


@needs_root
def test_a_named_device_is_measured_only_with_destroy_data(
    system: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    calls = []
    monkeypatch.setattr(device, "measure_raw", lambda dev, *a, **k: calls.append(dev) or RAW)
    system.mkdir(parents=True, exist_ok=True)
    image = system.parent / "scratch.img"
    subprocess.run(["fallocate", "-l", "64m", str(image)], check=True)
    scratch = subprocess.run(
        ["losetup", "--find", "--show", str(image)], capture_output=True, text=True, check=True
    ).stdout.strip()  # the system fixture detaches it
    with LocalFsTarget("localfs", device=scratch, state_dir=system) as target:
        target.setup()
        assert target._raw is None and calls == []
    with LocalFsTarget("localfs", device=scratch, destroy_data=True, state_dir=system) as target:
        target.setup()
        assert target._raw == RAW and calls == [scratch]
    assert list(json.loads((system / device.RAW_FILE).read_text())) == [
        device.device_key(scratch, 64 << 20)
    ]


@needs_root
@needs_fio
def test_a_tmpfs_run_carries_no_device_accounting(tmp_path: Path) -> None:
    from stortune.targets.tmpfs import TmpfsTarget

    with TmpfsTarget("tmpfs", state_dir=tmp_path / "state") as target:
        target.apply(target.space.default_config())
        run = target.run(FioWorkload("randread", runtime=1, size="16m"), timeout=120)
    assert run.ok, run.error
    assert not [k for k in run.metrics if k.startswith("device.")]
    assert device_reached(run.metrics) is None
