"""The pgbench workload on a real PostgreSQL server on a loop-mounted ext4: both modes end to end,
settings that reach the server, a bad value failing in one line, values that could inject lines
into postgresql.conf refused before anything starts, every value of the bundled space accepted,
and a server left behind by a SIGKILLed stortune stopped by the next target's recovery; after
each, no server, data folder, mount or loop device is left."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.localfs import (
    ROOT,
    guarded_state_dir,
    loop_devices_of,
    mounts_under,
    processes_under,
    wait_for,
)

from stortune.errors import ConfigError, TargetError
from stortune.space import load_space
from stortune.system.processes import pid_alive, stop_process
from stortune.targets.localfs import LocalFsTarget
from stortune.workloads.base import Venue
from stortune.workloads.postgres import (
    METRICS,
    Mode,
    PgbenchWorkload,
    installation,
    parse_transaction_logs,
    server_problem,
)


def _have_postgres() -> bool:
    try:
        installation()
        pwd.getpwnam("postgres")
    except (TargetError, KeyError):
        return False
    return True


needs_postgres = pytest.mark.skipif(
    not (ROOT and _have_postgres()),
    reason="needs root and PostgreSQL (Debian's postgresql package, with the postgres user)",
)
QUICK = {"runtime": 3, "scale": 2}  # about 30 MiB of data, 3 s runs


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A folder the postgres user can pass through (pytest's temporary folders are private to
    root), holding the template cache (STORTUNE_STATE_DIR) and the targets' state folders;
    any server a failed test left there is stopped, the folder removed."""
    path = Path(tempfile.mkdtemp(prefix="stortune-pgtest-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for pid in processes_under(path):
            stop_process(pid, None, (signal.SIGQUIT,), 5.0)
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(autouse=True)
def template_cache(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The templates (under STORTUNE_STATE_DIR) built once for the whole file."""
    monkeypatch.setenv("STORTUNE_STATE_DIR", str(base / "pgstate"))


@pytest.fixture(scope="module")
def target(base: Path) -> Iterator[LocalFsTarget]:
    """One ext4 loop target for the run tests, capped like the bench (384 MiB)."""
    guard = guarded_state_dir(base / "module")
    state = next(guard)
    fs = LocalFsTarget("ext4", image_size="1g", state_dir=state, memory_limit="384m")
    try:
        with pytest.MonkeyPatch.context() as patch:  # set up before the tests' own fixtures
            patch.setenv("STORTUNE_RAW_BANDWIDTH", "0")
            fs.setup()
        fs.apply({})
        yield fs
    finally:
        with contextlib.suppress(TargetError):
            fs.teardown()
        next(guard, None)
        assert not mounts_under(base / "module") and not loop_devices_of(base / "module")


def assert_nothing_left(target: LocalFsTarget, venue: Venue, base: Path) -> None:
    assert not processes_under(base), "a server or client is still running"
    assert venue.directory is not None
    assert not (venue.directory / "pgdata").exists()
    assert not (venue.directory / "pgprobe").exists()
    assert target._journal is not None
    assert not [e for e in target._journal.entries if e["op"] == "server"]


# ---- spec, declarations, refusals (no server) ----------------------------------------------
def test_spec_round_trip_bind_and_declarations() -> None:
    workload = PgbenchWorkload("select", runtime=12, scale=7, clients=4, jobs=2)
    assert workload.name == "pgbench-select" and PgbenchWorkload().name == "pgbench"
    bound = workload.bind({"shared_buffers": "64MB", "fsync": False})
    assert bound is not workload and workload.settings == {}
    again = PgbenchWorkload.from_spec(json.loads(json.dumps(bound.describe())))
    assert again.describe() == bound.describe()
    assert again.settings == {"shared_buffers": "64MB", "fsync": False}
    assert again.mode is Mode.SELECT and (again.runtime, again.scale) == (12.0, 7)
    assert bound.bind({"shared_buffers": "32MB"}).settings["shared_buffers"] == "32MB"
    assert workload.bind({}) is workload
    declared = workload.declared
    assert declared.objective is not None and declared.objective.metric == "tps"
    names = {declared.objective.metric, *(g.metric for g in declared.guardrails)}
    assert names <= workload.metric_names() == set(METRICS)
    assert [g.text() for g in declared.guardrails] == ["lat_p99_ms:min:20%"]
    assert str(declared.start) == "cold"
    # the default data set is larger than the bench's 384 MiB cap; WAL room follows max_wal_size
    default = PgbenchWorkload()
    assert default.data_bytes > 384 << 20
    assert default.footprint_bytes > 2 * default.data_bytes + (1 << 30) - 1
    more_wal = default.bind({"max_wal_size": "2048MB"})
    assert more_wal.footprint_bytes == default.footprint_bytes + (1 << 30)
    assert default.expected_seconds > default.runtime


@pytest.mark.parametrize(
    "values",
    [
        {"shared_buffers": "64MB'\nfsync = 'off"},  # a value that would add a line
        {"wal_sync_method": "fsync\nfsync = off"},
        {"synchronous_commit": "off' #"},
        {"wal_compression": "lz4\\"},
        {"fsync = off\nport": 1},  # names that are not option names
        {"fsync=off": True},
        {"include": "/etc/passwd"},  # a directive of postgresql.conf, not an option
        {"port": 5432},  # set by the workload itself
        {"archive_command": "rm -rf /"},  # runs a program
        {"shared_preload_libraries": "auto_explain"},
        {"no_such_option": 1},
    ],
)
def test_unsafe_or_unknown_settings_are_refused_before_anything_starts(
    values: dict, tmp_path: Path
) -> None:
    if "no_such_option" in values and not _have_postgres():
        pytest.skip("which options exist is asked of the installed PostgreSQL")
    with pytest.raises(ConfigError) as refused:
        PgbenchWorkload(**QUICK).bind(values)
    assert "\n" not in str(refused.value)
    with pytest.raises(ConfigError):
        PgbenchWorkload(settings=values)
    with pytest.raises(ConfigError):
        PgbenchWorkload.from_spec({"kind": "pgbench", "settings": values})
    venue = Venue(directory=tmp_path)
    with pytest.raises(ConfigError):
        PgbenchWorkload(**QUICK).probe(venue, values)
    assert list(tmp_path.iterdir()) == []


def test_bad_constructor_values_are_refused() -> None:
    for bad in ({"mode": "write"}, {"runtime": 0}, {"scale": 0}, {"scale": 1.5},
                {"clients": 2, "jobs": 3}, {"clients": True}):  # fmt: skip
        with pytest.raises(ConfigError):
            PgbenchWorkload(**bad)


def test_transaction_logs_and_server_lines_are_read(tmp_path: Path) -> None:
    (tmp_path / "txn.11").write_text("0 0 1500 0 1700000000 1\n1 0 2500 0 1700000000 2\n")
    (tmp_path / "txn.11.1").write_text("2 0 failed 0 1700000000 3\n3 0 500 0 1700000000 4\n")
    latencies, failed = parse_transaction_logs(sorted(tmp_path.glob("txn.*")))
    assert sorted(latencies) == [0.5, 1.5, 2.5] and failed == 1
    log = textwrap.dedent(
        """\
        2026-11-29 15:00:00.000 UTC [42] LOG:  invalid value for parameter "wal_sync_method": "x"
        2026-11-29 15:00:00.000 UTC [42] HINT:  Available values: fsync, fdatasync.
        2026-11-29 15:00:00.000 UTC [42] FATAL:  configuration file "/d/pg.conf" contains errors
        """
    )
    assert server_problem(log) == 'invalid value for parameter "wal_sync_method": "x"'
    assert server_problem("... PANIC:  could not write to file: No space left\n").startswith(
        "could not write"
    )


# ---- real runs ----------------------------------------------------------------------------
@needs_postgres
@pytest.mark.parametrize("mode", list(Mode))
def test_pgbench_runs_end_to_end(target: LocalFsTarget, base: Path, mode: Mode) -> None:
    workload = PgbenchWorkload(mode, **QUICK)
    measurement = target.run(workload, timeout=120)
    assert measurement.ok, measurement.error
    for name in METRICS:
        assert measurement.metrics[name] > 0, name
    metrics = measurement.metrics
    assert metrics["lat_p50_ms"] <= metrics["lat_p95_ms"] <= metrics["lat_p99_ms"]
    assert measurement.info["pgbench_transactions"] == metrics["transactions"]
    assert "sys.loadavg_start" in metrics  # the system sampler ran around pgbench
    # tps is pgbench's own figure; the clients were connected for about the runtime
    assert 0.5 < metrics["tps"] * QUICK["runtime"] / metrics["transactions"] < 1.5
    declared = workload.declared
    assert declared.objective is not None
    for name in (declared.objective.metric, *(g.metric for g in declared.guardrails)):
        assert name in workload.metric_names() and name in metrics
    assert_nothing_left(target, target.venue(workload), base)


@needs_postgres
def test_bound_settings_reach_the_server(target: LocalFsTarget, base: Path) -> None:
    workload = PgbenchWorkload(**QUICK).bind({"shared_buffers": "64MB", "wal_compression": "zstd"})
    venue = target.venue(workload)
    shown = workload.show(
        venue, {"synchronous_commit": False}, ["shared_buffers", "wal_compression",
                                               "synchronous_commit", "listen_addresses"]
    )  # fmt: skip
    assert shown == {
        "shared_buffers": "64MB",
        "wal_compression": "zstd",
        "synchronous_commit": "off",
        "listen_addresses": "",  # no TCP port: a socket only postgres may reach
    }
    # a run's server takes them too: more clients than it accepts fail the run, in one line
    crowded = PgbenchWorkload(**QUICK, clients=8).bind(
        {"max_connections": 3, "superuser_reserved_connections": 0}
    )
    measurement = crowded.run(venue, timeout=60)
    assert not measurement.ok and "\n" not in (measurement.error or "")
    assert "too many clients" in (measurement.error or ""), measurement.error
    assert_nothing_left(target, venue, base)


@needs_postgres
def test_a_refused_value_fails_in_one_line_and_leaves_nothing(
    target: LocalFsTarget, base: Path
) -> None:
    workload = PgbenchWorkload(**QUICK).bind({"wal_sync_method": "bogus"})
    venue = target.venue(workload)
    measurement = workload.run(venue, timeout=60)
    assert not measurement.ok
    assert measurement.error is not None and "\n" not in measurement.error
    assert 'invalid value for parameter "wal_sync_method": "bogus"' in measurement.error
    reason = PgbenchWorkload(**QUICK).probe(venue, {"max_wal_size": "1MB"})
    assert reason is not None and "max_wal_size" in reason and "\n" not in reason
    assert PgbenchWorkload(**QUICK).probe(venue, {}) is None
    assert_nothing_left(target, venue, base)


@needs_postgres
def test_every_value_of_the_bundled_space_starts_a_server(
    target: LocalFsTarget, base: Path
) -> None:
    space = load_space("postgres")
    assert all(p.layer == "postgres" and p.extra["option"] for p in space.parameters)
    risky = {p.name for p in space.parameters if p.extra.get("risk")}
    assert risky == {"fsync", "full_page_writes", "synchronous_commit"}
    defaults = space.workload_values(space.default_config())
    assert defaults["shared_buffers"] == "128MB" and defaults["fsync"] is True
    workload = PgbenchWorkload(**QUICK)
    venue = target.venue(workload)
    # the k-th value of every parameter at once: every value is started once in a few servers
    for k in range(max(len(p.values) for p in space.parameters)):
        config = space.validate({p.name: p.values[k % len(p.values)] for p in space.parameters})
        values = space.workload_values(config)
        assert workload.probe(venue, values) is None, values
    assert_nothing_left(target, venue, base)


# ---- a SIGKILLed stortune -------------------------------------------------------------------
# The journal's owner starts a server the workload's way and is killed. With "keeper", the
# server's parent is a process that outlives the owner (forked from it, it closed its copies
# of the journal's and the state folder's locks), so PDEATHSIG cannot stop the server and only
# the journal can; with "owner", the owner itself started it, as in a run.
CHILD = textwrap.dedent(
    """\
    import os, sys, time
    from stortune.targets.localfs import LocalFsTarget
    from stortune.workloads.launcher import User
    from stortune.workloads.postgres import (
        PgbenchWorkload, Server, copy_cluster, installation, own_folder, template,
    )

    state, parent = sys.argv[1], sys.argv[2]
    target = LocalFsTarget("ext4", image_size="512m", state_dir=state, memory_limit="384m")
    target.setup()
    target.apply({})
    workload = PgbenchWorkload(runtime=3, scale=2)
    venue = target.venue(workload)
    pg = installation()
    data = venue.directory / "pgdata"
    copy_cluster(template(pg, 2), data, User.named("postgres"))

    def start():
        scratch = venue.directory.parent / "scratch"  # on the mount: gone with it
        scratch.mkdir()
        log = own_folder(scratch, User.named("postgres")) / "server.log"
        server = Server(pg, data, log, venue.cgroup, venue.journal)
        server.start({"shared_buffers": "32MB"})
        return server

    if parent == "owner":
        server = start()
        print(server.proc.pid, flush=True)
        time.sleep(600)
    elif os.fork() == 0:  # the keeper
        os.setsid()
        server = start()
        print(server.proc.pid, flush=True)
        os.closerange(3, 1 << 16)  # the journal's and the state folder's locks stay the owner's
        server.proc.wait()
        os._exit(0)
    else:
        time.sleep(600)
    """
)


@needs_postgres
@pytest.mark.parametrize("parent", ["keeper", "owner"])
def test_a_server_left_by_a_killed_stortune_is_stopped_by_recovery(base: Path, parent: str) -> None:
    guard = guarded_state_dir(base / f"crash-{parent}")
    state = next(guard)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(state), parent],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    server = 0
    try:
        line = child.stdout.readline() if child.stdout else ""
        assert line.strip().isdigit(), f"the child started no server: {line!r}"
        server = int(line)
        journals = list(state.glob("journal-*.jsonl"))
        entries = [json.loads(x) for j in journals for x in j.read_text().splitlines()]
        assert [e["pid"] for e in entries if e["op"] == "server"] == [server]
        assert mounts_under(state)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        if parent == "keeper":
            time.sleep(1.0)
            assert pid_alive(server), "the server died with the journal's owner: no journal test"
        else:  # the launcher's PDEATHSIG stops it with its parent
            assert wait_for(lambda: not pid_alive(server), 10)
        after = LocalFsTarget("ext4", image_size="512m", state_dir=state)
        after.setup()  # recovery: the dead owner's journal is undone
        try:
            assert not pid_alive(server)
            assert wait_for(lambda: not processes_under(state), 10)
            assert not mounts_under(state)
            dead = f"localfs-{child.pid}-"  # the killed owner's image and cgroup
            assert not [d for d, image in loop_devices_of(state).items() if dead in image]
            assert not list(Path("/sys/fs/cgroup").glob(f"**/stortune-{child.pid}-*"))
        finally:
            after.teardown()
        assert not list(state.glob("journal-*.jsonl"))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        if child.stdout:
            child.stdout.close()
        if server:
            stop_process(server, None, (signal.SIGQUIT,), 5.0)
        for pid in processes_under(state):
            stop_process(pid, None, (signal.SIGQUIT,), 5.0)
        next(guard, None)
    assert not mounts_under(base / f"crash-{parent}")
    assert not loop_devices_of(base / f"crash-{parent}")
