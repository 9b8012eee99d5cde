"""Shared fixtures: small spaces written to files, a store in a temporary folder."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from stortune.space import Space, parse_space
from stortune.store import Store

REPO = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO.parent / "shared" / "datasets"
STORTUNE = [sys.executable, "-m", "stortune"]

TOY_SPACE = textwrap.dedent(
    """\
    name: toy
    description: a small space with every kind, a condition and two constraints
    parameters:
      block_size: {type: ordinal, values: [1024, 2048, 4096], default: 4096, unit: bytes,
                   layer: mkfs, apply: reformat}
      inode_size: {type: ordinal, values: [128, 256, 512, 1024, 2048], default: 256, unit: bytes}
      journal: {type: categorical, values: [ordered, writeback, journal], default: ordered}
      barrier: {type: bool, default: true, active_when: "journal != 'writeback'"}
      commit: {type: int, low: 1, high: 300, log: true, default: 5, unit: s, apply: remount}
      ratio_a: {type: float, low: 0.0, high: 1.0, default: 0.3}
      ratio_b: {type: float, low: 0.0, high: 1.0, default: 0.3}
    constraints:
      - require: inode_size <= block_size
        message: inode must fit in a block
      - require: ratio_a + ratio_b <= 1
    """
)


def killed_sessions_state_dirs(temp_root: Path) -> list[Path]:
    """State folders that earlier test sessions made under `temp_root` (pytest's base
    temporaries and the cephfs tests' folders): the ones holding a journal or a cluster."""
    folders = set()
    for pattern in ("pytest-of-*/pytest-*/*/", "pytest-of-*/pytest-*/*/*/", "stortune-*-tests-*/"):
        for folder in temp_root.glob(pattern):
            if any(folder.glob("journal-*.jsonl")) or any(folder.glob("ceph-*/")):
                folders.add(folder)
    return sorted(folders)


def undo_killed_sessions(temp_root: Path) -> list[str]:
    """Undo what test processes killed mid-test left (mounts, loop devices, queue and vm
    settings, clusters): their state folders are temporary, so no later target would. Live
    sessions keep theirs: their journals and clusters are locked by their owners."""
    from stortune.ceph import recover_stale
    from stortune.system.journal import recover

    problems = []
    for folder in killed_sessions_state_dirs(temp_root):
        problems += recover(folder)
        recover_stale(folder)
    return problems


@pytest.fixture(autouse=True, scope="session")
def no_leftovers_of_killed_sessions() -> None:
    if os.geteuid() == 0:
        for problem in undo_killed_sessions(Path(tempfile.gettempdir())):
            print(f"could not undo a killed test session's change: {problem}")


@pytest.fixture(autouse=True)
def private_benchmark_lock(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test measures under its own benchmark lock, so tests that run while someone else
    benchmarks on the machine do not collide with them (the lock itself is tested explicitly)."""
    monkeypatch.setenv("STORTUNE_LOCK_DIR", str(tmp_path_factory.mktemp("lock")))


@pytest.fixture(autouse=True)
def private_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Each test's targets keep their images, mounts, clusters and journals in a folder of
    their own (STORTUNE_STATE_DIR), so a test never waits for, or undoes, the state of a
    benchmark running beside the suite."""
    path = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("STORTUNE_STATE_DIR", str(path))
    return path


@pytest.fixture(autouse=True)
def no_disturbance_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Measuring commands run without waiting for a quiet machine (the suite must pass while
    other work, a benchmark among it, runs beside it); the disturbance tests turn it on."""
    monkeypatch.setenv("STORTUNE_CHECK_DISTURBANCE", "0")


@pytest.fixture(autouse=True)
def no_raw_bandwidth(monkeypatch: pytest.MonkeyPatch) -> None:
    """localfs targets skip measuring their device's raw bandwidth (about 9 s per target, each
    test's state folder being new); tests/test_device_accounting.py turns it on."""
    monkeypatch.setenv("STORTUNE_RAW_BANDWIDTH", "0")


@pytest.fixture(autouse=True)
def private_store(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The default results store (STORTUNE_STORE) of a test is its own, never the working
    folder's stortune.db."""
    path = tmp_path_factory.mktemp("store") / "stortune.db"
    monkeypatch.setenv("STORTUNE_STORE", str(path))
    return path


@pytest.fixture
def toy_space() -> Space:
    return parse_space(TOY_SPACE, "toy.yaml")


@pytest.fixture
def toy_space_file(tmp_path: Path) -> Path:
    path = tmp_path / "toy.yaml"
    path.write_text(TOY_SPACE)
    return path


@pytest.fixture
def store(tmp_path: Path) -> Store:
    with Store(str(tmp_path / "results.db")) as db:
        yield db


@pytest.fixture
def quiet_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fixed machine fingerprint: no `fio --version` or /sys reads while the tests run (the
    report tests ask for it with `pytest.mark.usefixtures`)."""
    from stortune.measure import runner as measure_runner

    fingerprint = {"hostname": "testhost", "kernel": "6.1.0-test", "cores": 2, "fio": "fio-3.33"}
    monkeypatch.setattr(measure_runner.environment, "fingerprint", lambda: dict(fingerprint))


@pytest.fixture
def drifting(tmp_path: Path) -> Any:
    """A command target on a machine that doubles its speed over a sweep (`fixtures.sweep`)."""
    from fixtures.sweep import drifting_target

    return drifting_target(tmp_path)


PG_BIN = Path("/usr/lib/postgresql/15/bin")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def postgres_url() -> Any:
    """A private PostgreSQL server on 127.0.0.1 with an empty database, as the URL a user
    types; stopped and removed afterwards. Needs root (the server runs as `postgres`)."""
    if os.geteuid() != 0 or not PG_BIN.is_dir():
        pytest.skip("starting a private PostgreSQL server here needs root and PostgreSQL 15")
    pytest.importorskip("psycopg", reason="the postgres extra is installed by `make test`")
    # pytest's own temporary folders are private to root; the server runs as `postgres`
    data = Path(tempfile.mkdtemp(prefix="stortune-pg-"))
    shutil.chown(data, "postgres", "postgres")
    port = free_port()

    def as_postgres(*args: str, check: bool = True) -> None:
        command = ["runuser", "-u", "postgres", "--", *args]
        subprocess.run(command, check=check, capture_output=True, timeout=120, cwd="/")

    pg_ctl = str(PG_BIN / "pg_ctl")
    as_postgres(str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
    server = f"-h 127.0.0.1 -p {port} -k {data}"
    as_postgres(pg_ctl, "-D", str(data), "-w", "-l", str(data / "log"), "-o", server, "start")
    try:
        as_postgres(str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(port), "stortune")
        yield f"postgresql://postgres@127.0.0.1:{port}/stortune"
    finally:
        as_postgres(pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop", check=False)
        shutil.rmtree(data, ignore_errors=True)


def ensure_ceph() -> None:
    """Install Debian's Ceph packages when missing (root only), as `make test` would."""
    tools = ("ceph-osd", "ceph-mds", "ceph-fuse", "getfattr", "prometheus-node-exporter")
    if all(shutil.which(tool) for tool in tools):
        return
    if os.geteuid() != 0:
        pytest.skip("Ceph is not installed and installing it needs root")
    started = time.monotonic()
    subprocess.run([str(REPO / "scripts" / "install-system.sh")], check=True, timeout=900)
    print(f"installed Ceph in {time.monotonic() - started:.0f} s")


# ---- which tests may run at the same time ----------------------------------------------------
# `make test` runs the suite on two pytest-xdist workers. Each file's tests stay together, in file
# order, on one worker (their module fixtures, a cluster or a target, are built once). Files that
# set machine-wide things (vm sysctls, fio and mounts of the localfs target, a PostgreSQL server)
# form one group and run one after the other; the Ceph files form another; the files in PURE
# compute only and run beside either. A new file joins the machine group until it is listed.
# Files marked `quiet` judge other processes' load (the disturbance checks): they run alone,
# after the parallel part (`-m quiet`).
CEPH = {"test_ceph_cluster", "test_ceph_tune", "test_cephfs_target", "test_cephfs_existing",
        "test_ceph_workload"}  # fmt: skip
PURE = {
    "test_app_spaces", "test_architecture", "test_campaign_best", "test_ceph_space", "test_cli",
    "test_contracts", "test_datasets",
    "test_ddpg_resume", "test_effects", "test_exporters", "test_fio_parse", "test_fuzz",
    "test_importance_carver", "test_importance_cli", "test_importance_fanova",
    "test_importance_lasso", "test_importance_study", "test_models_cli", "test_models_crossval",
    "test_models_cubist", "test_models_evaluation", "test_models_network", "test_models_search",
    "test_models_small", "test_models_surrogate", "test_models_techniques", "test_objective",
    "test_peer_bridge", "test_plots", "test_racing", "test_reference", "test_report_browser",
    "test_report_findings", "test_sampling", "test_sources", "test_space", "test_space_expr",
    "test_space_loader", "test_stats", "test_store", "test_store_upgrade", "test_tuners",
    "test_tuners_bestconfig", "test_tuners_ddpg", "test_tuners_flash", "test_tuners_pool",
    "test_tuners_trust",
    "test_tuners_repeats", "test_tuners_synthetic", "test_model_workflow", "test_resume_risks",
    "test_toy_target", "test_values", "test_rank_methods", "test_rank_workloads",
    "test_profile_model", "test_cli_output", "test_campaign_lease", "test_cluster",
    "test_parallel_plan",
}  # fmt: skip
LONGEST_FIRST = ("machine", "ceph")  # the two long groups start at once, one on each worker


def group_of(nodeid: str) -> str:
    """The group a test runs in (see above), from its node id (tests/test_x.py::test_y)."""
    stem = Path(nodeid.split("::", 1)[0]).stem
    if stem in CEPH:
        return "ceph"
    return stem if stem in PURE else "machine"


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scope scheduling with the groups above as its scopes (xdist's own `xdist_group`
    marks are lost under pytest 9's node ids)."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            for group in LONGEST_FIRST:
                if group in self.workqueue:
                    self.workqueue.move_to_end(group, last=False)
                    break
            super()._assign_work_unit(node)

    return GroupScheduling(config, log)


# ---- the engine, as tests drive it -----------------------------------------------------------
def tune(
    store: Store,
    name: str,
    space: Space,
    target: Any,
    objective: str | list[str] = "score",
    *,
    tuner: str = "random",
    seed: int = 0,
    workloads: Any = None,
    rules: Any = None,
    verify: int = 0,
    verify_max: int | None = None,
    on_event: Any = None,
    guardrails: Any = (),
    **settings: Any,
) -> Any:
    """A tuning campaign through the workflow every command uses (`workflows.tune`);
    `on_event` sees the runner's events."""
    from stortune.measure.runner import RunRules
    from stortune.measure.tuning import TuneSettings
    from stortune.objective import Objective
    from stortune.workflows.tune import TuneJob, start_tuning

    texts = [objective] if isinstance(objective, str) else list(objective)
    job = TuneJob(
        space=space,
        target=target,
        workloads=list(workloads) if workloads is not None else [None],
        objective=Objective.of(texts).with_guardrails(guardrails),
        settings=TuneSettings(**settings),
        rules=rules or RunRules(),
        tuner=tuner,
        seed=seed,
        name=name,
        verify=verify,
        verify_max=verify_max,
    )
    return start_tuning(store, job, EventsTo(on_event) if on_event else None)


class EventsTo:
    """A reporter that hands every measuring phase's events to one function."""

    def __init__(self, on_event: Any) -> None:
        self.on_event = on_event

    def note(self, text: str) -> None:
        pass

    def measuring(self, label: str, measuring: Any) -> Any:
        from contextlib import nullcontext

        return nullcontext(self.on_event)


def sweep(
    store: Store,
    name: str,
    space: Space,
    target: Any,
    metric: str,
    configs: list[dict[str, Any]],
    *,
    repetitions: int = 2,
    reference_every: int = 5,
    seed: int = 0,
    workloads: Any = None,
    rules: Any = None,
) -> Any:
    """A stored sweep ready to measure (`Measuring`; `.run(on_event)` measures it)."""
    from stortune.measure.runner import RunRules
    from stortune.measure.sweeping import SweepSettings
    from stortune.objective import Objective
    from stortune.workflows.sweep import new_sweep

    return new_sweep(
        store,
        name,
        space,
        target,
        list(workloads) if workloads is not None else [None],
        Objective(metric),
        configs,
        SweepSettings(repetitions, reference_every, seed),
        rules or RunRules(),
    )


def stored_localfs_campaign(
    store: Store,
    name: str,
    changes: dict[str, Any],
    objective: tuple[str, str],
    values: tuple[float, float],
) -> None:
    """A tuned localfs campaign of two evaluations, the default's and a best config holding
    `changes`, stored by hand (no root needed): for what reads a campaign (a recommendation,
    a headline), not for the measuring."""
    import yaml

    from stortune.space import load_space

    space = load_space("localfs")
    best = space.validate({**space.default_config(), **changes})
    metric, direction = objective
    campaign = store.create_campaign(
        name,
        kind="tune",
        space_name="localfs",
        space_yaml=yaml.safe_dump(space.to_dict(), sort_keys=False),
        target={"kind": "localfs", "image_size": "2g"},
        workload={"workloads": [{"kind": "fio", "job": "dbserver", "name": "dbserver"}]},
        objective={"metric": metric, "direction": direction},
        tuner="tpe",
    )
    for seq, (config, value) in enumerate(zip((space.default_config(), best), values, strict=True)):
        trial = store.add_trial(campaign.id, seq, config, {"source": "default"} if not seq else {})
        now = time.time()
        store.add_run(
            campaign.id, trial, workload="dbserver", repetition=0, status="ok",
            metrics={metric: value}, started_at=now, ended_at=now + 1,
        )  # fmt: skip
        store.finish_trial(trial, "ok", value)
