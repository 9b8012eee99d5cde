"""A whole profile: SeRRa's estimate (Monte Carlo sizes, lines per interval) or the full
reference (every size, repeated until its confidence interval is narrow), as one JSON-able dict.

Profile format (``kind: stortune-profile``): ``mode`` (estimated or full), ``target``,
``settings``, ``runner`` (serial or mpi, workers, balance), ``elapsed_s`` (wall time of the
whole profile, file lay-out and analysis included), ``measurements`` (every run), ``fits``
(estimated only), ``curve`` (per size: access time of each pattern in ms, the
sequential-to-random throughput ratio of reads and writes with its bootstrap interval
``ratio_ci``, and for an estimate how each ratio was got, ``estimate``: interpolated,
extrapolated or clamped) and ``summary`` (per operation: mean, min and max ratio, the mean's
interval, and the verdict).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import secrets
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stortune.errors import ConfigError, StortuneError
from stortune.inputs import TEXT_BYTES, read_text
from stortune.profile import measure, model, uncertainty
from stortune.profile.design import (
    DEFAULT_INTERVALS,
    PATTERNS,
    Interval,
    Task,
    grid,
    pick_sizes,
    tasks_for,
)
from stortune.profile.measure import TargetSpec, TaskResult
from stortune.profile.parallel import Runner, SerialRunner, worker_stats

KIND = "stortune-profile"
DEFAULT_FILE_SIZE = "64m"
DEFAULT_MAX_REQUESTS = 256  # a mean of 256 access times is settled; more only costs time
Progress = Callable[[int, int], None]  # (runs done, runs planned so far)


@dataclass(frozen=True)
class Settings:
    """How to profile; the defaults are the paper's (2 points per interval, a 90% t interval
    within 10% after at least 6 runs for the reference) except the small file and run cap."""

    intervals: tuple[Interval, ...] = DEFAULT_INTERVALS
    points: int = 2
    repetitions: int = 2
    seed: int | None = None
    full: bool = False
    min_runs: int = 6
    max_runs: int = 20
    confidence: float = 0.9
    max_error: float = 0.1

    def check(self) -> None:
        if self.repetitions < 1:
            raise ConfigError(f"--repetitions must be at least 1 (got {self.repetitions})")
        if not 1 <= self.min_runs <= self.max_runs:
            raise ConfigError(
                f"need 1 <= --min-runs <= --max-runs (got {self.min_runs}, {self.max_runs})"
            )
        if not 0 < self.confidence < 1 or self.max_error <= 0:
            raise ConfigError("--confidence must be in (0, 1) and --max-error positive")

    def to_dict(self) -> dict[str, Any]:
        common = {
            "intervals": [i.to_list() for i in self.intervals],
            "confidence": self.confidence,
        }
        if self.full:
            return common | {
                "min_runs": self.min_runs,
                "max_runs": self.max_runs,
                "max_error": self.max_error,
            }
        return common | {"points": self.points, "repetitions": self.repetitions, "seed": self.seed}


def make_target(
    directory: str | None,
    device: str | None,
    destroy_data: bool,
    file_size: int,
    max_requests: int | None = DEFAULT_MAX_REQUESTS,
) -> TargetSpec:
    """The target of a profile: a directory (a test file goes there) or a scratch device,
    which is overwritten and so needs `destroy_data`."""
    run_id = secrets.token_hex(4)
    if max_requests is not None and max_requests < 0:
        raise ConfigError(f"--max-requests must be 0 (no limit) or more (got {max_requests})")
    max_requests = max_requests or None  # 0: the whole file
    if (directory is None) == (device is None):
        raise ConfigError("give a directory to profile, or --device /dev/X --destroy-data")
    if device is not None:
        if not destroy_data:
            raise ConfigError(
                f"profiling {device} overwrites its first {file_size >> 20} MiB: "
                "add --destroy-data if it is a scratch device"
            )
        return TargetSpec("device", device, file_size, run_id, max_requests)
    assert directory is not None
    if Path(directory).is_block_device():
        raise ConfigError(f"{directory} is a device: use --device {directory} --destroy-data")
    return TargetSpec("directory", os.path.abspath(directory), file_size, run_id, max_requests)


def run_profile(
    spec: TargetSpec,
    settings: Settings,
    runner: Runner | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Measure and build the profile (see the module doc); removes its test files afterwards
    on this node (MPI workers remove theirs when they exit)."""
    settings.check()
    runner = runner or SerialRunner()
    if runner.mode == "serial":
        measure.check_target(spec)  # MPI workers check on their own nodes
    started = dt.datetime.now(dt.UTC)
    clock = time.monotonic()
    try:
        if settings.full:
            results, body = _full(spec, settings, runner, progress or _quiet)
        else:
            results, body = _estimated(spec, settings, runner, progress or _quiet)
    finally:
        measure.remove_files(spec)
    curve, measured = body.pop("access_ms"), body.pop("measured", None)
    ratio, estimator, status = body.pop("ratio"), body.pop("estimator"), body.pop("status", None)
    seed = body.pop("seed", None)
    intervals = uncertainty.bootstrap(
        _observations(results), estimator, settings.confidence, seed=seed or 0
    )
    elapsed = time.monotonic() - clock  # the analysis is part of the time to a profile
    return {
        "kind": KIND,
        "version": 2,
        "mode": "full" if settings.full else "estimated",
        "target": spec.describe(),
        "settings": settings.to_dict() | ({"seed": seed} if seed is not None else {}),
        "runner": {"mode": runner.mode, "workers": runner.workers} | worker_stats(results, elapsed),
        "started": started.isoformat(timespec="seconds"),
        "elapsed_s": round(elapsed, 3),
        "runs": len(results),
        **body,
        "confidence": settings.confidence,
        "curve": _curve_rows(curve, ratio, measured, intervals, status),
        "summary": _summary(ratio, intervals, settings),
        "measurements": [r.to_dict() for r in results],
    }


def _estimated(
    spec: TargetSpec, settings: Settings, runner: Runner, progress: Progress
) -> tuple[list[TaskResult], dict[str, Any]]:
    seed = settings.seed if settings.seed is not None else random.SystemRandom().randrange(2**31)
    picks = pick_sizes(settings.intervals, settings.points, random.Random(seed))
    tasks = tasks_for([s for sizes in picks for s in sizes], range(settings.repetitions))
    results = runner.run(spec, tasks, _Count(len(tasks), progress))
    observations = _observations(results)
    sizes = grid(settings.intervals)
    bounds = model.time_bounds(observations, sizes)

    def estimator(runs: uncertainty.Observations) -> dict[str, dict[int, float]]:
        fits = model.fit_profile(settings.intervals, picks, runs, test_slope=False)
        curve = model.estimate_curve(fits)[0]
        return model.bounded_ratios(curve, model.time_bounds(runs, sizes))[0]

    fits = model.fit_profile(settings.intervals, picks, observations)
    curve, extrapolated = model.estimate_curve(fits)
    ratio, held = model.bounded_ratios(curve, bounds)
    status = {
        op: {
            size: model.Estimate.CLAMPED
            if size in held[op]
            else model.Estimate.EXTRAPOLATED
            if size in extrapolated
            else model.Estimate.INTERPOLATED
            for size in by_size
        }
        for op, by_size in ratio.items()
    }
    return results, {
        "seed": seed,
        "picked_sizes": picks,
        "fits": [f.to_dict() for f in fits],
        "extrapolated_sizes": len(extrapolated),
        "clamped": {op: len(sizes) for op, sizes in held.items()},
        "access_ms": curve,
        "ratio": ratio,
        "estimator": estimator,
        "status": status,
    }


def _full(
    spec: TargetSpec, settings: Settings, runner: Runner, progress: Progress
) -> tuple[list[TaskResult], dict[str, Any]]:
    """Rounds: every (size, pattern) `min_runs` times, then one more run of each one whose
    interval is still too wide, until none is or they reached `max_runs`."""
    values: dict[tuple[int, str], list[float]] = defaultdict(list)
    results: list[TaskResult] = []
    tasks = tasks_for(grid(settings.intervals), range(settings.min_runs))
    count = _Count(len(tasks), progress)
    while tasks:
        for result in runner.run(spec, tasks, count):
            results.append(result)
            values[result.task.key()].append(float(result.access_ms or 0.0))
        tasks = [
            Task(len(runs), size, pattern)
            for (size, pattern), runs in sorted(values.items())
            if model.needs_more(
                runs, settings.min_runs, settings.max_runs, settings.confidence, settings.max_error
            )
        ]
        count.planned += len(tasks)
    measured = model.measured_curve(_observations(results), settings.confidence)
    curve = {
        p: {s: row["mean_ms"] for s, row in by_size.items()} for p, by_size in measured.items()
    }
    unconverged = sum(
        1
        for by_size in measured.values()
        for row in by_size.values()
        if row["ci_rel"] > settings.max_error
    )
    return results, {
        "unconverged": unconverged,
        "measured": measured,
        "access_ms": curve,
        "ratio": model.ratios(curve),
        "estimator": _mean_ratios,
    }


def _mean_ratios(runs: uncertainty.Observations) -> dict[str, dict[int, float]]:
    """The full profile's ratios: each size's mean random over mean sequential access time."""
    values: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for size, pattern, access in runs:
        values[pattern][size].append(access)
    means = {p: {s: sum(v) / len(v) for s, v in by_size.items()} for p, by_size in values.items()}
    return model.ratios(means)


class _Count:
    """Progress callback for the runners, counting runs against a growing plan."""

    def __init__(self, planned: int, progress: Progress) -> None:
        self.planned, self.done, self.progress = planned, 0, progress
        progress(0, planned)

    def __call__(self, result: TaskResult) -> None:
        self.done += 1
        self.progress(self.done, self.planned)


def _observations(results: Sequence[TaskResult]) -> list[tuple[int, str, float]]:
    return [(r.task.size, r.task.pattern, float(r.access_ms or 0.0)) for r in results]


def _curve_rows(
    curve: dict[str, dict[int, float]],
    ratio: dict[str, dict[int, float]],
    measured: dict[str, dict[int, dict[str, float]]] | None,
    intervals: uncertainty.RatioIntervals | None,
    status: dict[str, dict[int, model.Estimate]] | None,
) -> list[dict[str, Any]]:
    rows = []
    for size in sorted({s for by_size in curve.values() for s in by_size}):
        row: dict[str, Any] = {
            "size": size,
            "access_ms": {p: curve[p][size] for p in PATTERNS if size in curve.get(p, {})},
            "ratio": {op: by_size[size] for op, by_size in ratio.items() if size in by_size},
            "ratio_ci": {
                op: list(intervals.by_size[op][size]) if intervals else None for op in ratio
            },
        }
        if status is not None:
            row["estimate"] = {op: str(by_size[size]) for op, by_size in status.items()}
        if measured is not None:
            row["n"] = {p: measured[p][size]["n"] for p in PATTERNS if size in measured.get(p, {})}
            row["ci_rel"] = {
                p: model.finite(measured[p][size]["ci_rel"])
                for p in PATTERNS
                if size in measured.get(p, {})
            }
        rows.append(row)
    return rows


def _summary(
    ratio: dict[str, dict[int, float]],
    intervals: uncertainty.RatioIntervals | None,
    settings: Settings,
) -> dict[str, dict[str, Any]]:
    """Per operation: mean, min and max ratio, the mean's interval and the plain verdict."""
    out = {}
    for op, by_size in ratio.items():
        values = model.summarize_ratios(by_size)
        mean_ci = intervals.mean[op] if intervals else None
        out[op] = values | {
            "mean_ci": list(mean_ci) if mean_ci else None,
            "advantage": str(uncertainty.judge(mean_ci)),
            "verdict": uncertainty.verdict_line(
                op,
                values["mean"],
                mean_ci,
                settings.confidence,
                "--min-runs 2" if settings.full else "--repetitions 2",
            ),
        }
    return out


def _quiet(done: int, planned: int) -> None:
    """No progress display."""


def load_profile(path: str | Path) -> dict[str, Any]:
    """A profile written by `stortune profile`, checked to be one."""
    text = read_text(path, "profile", TEXT_BYTES)
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise StortuneError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise StortuneError(f"{path} is not a stortune profile (written by `stortune profile`)")
    return data
