"""The db_bench workload: its spec, flags and refusals, db_bench's output parsed, the bundled
rocksdb space, and real runs on a loop-mounted ext4 under a memory cap (every benchmark, bound
flags, a refused value, O_DIRECT reads, a timeout, every value of the space probed), leaving no
db_bench process, database, mount or loop device behind."""

from __future__ import annotations

import os
import shutil
import signal
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.localfs import (
    guarded_state_dir,
    loop_devices_of,
    mounts_under,
    needs_root,
    processes_under,
)

from stortune.enums import RunStatus
from stortune.errors import ConfigError
from stortune.space import load_space
from stortune.targets.localfs import LocalFsTarget
from stortune.workloads.base import Venue
from stortune.workloads.rocksdb import (
    Benchmark,
    DbBenchWorkload,
    histograms,
    parse_db_bench,
)

needs_db_bench = pytest.mark.skipif(
    shutil.which("db_bench") is None, reason="db_bench is not installed (apt install rocksdb-tools)"
)
QUICK = {"keys": 20_000, "runtime": 2}

OPS_LINE = (
    "readrandomwriterandom :       4.501 micros/op 443870 ops/sec 2.014 seconds 893998 "
    "operations; ( reads:387900 writes:43099 total:20000 found:387900)"
)
OUTPUT = textwrap.dedent(
    """\
    RocksDB:    version 7.8.3
    DB path: [/x/db]
    {OPS_LINE}
    Microseconds per read:
    Count: 100 Average: 3.0000  StdDev: 1.00
    Min: 0  Median: 2.2500  Max: 40
    Percentiles: P50: 2.25 P75: 2.88 P99: 4.00 P99.9: 40.00 P99.99: 40.00
    ------------------------------------------------------
    [       0,       1 ]       10  10.000%  10.000% ##
    (       1,       2 ]       30  30.000%  40.000% ######
    (       2,       3 ]       40  40.000%  80.000% ########
    (       3,       4 ]       19  19.000%  99.000% ####
    (      34,      51 ]        1   1.000% 100.000%

    Microseconds per write:
    Count: 100 Average: 10.0000  StdDev: 2.00
    Min: 7  Median: 8.0408  Max: 1000
    Percentiles: P50: 8.04 P75: 9.06 P99: 51.00 P99.9: 987.00 P99.99: 998.70
    ------------------------------------------------------
    (       6,      10 ]       98  98.000%  98.000% ####################
    (      34,      51 ]        1   1.000%  99.000%
    (     870,    1000 ]        1   1.000% 100.000%

    STATISTICS:
    rocksdb.block.cache.miss COUNT : 25
    rocksdb.block.cache.hit COUNT : 75
    rocksdb.bytes.written COUNT : 2097152
    rocksdb.bytes.read COUNT : 1048576
    rocksdb.stall.micros COUNT : 500000
    rocksdb.wal.synced COUNT : 7
    rocksdb.db.get.micros P50 : 2.0 P95 : 4.0 P99 : 9.0 P100 : 40.0 COUNT : 100 SUM : 300
    """
).replace("{OPS_LINE}", OPS_LINE)


# ---- without db_bench -------------------------------------------------------------------
def test_output_parsed_with_reads_and_writes_apart() -> None:
    metrics, _ = parse_db_bench(OUTPUT, "readrandomwriterandom")
    assert metrics["ops_per_s"] == 443870 and metrics["runtime_s"] == pytest.approx(2.014)
    assert metrics["read.lat_p99_ms"] == pytest.approx(0.004)  # as printed, microseconds -> ms
    assert metrics["write.lat_p999_ms"] == pytest.approx(0.987)
    assert metrics["read.ops_per_s"] == pytest.approx(100 / 2.014)
    # every operation: the histograms merged, percentiles as RocksDB interpolates them
    assert metrics["lat_mean_ms"] == pytest.approx(0.0065)
    assert metrics["lat_p50_ms"] == pytest.approx((6 + 4 / 98) / 1000)  # 100th of 200: (6, 10]
    assert metrics["lat_p99_ms"] == pytest.approx(0.0425)  # 198th: half-way in (34, 51]
    assert metrics["lat_p999_ms"] == pytest.approx(0.974)
    assert metrics["db.block_cache_hit_ratio"] == pytest.approx(0.75)
    assert metrics["db.stall_s"] == pytest.approx(0.5) and metrics["db.wal_syncs"] == 7
    assert "workload.read_mb" not in metrics  # the processes' own I/O gives it, not a ticker
    for hist in histograms(OUTPUT).values():  # RocksDB's interpolation, as db_bench prints it
        assert [hist.percentile(p) for p in (50, 99, 99.9)] == pytest.approx(hist.printed, 0.01)
    assert set(metrics) <= DbBenchWorkload(Benchmark.READRANDOMWRITERANDOM).metric_names()
    with pytest.raises(ValueError, match="no result line for readrandom"):
        parse_db_bench(OUTPUT, "readrandom")


def test_spec_round_trip_declarations_and_sizes() -> None:
    workload = DbBenchWorkload("readrandom", runtime=5, keys=1000, flags={"sync": True})
    again = DbBenchWorkload.from_spec(workload.describe())
    assert again.describe() == workload.describe()
    assert again.name == "rocksdb-readrandom" and again.threads == 4
    assert DbBenchWorkload("fillrandom", threads=1).threads == 1
    default = DbBenchWorkload()
    assert default.data_bytes == 2_500_000 * 416  # about 1 GiB of keys and values
    assert default.footprint_bytes == int(2.5 * default.data_bytes)
    assert default.expected_seconds > default.runtime == 30
    assert DbBenchWorkload("fillrandom").expected_seconds == 30
    declared = default.declared
    assert declared.objective.metric == "ops_per_s" and str(declared.objective.direction) == "max"
    (guard,) = declared.guardrails
    assert (guard.metric, str(guard.direction), guard.tolerance) == ("lat_p99_ms", "min", 0.2)
    assert str(declared.start) == "cold"
    for bench in Benchmark:
        names = DbBenchWorkload(bench).metric_names()
        assert {"ops_per_s", "lat_p99_ms"} <= names
    assert "write.lat_p99_ms" in DbBenchWorkload("readrandomwriterandom").metric_names()
    assert "write.lat_p99_ms" not in DbBenchWorkload("readrandom").metric_names()
    with pytest.raises(ConfigError, match="choose from"):
        DbBenchWorkload("readseq")


@needs_db_bench
def test_bind_merges_flags_and_refuses_bad_ones_before_anything_starts(tmp_path: Path) -> None:
    workload = DbBenchWorkload("fillrandom", flags={"cache_size": 8 << 20})
    assert workload.bind({}) is workload
    bound = workload.bind({"sync": True, "compaction_style": "universal", "bloom_bits": 10})
    assert bound.flags == {"cache_size": 8 << 20, "sync": True, "compaction_style": "universal",
                           "bloom_bits": 10}  # fmt: skip
    assert workload.flags == {"cache_size": 8 << 20}  # the original is left as it was
    numpy = pytest.importorskip("numpy")
    plain = workload.bind({"bloom_bits": numpy.int64(10), "sync": numpy.bool_(True)}).flags
    assert plain["bloom_bits"] == 10 and type(plain["bloom_bits"]) is int
    assert plain["sync"] is True
    argv = bound.argv(tmp_path, "measure")
    assert {"--sync=true", "--compaction_style=1", "--bloom_bits=10"} <= set(argv)
    assert f"--db={tmp_path}/db" in argv and f"--wal_dir={tmp_path}/db" in argv
    assert "--sync=true" not in bound.argv(tmp_path, "fill")  # the fill is never synced
    bad = [
        {"no such": 1},
        {"--sync": True},
        {"sync\n": True},
        {"nosuchflag": 1},  # db_bench has none of that name
        {"db": "/elsewhere"},  # the workload's own
        {"benchmarks": "fillseq"},
        {"flagfile": "x"},
        {"compression_type": "snappy lz4"},
        {"compression_type": "snappy\n--db=/"},
        {"compression_type": "../x"},
        {"cache_size": float("nan")},
        {"cache_size": None},
    ]
    for values in bad:
        with pytest.raises(ConfigError, match="db_bench flag"):
            workload.bind(values)
    assert list(tmp_path.iterdir()) == []


def test_space_defaults_risks_and_constraints() -> None:
    space = load_space("rocksdb")
    default = space.default_config()
    assert default["sync"] is True and default["disable_wal"] is False
    risky = {p.name: p.extra["risk"] for p in space.parameters if "risk" in p.extra}
    assert set(risky) == {"sync", "disable_wal"} and False in risky["sync"]
    assert "power cut" in risky["sync"][False]
    assert "library default" in space["sync"].description or "unsynced WAL" in space.description
    assert all(p.layer == "rocksdb" for p in space.parameters)
    values = space.workload_values(default)
    assert DbBenchWorkload("fillrandom").bind(values).flags["sync"] is True
    with pytest.raises(ConfigError, match="constraint"):
        space.validate({"level0_file_num_compaction_trigger": 16,
                        "level0_slowdown_writes_trigger": 12})  # fmt: skip
    with pytest.raises(ConfigError, match="constraint"):
        space.validate({"write_buffer_size": 134217728, "max_write_buffer_number": 4})
    without_wal = space.validate({"disable_wal": True})
    assert "sync" not in without_wal  # RocksDB refuses synced writes without a WAL


# ---- on a loop-mounted ext4 -----------------------------------------------------------------
@pytest.fixture(scope="module")
def ext4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFsTarget]:
    """One small ext4 loop image under a memory cap for the module; everything undone after."""
    if os.geteuid() != 0 or shutil.which("db_bench") is None:
        pytest.skip("needs root and db_bench")
    folder = tmp_path_factory.mktemp("rocksdb")
    guard = guarded_state_dir(folder)
    state = next(guard)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STORTUNE_RAW_BANDWIDTH", "0")
        try:
            with LocalFsTarget(
                "ext4", image_size="1g", state_dir=state, memory_limit="256m"
            ) as target:
                target.apply({})
                yield target
        finally:
            for pid in processes_under(folder, "db_bench"):
                os.kill(pid, signal.SIGKILL)
            next(guard, None)
    assert not processes_under(folder, "db_bench")
    assert not mounts_under(folder) and not loop_devices_of(folder)


@pytest.fixture
def target(ext4: LocalFsTarget) -> Iterator[LocalFsTarget]:
    """The module's target; after each test, no db_bench and no database on it."""
    yield ext4
    mount = ext4._mount_point
    assert mount is not None
    leftover = processes_under(mount, "db_bench")
    for pid in leftover:
        os.kill(pid, signal.SIGKILL)
    databases = [p for p in mount.glob("*/*") if p.name in ("db", "probe")]
    for path in databases:
        shutil.rmtree(path, ignore_errors=True)
    assert not leftover and not databases


def _run(target: LocalFsTarget, workload: DbBenchWorkload, timeout: float | None = None):
    venue = target.venue(workload)
    return venue, workload.run(venue, timeout)


@needs_root
@pytest.mark.slow
@pytest.mark.parametrize("benchmark", list(Benchmark))
def test_each_benchmark_runs_end_to_end(target: LocalFsTarget, benchmark: Benchmark) -> None:
    workload = DbBenchWorkload(benchmark, **QUICK)
    venue, measurement = _run(target, workload)
    assert measurement.ok, measurement.error
    metrics = measurement.metrics
    names = workload.metric_names()
    for name in ("ops_per_s", "lat_mean_ms", "lat_p50_ms", "lat_p99_ms", "lat_p999_ms"):
        assert metrics[name] > 0, name
    assert metrics["lat_p50_ms"] <= metrics["lat_p99_ms"] <= metrics["lat_p999_ms"]
    for op in benchmark.operations:
        assert metrics[f"{op}.ops_per_s"] > 0 and metrics[f"{op}.lat_p99_ms"] > 0
    assert workload.declared.objective.metric in names
    assert all(g.metric in names for g in workload.declared.guardrails)
    assert {k for k in metrics if not k.startswith(("sys.", "device."))} <= names
    assert any(k.startswith("sys.") for k in metrics)
    assert 2 * 0.9 <= metrics["runtime_s"] < 10
    if benchmark.filled:
        assert measurement.info["fill_seconds"] > 0 and measurement.info["fill_db_mb"] > 0
    if benchmark is Benchmark.READRANDOM:
        assert measurement.info["reads_found_share"] == 1.0  # the keys the fill wrote
    assert not (venue.directory / "db").exists()


@needs_root
@pytest.mark.slow
def test_bound_sync_slows_single_thread_fills(target: LocalFsTarget) -> None:
    workload = DbBenchWorkload("fillrandom", threads=1, **QUICK)
    _, synced = _run(target, workload.bind({"sync": True}))
    _, unsynced = _run(target, workload.bind({"sync": False}))
    assert synced.ok and unsynced.ok, (synced.error, unsynced.error)
    assert synced.metrics["db.wal_syncs"] > 0 and unsynced.metrics["db.wal_syncs"] == 0
    assert synced.metrics["ops_per_s"] < 0.5 * unsynced.metrics["ops_per_s"]


@needs_root
@pytest.mark.slow
def test_a_value_db_bench_refuses_fails_in_one_line(target: LocalFsTarget) -> None:
    for benchmark in ("fillrandom", "readrandom"):
        workload = DbBenchWorkload(benchmark, **QUICK).bind({"cache_size": "lots"})
        venue, measurement = _run(target, workload)
        assert measurement.status is RunStatus.FAILED
        assert "\n" not in measurement.error
        assert "illegal value 'lots'" in measurement.error and "cache_size" in measurement.error
        assert not (venue.directory / "db").exists()


@needs_root
@pytest.mark.slow
def test_direct_reads_work_on_ext4(target: LocalFsTarget) -> None:
    workload = DbBenchWorkload("readrandom", **QUICK).bind({"use_direct_reads": True})
    _, measurement = _run(target, workload)
    assert measurement.ok, measurement.error
    assert measurement.metrics["ops_per_s"] > 0


@needs_root
@pytest.mark.slow
def test_a_run_past_its_time_limit_is_killed(target: LocalFsTarget) -> None:
    workload = DbBenchWorkload("fillrandom", keys=20_000, runtime=60)
    venue, measurement = _run(target, workload, timeout=3)
    assert measurement.status is RunStatus.TIMEOUT and "time limit" in measurement.error
    assert not processes_under(venue.directory, "db_bench")
    assert not (venue.directory / "db").exists()


@needs_root
@pytest.mark.slow
def test_every_value_of_the_space_runs_here(target: LocalFsTarget) -> None:
    space = load_space("rocksdb")
    workload = DbBenchWorkload("fillrandom", **QUICK)
    venue = target.venue(workload)
    assert workload.probe(venue, {"cache_size": "lots"}).startswith("probe: exit status 1")
    assert workload.probe(Venue(directory=venue.directory), {}) is None
    partners = ({}, {"level0_stop_writes_trigger": 80})  # a value the defaults do not admit
    configs: dict[str, tuple[str, object, dict]] = {}  # each value once, the default once
    for p in space.parameters:
        for value in p.values:
            config = next(
                (c for c in ({**extra, p.name: value} for extra in partners) if space.is_valid(c)),
                None,
            )
            assert config is not None, (p.name, value)
            values = space.workload_values(space.validate(config))
            configs.setdefault(repr(sorted(values.items())), (p.name, value, values))
    assert len(configs) == 1 + sum(len(p.values) - 1 for p in space.parameters)
    for name, value, values in configs.values():
        assert workload.probe(venue, values) is None, (name, value)
    assert not (venue.directory / "probe").exists()
