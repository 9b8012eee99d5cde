"""A real Ceph 16.2 mini-cluster: it comes up and serves rados bench; runtime and startup
options reach the running daemons; an invalid config is a failed trial after which the cluster
is healthy again; options read at mkfs re-create the OSDs; the existing mode changes only what
it may and puts it back; the space is generated from the live cluster; teardown leaves no
daemon and no file.

All tests share one module-scoped 1-OSD cluster (bring-up is the slow part) and run in file
order; the fixture tears it down even when a test fails, and a cluster left by a killed run in
the fixed state directory is removed by the next one (`recover_stale`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
import yaml
from conftest import ensure_ceph
from typer.testing import CliRunner

from stortune.ceph.client import asok_command
from stortune.ceph.conf import same_value
from stortune.cephspace.metadata import probe_observed
from stortune.cli.ceph import register
from stortune.enums import CampaignKind
from stortune.errors import TargetError
from stortune.measure.campaigns import Measuring, new_campaign
from stortune.measure.log import CampaignLog
from stortune.measure.runner import RunRules
from stortune.measure.tuning import TunePlan, TuneSettings
from stortune.objective import Objective
from stortune.space import Space, load_space
from stortune.store import Store
from stortune.targets import make_target
from stortune.targets.ceph import CephTarget
from stortune.tuners.base import Tuner
from stortune.workloads.rados import RadosWorkload

STATE_DIR = Path(tempfile.mkdtemp(prefix="stortune-ceph-tests-"))  # this run's own
QUICK = {"duration": 3, "prefill": 3, "procs": 1}
TEST_PARAMS = (
    "osd_op_num_shards",
    "osd_client_message_cap",
    "bluestore_cache_kv_ratio",
    "bluestore_cache_meta_ratio",
    "bluestore_min_alloc_size",
    "pg_per_osd",
)


def test_space() -> Space:
    """Parameters of the bundled (generated) space, without its conditions and constraints,
    so that a config the daemons refuse can get through to them."""
    bundled = load_space("ceph")
    params = [dataclasses.replace(bundled[n], condition=None) for n in TEST_PARAMS]
    return Space("ceph-test", params)


test_space.__test__ = False  # a helper, not a test


@pytest.fixture(scope="module")
def target() -> Iterator[CephTarget]:
    ensure_ceph()
    STATE_DIR.mkdir(exist_ok=True)
    started = time.monotonic()
    target = CephTarget(test_space(), osds=1, state_dir=STATE_DIR, health_timeout=120)
    try:
        target.setup()
        print(f"cluster up and healthy in {time.monotonic() - started:.1f} s")
        yield target
    finally:
        target.teardown()
        (STATE_DIR / "localfs.lock").unlink(missing_ok=True)  # the machine lock, free now
        with contextlib.suppress(OSError):
            STATE_DIR.rmdir()


def alive(pid: int) -> bool:
    """A process that still runs (a zombie waiting for this VM's init to reap it does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def osd_pid(target: CephTarget) -> int:
    assert target.cluster is not None
    return target.cluster.pids["osd.0"]


def test_cluster_serves_rados_bench_with_cluster_state(target: CephTarget) -> None:
    for name in ("rados-write", "rados-rand", "rados-seq"):
        measurement = target.run(RadosWorkload.named(name, **QUICK), timeout=120)
        assert measurement.ok, measurement.error
        metrics = measurement.metrics
        assert metrics["bw_mbs"] > 0 and metrics["iops"] > 0 and metrics["ops"] > 0
        assert 0 < metrics["lat_mean_ms"] <= metrics["lat_max_ms"]
        assert metrics["runtime_s"] >= 0.9 * 3
        assert metrics["ceph.osd.0.rss_mb"] > 0 and "ceph.osd.0.cpu_pct" in metrics
        assert "ceph.osd.commit_latency_ms" in metrics and "sys.cpu_idle_pct" in metrics
    assert metrics["ceph.osd.op_r_per_s"] > 0  # the last run read
    state = target.state()
    assert state["ceph.osd.op_r_per_s"] > 0 and "sys.loadavg" in state


def test_runtime_option_reaches_the_daemon_without_a_restart(target: CephTarget) -> None:
    pid = osd_pid(target)
    target.apply({"osd_client_message_cap": 100})
    assert osd_pid(target) == pid
    assert target.running_config("osd.0")["osd_client_message_cap"] == "100"


def test_startup_option_restarts_the_osd_and_shows_in_its_config(target: CephTarget) -> None:
    pid = osd_pid(target)
    target.apply({"osd_client_message_cap": 100, "osd_op_num_shards": 2})
    assert osd_pid(target) != pid
    assert target.cluster is not None
    shown = asok_command(target.cluster.asok("osd.0"), "config get", var="osd_op_num_shards")
    assert shown == {"osd_op_num_shards": "2"}
    assert target.running_config("osd.0")["osd_op_num_shards"] == "2"
    target.apply({})  # back to the defaults: the option leaves the config database
    dump = {e["name"] for e in target.client.json("config", "dump")}
    assert "osd_op_num_shards" not in dump and "osd_client_message_cap" not in dump


class Fixed(Tuner):
    """Asks the given configs in order."""

    def __init__(self, space: Space, configs: list[dict]) -> None:
        super().__init__(space)
        self.configs = list(configs)

    def ask(self) -> dict:
        return self.configs.pop(0)


def test_invalid_config_is_a_failed_trial_and_the_cluster_recovers(
    target: CephTarget, tmp_path: Path
) -> None:
    """kv + meta cache ratios above 1: BlueStore refuses to mount, the OSD exits."""
    bad = {"bluestore_cache_kv_ratio": 0.9, "bluestore_cache_meta_ratio": 0.9}
    workload = RadosWorkload.named("rados-write", duration=2, procs=1)
    settings = TuneSettings(budget=2, repetitions=1)
    with Store(str(tmp_path / "runs.db")) as store:
        campaign = new_campaign(
            store, "invalid", CampaignKind.TUNE, target.space, target, [workload],
            Objective("bw_mbs"), settings.to_dict(), tuner="random",
        )  # fmt: skip
        log = CampaignLog(store, campaign, [workload.name])
        plan = TunePlan(log, [workload], target.space, Fixed(target.space, [bad, {}]), settings)
        Measuring(log, plan, _NoTeardown(target), RunRules(timeout=120)).run()  # type: ignore[arg-type]
        trials = store.trials(campaign.id)
    assert [t.status for t in trials] == ["failed", "ok"]
    assert "osd.0 exited" in trials[0].error and "back at the default config" in trials[0].error
    assert trials[1].value > 0  # the next config is measured on a healthy cluster
    assert same_value(target.running_config("osd.0")["bluestore_cache_kv_ratio"], 0.45)


class _NoTeardown:
    """The shared target inside an experiment, which would tear it down at the end."""

    def __init__(self, target: CephTarget) -> None:
        self._target = target

    def __getattr__(self, name: str):
        return getattr(self._target, name)

    def __enter__(self):
        return self._target

    def __exit__(self, *exc: object) -> None:
        pass


def test_option_read_at_mkfs_recreates_the_osd(target: CephTarget) -> None:
    target.apply({"bluestore_min_alloc_size": 8192})
    assert target.client.json("osd", "metadata", "0")["bluestore_min_alloc_size"] == "8192"
    target.apply({})
    assert target.client.json("osd", "metadata", "0")["bluestore_min_alloc_size"] == "4096"


def test_existing_mode_changes_runtime_options_only_and_puts_them_back(
    target: CephTarget,
) -> None:
    assert target.cluster is not None
    spec = {"kind": "ceph", "mode": "existing", "conf": str(target.cluster.conf)}
    existing = make_target({**spec, "pool": target.pool}, target.space)
    assert isinstance(existing, CephTarget)
    with existing:
        existing.apply({"osd_client_message_cap": 64})
        assert existing.running_config("osd.0")["osd_client_message_cap"] == "64"
        with pytest.raises(TargetError, match="allow restarts"):
            existing.apply({"osd_op_num_shards": 3})
        with pytest.raises(TargetError, match="never re-creates"):
            existing.apply({"bluestore_min_alloc_size": 8192})
        measurement = existing.run(RadosWorkload.named("rados-write", duration=2, procs=1))
        assert measurement.ok, measurement.error
    assert "osd_client_message_cap" not in {e["name"] for e in target.client.json("config", "dump")}
    assert existing.describe()["mode"] == "existing"
    with pytest.raises(TargetError, match="does not exist"):
        make_target({**spec, "pool": "no-such-pool"}, target.space).setup()


def test_probe_tells_observed_from_restart_only_options(target: CephTarget) -> None:
    assert target.cluster is not None
    options = [
        {"name": "osd_client_message_cap", "type": "uint", "can_update_at_runtime": True},
        {"name": "bluestore_cache_size", "type": "size", "can_update_at_runtime": True},
        {"name": "osd_op_num_shards", "type": "int", "can_update_at_runtime": False},
    ]
    observed = probe_observed(options, {"osd": target.cluster.asok("osd.0")})
    assert observed == {"osd_client_message_cap": True, "bluestore_cache_size": False}


def test_space_command_reads_the_live_cluster(target: CephTarget, tmp_path: Path) -> None:
    assert target.cluster is not None
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # a group of one command would hide its name
    out = tmp_path / "ceph.yaml"
    result = CliRunner().invoke(
        app, ["ceph", "space", "--conf", str(target.cluster.conf), "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["total"] >= 1500
    assert summary["washed"] + summary["pruned"] + summary["left"] == summary["total"]
    assert summary["washed_by_reason"]["debugging or logging"] > 50
    space = load_space(str(out))
    assert len(space) == summary["left"] + 1
    assert "osd_op_num_shards" in space and "fsid" not in space
    assert yaml.safe_load(out.read_text())["name"] == "ceph"


def test_teardown_leaves_no_daemon_and_no_file(target: CephTarget) -> None:
    assert target.cluster is not None
    root, conf = target.cluster.root, str(target.cluster.conf)
    pids = dict(target.cluster.pids)
    target.teardown()
    assert not root.exists()
    assert [p.name for p in STATE_DIR.iterdir()] == ["localfs.lock"]  # the machine lock only
    assert not any(alive(pid) for pid in pids.values())
    ours = subprocess.run(["pgrep", "-f", conf], capture_output=True, text=True).stdout
    assert ours.strip() == ""


def test_up_status_down_manage_a_cluster_that_outlives_the_command() -> None:
    ensure_ceph()
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)
    directory = STATE_DIR / "ceph-cli"
    runner = CliRunner()
    try:
        up = runner.invoke(app, ["ceph", "up", "--dir", str(directory), "--json"])
        assert up.exit_code == 0, up.output
        pids = json.loads(up.output)["pids"]
        assert set(pids) == {"mon.a", "mgr.x", "osd.0"}
        status = runner.invoke(app, ["ceph", "status", "--dir", str(directory), "--json"])
        assert json.loads(status.output)["status"] == "HEALTH_OK"
    finally:
        down = runner.invoke(app, ["ceph", "down", "--dir", str(directory)])
    assert down.exit_code == 0, down.output
    assert not directory.exists()
    assert not any(alive(pid) for pid in pids.values())
