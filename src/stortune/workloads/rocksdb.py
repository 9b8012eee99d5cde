"""RocksDB's db_bench as a workload: a real key-value store's I/O on the file system under test.

Three benchmarks (`Benchmark`): ``fillrandom`` measures random inserts into an empty database for
`runtime` seconds (``--duration``); ``readrandom`` and ``readrandomwriterandom`` (90% reads by
db_bench's default) measure over a database filled first. The fill is ``fillseq`` of `keys` keys
of `value_size` bytes, one thread, with the run's own RocksDB options (so the LSM tree has the
shape those options give it) except that its writes are not synced (syncing every write of a
fill of millions of keys would take half an hour and changes nothing in the tree), then
``flush`` and ``waitforcompaction`` (which sleeps 5 s first), so that the measured phase starts
from a settled tree rather than a WAL to replay; then the target drops the page cache
(`Venue.before_measure`), then the measured benchmark opens the database again
(``--use_existing_db=1 --duration=runtime``).

The defaults (2.5 M keys of 400-byte values, 16-byte keys: about 1 GiB of raw data, 560 MiB on
disk after db_bench's 2:1 Snappy-compressible values) make the database larger than the page
cache a run capped at 384 MiB has (``--memory-limit 384m``), so reads reach the device; the fill
took 20-24 s on a 2-core VM (loop-mounted ext4). Every benchmark runs 4 threads by default.

RocksDB's own options come from a space's parameters of layer ``rocksdb`` (`bind`): db_bench
flag names with their values, passed as ``--flag=value`` after the workload's defaults (so they
override them). Names are refused unless db_bench knows them (its ``--help``, when it is
installed), the flags the workload sets itself (the database's place, the benchmark, its size
and length) are refused, and so are values that are not plain (no spaces, no paths): every flag
is one argv item, never shell text. ``compaction_style`` takes ``level``/``universal``/``fifo``
besides db_bench's 0/1/2.

db_bench runs through the launcher (the run's memory cgroup, killed with stortune, its own
process group killed on timeout); the database lives in ``db`` under the venue's directory and
is removed after the run, whatever happened. A run that exits non-zero, is killed (Debian's
db_bench is built with assertions: an out-of-range enum value aborts it) or prints no result
line is a failed Measurement with db_bench's own error line.

Metrics (`parse_db_bench`): ``ops_per_s`` from the benchmark's ``micros/op ... ops/sec`` line;
``lat_mean_ms``/``lat_p50_ms``/``lat_p99_ms``/``lat_p999_ms`` over every operation from
db_bench's histograms (``--histogram``, microseconds, merged as RocksDB interpolates them);
the same per operation type as ``read.*`` and ``write.*`` (db_bench 7.8.3 prints reads and writes
of ``readrandomwriterandom`` as separate histograms), with each type's ``ops_per_s``; a few of
RocksDB's statistics as ``db.*`` (stalls, flush and compaction bytes, WAL syncs, block cache hit
ratio); ``workload.read_mb``/``workload.write_mb`` (what db_bench read and wrote through system
calls, `ProcessIoSampler`: for the target's device accounting, a share under 0.5 says the page
cache served the run); and the target's ``sys.*``/``device.*``.
"""

from __future__ import annotations

import functools
import math
import numbers
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from stortune.enums import Direction, RunStatus
from stortune.errors import ConfigError, TargetError
from stortune.system.scratch import ScratchKind, scratch_folder
from stortune.workloads.base import Measurement, Need, Venue, Workload
from stortune.workloads.declared import Declarations
from stortune.workloads.launcher import launch_argv, procs_file, run_group
from stortune.workloads.phase import measured_phase

PROGRAM = "db_bench"


class Benchmark(StrEnum):
    """The db_bench benchmarks the workload runs."""

    FILLRANDOM = "fillrandom"  # random inserts into an empty database (write-heavy)
    READRANDOMWRITERANDOM = "readrandomwriterandom"  # 90% reads, 10% writes over a filled db
    READRANDOM = "readrandom"  # random point reads over a filled database

    @property
    def filled(self) -> bool:
        """Whether the benchmark measures over a database filled first."""
        return self is not Benchmark.FILLRANDOM

    @property
    def operations(self) -> tuple[str, ...]:
        """The operation types db_bench times separately (its ``Microseconds per X`` blocks)."""
        if self is Benchmark.FILLRANDOM:
            return ("write",)
        if self is Benchmark.READRANDOM:
            return ("read",)
        return ("read", "write")


DEFAULT_RUNTIME = 30.0
DEFAULT_KEYS = 2_500_000
DEFAULT_VALUE_SIZE = 400
KEY_SIZE = 16  # db_bench's default --key_size
# Four clients for every benchmark: on 2 cores, 4 readers of a database larger than the page cache
# kept the device busier than 2; 4 synced writers ran twice the rate of 1 (group commit), and
# unsynced fills are CPU-bound either way.
DEFAULT_THREADS = {
    Benchmark.FILLRANDOM: 4,
    Benchmark.READRANDOMWRITERANDOM: 4,
    Benchmark.READRANDOM: 4,
}
FOOTPRINT_FACTOR = 2.5  # the database, its WAL and room for compactions, over the raw data
FILL_RATE = 125_000.0  # keys per second of a fillseq (130-170k measured on a 2-core VM)
FILL_WAIT = 5.0  # db_bench's waitforcompaction sleeps 5 s before it looks
MIN_RUNTIME_SHARE = 0.9  # a measured phase shorter than this share of the runtime is rejected
# The fill: sequential inserts, the memtable flushed and compactions done (the measured phase
# starts from a settled tree, not a WAL to replay), then the tree's shape for the record.
FILL = "fillseq,flush,waitforcompaction,levelstats"
PROBE = "fillrandom,flush,readrandom"  # writes, an SST file written and read back
PROBE_KEYS = 200
PROBE_TIMEOUT = 120.0
SEED = 1  # fixed, so that repetitions and configs see the same keys (a flag may change it)

# Set by the workload itself: the database's place, the benchmark, its size and length, the
# output it parses; and gflags' own flags that read files or the environment.
RESERVED = frozenset(
    {
        "db",
        "wal_dir",
        "benchmarks",
        "use_existing_db",
        "duration",
        "num",
        "value_size",
        "key_size",
        "threads",
        "statistics",
        "histogram",
        "flagfile",
        "fromenv",
        "tryfromenv",
        "undefok",
        "help",
        "helpfull",
        "helpshort",
        "helpmatch",
        "helpon",
        "helppackage",
        "helpxml",
        "version",
    }
)
# Flags whose db_bench value is a number the space may give by name.
NAMED_VALUES: dict[str, dict[str, int]] = {
    "compaction_style": {"level": 0, "universal": 1, "fifo": 2},
}
_FLAG_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_PLAIN_VALUE = re.compile(r"^[A-Za-z0-9_.,:+-]+$")
_HELP_FLAG = re.compile(r"^\s+-([A-Za-z][A-Za-z0-9_]*) \(", re.MULTILINE)
_MIB = 1024 * 1024

FlagValue = bool | int | float | str


class DbBenchWorkload(Workload):
    """One db_bench benchmark (module doc) with RocksDB options `flags` (db_bench flag names
    without dashes, as `bind` gives them)."""

    kind = "db_bench"
    needs = Need.DIRECTORY

    def __init__(
        self,
        benchmark: Benchmark | str = Benchmark.READRANDOMWRITERANDOM,
        runtime: float = DEFAULT_RUNTIME,
        keys: int = DEFAULT_KEYS,
        value_size: int = DEFAULT_VALUE_SIZE,
        threads: int | None = None,
        flags: Mapping[str, FlagValue] | None = None,
        name: str | None = None,
    ) -> None:
        try:
            self.benchmark = Benchmark(benchmark)
        except ValueError:
            raise ConfigError(
                f"db_bench benchmark {benchmark!r}: choose from {', '.join(Benchmark)}"
            ) from None
        if not (_real(runtime) and runtime >= 1):
            raise ConfigError(f"db_bench runtime {runtime!r}: give at least 1 second")
        self.runtime = float(runtime)
        self.keys = _whole(keys, "keys", 1)
        self.value_size = _whole(value_size, "value_size", 1)
        chosen = DEFAULT_THREADS[self.benchmark] if threads is None else threads
        self.threads = _whole(chosen, "threads", 1)
        self.flags: dict[str, FlagValue] = check_flags(flags or {})
        self.name = name or f"rocksdb-{self.benchmark}"

    # ---- spec -----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "benchmark": str(self.benchmark),
            "runtime": self.runtime,
            "keys": self.keys,
            "value_size": self.value_size,
            "threads": self.threads,
            "flags": dict(self.flags),
        }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> DbBenchWorkload:
        return cls(
            spec.get("benchmark", Benchmark.READRANDOMWRITERANDOM),
            runtime=spec.get("runtime", DEFAULT_RUNTIME),
            keys=spec.get("keys", DEFAULT_KEYS),
            value_size=spec.get("value_size", DEFAULT_VALUE_SIZE),
            threads=spec.get("threads"),
            flags=spec.get("flags"),
            name=spec.get("name"),
        )

    def bind(self, values: Mapping[str, Any]) -> DbBenchWorkload:
        """This workload with RocksDB options (db_bench flags) `values` over its own."""
        if not values:
            return self
        return DbBenchWorkload(
            self.benchmark,
            self.runtime,
            self.keys,
            self.value_size,
            self.threads,
            {**self.flags, **check_flags(values)},
            self.name,
        )

    # ---- what the run needs and reports ---------------------------------------------------
    @property
    def data_bytes(self) -> int:
        """The keys' and values' raw bytes of a full database."""
        return self.keys * (KEY_SIZE + self.value_size)

    @property
    def footprint_bytes(self) -> int:
        return int(FOOTPRINT_FACTOR * self.data_bytes)

    @property
    def fill_seconds(self) -> float:
        """About how long the fill takes (none for fillrandom)."""
        return self.keys / FILL_RATE + FILL_WAIT if self.benchmark.filled else 0.0

    @property
    def expected_seconds(self) -> float:
        return self.fill_seconds + self.runtime

    def default_timeout(self) -> float:
        """Generous: three times the fill's estimate, half the runtime again, two minutes."""
        return 3.0 * self.fill_seconds + 1.5 * self.runtime + 120.0

    @property
    def declared(self) -> Declarations:
        from stortune.objective import Guardrail, ObjectiveSpec

        return Declarations(
            objective=ObjectiveSpec("ops_per_s", Direction.MAX),
            guardrails=(Guardrail("lat_p99_ms", Direction.MIN, 0.2),),
        )

    def metric_names(self) -> frozenset[str]:
        names = {"ops_per_s", "runtime_s", *LATENCIES, *STATISTICS}
        names |= {"workload.read_mb", "workload.write_mb"}
        for op in self.benchmark.operations:
            names |= {f"{op}.ops_per_s"} | {f"{op}.{lat}" for lat in LATENCIES}
        return frozenset(names)

    # ---- db_bench's command line ----------------------------------------------------------
    def argv(self, directory: str | Path, phase: str) -> list[str]:
        """db_bench's argv for `phase`: ``fill`` (the fillseq before a read benchmark),
        ``measure`` (the benchmark) or ``probe`` (a tiny fill, flush and read with the flags)."""
        db = str(Path(directory) / "db")
        base: dict[str, FlagValue] = {"db": db, "wal_dir": db, "value_size": self.value_size}
        defaults: dict[str, FlagValue] = {"seed": SEED}
        flags = dict(self.flags)
        if phase == "fill":
            base.update(benchmarks=FILL, num=self.keys, threads=1, use_existing_db=False)
            flags.pop("sync", None)  # a fill of unsynced writes: the same tree, in less time
        elif phase == "measure":
            base.update(
                benchmarks=str(self.benchmark),
                num=self.keys,
                threads=self.threads,
                duration=int(math.ceil(self.runtime)),
                use_existing_db=self.benchmark.filled,
                statistics=True,
                histogram=True,
            )
        elif phase == "probe":
            base.update(benchmarks=PROBE, num=PROBE_KEYS, threads=1)
            base.update(use_existing_db=False)
        else:
            raise ValueError(f"unknown db_bench phase {phase!r}")
        return [PROGRAM, *(_flag(k, v) for k, v in {**base, **defaults, **flags}.items())]

    # ---- running --------------------------------------------------------------------------
    def run(self, venue: Venue, timeout: float | None = None) -> Measurement:
        """Fill (read benchmarks), drop the cache, measure; the database is removed after."""
        if venue.directory is None:
            raise TargetError(f"workload {self.name} needs a directory to run in")
        timeout = timeout if timeout is not None else self.default_timeout()
        deadline = time.monotonic() + timeout
        directory = Path(venue.directory)
        db = directory / "db"
        shutil.rmtree(db, ignore_errors=True)  # what a killed run left
        info: dict[str, Any] = {"workload": self.name, "benchmark": str(self.benchmark)}
        try:
            with scratch_folder(ScratchKind.DBBENCH) as tmp:
                if self.benchmark.filled:
                    started = time.monotonic()
                    done = _launch(self.argv(directory, "fill"), tmp, venue, deadline)
                    info["fill_seconds"] = round(time.monotonic() - started, 3)
                    problem = _failure(done, "fill (fillseq)", deadline - started)
                    if problem is not None:
                        return Measurement.failed(f"{self.name}: {problem[0]}", problem[1], **info)
                    assert done is not None
                    fill = _ops_line(done.stdout, "fillseq")
                    if fill is not None:
                        info["fill_ops_per_s"] = fill.ops_per_s
                    info["fill_levels"] = level_files(done.stdout)
                    info["fill_db_mb"] = round(_folder_bytes(db) / _MIB, 1)
                    venue.before_measure()
                return self._measure(directory, tmp, venue, deadline, info)
        except NotStarted as exc:
            return Measurement.failed(f"{self.name}: {exc}", **info)
        finally:
            shutil.rmtree(db, ignore_errors=True)

    def _measure(
        self, directory: Path, tmp: Path, venue: Venue, deadline: float, info: dict[str, Any]
    ) -> Measurement:
        started = time.monotonic()
        with measured_phase(venue, "db_bench") as system:
            done = _launch(self.argv(directory, "measure"), tmp, venue, deadline)
        info["seconds"] = round(time.monotonic() - started, 3)
        info["runtime_requested"] = self.runtime
        problem = _failure(done, str(self.benchmark), deadline - started)
        if problem is not None:
            return Measurement.failed(f"{self.name}: {problem[0]}", problem[1], **info)
        assert done is not None
        try:
            metrics, found = parse_db_bench(done.stdout, str(self.benchmark))
        except ValueError as exc:
            return Measurement.failed(f"{self.name}: {exc}", **info)
        if metrics["runtime_s"] < MIN_RUNTIME_SHARE * self.runtime:
            return Measurement.failed(
                f"{self.name}: {self.benchmark} ran {metrics['runtime_s']:.2f} s of the "
                f"{self.runtime:g} s asked (under {MIN_RUNTIME_SHARE:.0%})",
                **info,
            )
        info.update(found)
        version = re.search(r"^RocksDB:\s+version (\S+)", done.stdout, re.MULTILINE)
        if version:
            info["rocksdb_version"] = version.group(1)
        return Measurement({**metrics, **system}, info=info)

    def probe(self, venue: Venue, values: Mapping[str, Any]) -> str | None:
        """Whether db_bench runs with `values` (flags) over the workload's own on this machine:
        a tiny fill, flush and read in the venue's directory; None when it works, else db_bench's
        reason in one line. Leaves nothing behind. A flag name or value `bind` refuses raises
        ConfigError (a fault of the space, not of the machine)."""
        if venue.directory is None:
            raise TargetError(f"workload {self.name} needs a directory to probe in")
        bound = self.bind(values)
        directory = Path(venue.directory) / "probe"
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        deadline = time.monotonic() + PROBE_TIMEOUT
        try:
            with scratch_folder(ScratchKind.DBBENCH) as tmp:
                done = _launch(bound.argv(directory, "probe"), tmp, venue, deadline)
        except NotStarted as exc:
            return str(exc)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        problem = _failure(done, "probe", PROBE_TIMEOUT)
        if problem is not None:
            return problem[0]
        assert done is not None
        if _ops_line(done.stdout, "readrandom") is None:
            return f"probe: no readrandom result ({_error_line(done.stdout, done.stderr)})"
        return None


# ---- flags --------------------------------------------------------------------------------
def check_flags(values: Mapping[str, Any]) -> dict[str, FlagValue]:
    """`values` as db_bench flags: names db_bench knows and the workload does not set itself,
    plain values (booleans, finite numbers, text without spaces or paths); ConfigError else."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"db_bench flags: a mapping of flag to value, not {values!r:.60}")
    out: dict[str, FlagValue] = {}
    for name, value in values.items():
        if not isinstance(name, str) or not _FLAG_NAME.match(name):
            raise ConfigError(
                f"db_bench flag {name!r:.60}: a flag name is letters, digits and '_' "
                "(without dashes)"
            )
        if name in RESERVED:
            raise ConfigError(
                f"db_bench flag {name!r}: the workload sets it itself (the database's place, "
                "the benchmark, its size and length, or gflags' own)"
            )
        known = known_flags()
        if known is not None and name not in known:
            raise ConfigError(f"db_bench flag {name!r}: db_bench has no such flag")
        out[name] = _flag_value(name, value)
    return out


def _flag_value(name: str, value: Any) -> FlagValue:
    """A db_bench flag's value as a bool, int, float or plain text, or why it cannot be one."""
    if isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", "") == "b":
        return bool(value)  # a numpy bool too
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        if not math.isfinite(value):
            raise ConfigError(f"db_bench flag {name}={value!r}: not a finite number")
        return float(value)
    if isinstance(value, str) and _PLAIN_VALUE.match(value):
        return value
    raise ConfigError(
        f"db_bench flag {name}={value!r:.60}: a value is true/false, a number or plain text "
        "(letters, digits, '_', '.', ',', ':', '+', '-'; no spaces, newlines or paths)"
    )


def _flag(name: str, value: FlagValue) -> str:
    named = NAMED_VALUES.get(name)
    if named is not None and isinstance(value, str) and value in named:
        value = named[value]
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = repr(int(value)) if value.is_integer() else repr(value)
    else:
        text = str(value)
    return f"--{name}={text}"


@functools.cache
def known_flags() -> frozenset[str] | None:
    """The flag names db_bench's ``--help`` lists; None without db_bench."""
    if shutil.which(PROGRAM) is None:
        return None
    try:
        done = subprocess.run(
            [PROGRAM, "--help"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = frozenset(_HELP_FLAG.findall(done.stdout + done.stderr))
    return names or None


# ---- running db_bench ---------------------------------------------------------------------
class NotStarted(Exception):
    """db_bench could not be started (a failed run, said in one line)."""


def _launch(
    command: Sequence[str], tmp: Path, venue: Venue, deadline: float
) -> subprocess.CompletedProcess[str] | None:
    """db_bench in the run's cgroup, in the scratch folder (a core file or report lands there),
    killed at `deadline`; None when it was."""
    remaining = max(1.0, deadline - time.monotonic())
    try:
        return run_group(launch_argv(command, procs_file(venue.cgroup)), tmp, remaining)
    except OSError as exc:
        raise NotStarted(f"cannot start {PROGRAM}: {exc.strerror}") from None


def _failure(
    done: subprocess.CompletedProcess[str] | None, phase: str, allowed: float
) -> tuple[str, RunStatus] | None:
    """Why a phase failed, in one line, and the run status; None when it exited 0."""
    if done is None:
        return f"{phase} killed after the {allowed:.0f} s time limit", RunStatus.TIMEOUT
    if done.returncode == 0:
        return None
    if done.returncode < 0:
        try:
            how = f"killed by {signal.Signals(-done.returncode).name}"
        except ValueError:
            how = f"killed by signal {-done.returncode}"
        if done.returncode == -signal.SIGKILL:
            how += " (the memory cap?)"
    else:
        how = f"exit status {done.returncode}"
    return f"{phase}: {how}: {_error_line(done.stdout, done.stderr)}", RunStatus.FAILED


_PROGRESS = re.compile(r"^\.\.\. finished \d+ ops")
_ERROR_WORDS = re.compile(
    r"error|invalid|not implemented|not supported|assertion|corruption|failed|illegal|unknown",
    re.IGNORECASE,
)


def _error_line(stdout: str, stderr: str) -> str:
    """db_bench's own error line: the first telling line of stderr, then stdout, else the
    last line it printed."""
    out_lines = _lines(stdout)
    err_lines = _lines(stderr)
    for line in err_lines + out_lines:
        if _ERROR_WORDS.search(line) and not line.startswith("rocksdb."):
            return line[:300]
    lines = err_lines or out_lines
    return lines[-1][:300] if lines else "(no output)"


def _lines(text: str) -> list[str]:
    parts = (p.strip() for p in re.split(r"[\r\n]+", text or ""))
    return [p for p in parts if p and not _PROGRESS.match(p)]


# ---- parsing db_bench's output -----------------------------------------------------------
LATENCIES = ("lat_mean_ms", "lat_p50_ms", "lat_p99_ms", "lat_p999_ms")
# RocksDB statistics kept as metrics: (name, statistic, divisor).
_COUNTERS = (
    ("db.stall_s", "rocksdb.stall.micros", 1e6),
    ("db.flush_write_mb", "rocksdb.flush.write.bytes", _MIB),
    ("db.compact_read_mb", "rocksdb.compact.read.bytes", _MIB),
    ("db.compact_write_mb", "rocksdb.compact.write.bytes", _MIB),
    ("db.wal_mb", "rocksdb.wal.bytes", _MIB),
    ("db.wal_syncs", "rocksdb.wal.synced", 1),
)
STATISTICS = (*(c[0] for c in _COUNTERS), "db.block_cache_hit_ratio")
_OPS_LINE = re.compile(
    r"^(?P<name>\w+)\s*:\s*(?P<micros>[0-9.]+) micros/op (?P<ops>[0-9]+) ops/sec"
    r"(?: (?P<seconds>[0-9.]+) seconds (?P<count>[0-9]+) operations;)?(?P<rest>.*)$",
    re.MULTILINE,
)
_BLOCK = re.compile(r"^Microseconds per (?P<op>[\w-]+):\s*$", re.MULTILINE)
_BUCKET = re.compile(r"^[\[(]\s*([0-9.]+),\s*([0-9.]+)\s*\]\s+([0-9]+)\s")
_COUNT = re.compile(r"^Count: ([0-9]+) Average: ([0-9.]+)")
_MINMAX = re.compile(r"^Min: ([0-9.]+)\s+Median: [0-9.]+\s+Max: ([0-9.]+)")
_PERCENTILES = re.compile(
    r"^Percentiles: P50: ([0-9.]+) P75: [0-9.]+ P99: ([0-9.]+) P99\.9: ([0-9.]+)"
)
_TICKER = re.compile(r"^(rocksdb\.[\w.]+) COUNT : ([0-9]+)\s*$", re.MULTILINE)
_FOUND = re.compile(r"\(\s*([0-9]+) of ([0-9]+) found\)")


@dataclass(frozen=True)
class OpsLine:
    """A benchmark's result line."""

    name: str
    micros_per_op: float
    ops_per_s: float
    seconds: float | None
    operations: int | None
    rest: str
    end: int  # where the line ends in the output (the histograms follow it)


@dataclass
class Histogram:
    """One of db_bench's ``Microseconds per X`` blocks."""

    count: int
    mean: float
    low: float
    high: float
    printed: tuple[float, float, float]  # P50, P99, P99.9 as printed
    buckets: list[tuple[float, float, int]] = field(default_factory=list)

    def percentile(self, p: float) -> float:
        """As RocksDB's HistogramStat::Percentile: linear within the bucket, within min-max."""
        threshold = self.count * p / 100.0
        seen = 0
        for left, right, n in self.buckets:
            seen += n
            if seen >= threshold:
                position = (threshold - (seen - n)) / n if n else 0.0
                return min(max(left + (right - left) * position, self.low), self.high)
        return self.high

    @staticmethod
    def merged(parts: Sequence[Histogram]) -> Histogram:
        counts: dict[tuple[float, float], int] = {}
        for part in parts:
            for left, right, n in part.buckets:
                counts[(left, right)] = counts.get((left, right), 0) + n
        total = sum(p.count for p in parts)
        out = Histogram(
            total,
            sum(p.mean * p.count for p in parts) / total if total else 0.0,
            min(p.low for p in parts),
            max(p.high for p in parts),
            (0.0, 0.0, 0.0),
            [(left, right, n) for (left, right), n in sorted(counts.items())],
        )
        out.printed = (out.percentile(50), out.percentile(99), out.percentile(99.9))
        return out

    def metrics(self, prefix: str) -> dict[str, float]:
        p50, p99, p999 = self.printed
        return {
            f"{prefix}lat_mean_ms": self.mean / 1000,
            f"{prefix}lat_p50_ms": p50 / 1000,
            f"{prefix}lat_p99_ms": p99 / 1000,
            f"{prefix}lat_p999_ms": p999 / 1000,
        }


def _ops_line(text: str, benchmark: str) -> OpsLine | None:
    for match in _OPS_LINE.finditer(text or ""):
        if match.group("name") == benchmark:
            seconds, count = match.group("seconds"), match.group("count")
            return OpsLine(
                benchmark,
                float(match.group("micros")),
                float(match.group("ops")),
                float(seconds) if seconds else None,
                int(count) if count else None,
                match.group("rest").strip(),
                match.end(),
            )
    return None


def histograms(text: str) -> dict[str, Histogram]:
    """db_bench's ``--histogram`` blocks in `text`, by operation type (``read``, ``write``)."""
    out: dict[str, Histogram] = {}
    for match in _BLOCK.finditer(text):
        lines = text[match.end() :].lstrip("\n").splitlines()
        head = _COUNT.match(lines[0]) if lines else None
        minmax = _MINMAX.match(lines[1]) if len(lines) > 1 else None
        pct = _PERCENTILES.match(lines[2]) if len(lines) > 2 else None
        if head is None or minmax is None or pct is None:
            raise ValueError(f"db_bench's histogram of {match.group('op')} does not parse")
        hist = Histogram(
            int(head.group(1)),
            float(head.group(2)),
            float(minmax.group(1)),
            float(minmax.group(2)),
            (float(pct.group(1)), float(pct.group(2)), float(pct.group(3))),
        )
        for line in lines[4:]:
            bucket = _BUCKET.match(line)
            if bucket is None:
                break
            hist.buckets.append(
                (float(bucket.group(1)), float(bucket.group(2)), int(bucket.group(3)))
            )
        out[match.group("op")] = hist
    return out


def parse_db_bench(text: str, benchmark: str) -> tuple[dict[str, float], dict[str, Any]]:
    """The metrics of one benchmark's db_bench output (module doc), and what else is worth
    keeping (the share of reads that found their key). ValueError without the benchmark's
    result line or histograms."""
    line = _ops_line(text, benchmark)
    if line is None:
        raise ValueError(f"db_bench printed no result line for {benchmark}")
    after = text[line.end :]
    hists = {op: h for op, h in histograms(after.split("STATISTICS:", 1)[0]).items() if h.count}
    if not hists:
        raise ValueError(f"db_bench printed no latency histogram for {benchmark} (--histogram)")
    seconds = line.seconds or 0.0
    metrics: dict[str, float] = {"ops_per_s": line.ops_per_s, "runtime_s": seconds}
    total = Histogram.merged(list(hists.values())) if len(hists) > 1 else next(iter(hists.values()))
    metrics.update(total.metrics(""))
    for op, hist in hists.items():
        metrics.update(hist.metrics(f"{op}."))
        if seconds > 0:
            metrics[f"{op}.ops_per_s"] = hist.count / seconds
    tickers = {name: int(value) for name, value in _TICKER.findall(text)}
    for name, statistic, divisor in _COUNTERS:
        if statistic in tickers:
            metrics[name] = tickers[statistic] / divisor
    hits, misses = tickers.get("rocksdb.block.cache.hit"), tickers.get("rocksdb.block.cache.miss")
    if hits is not None and misses is not None and hits + misses > 0:
        metrics["db.block_cache_hit_ratio"] = hits / (hits + misses)
    info: dict[str, Any] = {}
    found = _FOUND.search(line.rest)  # one thread's count: a share says what they all do
    if found and int(found.group(2)) > 0:
        info["reads_found_share"] = int(found.group(1)) / int(found.group(2))
    return metrics, info


_LEVEL_ROW = re.compile(r"^\s*([0-9]+)\s+([0-9]+)\s+([0-9]+)\s*$", re.MULTILINE)


def level_files(text: str) -> dict[str, int]:
    """SST files per LSM level (non-empty levels) from db_bench's ``levelstats``."""
    table = text.split("Level Files Size(MB)", 1)
    if len(table) < 2:
        return {}
    return {
        f"L{m.group(1)}": int(m.group(2))
        for m in _LEVEL_ROW.finditer(table[1])
        if m.group(2) != "0"
    }


def _folder_bytes(path: Path) -> int:
    total = 0
    for item in path.rglob("*"):
        try:
            total += item.stat().st_size if item.is_file() else 0
        except OSError:
            continue
    return total


# ---- checks -------------------------------------------------------------------------------
def _real(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _whole(value: Any, what: str, least: int) -> int:
    if not _real(value) or value != int(value) or value < least:
        raise ConfigError(f"db_bench {what} {value!r}: a whole number of at least {least}")
    return int(value)
