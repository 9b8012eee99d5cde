"""rados bench workloads: write, sequential read and random read (SAPPHIRE's Table 4).

SAPPHIRE ran 64 rados bench processes of 16 concurrent 16 KB operations each, for 120 s of
reads after 240 s of prefill, or 600 s of writes, on 100 GbE NVMe hosts. On one 2-core machine
the same shape is kept and scaled down: 16 KiB objects, 2 processes x 16 operations, 10 s
measured, reads after 10 s of prefill writes (`PRESETS`; every number can be changed).

A run: remove what an earlier run of the same names left, prefill (reads only, each process
writing the objects it will read, ``--no-cleanup``), the measured phase (with the samplers
running), then remove the objects again, whatever happened. ``rados bench seq`` stops when it
has read every object once; the sequential workload therefore reads in rounds until its
duration is spent. Metrics: ``bw_mbs`` (MiB/s), ``iops``, ``lat_mean_ms``, ``lat_max_ms``,
``lat_min_ms`` over all processes and rounds, ``ops``, ``runtime_s``, and for reads the prefill's
``prefill_bw_mbs``.
"""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stortune.errors import ConfigError
from stortune.system.syscmd import kill_group, last_line
from stortune.units import parse_size
from stortune.workloads.base import Measurement, Need, Venue, Workload

MODES = ("write", "seq", "rand")
PRESETS: dict[str, dict[str, Any]] = {
    "rados-write": {"mode": "write"},
    "rados-seq": {"mode": "seq"},
    "rados-rand": {"mode": "rand"},
}
MIN_RUNTIME_SHARE = 0.9
_MIB = 1024 * 1024
_RUN_PREFIX = "stortune-bench"


@dataclass(frozen=True)
class BenchResult:
    """One rados bench process's report: operations, seconds, latencies (s)."""

    ops: int
    seconds: float
    op_bytes: int
    lat_mean: float
    lat_max: float
    lat_min: float

    @classmethod
    def parse(cls, text: str) -> BenchResult:
        """From ``rados bench --format json`` output (it prints ``hints = 1`` first)."""
        data = next((_json(line) for line in text.splitlines() if line.startswith("{")), None)
        if not isinstance(data, dict) or "total_time_run" not in data:
            first = text.strip().splitlines()[0][:200] if text.strip() else "nothing"
            raise ValueError(f"no rados bench report in the output (it printed: {first})")
        ops = data.get("total_writes_made", data.get("total_reads_made", 0))
        size = data.get("write_size", data.get("read_size", 0))
        return cls(
            ops=int(float(ops)),
            seconds=float(data["total_time_run"]),
            op_bytes=int(float(size)),
            lat_mean=float(data.get("average_latency", 0.0)),
            lat_max=float(data.get("max_latency", 0.0)),
            lat_min=float(data.get("min_latency", 0.0)),
        )


def _json(line: str) -> Any:
    with contextlib.suppress(json.JSONDecodeError):
        return json.loads(line)
    return None


def summarize(rounds: Sequence[Sequence[BenchResult]]) -> dict[str, float]:
    """Metrics over rounds of concurrent processes: a round lasts as long as its slowest
    process; rates are all bytes (operations) over the rounds' total time."""
    results = [r for parts in rounds for r in parts]
    ops = sum(r.ops for r in results)
    seconds = sum(max(r.seconds for r in parts) for parts in rounds if parts)
    out = {
        "ops": float(ops),
        "runtime_s": seconds,
        "bw_mbs": sum(r.ops * r.op_bytes for r in results) / _MIB / seconds if seconds else 0.0,
        "iops": ops / seconds if seconds else 0.0,
    }
    if ops:
        out["lat_mean_ms"] = 1000.0 * sum(r.ops * r.lat_mean for r in results) / ops
        out["lat_max_ms"] = 1000.0 * max(r.lat_max for r in results)
        out["lat_min_ms"] = 1000.0 * min(r.lat_min for r in results if r.ops)
    return out


class RadosWorkload(Workload):
    """``rados bench`` in `mode` write, seq or rand: `procs` processes of `concurrency`
    operations on `object_size` objects for `duration` seconds, reads after `prefill` seconds
    of writes (default: as long as the reads)."""

    kind = "rados"
    needs = Need.RADOS_POOL

    def __init__(
        self,
        mode: str = "write",
        *,
        object_size: str | int = "16k",
        concurrency: int = 16,
        procs: int = 2,
        duration: float = 10.0,
        prefill: float | None = None,
        name: str | None = None,
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"rados bench mode {mode!r}: choose from {', '.join(MODES)}")
        self.mode = mode
        self.object_size = object_size
        self.object_bytes = parse_size(object_size)
        for label, value in (("concurrency", concurrency), ("procs", procs)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"rados bench {label} {value!r}: give a whole number >= 1")
        self.concurrency = concurrency
        self.procs = procs
        if not (isinstance(duration, int | float) and math.isfinite(duration) and duration >= 1):
            raise ConfigError(f"rados bench duration {duration!r}: give at least 1 second")
        self.duration = float(duration)
        if mode == "write":
            prefill = 0.0
        elif prefill is None:
            prefill = self.duration
        if not (isinstance(prefill, int | float) and prefill >= (0 if mode == "write" else 1)):
            raise ConfigError(f"rados bench prefill {prefill!r}: give at least 1 second")
        self.prefill = float(prefill)
        self.name = name or f"rados-{mode}"

    @classmethod
    def named(cls, name: str, **settings: Any) -> RadosWorkload:
        """A preset (``rados-write``, ``rados-seq``, ``rados-rand``) with `settings` changed."""
        if name not in PRESETS:
            raise ConfigError(f"unknown rados workload {name!r} (choose from {', '.join(PRESETS)})")
        return cls(**{**PRESETS[name], **settings}, name=name)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "mode": self.mode,
            "object_size": self.object_size,
            "concurrency": self.concurrency,
            "procs": self.procs,
            "duration": self.duration,
            "prefill": self.prefill,
        }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> RadosWorkload:
        known = {"mode", "object_size", "concurrency", "procs", "duration", "prefill", "name"}
        unknown = sorted(set(spec) - known - {"kind"})
        if unknown:
            raise ConfigError(f"rados workload: unknown setting(s) {', '.join(unknown)}")
        return cls(**{k: spec[k] for k in known if k in spec})

    def metric_names(self) -> frozenset[str]:
        """What `summarize` reports, and the prefill's bandwidth for reads (module doc); the
        target's samplers add their own (``ceph.*``)."""
        names = {"ops", "runtime_s", "bw_mbs", "iops", "lat_mean_ms", "lat_max_ms", "lat_min_ms"}
        return frozenset(names | ({"prefill_bw_mbs"} if self.mode != "write" else set()))

    def default_timeout(self) -> float:
        """Generous: prefill and measured phase, plus time to start and clean up."""
        return (self.prefill + self.duration) * 1.5 + 120.0

    # ---- running --------------------------------------------------------------------------
    @property
    def expected_seconds(self) -> float:
        return self.prefill + self.duration

    def run(self, venue: Venue, timeout: float | None = None) -> Measurement:
        """Run against the pool that the venue's argv prefix (``rados -c CONF -p POOL``)
        names; the venue's samplers run during the measured phase and add their metrics."""
        rados, samplers = list(venue.rados), list(venue.samplers)
        if not rados:
            return Measurement.failed(f"rados workload {self.name}: the target gave no pool")
        deadline = time.monotonic() + (timeout or self.default_timeout())
        names = [f"{_RUN_PREFIX}-{i}" for i in range(self.procs)]
        info: dict[str, Any] = {"workload": self.name, "mode": self.mode}
        self._cleanup(rados, names, deadline)
        try:
            metrics: dict[str, float] = {}
            if self.mode != "write":
                prefill = self._round(rados, names, "write", self.prefill, deadline)
                metrics["prefill_bw_mbs"] = summarize([prefill])["bw_mbs"]
            for sampler in samplers:
                sampler.start()
            try:
                rounds = self._measure(rados, names, deadline)
            finally:
                sampled = [sampler.stop() for sampler in samplers]
        except _Failed as exc:
            return Measurement.failed(str(exc), exc.status, **info)
        finally:
            self._cleanup(rados, names, deadline + 60)
        metrics.update(summarize(rounds))
        for extra in sampled:
            metrics.update(extra)
        info["rounds"] = len(rounds)
        if metrics["ops"] <= 0:
            return Measurement.failed(f"rados bench {self.mode}: no operation finished", **info)
        if metrics["runtime_s"] < MIN_RUNTIME_SHARE * self.duration:
            return Measurement.failed(
                f"rados bench {self.mode} ran {metrics['runtime_s']:.2f} s of the "
                f"{self.duration:g} s asked",
                **info,
            )
        return Measurement(metrics, info=info)

    def _measure(
        self, rados: Sequence[str], names: list[str], deadline: float
    ) -> list[list[BenchResult]]:
        if self.mode != "seq":
            return [self._round(rados, names, self.mode, self.duration, deadline)]
        rounds: list[list[BenchResult]] = []
        spent = 0.0
        while spent < MIN_RUNTIME_SHARE * self.duration:
            left = max(1.0, math.ceil(self.duration - spent))
            parts = self._round(rados, names, "seq", left, deadline)
            rounds.append(parts)
            spent += max(r.seconds for r in parts)
            if sum(r.ops for r in parts) == 0:
                break
        return rounds

    def _round(
        self,
        rados: Sequence[str],
        names: list[str],
        mode: str,
        seconds: float,
        deadline: float,
    ) -> list[BenchResult]:
        """One rados bench process per run name, at the same time; their reports."""
        argv = ["bench", str(max(1, math.ceil(seconds))), mode, "-t", str(self.concurrency)]
        if mode == "write":  # objects stay for the reads; `_cleanup` removes them
            argv += ["-b", str(self.object_bytes), "--no-cleanup"]
        procs = [
            subprocess.Popen(
                [*rados, *argv, "--run-name", name, "--format", "json"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                start_new_session=True,
            )
            for name in names
        ]
        outputs = [_communicate(proc, deadline) for proc in procs]
        results = []
        for proc, (stdout, stderr) in zip(procs, outputs, strict=True):
            if stdout is None:
                for other in procs:
                    kill_group(other)
                raise _Failed(f"rados bench {mode}: killed at the time limit", "timeout")
            if proc.returncode != 0:
                line = last_line(stderr, stdout)
                raise _Failed(f"rados bench {mode}: exit status {proc.returncode}: {line}")
            try:
                results.append(BenchResult.parse(stdout))
            except ValueError as exc:
                raise _Failed(f"rados bench {mode}: {exc}") from None
        return results

    def _cleanup(self, rados: Sequence[str], names: list[str], deadline: float) -> None:
        """Remove the objects of our run names (and their metadata objects); quietly, since
        there is usually nothing to remove."""
        procs = [
            subprocess.Popen(
                [*rados, "cleanup", "--run-name", name],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            for name in names
        ]
        try:
            for proc in procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:  # also on Ctrl-C/SIGTERM: none may outlive us against a cluster torn down
            for proc in procs:
                if proc.poll() is None:
                    kill_group(proc)


class _Failed(Exception):
    def __init__(self, message: str, status: str = "failed") -> None:
        super().__init__(message)
        self.status = status


def _communicate(proc: subprocess.Popen[str], deadline: float) -> tuple[str | None, str]:
    try:
        stdout, stderr = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return None, ""
    return stdout, stderr

    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=10)
