"""PostgreSQL's pgbench as a workload: a real database's I/O on the file system under test.

One run copies a pgbench database into the venue's directory, starts a PostgreSQL server on it
(as user ``postgres``, in the run's cgroup, with the run's postgresql.conf settings, listening
on no TCP port but a socket in a folder only postgres and root may enter), drops the
page cache and times ``pgbench -T RUNTIME``: the built-in TPC-B-like read-write mix (``tpcb``),
or ``-S``, the read-only select mix (``select``). Metrics come from pgbench's per-transaction
log: ``transactions``, latency mean and percentiles (``lat_*_ms``); ``tps`` is pgbench's own
figure "without initial connection time" (transactions over the time the clients were connected).

The database is built once per PostgreSQL major version and scale, as a template under the
state folder (``$STORTUNE_STATE_DIR/templates``, on the root disk, not the device under test):
``initdb -A trust``, ``pgbench -i -s SCALE`` with logged tables, a clean shutdown. It is built
in a temporary folder and renamed into place, so a crash never leaves half a template, and every
run and campaign after reuses it. Each run starts from the same bytes, a clean shutdown's, and a
cold cache.

The server runs as long as the run; it is journaled (`Venue.journal`, entry ``server``) as soon
as it starts, so a target's teardown, or the next target after a SIGKILL, stops it; the workload
itself stops it (fast shutdown, then immediate) and removes the copy whatever happened.

Settings (`bind`, from a space's parameters in layer ``postgres``) are PostgreSQL's option names
and values; names must be options this PostgreSQL knows (``postgres --describe-config``) and
values are written quoted, one per line: a value with a quote, a backslash or a line break is
refused, and so are the options the workload sets itself and those that run programs or load
libraries.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import math
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from stortune.enums import Direction
from stortune.errors import ConfigError, TargetError
from stortune.system.processes import started_at, stop_process
from stortune.system.scratch import ScratchKind, scratch_folder
from stortune.workloads.base import Measurement, Need, Tracker, Venue, Workload
from stortune.workloads.declared import Declarations
from stortune.workloads.launcher import User, launch_argv, procs_file, run_group
from stortune.workloads.phase import measured_phase

PG_ROOT = Path("/usr/lib/postgresql")  # Debian's versioned installations: PG_ROOT/N/bin
USER = "postgres"
DATABASE = "postgres"
MIB = 1024 * 1024
MIB_PER_SCALE = 15  # pgbench_accounts' 100,000 rows and their index per scale unit, about
BASE_MIB = 40  # an empty cluster (initdb), about
DEFAULT_SCALE = 50  # about 750 MiB: twice the 384 MiB memory cap the bench gives a run
DEFAULT_RUNTIME = 30.0
DEFAULT_CLIENTS = 8
DEFAULT_JOBS = 2
DEFAULT_MAX_WAL = 1024 * MIB  # PostgreSQL's max_wal_size unasked
TEMPLATE_FORMAT = 1  # bump when templates are built differently: old ones are not reused
START_SECONDS = 60.0  # a server that is not ready by then failed to start
STOP_SECONDS = 30.0  # per signal: fast shutdown (a checkpoint), then immediate
STOP_SIGNALS = (signal.SIGINT, signal.SIGQUIT)
METRICS = ("tps", "lat_mean_ms", "lat_p50_ms", "lat_p95_ms", "lat_p99_ms", "transactions")

_GUC = re.compile(r"[a-z_][a-z0-9_]*")
_UNSAFE_VALUE = re.compile(r"['\\\x00-\x1f\x7f]")
# Options the workload sets itself (where the server listens and logs, where its files are),
# options that run programs or load code, and postgresql.conf's include directives: a space
# never sets them.
_RESERVED = {
    "listen_addresses", "port", "unix_socket_directories", "unix_socket_group",
    "unix_socket_permissions", "data_directory", "config_file", "hba_file", "ident_file",
    "external_pid_file", "logging_collector", "log_destination", "log_directory",
    "log_filename", "archive_library", "dynamic_library_path", "shared_preload_libraries",
    "local_preload_libraries", "session_preload_libraries", "jit_provider",
    "ssl_passphrase_command", "archive_command", "restore_command", "archive_cleanup_command",
    "recovery_end_command", "include", "include_dir", "include_if_exists",
}  # fmt: skip
_SIZE = re.compile(r"^\s*(\d+)\s*(kB|MB|GB|TB)?\s*$")
_SIZE_UNITS = {"kB": 1024, "MB": MIB, "GB": 1024 * MIB, "TB": 1024 * 1024 * MIB, None: MIB}
_REFUSED_SETTING = re.compile(
    r"invalid value for parameter|unrecognized configuration parameter|is outside the valid "
    r'range for parameter|parameter "[a-z_]+" requires an? '
)
_SERVER_LINE = re.compile(r"\b(DEBUG\d?|LOG|INFO|NOTICE|WARNING|ERROR|FATAL|PANIC):\s+(.*)$")


class Mode(StrEnum):
    """What pgbench's clients do."""

    TPCB = "tpcb"  # the built-in TPC-B-like read-write transaction
    SELECT = "select"  # -S: one primary-key select per transaction


# ---- the installation -----------------------------------------------------------------------
@dataclass(frozen=True)
class Postgres:
    """A PostgreSQL installation: its programs' folder and major version."""

    bin: Path
    major: int

    def tool(self, name: str) -> str:
        return str(self.bin / name)


def installation() -> Postgres:
    """The newest PostgreSQL installed the Debian way (``/usr/lib/postgresql/N/bin``) with the
    server, initdb, pgbench and psql; TargetError when there is none."""
    found = []
    with contextlib.suppress(OSError):
        for entry in PG_ROOT.iterdir():
            tools = ("postgres", "initdb", "pgbench", "psql")
            if entry.name.isdigit() and all((entry / "bin" / t).is_file() for t in tools):
                found.append(Postgres(entry / "bin", int(entry.name)))
    if not found:
        raise TargetError(
            f"PostgreSQL is not installed (no {PG_ROOT}/N/bin with postgres, initdb, pgbench "
            "and psql; Debian's package postgresql has them)"
        )
    return max(found, key=lambda pg: pg.major)


@functools.cache
def known_options() -> frozenset[str] | None:
    """The option names this machine's PostgreSQL knows (``postgres --describe-config``), in
    lower case; None when it cannot tell (no PostgreSQL installed)."""
    try:
        pg = installation()
        done = run_group(launch_argv([pg.tool("postgres"), "--describe-config"]), "/", 60)
    except (TargetError, OSError):
        return None
    if done is None or done.returncode != 0:
        return None
    names = {line.split("\t", 1)[0].strip().lower() for line in done.stdout.splitlines()}
    return frozenset(n for n in names if n)


def check_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The settings if every name is an option PostgreSQL knows and the workload may set, and
    every value can be written into postgresql.conf as one quoted value; else ConfigError
    naming what is refused."""
    out: dict[str, Any] = {}
    if settings is None or (isinstance(settings, Mapping) and not settings):
        return out
    if not isinstance(settings, Mapping):
        raise ConfigError(f"pgbench settings: a mapping of option to value, not {settings!r:.60}")
    bad_names = [str(n) for n in settings if not (isinstance(n, str) and _GUC.fullmatch(n))]
    if bad_names:
        raise ConfigError(
            "pgbench settings: option name(s) "
            f"{', '.join(repr(n[:60]) for n in bad_names)}: PostgreSQL option names are "
            "lower-case letters, digits and '_'"
        )
    reserved = sorted(n for n in settings if n in _RESERVED)
    if reserved:
        raise ConfigError(
            f"pgbench settings: {', '.join(reserved)} cannot be set (the workload sets where "
            "the server listens and logs; options that run programs or load libraries are refused)"
        )
    known = known_options()
    if known is not None:
        unknown = sorted(n for n in settings if n not in known)
        if unknown:
            raise ConfigError(
                f"pgbench settings: unknown PostgreSQL option(s) {', '.join(unknown)}"
            )
    for name, value in settings.items():
        if hasattr(value, "item") and not isinstance(value, str):
            value = value.item()  # a numpy scalar from a tuner
        conf_value(name, value)  # refuses what cannot be written
        out[name] = value
    return out


def conf_value(name: str, value: Any) -> str:
    """A setting's value as postgresql.conf takes it, quoted (booleans as on/off)."""
    if isinstance(value, bool):
        text = "on" if value else "off"
    elif isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"pgbench setting {name}: {value!r} is not a finite number")
        text = repr(value)
    elif isinstance(value, str):
        text = value
    else:
        raise ConfigError(f"pgbench setting {name}: {value!r:.60} is not text, a number or a bool")
    if _UNSAFE_VALUE.search(text) or len(text) > 1000:
        raise ConfigError(
            f"pgbench setting {name}: {text[:60]!r}: a value holds no quote, backslash, line "
            "break or control character (and at most 1,000 characters)"
        )
    return f"'{text}'"


def size_bytes(value: Any, default_unit: int = MIB) -> int | None:
    """Bytes of a size setting (``1GB``, ``512MB``, 1024 meaning MB); None when unreadable."""
    match = _SIZE.match(str(value)) if not isinstance(value, bool) else None
    if match is None:
        return None
    unit = _SIZE_UNITS[match.group(2)] if match.group(2) else default_unit
    return int(match.group(1)) * unit


# ---- a server -------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _reachable(path: Path, user: User) -> None:
    """TargetError unless `user` can pass through every folder above `path` (a private
    temporary folder above a state folder would stop the server from reaching its data)."""
    path = path.resolve()
    for folder in [*reversed(path.parents), path]:
        try:
            info = folder.stat()
        except OSError:
            continue
        mode = info.st_mode
        if info.st_uid == user.uid:
            ok = mode & stat.S_IXUSR
        elif info.st_gid == user.gid:
            ok = mode & stat.S_IXGRP
        else:
            ok = mode & stat.S_IXOTH
        if not ok:
            raise TargetError(
                f"user {user.name} cannot reach {path}: {folder} is closed to it "
                f"(mode {stat.S_IMODE(mode):o})"
            )


def server_problem(log_text: str) -> str:
    """The most telling line of a server's log, without its time stamp: a setting it refused,
    else its last FATAL or PANIC line, else its last line."""
    lines = []
    for raw in log_text.splitlines():
        match = _SERVER_LINE.search(raw)
        if match:
            lines.append((match.group(1), match.group(2).strip()))
        elif raw.strip():
            lines.append(("", raw.strip()))
    for level, text in lines:
        if level in ("LOG", "ERROR", "FATAL") and _REFUSED_SETTING.search(text):
            return text[:300]
    for level, text in reversed(lines):
        if level in ("FATAL", "PANIC") and "contains errors" not in text:
            return text[:300]
    return lines[-1][1][:300] if lines else "(the server logged nothing)"


def own_folder(scratch: Path, user: User) -> Path:
    """A folder of `user`'s, mode 0700, in a root-owned scratch folder (which the stale-folder
    clean-up removes after a crash): the server's log and socket, pgbench's logs."""
    scratch.chmod(0o711)  # postgres may pass through to its own folder, not list the scratch
    folder = scratch / "pg"
    folder.mkdir(mode=0o700)
    user.owns(folder)
    return folder


class Server:
    """A PostgreSQL server on a data folder, started as user postgres in a cgroup (if any),
    logging to `log`; journaled while it runs. It listens on no TCP port: its socket (named by
    a port of its own) is in the log's folder, which only postgres (and root) may enter, so
    initdb's trust authentication lets no other local user in."""

    def __init__(
        self,
        pg: Postgres,
        data: Path,
        log: Path,
        cgroup: str | os.PathLike[str] | None = None,
        journal: Tracker | None = None,
    ) -> None:
        self.pg, self.data, self.log = pg, data, log
        self.cgroup, self.journal = cgroup, journal
        self.user = User.named(USER)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.started: int | None = None

    @property
    def socket(self) -> Path:
        """The folder of the server's socket (the log's, postgres's own)."""
        return self.log.parent

    def configure(self, settings: Mapping[str, Any]) -> None:
        """Append the run's settings and the workload's own to postgresql.conf (later lines
        win over initdb's)."""
        lines = ["", "# stortune: this run's settings"]
        lines += [f"{name} = {conf_value(name, value)}" for name, value in settings.items()]
        self.port = _free_port()
        lines += [
            "listen_addresses = ''",
            f"port = {self.port}",
            f"unix_socket_directories = {conf_value('unix_socket_directories', str(self.socket))}",
            "logging_collector = off",
            "log_destination = 'stderr'",
            "",
        ]
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write("\n".join(lines))

    def start(self, settings: Mapping[str, Any], timeout: float = START_SECONDS) -> None:
        """Start the server with `settings` and wait until it accepts connections; TargetError
        with the line of its log that says why not."""
        for attempt in range(3):
            self.configure(settings)
            try:
                self._spawn()
                self._wait_ready(timeout)
                return
            except TargetError as exc:
                self.stop()
                if "could not bind" not in str(exc) or attempt == 2:
                    raise  # else the free port was taken meanwhile: another one

    def _spawn(self) -> None:
        argv = launch_argv(
            [self.pg.tool("postgres"), "-D", str(self.data)], procs_file(self.cgroup), self.user
        )
        with open(self.log, "ab") as log:
            try:
                self.proc = subprocess.Popen(
                    argv,
                    cwd="/",
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                raise TargetError(f"cannot start postgres: {exc.strerror}") from None
        self.started = started_at(self.proc.pid)
        if self.journal is not None:
            self.journal.record(
                "server",
                pid=self.proc.pid,
                started=self.started,
                signals=[int(s) for s in STOP_SIGNALS],
            )

    def _wait_ready(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        pid_file = self.data / "postmaster.pid"
        while True:
            if self.proc.poll() is not None:
                raise TargetError(
                    f"the PostgreSQL server did not start: {server_problem(self.log_text())}"
                )
            with contextlib.suppress(OSError):
                lines = pid_file.read_text().splitlines()
                mine = len(lines) >= 8 and lines[0].strip() == str(self.proc.pid)
                if mine and lines[7].strip() == "ready":
                    return
            if time.monotonic() > deadline:
                raise TargetError(
                    f"the PostgreSQL server was not ready after {timeout:g} s: "
                    f"{server_problem(self.log_text())}"
                )
            time.sleep(0.05)

    def log_text(self) -> str:
        try:
            with open(self.log, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 200_000))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def client_argv(self, program: str, *args: str) -> list[str]:
        """A client program's argv (psql, pgbench), run as postgres in the server's cgroup."""
        command = [self.pg.tool(program), "-h", str(self.socket), "-p", str(self.port), "-U", USER]
        return launch_argv([*command, *args], procs_file(self.cgroup), self.user)

    def query(self, *statements: str, timeout: float = 60.0) -> str:
        """psql's unaligned output of `statements`, each on its own; TargetError saying why
        not."""
        commands = [arg for sql in statements for arg in ("-c", sql)]
        argv = self.client_argv(
            "psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", DATABASE, *commands
        )
        done = run_group(argv, "/", timeout)
        if done is None:
            raise TargetError(f"psql: no answer within {timeout:g} s")
        if done.returncode != 0:
            raise TargetError(f"psql: {_last_line(done.stderr, done.stdout)}")
        return done.stdout

    def stop(self) -> None:
        """Stop the server (fast shutdown, then immediate, then SIGKILL) and forget its journal
        entry; TargetError when it cannot be stopped (the entry stays for the teardown)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        stopped = stop_process(proc.pid, self.started, STOP_SIGNALS, STOP_SECONDS)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)  # reaped: no zombie
        if not stopped:
            raise TargetError(f"cannot stop the PostgreSQL server of pid {proc.pid}")
        if self.journal is not None:
            problems = self.journal.undo({"server"})
            if problems:
                raise TargetError("; ".join(problems))


def _last_line(*texts: str | None) -> str:
    """A client's most telling line: an error line, else the last line."""
    lines = [line.strip() for text in texts for line in (text or "").splitlines() if line.strip()]
    for line in lines:
        low = line.lower()
        if "error" in low or "fatal" in low:
            return line[:300]
    return lines[-1][:300] if lines else "(no output)"


def copy_cluster(source: Path, target: Path, user: User) -> None:
    """Copy a data folder (a template) to `target`, owned by `user`, mode 0700."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, symlinks=True)
    for folder, _dirs, files in os.walk(target):
        os.chown(folder, user.uid, user.gid)
        for name in files:
            os.chown(os.path.join(folder, name), user.uid, user.gid, follow_symlinks=False)
    target.chmod(0o700)


def remove_cluster(data: Path) -> None:
    shutil.rmtree(data, ignore_errors=True)


def _clean_up(server: Server | None, data: Path) -> str | None:
    """Stop the server (if any) and remove its data folder; why the server could not be
    stopped, or None."""
    try:
        if server is not None:
            server.stop()
    except TargetError as exc:
        return _one_line(exc)
    finally:
        remove_cluster(data)
    return None


# ---- templates ------------------------------------------------------------------------------
def templates_dir() -> Path:
    from stortune.system.journal import default_state_dir  # targets import workloads

    return Path(default_state_dir()) / "templates"


def template_name(pg: Postgres, scale: int) -> str:
    """The template of a major version and scale (0: initdb alone)."""
    what = f"scale{scale}" if scale > 0 else "initdb"
    return f"pgbench-v{TEMPLATE_FORMAT}-pg{pg.major}-{what}"


def build_seconds(scale: int) -> float:
    """The bound on a template's build."""
    return 300.0 + 20.0 * scale


def template(pg: Postgres, scale: int, journal: Tracker | None = None) -> Path:
    """The cached template of `scale` (0: initdb alone), built now if there is none."""
    folder = templates_dir()
    user = User.named(USER)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    _reachable(folder, user)
    done = folder / template_name(pg, scale)
    if done.is_dir():
        return done
    with _build_lock(folder, build_seconds(scale)):
        if done.is_dir():
            return done  # another process built it meanwhile
        for stale in folder.glob(".building-*"):
            shutil.rmtree(stale, ignore_errors=True)  # a crashed build's (we hold the lock)
        building = folder / f".building-{os.getpid()}-{done.name}"
        building.mkdir(mode=0o700)
        try:
            user.owns(building)
            _build(pg, scale, building, user, journal)
            os.sync()
            os.rename(building, done)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return done


@contextlib.contextmanager
def _build_lock(folder: Path, wait: float) -> Iterator[None]:
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TargetError(
                        f"another process has been building a template in {folder} for {wait:g} s"
                    ) from None
                time.sleep(0.5)
        yield
    finally:
        os.close(fd)


def _build(pg: Postgres, scale: int, data: Path, user: User, journal: Tracker | None) -> None:
    """initdb into `data` (an empty folder of `user`), then pgbench's tables at `scale`, then a
    clean shutdown; postgresql.conf as initdb wrote it."""
    bound = build_seconds(scale)
    with scratch_folder(ScratchKind.PGBENCH) as scratch:
        tmp = own_folder(scratch, user)
        init = [pg.tool("initdb"), "-D", str(data), "-A", "trust", "-U", USER, "-E", "UTF8",
                "--locale=C", "--no-sync", "--no-instructions"]  # fmt: skip
        done = run_group(launch_argv(init, "", user), tmp, bound)
        if done is None or done.returncode != 0:
            why = "timed out" if done is None else _last_line(done.stderr, done.stdout)
            raise TargetError(f"initdb failed: {why}")
        if scale <= 0:
            return
        original = (data / "postgresql.conf").read_bytes()
        server = Server(pg, data, tmp / "server.log", None, journal)
        # wal_level minimal: the tables' COPY in the transaction that made them skips the WAL,
        # so the template holds no gigabyte of WAL; runs start with the default (replica).
        try:
            server.start({"wal_level": "minimal", "max_wal_senders": 0})
            argv = server.client_argv("pgbench", "-i", "-q", "-s", str(scale), DATABASE)
            done = run_group(argv, tmp, bound)
            if done is None or done.returncode != 0:
                why = "timed out" if done is None else _last_line(done.stderr, done.stdout)
                raise TargetError(f"pgbench -i -s {scale} failed: {why}")
        finally:
            server.stop()
        (data / "postgresql.conf").write_bytes(original)
        for leftover in ("postmaster.opts", "postmaster.pid"):
            with contextlib.suppress(FileNotFoundError):
                (data / leftover).unlink()


# ---- pgbench's output -----------------------------------------------------------------------
_TPS = re.compile(r"^tps = ([0-9.]+) \(without initial connection time\)", re.MULTILINE)
_PROCESSED = re.compile(r"^number of transactions actually processed: (\d+)", re.MULTILINE)
_CONNECT = re.compile(r"^initial connection time = ([0-9.]+) ms", re.MULTILINE)


def parse_transaction_logs(paths: Sequence[Path]) -> tuple[list[float], int]:
    """Latencies (ms) of the transactions in pgbench's per-transaction logs, and how many
    failed or were skipped (their time column is not a number)."""
    latencies: list[float] = []
    failed = 0
    for path in paths:
        with open(path) as f:
            for line in f:
                fields = line.split()
                if len(fields) < 3:
                    continue
                try:
                    latencies.append(int(fields[2]) / 1000.0)
                except ValueError:
                    failed += 1
    return latencies, failed


def latency_metrics(latencies: Sequence[float]) -> dict[str, float]:
    import numpy as np

    values = np.asarray(latencies, dtype=float)
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {
        "lat_mean_ms": float(values.mean()),
        "lat_p50_ms": float(p50),
        "lat_p95_ms": float(p95),
        "lat_p99_ms": float(p99),
    }


# ---- the workload ---------------------------------------------------------------------------
class PgbenchWorkload(Workload):
    """pgbench against a PostgreSQL server on the directory under test (module doc).

    `scale` sets the data set: about 15 MiB per unit, so the default 50 is about 750 MiB, twice
    the 384 MiB memory cap (``--memory-limit 384m``) the bench gives a run's page cache and
    server together, so reads reach the device. `clients` connections in `jobs` pgbench
    threads for `runtime` seconds; `settings` are postgresql.conf options (`bind`).
    """

    kind = "pgbench"
    needs = Need.DIRECTORY

    def __init__(
        self,
        mode: Mode | str = Mode.TPCB,
        runtime: float = DEFAULT_RUNTIME,
        scale: int = DEFAULT_SCALE,
        clients: int = DEFAULT_CLIENTS,
        jobs: int | None = None,
        settings: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        try:
            self.mode = Mode(mode)
        except ValueError:
            raise ConfigError(
                f"pgbench mode {mode!r}: {' or '.join(m.value for m in Mode)}"
            ) from None
        if not (
            isinstance(runtime, int | float)
            and not isinstance(runtime, bool)
            and math.isfinite(runtime)
            and runtime >= 1
        ):
            raise ConfigError(f"pgbench runtime {runtime!r}: give at least 1 second")
        self.runtime = float(runtime)
        self.scale = _whole("scale", scale, 1, 100_000)
        self.clients = _whole("clients", clients, 1, 1000)
        # pgbench's threads: at most one per client (default 2, fewer for one client)
        self.jobs = _whole("jobs", jobs or min(DEFAULT_JOBS, self.clients), 1, self.clients)
        self.settings = check_settings(settings)
        self.name = name or ("pgbench" if self.mode is Mode.TPCB else "pgbench-select")

    # ---- spec -----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "mode": self.mode.value,
            "runtime": self.runtime,
            "scale": self.scale,
            "clients": self.clients,
            "jobs": self.jobs,
            "settings": dict(self.settings),
        }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> PgbenchWorkload:
        return cls(
            spec.get("mode", Mode.TPCB),
            runtime=spec.get("runtime", DEFAULT_RUNTIME),
            scale=spec.get("scale", DEFAULT_SCALE),
            clients=spec.get("clients", DEFAULT_CLIENTS),
            jobs=spec.get("jobs"),
            settings=spec.get("settings"),
            name=spec.get("name"),
        )

    def bind(self, values: Mapping[str, Any]) -> PgbenchWorkload:
        """This workload with `values` (postgresql.conf options) over its own settings."""
        if not values:
            return self
        return PgbenchWorkload(
            self.mode,
            self.runtime,
            self.scale,
            self.clients,
            self.jobs,
            {**self.settings, **dict(values)},
            self.name,
        )

    @property
    def declared(self) -> Declarations:
        """Judged on throughput; the tail latency must not get more than 20% worse."""
        from stortune.objective import Guardrail, ObjectiveSpec

        return Declarations(
            ObjectiveSpec("tps", Direction.MAX),
            (Guardrail("lat_p99_ms", Direction.MIN, 0.2),),
        )

    def metric_names(self) -> frozenset[str]:
        return frozenset(METRICS)

    @property
    def data_bytes(self) -> int:
        """The database's size, about."""
        return (BASE_MIB + MIB_PER_SCALE * self.scale) * MIB

    @property
    def footprint_bytes(self) -> int:
        """The database, as much again for its growth and the tables pgbench appends to, and
        the WAL PostgreSQL keeps (max_wal_size, a soft limit) with a margin."""
        wal = size_bytes(self.settings.get("max_wal_size", ""), MIB) or DEFAULT_MAX_WAL
        return 2 * self.data_bytes + wal + 64 * MIB

    @property
    def expected_seconds(self) -> float:
        """The runtime, the copy and its write-back when the cache is dropped (a 790 MiB copy
        took 0.6-2.5 s and the whole run 2-4 s more than its runtime here), the server's start
        and stop."""
        return self.runtime + self.data_bytes / (200 * MIB) + 5.0

    def default_timeout(self) -> float:
        return self.runtime * 1.5 + 60.0

    # ---- running --------------------------------------------------------------------------
    def run(self, venue: Venue, timeout: float | None = None) -> Measurement:
        """Copy the template into the venue, start the server, drop the cache, time pgbench;
        the server stopped and the copy removed whatever happens."""
        if venue.directory is None:
            raise TargetError(f"workload {self.name} needs a directory to run in")
        timeout = timeout if timeout is not None else self.default_timeout()
        info: dict[str, Any] = {"workload": self.name, "runtime_requested": self.runtime}
        data = Path(venue.directory) / "pgdata"
        try:
            pg = installation()
            info["postgres_major"] = pg.major
            _reachable(Path(venue.directory), User.named(USER))
            source = template(pg, self.scale, venue.journal)
        except (TargetError, OSError) as exc:
            return Measurement.failed(f"{self.name}: {_one_line(exc)}", **info)
        with scratch_folder(ScratchKind.PGBENCH) as scratch:
            server: Server | None = None
            try:
                user = User.named(USER)
                tmp = own_folder(scratch, user)
                started = time.monotonic()
                copy_cluster(source, data, user)
                info["copy_seconds"] = time.monotonic() - started
                server = Server(pg, data, tmp / "server.log", venue.cgroup, venue.journal)
                server.start(self.settings)
                started = time.monotonic()
                venue.before_measure()  # writes the copy back, empties the cache
                info["settle_seconds"] = time.monotonic() - started
                measurement = self._measure(server, venue, tmp, timeout, info)
            except (TargetError, OSError) as exc:
                measurement = Measurement.failed(f"{self.name}: {_one_line(exc)}", **info)
            finally:
                left = _clean_up(server, data)
        if left is not None:  # the journal keeps the server for the target's teardown
            return Measurement.failed(f"{self.name}: {left}", **measurement.info)
        return measurement

    def _measure(
        self, server: Server, venue: Venue, tmp: Path, timeout: float, info: dict[str, Any]
    ) -> Measurement:
        args = ["-n", "-T", str(int(math.ceil(self.runtime))), "-c", str(self.clients),
                "-j", str(self.jobs), "-l", f"--log-prefix={tmp}/txn"]  # fmt: skip
        if self.mode is Mode.SELECT:
            args.append("-S")
        argv = server.client_argv("pgbench", *args, DATABASE)
        started = time.monotonic()
        with measured_phase(venue, "postgres") as system:
            done = run_group(argv, tmp, timeout)
        info["seconds"] = time.monotonic() - started
        if done is None:
            return Measurement.failed(
                f"{self.name}: pgbench killed after the {timeout:g} s time limit", "timeout", **info
            )
        if done.returncode != 0:
            why = _last_line(done.stderr, done.stdout)
            if server.proc is not None and server.proc.poll() is not None:
                why += f" (the server: {server_problem(server.log_text())})"
            return Measurement.failed(
                f"{self.name}: pgbench exit status {done.returncode}: {why}", **info
            )
        latencies, failed = parse_transaction_logs(sorted(tmp.glob("txn.*")))
        info["failed_transactions"] = failed
        if not latencies:
            return Measurement.failed(f"{self.name}: pgbench finished no transaction", **info)
        tps = _TPS.search(done.stdout)
        connect = _CONNECT.search(done.stdout)
        processed = _PROCESSED.search(done.stdout)
        if connect:
            info["connection_ms"] = float(connect.group(1))
        if processed:
            info["pgbench_transactions"] = int(processed.group(1))
        metrics = {
            "tps": float(tps.group(1)) if tps else len(latencies) / info["seconds"],
            "transactions": float(len(latencies)),
            **latency_metrics(latencies),
        }
        info["tps_source"] = "pgbench" if tps else "transactions / seconds"
        return Measurement({**metrics, **system}, info=info)

    # ---- probing settings -------------------------------------------------------------------
    def probe(self, venue: Venue, values: Mapping[str, Any]) -> str | None:
        """Whether a server starts with `values` (over this workload's settings) and accepts a
        connection, on an empty cluster in the venue's directory: None, or why not in one line.
        ConfigError, before anything starts, for values the workload refuses."""
        try:
            self.show(venue, values, ())
        except (TargetError, OSError) as exc:
            return _one_line(exc)
        return None

    def show(self, venue: Venue, values: Mapping[str, Any], names: Sequence[str]) -> dict[str, str]:
        """What a server started with `values` (over this workload's settings) on an empty
        cluster in the venue's directory says the options `names` are (``SHOW``);
        TargetError saying why it did not start or answer."""
        settings = self.bind(values).settings
        bad = [n for n in names if not _GUC.fullmatch(n)]
        if bad:
            raise ConfigError(f"pgbench: {', '.join(map(repr, bad))} are not option names")
        if venue.directory is None:
            raise TargetError(f"workload {self.name} needs a directory to probe in")
        pg = installation()
        user = User.named(USER)
        _reachable(Path(venue.directory), user)
        source = template(pg, 0, venue.journal)
        data = Path(venue.directory) / "pgprobe"
        with scratch_folder(ScratchKind.PGBENCH) as scratch:
            tmp = own_folder(scratch, user)
            server = Server(pg, data, tmp / "server.log", venue.cgroup, venue.journal)
            try:
                copy_cluster(source, data, user)
                server.start(settings)
                # a write, its commit and a checkpoint: the WAL and data paths the settings
                # change, once each
                server.query("CREATE TABLE stortune_probe AS SELECT 1 AS x", "CHECKPOINT")
                out = server.query(
                    "SELECT n || '|' || current_setting(n) FROM unnest(ARRAY["
                    + ", ".join(f"'{n}'" for n in names)
                    + "]::text[]) AS n"
                )
            finally:
                left = _clean_up(server, data)
        if left is not None:
            raise TargetError(left)
        shown = {}
        for line in out.splitlines():
            name, sep, value = line.partition("|")
            if sep:
                shown[name] = value
        return shown


def _whole(what: str, value: Any, least: int, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ConfigError(f"pgbench {what} {value!r}: a whole number")
    if not least <= value <= most:
        raise ConfigError(f"pgbench {what} {value!r}: from {least} to {most}")
    return int(value)


def _one_line(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) if isinstance(exc, OSError) else None
    if isinstance(exc, OSError) and text:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{text}{where}"
    return " ".join(str(exc).split())[:400]
