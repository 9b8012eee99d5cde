"""The cluster's side of a run, for tuners that learn from state (DDPG) and for diagnosis.

Per OSD, from ``perf dump`` (its admin socket on a local cluster, ``ceph tell`` otherwise):
op rates, byte rates, mean latencies over the run (the change of a latency counter's sum over
the change of its count), queue depth and cache gauges; from ``ceph osd perf``: commit and apply
latency; for a local cluster's daemons: CPU share and resident memory from /proc. Names are
``ceph.osd.N.METRIC``, with ``ceph.osd.METRIC`` over all OSDs (rates summed, the rest averaged).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from stortune.errors import StortuneError
from stortune.system.processes import cpu_seconds

# metric -> (perf dump section, counter, kind): "rate" (per second over the run), "latency"
# (mean over the run, ms) or "gauge" (value at the end).
COUNTERS: dict[str, tuple[str, str, str]] = {
    "op_r_per_s": ("osd", "op_r", "rate"),
    "op_w_per_s": ("osd", "op_w", "rate"),
    "op_in_mbs": ("osd", "op_in_bytes", "rate"),
    "op_out_mbs": ("osd", "op_out_bytes", "rate"),
    "op_latency_ms": ("osd", "op_latency", "latency"),
    "op_r_latency_ms": ("osd", "op_r_latency", "latency"),
    "op_w_latency_ms": ("osd", "op_w_latency", "latency"),
    "op_process_latency_ms": ("osd", "op_process_latency", "latency"),
    "op_wip": ("osd", "op_wip", "gauge"),
    "numpg": ("osd", "numpg", "gauge"),
    "bluestore_commit_lat_ms": ("bluestore", "commit_lat", "latency"),
    "bluestore_kv_sync_lat_ms": ("bluestore", "kv_sync_lat", "latency"),
    "bluestore_read_lat_ms": ("bluestore", "read_lat", "latency"),
    "bluestore_kv_queued_lat_ms": ("bluestore", "state_kv_queued_lat", "latency"),
    "onode_hits_per_s": ("bluestore", "onode_hits", "rate"),
    "onode_misses_per_s": ("bluestore", "onode_misses", "rate"),
    "buffer_hit_mbs": ("bluestore", "bluestore_buffer_hit_bytes", "rate"),
    "buffer_miss_mbs": ("bluestore", "bluestore_buffer_miss_bytes", "rate"),
    "deferred_write_per_s": ("bluestore", "deferred_write_ops", "rate"),
    "onodes": ("bluestore", "bluestore_onodes", "gauge"),
    "buffer_mb": ("bluestore", "bluestore_buffer_bytes", "gauge"),
}
_MB = 1024 * 1024

PerfDump = Mapping[str, Any]


def _value(dump: PerfDump, section: str, counter: str) -> tuple[float, float]:
    """(sum, count) of a latency counter, (value, 0) of a plain one; zeros when absent."""
    raw = (dump.get(section) or {}).get(counter, 0)
    if isinstance(raw, Mapping):
        return float(raw.get("sum", 0.0)), float(raw.get("avgcount", 0))
    return float(raw), 0.0


def osd_metrics(before: PerfDump, after: PerfDump, seconds: float) -> dict[str, float]:
    """One OSD's metrics over a run from perf dumps at its start and end."""
    out: dict[str, float] = {}
    for name, (section, counter, kind) in COUNTERS.items():
        (s0, n0), (s1, n1) = _value(before, section, counter), _value(after, section, counter)
        if kind == "gauge":
            out[name] = s1 / _MB if name.endswith("_mb") else s1
        elif kind == "latency":
            out[name] = 1000.0 * (s1 - s0) / (n1 - n0) if n1 > n0 else 0.0
        else:
            scale = _MB if name.endswith("_mbs") else 1.0
            out[name] = (s1 - s0) / scale / seconds if seconds > 0 else 0.0
    return out


def cluster_metrics(per_osd: Mapping[int, Mapping[str, float]]) -> dict[str, float]:
    """``ceph.osd.N.METRIC`` for each OSD and ``ceph.osd.METRIC`` over all of them."""
    out: dict[str, float] = {}
    for osd, metrics in sorted(per_osd.items()):
        out.update({f"ceph.osd.{osd}.{k}": v for k, v in metrics.items()})
    names = {k for metrics in per_osd.values() for k in metrics}
    for name in sorted(names):
        values = [m[name] for m in per_osd.values() if name in m]
        total = sum(values)
        summed = name.endswith(("_per_s", "_mbs"))
        out[f"ceph.osd.{name}"] = total if summed else total / len(values)
    return out


def osd_perf(data: Any) -> dict[int, dict[str, float]]:
    """Commit and apply latency (ms) per OSD from ``ceph osd perf --format json``."""
    stats = data.get("osdstats", data) if isinstance(data, Mapping) else {}
    out: dict[int, dict[str, float]] = {}
    for info in stats.get("osd_perf_infos") or []:
        perf = info.get("perf_stats") or {}
        out[int(info["id"])] = {
            "commit_latency_ms": float(perf.get("commit_latency_ms", 0)),
            "apply_latency_ms": float(perf.get("apply_latency_ms", 0)),
        }
    return out


def process_usage(pid: int) -> tuple[float, float] | None:
    """(CPU seconds used so far, resident MB) of a process; None when it is gone or a zombie
    (a daemon that died and was not reaped yet has no memory to report)."""
    cpu = cpu_seconds(pid)
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    rss = [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")]
    if cpu is None or not rss:
        return None
    return cpu, rss[0] / 1024.0


def daemon_metrics(
    before: Mapping[str, tuple[float, float] | None],
    after: Mapping[str, tuple[float, float] | None],
    seconds: float,
) -> dict[str, float]:
    """``ceph.NAME.cpu_pct`` (share of one core over the run) and ``ceph.NAME.rss_mb``."""
    out: dict[str, float] = {}
    for name, end in after.items():
        start = before.get(name)
        if end is None:
            continue
        out[f"ceph.{name}.rss_mb"] = end[1]
        if start is not None and seconds > 0:
            out[f"ceph.{name}.cpu_pct"] = 100.0 * (end[0] - start[0]) / seconds
    return out


def snapshot_usage(pids: Mapping[str, int]) -> dict[str, tuple[float, float] | None]:
    return {name: process_usage(pid) for name, pid in pids.items()}


class Source(Protocol):
    """Where a sampler reads a cluster's side (the `ceph` target)."""

    @property
    def osd_ids(self) -> list[int]: ...

    def perf_dump(self, osd: int) -> dict[str, Any]: ...

    def osd_perf(self) -> Any: ...

    def daemon_usage(self) -> dict[str, tuple[float, float] | None]: ...


class ClusterSampler:
    """Perf counters and daemon usage around the measured phase of a run; a workload starts
    and stops it like the system sampler."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self._dumps: dict[int, PerfDump] = {}
        self._usage: dict[str, tuple[float, float] | None] = {}
        self._started = 0.0

    def start(self) -> None:
        self._dumps = {osd: self.source.perf_dump(osd) for osd in self.source.osd_ids}
        self._usage = self.source.daemon_usage()
        self._started = time.monotonic()

    def stop(self) -> dict[str, float]:
        seconds = time.monotonic() - self._started
        try:
            per_osd = {
                osd: osd_metrics(self._dumps.get(osd, {}), self.source.perf_dump(osd), seconds)
                for osd in self.source.osd_ids
            }
            for osd, extra in osd_perf(self.source.osd_perf()).items():
                per_osd.setdefault(osd, {}).update(extra)
        except StortuneError:
            per_osd = {}  # a run is not lost for want of its counters
        out = cluster_metrics(per_osd)
        out.update(daemon_metrics(self._usage, self.source.daemon_usage(), seconds))
        return out
