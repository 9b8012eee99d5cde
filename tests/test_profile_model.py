"""The profile's design, models and bookkeeping on synthetic access-time curves (no fio)."""

from __future__ import annotations

import functools
import json
import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from stortune.errors import ConfigError, StortuneError
from stortune.profile import model, uncertainty
from stortune.profile.compare import compare_profiles
from stortune.profile.design import (
    DEFAULT_INTERVALS,
    KIB,
    PATTERNS,
    Interval,
    Task,
    grid,
    parse_intervals,
    pick_sizes,
    tasks_for,
)
from stortune.profile.measure import TargetSpec, TaskResult
from stortune.profile.parallel import schedule, worker_stats
from stortune.profile.profiler import Settings, make_target, run_profile

MIB = 2**20


def piecewise(pattern: str) -> Callable[[int], float]:
    """Continuous, linear in each default interval, different per pattern (ms)."""
    base = {"read": 0.05, "randread": 0.09, "write": 0.04, "randwrite": 0.12}[pattern]
    slope_small, slope_large = {"read": (2.0, 0.9), "randread": (3.0, 1.2)}.get(pattern, (1.5, 0.6))

    def access(size: int) -> float:
        if size <= 64 * KIB:
            return base + slope_small * size / MIB
        return base + slope_small * 64 * KIB / MIB + slope_large * (size - 64 * KIB) / MIB

    return access


class FakeRunner:
    """Answers tasks from a curve plus relative noise, recording what it was asked."""

    mode = "synthetic"
    workers = 1

    def __init__(self, noise: float = 0.0, seed: int = 0) -> None:
        self.noise = noise
        self.rng = random.Random(seed)
        self.asked: list[Task] = []

    def run(self, spec: TargetSpec, tasks: Sequence[Task], on_done) -> list[TaskResult]:
        out = []
        for task in schedule(tasks):
            value = piecewise(task.pattern)(task.size) * (1 + self.rng.gauss(0, self.noise))
            result = TaskResult(task, value, 0.01, "host", 1)
            self.asked.append(task)
            on_done(result)
            out.append(result)
        return out

    def close(self) -> None:
        pass


SPEC = TargetSpec("directory", "/nowhere", 16 * MIB, "test")


# ---- design ----------------------------------------------------------------------------------
def test_default_intervals_are_the_papers() -> None:
    small, large = DEFAULT_INTERVALS
    assert small.sizes == [k * KIB for k in range(8, 65, 8)]
    assert large.sizes[0] == 64 * KIB and large.sizes[-1] == 4 * MIB
    assert len(large.sizes) == 127
    assert len(grid(DEFAULT_INTERVALS)) == 8 + 127 - 1  # 64 KiB is in both
    assert parse_intervals("8k:64k:8k,64k:4m:32k") == DEFAULT_INTERVALS


@pytest.mark.parametrize("text", ["8k:64k", "8k:4k:4k", "6k:64k:8k", "8k:64k:0", "a:b:c"])
def test_bad_intervals_are_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_intervals(text)


def test_monte_carlo_picks_distinct_sizes_of_each_interval_reproducibly() -> None:
    picks = pick_sizes(DEFAULT_INTERVALS, 2, random.Random(7))
    assert picks == pick_sizes(DEFAULT_INTERVALS, 2, random.Random(7))
    for interval, sizes in zip(DEFAULT_INTERVALS, picks, strict=True):
        assert len(set(sizes)) == 2 and all(s in interval.sizes for s in sizes)
    assert pick_sizes([Interval(8 * KIB, 16 * KIB, 8 * KIB)], 5, random.Random(0)) == [
        [8 * KIB, 16 * KIB]
    ]


def test_tasks_are_repetition_major_and_scheduled_longest_first() -> None:
    tasks = tasks_for([64 * KIB, 8 * KIB, 8 * KIB], range(2))
    assert len(tasks) == 2 * 2 * len(PATTERNS)
    order = schedule(tasks)
    assert [t.rep for t in order] == sorted(t.rep for t in order)
    first_round = order[: 2 * len(PATTERNS)]
    assert [t.size for t in first_round[:4]] == [8 * KIB] * 4
    assert [t.pattern for t in first_round[:2]] == ["randread", "randwrite"]


# ---- models ----------------------------------------------------------------------------------
def test_line_fit_recovers_an_exact_line() -> None:
    interval = Interval(64 * KIB, 1024 * KIB, 64 * KIB)
    points = [(s, 0.2 + 0.5 * s / MIB) for s in (128 * KIB, 512 * KIB, 960 * KIB) for _ in (0, 1)]
    fit = model.fit_line("read", interval, points)
    assert fit.intercept_ms == pytest.approx(0.2)
    assert fit.slope_ms_per_mib == pytest.approx(0.5)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.n == 6 and fit.sizes == (128 * KIB, 512 * KIB, 960 * KIB)


def test_line_fit_tests_the_slope() -> None:
    rng = np.random.default_rng(3)
    interval = Interval(64 * KIB, 4096 * KIB, 32 * KIB)
    sizes = [128 * KIB, 1024 * KIB, 3072 * KIB]
    sloped = [(s, 0.1 + 2.0 * s / MIB + rng.normal(0, 0.05)) for s in sizes for _ in range(4)]
    flat = [(s, 1.0 + rng.normal(0, 0.05)) for s in sizes for _ in range(4)]
    assert model.fit_line("read", interval, sloped).p_value < 1e-6
    assert model.fit_line("read", interval, flat).p_value > 0.001
    two = model.fit_line("read", interval, sloped[:1] + sloped[4:5])
    assert two.r2 == pytest.approx(1.0) and math.isnan(two.p_value)  # nothing left to test
    assert json.loads(json.dumps(two.to_dict()))["p_value"] is None


def test_estimated_piecewise_curve_matches_everywhere() -> None:
    picks = pick_sizes(DEFAULT_INTERVALS, 2, random.Random(1))
    observations = [(s, p, piecewise(p)(s)) for sizes in picks for s in sizes for p in PATTERNS]
    fits = model.fit_profile(DEFAULT_INTERVALS, picks, observations)
    assert len(fits) == len(DEFAULT_INTERVALS) * len(PATTERNS)
    curve, extrapolated = model.estimate_curve(fits)
    assert extrapolated == {
        s
        for s in grid(DEFAULT_INTERVALS)
        if any(
            s in i and not min(p) <= s <= max(p)
            for i, p in zip(DEFAULT_INTERVALS, picks, strict=True)
        )
    }
    for pattern in PATTERNS:
        assert sorted(curve[pattern]) == grid(DEFAULT_INTERVALS)
        for size, value in curve[pattern].items():
            assert value == pytest.approx(piecewise(pattern)(size), rel=1e-9)
    ratio = model.ratios(curve)
    size = 1024 * KIB
    expected = piecewise("randwrite")(size) / piecewise("write")(size)
    assert ratio["write"][size] == pytest.approx(expected)


def test_one_line_over_a_bent_curve_shows_in_r2_and_error() -> None:
    """A single interval over the whole range cannot follow the bend at 64 KiB."""
    one = (Interval(8 * KIB, 4096 * KIB, 8 * KIB),)
    picks = [[8 * KIB, 32 * KIB, 2048 * KIB, 4096 * KIB]]
    observations = [(s, p, piecewise(p)(s)) for s in picks[0] for p in PATTERNS]
    fits = model.fit_profile(one, picks, observations)
    assert min(f.r2 for f in fits) < 0.9999
    curve, _ = model.estimate_curve(fits)
    assert curve["read"][64 * KIB] != pytest.approx(piecewise("read")(64 * KIB), rel=1e-3)


def test_a_line_that_would_fall_below_zero_is_constrained_to_stay_above() -> None:
    interval = Interval(8 * KIB, 64 * KIB, 8 * KIB)
    fit = model.fit_line("read", interval, [(32 * KIB, 0.01), (64 * KIB, 0.5)])
    assert fit.constrained and fit.intercept_ms >= 0 and fit.slope_ms_per_mib >= 0
    value, outside = fit.predict(8 * KIB)
    assert outside and value > 0
    assert fit.predict(48 * KIB) == (pytest.approx(fit.line(48 * KIB)), False)
    falling = model.fit_line("read", interval, [(8 * KIB, 0.5), (64 * KIB, 0.1)])
    assert falling.slope_ms_per_mib == 0 and falling.intercept_ms == pytest.approx(0.3)


def test_ratio_summary() -> None:
    summary = model.summarize_ratios({8: 2.0, 16: 1.0, 32: 3.0})
    assert summary == {"mean": 2.0, "min": 1.0, "min_size": 16, "max": 3.0, "max_size": 32}


def test_stopping_rule_of_the_full_profile() -> None:
    steady = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98]
    assert model.needs_more(steady[:5], 6, 20, 0.9, 0.1)  # fewer than the minimum
    assert not model.needs_more(steady, 6, 20, 0.9, 0.1)  # narrow interval
    noisy = [1.0, 2.0, 0.5, 1.5, 0.7, 1.9]
    assert model.needs_more(noisy, 6, 20, 0.9, 0.1)
    assert not model.needs_more(noisy, 6, 6, 0.9, 0.1)  # the cap


# ---- whole profiles with a synthetic device ---------------------------------------------------
def test_estimated_profile_from_a_synthetic_device() -> None:
    runner = FakeRunner()
    seen: list[tuple[int, int]] = []
    settings = Settings(points=2, repetitions=3, seed=5)
    profile = run_profile(SPEC, settings, runner, lambda d, p: seen.append((d, p)))
    assert profile["mode"] == "estimated" and profile["settings"]["seed"] == 5
    assert profile["runs"] == len(runner.asked) == len(profile["measurements"])
    assert len(runner.asked) <= 2 * 2 * 4 * 3 and seen[-1] == (profile["runs"],) * 2
    assert {r["size"] for r in profile["curve"]} == set(grid(DEFAULT_INTERVALS))
    for row in profile["curve"]:
        assert row["access_ms"]["read"] == pytest.approx(piecewise("read")(row["size"]))
    assert set(profile["summary"]) == {"read", "write"}
    json.dumps(profile, allow_nan=False)


def test_full_profile_repeats_noisy_sizes_until_the_interval_is_narrow() -> None:
    intervals = (Interval(8 * KIB, 16 * KIB, 8 * KIB),)
    settings = Settings(intervals=intervals, full=True, min_runs=6, max_runs=12)
    quiet = run_profile(SPEC, settings, FakeRunner(noise=0.001))
    assert quiet["runs"] == 2 * 4 * 6 and quiet["unconverged"] == 0
    noisy = run_profile(SPEC, settings, FakeRunner(noise=0.4))
    assert 2 * 4 * 6 < noisy["runs"] <= 2 * 4 * 12
    counts = [n for row in noisy["curve"] for n in row["n"].values()]
    assert max(counts) <= 12 and min(counts) >= 6
    reps = {(m["size"], m["pattern"]): [] for m in noisy["measurements"]}
    for m in noisy["measurements"]:
        reps[(m["size"], m["pattern"])].append(m["rep"])
    assert all(sorted(r) == list(range(len(r))) for r in reps.values())
    json.dumps(noisy, allow_nan=False)


def test_compare_reports_errors_and_time() -> None:
    full = run_profile(SPEC, Settings(full=True, min_runs=2, max_runs=2), FakeRunner())
    estimated = run_profile(SPEC, Settings(seed=1), FakeRunner())
    estimated["elapsed_s"], full["elapsed_s"] = 2.0, 300.0
    result = compare_profiles(estimated, full)
    assert result["sizes"] == len(grid(DEFAULT_INTERVALS))
    assert result["ratio_error"]["read"]["mean_abs"] == pytest.approx(0.0, abs=1e-9)
    assert result["time"]["speedup"] == pytest.approx(150.0)
    assert result["warnings"] == []
    # an estimate off by 10% on random reads
    for row in estimated["curve"]:
        row["ratio"]["read"] *= 1.1
    assert compare_profiles(estimated, full)["ratio_error"]["read"]["mean_abs"] == pytest.approx(
        0.1
    )
    assert compare_profiles(full, estimated)["warnings"]


def test_worker_stats_show_imbalance_and_shared_hosts() -> None:
    task = Task(0, 8192, "read")
    results = [
        TaskResult(task, 1.0, 3.0, "a", 1),
        TaskResult(task, 1.0, 1.0, "a", 2),
        TaskResult(task, 1.0, 2.0, "b", 3),
    ]
    stats = worker_stats(results, elapsed=3.0)
    assert stats["imbalance"] == pytest.approx(1.5)
    assert stats["shared_hosts"] == ["a"]


def test_targets_need_a_directory_or_a_consented_device(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--destroy-data"):
        make_target(None, "/dev/loop7", False, MIB)
    with pytest.raises(ConfigError):
        make_target(str(tmp_path), "/dev/loop7", True, MIB)
    block = next((p for p in sorted(Path("/dev").glob("loop*")) if p.is_block_device()), None)
    if block is not None:  # only its type is looked at
        with pytest.raises(ConfigError, match="--device"):
            make_target(str(block), None, False, MIB)
    spec = make_target(str(tmp_path), None, False, MIB)
    assert spec.kind == "directory" and spec.path == str(tmp_path)
    with pytest.raises(StortuneError):
        run_profile(TargetSpec("directory", str(tmp_path / "missing"), MIB, "x"), Settings())


# ---- ratios the measurements can support, intervals and verdicts ------------------------------
class CurveRunner(FakeRunner):
    """Answers every task with `access(size, pattern, rng)`."""

    def __init__(self, access: Callable[[int, str, random.Random], float], seed: int) -> None:
        super().__init__(seed=seed)
        self.access = access

    def run(self, spec: TargetSpec, tasks: Sequence[Task], on_done) -> list[TaskResult]:
        out = []
        for task in schedule(tasks):
            result = TaskResult(task, self.access(task.size, task.pattern, self.rng), 0.01, "h", 1)
            on_done(result)
            out.append(result)
        return out


def flat(size: int, pattern: str, rng: random.Random) -> float:
    """This VM's disk as a new user saw it: 0.05-0.1 ms whatever the size or pattern."""
    return rng.uniform(0.05, 0.1)


def crossing(size: int, pattern: str, rng: random.Random) -> float:
    """Sequential times that fall with the size (a line through them crosses zero), random
    ones that rise: the quotient of two lines explodes unless something holds it."""
    if pattern in ("read", "write"):
        return max(1e-4, 0.2 - 0.045 * size / MIB + rng.gauss(0, 0.01))
    return 0.05 + 0.01 * size / MIB + rng.gauss(0, 0.005) ** 2


def noisy(size: int, pattern: str, rng: random.Random) -> float:
    """A real line under 50% noise."""
    return (0.1 + 0.5 * size / MIB) * rng.lognormvariate(0, 0.5)


@pytest.mark.parametrize("access", [flat, crossing, noisy])
@pytest.mark.parametrize("repetitions", [1, 3])
def test_no_ratio_outside_what_the_measured_points_allow(
    access, repetitions: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the bounds hold for every draw of the bootstrap, so fewer draws test the same
    fewer_draws = functools.partial(uncertainty.bootstrap, draws=50)
    monkeypatch.setattr(uncertainty, "bootstrap", fewer_draws)
    for seed in range(15):
        settings = Settings(points=2, repetitions=repetitions, seed=seed)
        profile = run_profile(SPEC, settings, CurveRunner(access, seed))
        runs: dict[str, list[tuple[int, float]]] = {p: [] for p in PATTERNS}
        for m in profile["measurements"]:
            runs[m["pattern"]].append((m["size"], m["access_ms"]))
        measured = sorted({s for s, _ in runs["read"]})
        for row in profile["curve"]:
            size = row["size"]
            # time cannot fall with size, nor grow faster than it: beyond the measured sizes
            # the bounds widen by the size factor, and no further
            stretch = max(measured[0] / size, size / measured[-1], 1.0)
            for op, (seq, rand) in {
                "read": ("read", "randread"),
                "write": ("write", "randwrite"),
            }.items():
                low = min(a for _, a in runs[rand]) / max(a for _, a in runs[seq]) / stretch
                high = max(a for _, a in runs[rand]) / min(a for _, a in runs[seq]) * stretch
                assert low * (1 - 1e-9) <= row["ratio"][op] <= high * (1 + 1e-9), (seed, size, op)
                if row["ratio_ci"][op] is not None:
                    ci_low, ci_high = row["ratio_ci"][op]
                    assert 0 < ci_low <= ci_high < math.inf
        json.dumps(profile, allow_nan=False)


def test_the_flat_device_of_a_new_user_gets_no_explosion_and_no_advantage() -> None:
    profile = run_profile(SPEC, Settings(seed=1, repetitions=2), CurveRunner(flat, 1))
    for op in ("read", "write"):
        assert profile["summary"][op]["max"] < 2 * 8  # flat: at most 2x, stretched 8x at 8 KiB
        assert profile["summary"][op]["advantage"] == "none"
        assert "no sequential advantage measurable" in profile["summary"][op]["verdict"]


def test_equal_sequential_and_random_times_are_not_measurable_in_full_or_estimated() -> None:
    def equal(size: int, pattern: str, rng: random.Random) -> float:
        return (0.08 + 0.4 * size / MIB) * rng.lognormvariate(0, 0.1)

    small = (Interval(8 * KIB, 64 * KIB, 8 * KIB),)
    for seed in range(5):
        full = Settings(intervals=small, full=True, min_runs=6, max_runs=8)
        estimated = Settings(intervals=small, seed=seed, repetitions=4)
        for settings in (full, estimated):
            profile = run_profile(SPEC, settings, CurveRunner(equal, seed))
            for op in ("read", "write"):
                assert profile["summary"][op]["advantage"] == "none", (seed, settings.full)


def test_a_real_advantage_is_found_with_an_interval_around_it() -> None:
    def seeky(size: int, pattern: str, rng: random.Random) -> float:
        seek = 2.0 if pattern.startswith("rand") else 0.0
        return (seek + 0.1 + 5.0 * size / MIB) * rng.lognormvariate(0, 0.05)

    profile = run_profile(SPEC, Settings(seed=3, repetitions=3), CurveRunner(seeky, 3))
    truth = {
        size: (2.1 + 5 * size / MIB) / (0.1 + 5 * size / MIB) for size in grid(DEFAULT_INTERVALS)
    }
    inside = [
        row["ratio_ci"]["read"][0] * 0.97 <= truth[row["size"]] <= row["ratio_ci"]["read"][1] * 1.03
        for row in profile["curve"]
    ]
    assert sum(inside) / len(inside) > 0.8
    assert profile["summary"]["read"]["advantage"] == "sequential"
    low, high = profile["summary"]["read"]["mean_ci"]
    assert low > 1.05 and low <= profile["summary"]["read"]["mean"] <= high


def test_one_run_per_size_gives_no_interval_and_says_so() -> None:
    profile = run_profile(SPEC, Settings(seed=1, repetitions=1), CurveRunner(noisy, 1))
    assert all(ci is None for row in profile["curve"] for ci in row["ratio_ci"].values())
    assert profile["summary"]["read"]["advantage"] == "unknown"
    assert "--repetitions" in profile["summary"]["read"]["verdict"]


def test_bounds_contain_each_measured_size_own_runs_even_when_noise_contradicts() -> None:
    kib = 1024
    contradicting = [(16 * kib, "read", 0.10), (16 * kib, "read", 0.11)]
    contradicting += [(48 * kib, "read", 0.08), (48 * kib, "read", 0.09)]
    bounds = model.time_bounds(contradicting, [8 * kib, 16 * kib, 32 * kib, 48 * kib])["read"]
    assert bounds[16 * kib][0] <= 0.10 and bounds[16 * kib][1] >= 0.11
    assert bounds[48 * kib][0] <= 0.08 and bounds[48 * kib][1] >= 0.09
    assert bounds[32 * kib] == pytest.approx((0.08, 0.11))  # the runs on either side
    consistent = [(16 * kib, "read", 0.10), (48 * kib, "read", 0.2)]
    tight = model.time_bounds(consistent, [32 * kib])["read"][32 * kib]
    assert tight == pytest.approx((0.2 * 32 / 48, 0.2))  # no faster than 48K's rate, no slower


def test_with_a_request_cap_the_largest_capped_size_runs_first() -> None:
    tasks = tasks_for([8 * KIB, 256 * KIB, 4 * MIB], range(1))
    uncapped = schedule(tasks, 64 * MIB, None)
    assert uncapped[0].size == 8 * KIB  # the whole file in 8 KiB requests is the longest
    capped = schedule(tasks, 64 * MIB, 256)  # 256 requests up to 256 KiB, 16 of 4 MiB
    assert [t.size for t in capped] == [256 * KIB] * 4 + [4 * MIB] * 4 + [8 * KIB] * 4
    assert capped[0].pattern in ("randread", "randwrite")
