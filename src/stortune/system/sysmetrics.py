"""System metrics sampled during a run: CPU, memory, dirty pages, disk utilisation, load.

A benchmark number means little without knowing what else the machine did meanwhile (MEASURING.md:
throughput followed the load average of other work). `SystemSampler` reads /proc every second in
a thread while a run goes on and summarises what it saw as ``sys.*`` metrics (mean, and max as
``*_max``), stored with every run; `snapshot()` gives the instantaneous gauges tuners use as state.
`DeviceSampler` counts the bytes at a run's device under test and at the disk under its image
(``device.*``), for `stortune.targets.device` to set beside the bytes the workload moved, which
`ProcessIoSampler` counts for an application (a database server) from its processes' I/O.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from stortune.system.processes import descendants, io_counters

_MB = 1024 * 1024
_SECTOR = 512


@dataclass(frozen=True)
class _Sample:
    """One reading of the counters and gauges."""

    when: float
    cpu: tuple[int, ...]  # user nice system idle iowait irq softirq steal (jiffies)
    memory: dict[str, float]  # MB
    disks: dict[str, tuple[int, int, int]]  # name -> (sectors read, sectors written, io ms)


def _read_cpu() -> tuple[int, ...]:
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return tuple(int(x) for x in fields[1:9])


def _read_memory() -> dict[str, float]:
    values: dict[str, float] = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            values[key] = float(rest.split()[0]) / 1024  # kB -> MB
    return {
        "mem_used_mb": values.get("MemTotal", 0.0) - values.get("MemAvailable", 0.0),
        "cached_mb": values.get("Cached", 0.0),
        "dirty_mb": values.get("Dirty", 0.0),
        "writeback_mb": values.get("Writeback", 0.0),
    }


def _read_disks() -> dict[str, tuple[int, int, int]]:
    disks = {}
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 13:
                disks[fields[2]] = (int(fields[5]), int(fields[9]), int(fields[12]))
    return disks


def _sample() -> _Sample:
    return _Sample(time.monotonic(), _read_cpu(), _read_memory(), _read_disks())


def _hardware_disks() -> set[str]:
    """Whole disks backed by a device (not loop, zram, device-mapper or partitions): the disks
    whose I/O includes everything else on the machine, our own loop devices' included."""
    root = Path("/sys/block")
    return {p.name for p in root.iterdir() if (p / "device").exists()} if root.exists() else set()


def disk_of(path: str | os.PathLike[str]) -> str | None:
    """The whole disk holding `path` (``vda`` for a file on /dev/vda1), or None when it is not
    on a block device (tmpfs, overlay on nothing): what a daemon writing files there uses."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    node = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    if not node.exists():
        return None
    real = node.resolve()
    return real.parent.name if (real / "partition").exists() else real.name


def _device_name(device: str) -> str:
    return os.path.basename(os.path.realpath(device)) if device.startswith("/") else device


def loadavg() -> float:
    return os.getloadavg()[0]


def snapshot() -> dict[str, float]:
    """Instantaneous gauges: 1-minute load average and memory (MB)."""
    out = {"sys.loadavg": loadavg()}
    out.update({f"sys.{k}": v for k, v in _read_memory().items()})
    return out


BACKING_OVERHEAD = 0.1  # share of a loop device's traffic the disk under it may add


class SystemSampler:
    """Samples /proc every `interval` seconds between `start()` and `stop()` in a daemon thread.

    `devices` are the devices the run uses (e.g. ``/dev/loop3``): their utilisation and traffic
    are reported as ``sys.disk_*``; I/O on the machine's hardware disks beyond theirs is reported
    as ``sys.other_io_mb``, a sign that something else disturbed the run.
    """

    def __init__(self, devices: Iterable[str] = (), interval: float = 1.0) -> None:
        self.devices = [_device_name(d) for d in devices]
        self.interval = interval
        self._samples: list[_Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._load_start = 0.0

    def start(self) -> SystemSampler:
        self._load_start = loadavg()
        self._samples = [_sample()]
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="stortune-sysmetrics", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._samples.append(_sample())

    def stop(self) -> dict[str, float]:
        """Stop sampling and summarise (one last sample closes the final interval)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self._samples.append(_sample())
        return self.summary()

    def __enter__(self) -> SystemSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self.stop()

    def summary(self) -> dict[str, float]:
        samples = self._samples
        out: dict[str, float] = {
            "sys.loadavg_start": self._load_start,
            "sys.loadavg_end": loadavg(),
        }
        if len(samples) < 2:
            return out
        intervals = list(zip(samples, samples[1:], strict=False))
        for name, index in (("cpu_idle_pct", 3), ("cpu_iowait_pct", 4), ("cpu_system_pct", 2)):
            per = [_cpu_share(a, b, index) for a, b in intervals]
            _mean_max(out, name, per, whole=_cpu_share(samples[0], samples[-1], index))
        user = [_cpu_share(a, b, 0) + _cpu_share(a, b, 1) for a, b in intervals]
        whole_user = _cpu_share(samples[0], samples[-1], 0) + _cpu_share(samples[0], samples[-1], 1)
        _mean_max(out, "cpu_user_pct", user, whole=whole_user)
        for key in samples[0].memory:
            _mean_max(out, key, [s.memory[key] for s in samples])
        self._disk_metrics(out, intervals, samples[0], samples[-1])
        return out

    def _disk_metrics(
        self,
        out: dict[str, float],
        intervals: list[tuple[_Sample, _Sample]],
        first: _Sample,
        last: _Sample,
    ) -> None:
        own = [d for d in self.devices if d in first.disks and d in last.disks]
        if own:
            util = [_util(a, b, own) for a, b in intervals]
            _mean_max(out, "disk_util_pct", util, whole=_util(first, last, own))
            out["sys.disk_read_mb"] = _traffic(first, last, own, 0)
            out["sys.disk_write_mb"] = _traffic(first, last, own, 1)
        hardware = sorted(_hardware_disks() - set(own))
        other = _traffic(first, last, hardware, 0) + _traffic(first, last, hardware, 1)
        # A loop device's I/O lands on the hardware disk under its image: count it out, with a
        # margin for what the file system under the image adds (journal and extent conversion
        # of a fallocated image: 2-3% of the loop's traffic, measured on this VM).
        own_loops = [d for d in own if d.startswith("loop")]
        loop_traffic = _traffic(first, last, own_loops, 0) + _traffic(first, last, own_loops, 1)
        other -= loop_traffic * (1.0 + BACKING_OVERHEAD)
        out["sys.other_io_mb"] = max(other, 0.0)


class DeviceSampler:
    """MiB read and written between `start()` and `stop()` at the device under test
    (``device.read_mb``, ``device.write_mb``: a loop device, or a named one) and, for a loop
    device, at the disk holding its image (``device.backing_read_mb``/``backing_write_mb``,
    `disk_of` the image: that disk's whole traffic, other processes' I/O included)."""

    def __init__(self, device: str, backing: str | None = None) -> None:
        self.device = _device_name(device)
        below = _device_name(backing) if backing else None
        self.backing = below if below != self.device else None
        self._first: dict[str, tuple[int, int, int]] = {}

    def start(self) -> DeviceSampler:
        self._first = _read_disks()
        return self

    def stop(self) -> dict[str, float]:
        last = _read_disks()
        out: dict[str, float] = {}
        for prefix, name in (("device.", self.device), ("device.backing_", self.backing)):
            if name is None or name not in self._first or name not in last:
                continue
            before, after = self._first[name], last[name]
            out[f"{prefix}read_mb"] = (after[0] - before[0]) * _SECTOR / _MB
            out[f"{prefix}write_mb"] = (after[1] - before[1]) * _SECTOR / _MB
        return out


def _cpu_share(a: _Sample, b: _Sample, index: int) -> float:
    deltas = [y - x for x, y in zip(a.cpu, b.cpu, strict=True)]
    total = sum(deltas)
    return 100.0 * deltas[index] / total if total > 0 else 0.0


def _util(a: _Sample, b: _Sample, devices: list[str]) -> float:
    """Busiest device's share of wall time spent doing I/O, in percent."""
    elapsed_ms = max((b.when - a.when) * 1000.0, 1e-9)
    busy = [b.disks[d][2] - a.disks[d][2] for d in devices if d in a.disks and d in b.disks]
    return min(100.0, 100.0 * max(busy, default=0) / elapsed_ms)


def _traffic(a: _Sample, b: _Sample, devices: Iterable[str], index: int) -> float:
    total = sum(
        b.disks[d][index] - a.disks[d][index] for d in devices if d in a.disks and d in b.disks
    )
    return total * _SECTOR / _MB


def _mean_max(
    out: dict[str, float], name: str, values: list[float], whole: float | None = None
) -> None:
    """``sys.NAME`` (mean; `whole` when the whole-run value is exact) and ``sys.NAME_max``."""
    if not values:
        return
    out[f"sys.{name}"] = whole if whole is not None else sum(values) / len(values)
    out[f"sys.{name}_max"] = max(values)


class ProcessIoSampler:
    """MiB a program's processes read and wrote through system calls between `start()` and
    `stop()` (``workload.read_mb``/``write_mb`` from /proc/PID/io ``rchar``/``wchar``): what an
    application moved, for `stortune.targets.device` to set beside what reached the device (a
    share under 0.5: the page cache served it). The processes are those named `program` in the
    `cgroup` folder, or else among this process's descendants; they are polled every
    `interval` seconds in a thread, since a process's counters go with it when it ends (a
    database's client connections do)."""

    def __init__(
        self, program: str, cgroup: str | os.PathLike[str] | None = None, interval: float = 0.5
    ) -> None:
        self.program = program
        self.cgroup = Path(cgroup) if cgroup is not None else None
        self.interval = interval
        self._first: dict[int, tuple[int, int]] = {}
        self._last: dict[int, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ProcessIoSampler:
        self._first = self._poll()
        self._last = dict(self._first)
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._last.update(self._poll())
        read = written = 0
        for pid, (rchar, wchar) in self._last.items():
            before = self._first.get(pid, (0, 0))  # a process born during the run: from 0
            read += max(0, rchar - before[0])
            written += max(0, wchar - before[1])
        return {"workload.read_mb": read / _MB, "workload.write_mb": written / _MB}

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._last.update(self._poll())

    def _poll(self) -> dict[int, tuple[int, int]]:
        out = {}
        for pid in self._pids():
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() != self.program:
                    continue
                fields = io_counters(pid)
                out[pid] = (fields["rchar"], fields["wchar"])
            except (OSError, KeyError, ValueError):
                continue  # ended meanwhile
        return out

    def _pids(self) -> list[int] | set[int]:
        if self.cgroup is not None:
            try:
                return [int(p) for p in (self.cgroup / "cgroup.procs").read_text().split()]
            except (OSError, ValueError):
                return []
        return descendants(os.getpid())
