"""Did a run reach the device? Bytes at the device beside the bytes the workload moved, and the
device's own raw bandwidth, measured once and kept.

A file-system benchmark without a memory cap can report more than the device delivers: a small
file set read again and again comes from the page cache (MEASURING.md: 2,617 MB/s "fileserver" on
a loop device whose own direct 1 MiB reads gave 2,000-2,100 MB/s). Two checks say so per run:

- ``device.share``: MiB read and written at the device under test during the run, over the MiB
  the workload moved (``workload.read_mb``/``write_mb``, else fio's bandwidth times its runtime);
  ``device.cache_served`` is 1.0 when that share is under `CACHE_SHARE`.
- ``device.above_raw``: 1.0 when the workload's total bandwidth is above the device's raw
  sequential read bandwidth (``device.raw_seq_mbs``), measured once per device by direct fio on
  the raw device before its first mkfs (`measure_raw`) and kept in the state folder
  (`raw_bandwidth`); ``device.raw_rand_iops`` is its random 4 KiB read rate.

`accounting` turns a run's metrics (and the raw bandwidth) into these; `device_reached` reads
them back for verdicts and reports.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stortune.errors import TargetError
from stortune.system.scratch import ScratchKind, scratch_folder

log = logging.getLogger(__name__)

# Under half of the workload's bytes at the device: memory, not the device, served most of them.
CACHE_SHARE = 0.5
RAW_SECONDS = 3  # each phase of the raw measurement (write, sequential read, random read)
RAW_IODEPTH = 16
RAW_FILE = "devices.json"  # in the state folder: raw bandwidth by device key
RAW_ENV = "STORTUNE_RAW_BANDWIDTH"  # "0": targets measure no raw bandwidth (the test suite)
_MIB = 1024 * 1024


# ---- accounting: pure functions of a run's metrics ------------------------------------------
def _number(metrics: Mapping[str, Any], key: str) -> float | None:
    value = metrics.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def workload_mib(metrics: Mapping[str, Any]) -> float | None:
    """MiB the workload read and wrote in its timed part: ``workload.read_mb`` +
    ``workload.write_mb`` when the workload reports them, else fio's ``read.bw_mbs`` and
    ``write.bw_mbs`` times ``runtime_s``; None when neither is known or nothing moved."""
    moved = [_number(metrics, "workload.read_mb"), _number(metrics, "workload.write_mb")]
    if all(m is None for m in moved):
        seconds = _number(metrics, "runtime_s")
        rates = [_number(metrics, "read.bw_mbs"), _number(metrics, "write.bw_mbs")]
        if seconds is None or all(r is None for r in rates):
            return None
        moved = [r * seconds if r is not None else None for r in rates]
    total = sum(m for m in moved if m is not None)
    return total if total > 0 else None


@dataclasses.dataclass(frozen=True)
class RawBandwidth:
    """A device's own bandwidth under direct I/O, as measured once (`measure_raw`)."""

    seq_read_mbs: float  # MiB/s, 1 MiB reads, iodepth 16
    rand_read_iops: float  # 4 KiB reads, iodepth 16
    seq_write_mbs: float  # MiB/s, 1 MiB writes (the phase that fills the range read)
    measured: str  # ISO date and time
    device: str  # what fio ran on (a loop device's name changes; for the reader of the file)
    size_bytes: int
    backing: str | None = None  # the disk under a loop device's image
    loadavg: float | None = None  # the machine's load when measured: a busy host reads slower

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RawBandwidth:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def accounting(metrics: Mapping[str, Any], raw: RawBandwidth | None = None) -> dict[str, float]:
    """The ``device.*`` metrics a run adds to its `metrics` (which hold ``device.read_mb`` and
    ``device.write_mb`` from `sysmetrics.DeviceSampler`, and the workload's own): the share and
    cache verdict when both sides' bytes are known, the raw bandwidth and the above-raw verdict
    when `raw` is given. Empty when nothing is known (a run on tmpfs)."""
    out: dict[str, float] = {}
    at_device = [_number(metrics, "device.read_mb"), _number(metrics, "device.write_mb")]
    moved = workload_mib(metrics)
    if moved is not None and None not in at_device:
        share = sum(m for m in at_device if m is not None) / moved
        out["device.share"] = share
        out["device.cache_served"] = 1.0 if share < CACHE_SHARE else 0.0
    if raw is not None:
        out["device.raw_seq_mbs"] = float(raw.seq_read_mbs)
        out["device.raw_rand_iops"] = float(raw.rand_read_iops)
        total = _number(metrics, "total.bw_mbs")
        if total is not None and raw.seq_read_mbs > 0:
            out["device.above_raw"] = 1.0 if total > raw.seq_read_mbs else 0.0
    return out


def device_reached(metrics: Mapping[str, Any]) -> bool | None:
    """Whether a run measured its device: True when it was neither cache-served nor above the
    device's raw bandwidth, False when either, None when the run has no device accounting (a
    tmpfs run, a run stored before the accounting existed)."""
    flags = [_number(metrics, "device.cache_served"), _number(metrics, "device.above_raw")]
    known = [f for f in flags if f is not None]
    if not known:
        return None
    return not any(f >= 0.5 for f in known)


# ---- raw bandwidth: measured once per device, kept in the state folder ----------------------
def image_key(image: Path | str, size: int, backing: str | None) -> str:
    """What identifies a loop image's device: its folder (a target's own image is named after
    its process, so the file name changes with every campaign), its size and the disk under it."""
    folder = os.path.dirname(os.path.realpath(image))
    return f"image:{folder}:{size}:{backing or '-'}"


def device_key(path: str, size: int) -> str:
    """What identifies a named block device: its path and size."""
    return f"device:{os.path.realpath(path)}:{size}"


def block_size_bytes(path: str) -> int:
    """A block device's size in bytes (from sysfs)."""
    name = os.path.basename(os.path.realpath(path))
    try:
        return int(Path("/sys/class/block", name, "size").read_text()) * 512
    except (OSError, ValueError):
        raise TargetError(f"cannot read the size of {path}") from None


def kept(state_dir: Path | str) -> dict[str, RawBandwidth]:
    """Every raw bandwidth kept in a state folder, by device key."""
    path = Path(state_dir) / RAW_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("ignoring %s: %s", path, exc)
        return {}
    out = {}
    for key, value in data.items() if isinstance(data, dict) else ():
        try:
            out[key] = RawBandwidth.from_json(value)
        except TypeError:
            log.warning("ignoring %s's entry %s: not a raw bandwidth", path, key)
    return out


def keep(state_dir: Path | str, key: str, raw: RawBandwidth) -> None:
    """Add (or replace) a device's raw bandwidth in the state folder's file, atomically."""
    folder = Path(state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    entries = {k: v.to_json() for k, v in kept(folder).items()}
    entries[key] = raw.to_json()
    fd, temporary = tempfile.mkstemp(prefix=f".{RAW_FILE}.", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(entries, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(temporary, folder / RAW_FILE)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def raw_enabled() -> bool:
    """Whether targets measure raw bandwidth (``STORTUNE_RAW_BANDWIDTH=0`` says not)."""
    return os.environ.get(RAW_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def raw_bandwidth(
    state_dir: Path | str, key: str, device: str, size: int, backing: str | None = None
) -> RawBandwidth:
    """The raw bandwidth kept for `key` in the state folder, else measured on `device` now (its
    data is overwritten) and kept."""
    have = kept(state_dir).get(key)
    if have is not None:
        log.info("raw bandwidth of %s: kept from %s", key, have.measured)
        return have
    raw = measure_raw(device, size, backing, cwd=state_dir)
    keep(state_dir, key, raw)
    return raw


def measure_raw(
    device: str,
    size: int,
    backing: str | None = None,
    cwd: Path | str = "/",
    seconds: int | None = None,
) -> RawBandwidth:
    """Direct fio on a raw block device whose data may be destroyed: sequential 1 MiB writes
    for `seconds` (or the whole device, whichever ends first: reading a fallocated image's
    unwritten extents returns zeros without any I/O), then sequential 1 MiB and random 4 KiB
    reads over the range written, each for `seconds` (default `RAW_SECONDS`), libaio at
    iodepth 16."""
    seconds = seconds if seconds is not None else RAW_SECONDS
    log.info(
        "measuring the raw bandwidth of %s (%d MiB, about %d s)", device, size >> 20, 3 * seconds
    )
    load = os.getloadavg()[0]
    write = _fio(device, cwd, seconds, rw="write", bs="1M", size=size, time_based=False)
    written = min(size, int(write.get("write.bw_mbs", 0.0) * write.get("runtime_s", 0.0) * _MIB))
    written -= written % _MIB
    if written < _MIB:
        raise TargetError(f"raw bandwidth of {device}: the write phase wrote less than 1 MiB")
    seq = _fio(device, cwd, seconds, rw="read", bs="1M", size=written)
    rand = _fio(device, cwd, seconds, rw="randread", bs="4k", size=written)
    raw = RawBandwidth(
        seq_read_mbs=seq.get("read.bw_mbs", 0.0),
        rand_read_iops=rand.get("read.iops", 0.0),
        seq_write_mbs=write.get("write.bw_mbs", 0.0),
        measured=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        device=device,
        size_bytes=size,
        backing=backing,
        loadavg=round(load, 2),
    )
    log.info(
        "raw bandwidth of %s: %.0f MiB/s sequential read, %.0f IOPS random 4 KiB, %.0f MiB/s "
        "sequential write",
        device,
        raw.seq_read_mbs,
        raw.rand_read_iops,
        raw.seq_write_mbs,
    )
    return raw


def _fio(
    device: str,
    cwd: Path | str,
    seconds: int,
    *,
    rw: str,
    bs: str,
    size: int,
    time_based: bool = True,
) -> dict[str, float]:
    """One direct fio job on `device` (argv, no shell; fio's launcher and time limit)."""
    from stortune.workloads.fio import parse_fio_output
    from stortune.workloads.launcher import launch_argv, run_group

    with scratch_folder(ScratchKind.RAW) as tmp:
        output = Path(tmp) / "out.json"
        command = [
            "fio",
            "--output-format=json",
            f"--output={output}",
            f"--name=raw-{rw}",
            f"--filename={device}",
            "--direct=1",
            "--ioengine=libaio",
            f"--iodepth={RAW_IODEPTH}",
            f"--rw={rw}",
            f"--bs={bs}",
            "--offset=0",
            f"--size={size}",
            f"--runtime={seconds}",
            "--norandommap=1",
            "--randrepeat=0",
            *(["--time_based=1"] if time_based else []),
        ]
        try:
            done = run_group(launch_argv(command), cwd, timeout=seconds * 3 + 60.0)
        except OSError as exc:
            raise TargetError(f"cannot start fio on {device}: {exc.strerror}") from None
        if done is None:
            raise TargetError(f"raw bandwidth of {device}: fio did not end in time")
        report = output.read_text() if output.exists() else ""
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        last = lines[-1].strip()[:300] if lines else "(no output)"
        raise TargetError(f"raw bandwidth of {device}: fio exit status {done.returncode}: {last}")
    try:
        return parse_fio_output(report)
    except ValueError as exc:
        raise TargetError(f"raw bandwidth of {device}: {exc}") from None
