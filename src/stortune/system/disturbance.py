"""Was a run disturbed by something else on the machine?

MEASURING.md: another fio harness on the machine doubled and halved throughput. Before and after
each run the guard takes a probe of the machine:

* other benchmark processes (fio, rados, dd, sysbench, stress-ng, ... that are not this process
  or its children),
* CPU time spent in user mode by anyone but this process and its children (our own benchmark
  counts as ours; kernel I/O threads run in system mode and do not count),
* bytes other processes read from and wrote to storage (their /proc/PID/io; kernel threads
  are left out: the journal and write-back threads also carry the run's own I/O, and a loop
  device's writes reach the disk under its image through them).

A run is disturbed when another benchmark was seen, or when the others' CPU or I/O during the run
exceeds a limit. The loop then redoes it (a bounded number of times) and keeps what it saw.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from stortune.system.processes import descendants, io_counters

BENCHMARKS = frozenset(
    {
        "fio",
        "rados",
        "dd",
        "sysbench",
        "stress-ng",
        "stress",
        "iozone",
        "bonnie++",
        "filebench",
        "vdbench",
        "iperf3",
    }
)


@dataclass(frozen=True)
class Probe:
    time: float
    user_ticks: int  # all CPUs, user + nice, since boot
    own_ticks: int  # this process and its waited-for children, user mode
    benchmarks: tuple[str, ...]  # "pid name" of other benchmark processes
    other_io: dict[int, int] = field(default_factory=dict)  # pid -> bytes read + written


@dataclass(frozen=True)
class Limits:
    """Thresholds: other processes' user CPU in cores, other devices' I/O in MB/s."""

    other_cpu_cores: float = 0.5
    other_io_mbs: float = 5.0
    retries: int = 2
    settle_seconds: float = 5.0  # let the disturbance pass before the run is redone


def probe() -> Probe:
    ours = descendants(os.getpid()) | {os.getpid()}
    return Probe(
        time.monotonic(), _user_ticks(), _own_ticks(ours), tuple(other_benchmarks(ours)),
        _io_of(ours),
    )  # fmt: skip


def judge(before: Probe, after: Probe, limits: Limits) -> str | None:
    """Why the run between two probes was disturbed, or None."""
    seen = sorted(set(before.benchmarks) | set(after.benchmarks))
    if seen:
        return f"another benchmark was running: {', '.join(seen[:3])}"
    seconds = max(after.time - before.time, 1e-3)
    ticks = os.sysconf("SC_CLK_TCK")
    others = (after.user_ticks - before.user_ticks) - (after.own_ticks - before.own_ticks)
    cores = others / ticks / seconds
    if cores > limits.other_cpu_cores:
        return f"other processes used {cores:.2f} CPU cores during the run"
    other_io = sum(n - before.other_io.get(pid, 0) for pid, n in after.other_io.items()) / 1e6
    if other_io / seconds > limits.other_io_mbs:
        return f"other processes read or wrote {other_io / seconds:.1f} MB/s during the run"
    return None


def other_benchmarks(ours: set[int] | None = None) -> list[str]:
    """Benchmark processes that are neither this process nor one of its descendants."""
    ours = ours if ours is not None else descendants(os.getpid()) | {os.getpid()}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in ours:
            continue
        try:
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if name in BENCHMARKS:
            found.append(f"{entry.name} {name}")
    return found


def _io_of(ours: set[int]) -> dict[int, int]:
    """Bytes each user process but ours has read from and written to storage, since it
    started (kernel threads, which have no command line, are left out)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in ours:
            continue
        try:
            if not (entry / "cmdline").read_bytes():
                continue
            fields = io_counters(int(entry.name))
        except (OSError, ValueError):
            continue
        out[int(entry.name)] = int(fields.get("read_bytes", 0)) + int(fields.get("write_bytes", 0))
    return out


def _user_ticks() -> int:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return int(fields[1]) + int(fields[2])  # user + nice


def _own_ticks(ours: set[int]) -> int:
    total = 0
    for pid in ours:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += int(fields[11]) + int(fields[13])  # utime + cutime (waited-for children)
    return total


def busy_now(limits: Limits, window: float = 0.5) -> str | None:
    """Why the machine is too busy to start a run right now (another benchmark running, or
    other processes using more CPU than the limit over a short window), or None."""
    before = probe()
    if before.benchmarks:
        return f"another benchmark is running: {', '.join(before.benchmarks[:3])}"
    time.sleep(window)
    return judge(before, probe(), limits)
