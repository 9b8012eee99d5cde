"""rados bench workloads without a cluster: parsing reports, combining processes and rounds,
specs, and the cluster-side metrics computed from perf dumps."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from stortune.ceph import perf
from stortune.ceph.health import Health
from stortune.errors import ConfigError
from stortune.workloads import make_workload
from stortune.workloads.rados import BenchResult, RadosWorkload, summarize

WRITE = (
    "hints = 1\n"
    '{"concurrent_ios":"16","total_time_run":"5.005489","total_writes_made":"10860",'
    '"write_size":"16384","object_size":"16384","bandwidth":"33.900284","average_iops":"2169",'
    '"stddev_iops":"-2063162448","average_latency":"0.007369","max_latency":"0.344962",'
    '"min_latency":"0.001661"}\n'
)
READ = (
    '{"total_time_run":"1.545583","total_reads_made":"10860","read_size":"16384",'
    '"object_size":"16384","bandwidth":"109.788635","average_iops":"7026",'
    '"average_latency":"0.002270","max_latency":"0.019290","min_latency":"0.000252"}'
)


def test_bench_report_is_parsed_after_its_hints_line() -> None:
    result = BenchResult.parse(WRITE)
    assert result == BenchResult(10860, 5.005489, 16384, 0.007369, 0.344962, 0.001661)
    assert BenchResult.parse(READ).ops == 10860
    with pytest.raises(ValueError, match="no rados bench report"):
        BenchResult.parse("error opening pool stortune-bench\n")


def test_processes_add_up_and_rounds_follow_each_other() -> None:
    one = BenchResult.parse(WRITE)
    metrics = summarize([[one, one]])
    assert metrics["ops"] == 2 * 10860
    assert metrics["bw_mbs"] == pytest.approx(2 * 10860 * 16384 / 2**20 / 5.005489)
    assert metrics["lat_mean_ms"] == pytest.approx(7.369)
    assert metrics["lat_max_ms"] == pytest.approx(344.962)
    read = BenchResult.parse(READ)
    rounds = summarize([[read], [read]])
    assert rounds["runtime_s"] == pytest.approx(2 * 1.545583)
    assert rounds["iops"] == pytest.approx(10860 / 1.545583)


def test_presets_scale_sapphire_table_4_and_specs_round_trip() -> None:
    rand = RadosWorkload.named("rados-rand")
    assert (rand.mode, rand.object_bytes, rand.concurrency, rand.procs) == ("rand", 16384, 16, 2)
    assert rand.prefill == rand.duration == 10.0
    assert RadosWorkload.named("rados-write").prefill == 0.0
    spec = RadosWorkload.named("rados-seq", duration=3, procs=1).describe()
    again = make_workload(spec)
    assert isinstance(again, RadosWorkload) and again.describe() == spec
    for bad in ({"mode": "append"}, {"procs": 0}, {"duration": 0.5}, {"colour": "red"}):
        with pytest.raises(ConfigError):
            RadosWorkload.from_spec(bad)
    with pytest.raises(ConfigError, match="rados-rand"):
        RadosWorkload.named("rados-random")


def test_perf_counters_become_rates_means_and_gauges() -> None:
    before = {"osd": {"op_w": 100, "op_latency": {"avgcount": 100, "sum": 1.0}, "op_wip": 3}}
    after = {
        "osd": {"op_w": 300, "op_latency": {"avgcount": 300, "sum": 3.0}, "op_wip": 1},
        "bluestore": {"bluestore_buffer_bytes": 2 * 2**20},
    }
    one = perf.osd_metrics(before, after, seconds=2.0)
    assert one["op_w_per_s"] == 100.0
    assert one["op_latency_ms"] == pytest.approx(10.0)
    assert one["op_wip"] == 1 and one["buffer_mb"] == 2.0
    both = perf.cluster_metrics({0: one, 1: one})
    assert both["ceph.osd.op_w_per_s"] == 200.0  # rates add up over OSDs
    assert both["ceph.osd.op_latency_ms"] == pytest.approx(10.0)  # latencies average
    assert both["ceph.osd.1.op_wip"] == 1
    info = {"id": 0, "perf_stats": {"commit_latency_ms": 9}}
    perf_json = {"osdstats": {"osd_perf_infos": [info]}}
    assert perf.osd_perf(perf_json)[0]["commit_latency_ms"] == 9.0


def test_health_says_what_is_missing() -> None:
    status = {
        "health": {"status": "HEALTH_WARN", "checks": {"OSD_DOWN": {}}},
        "osdmap": {"num_up_osds": 1, "num_in_osds": 2},
        "pgmap": {"num_pgs": 33, "pgs_by_state": [{"state_name": "active+clean", "count": 33}]},
    }
    health = Health.parse(status)
    assert health.problem(2, ()) == "1 of 2 OSDs up, 2 in"
    assert health.problem(1, ()) == "HEALTH_WARN: OSD_DOWN"
    assert health.problem(1, {"OSD_DOWN"}) is None


class FakeCluster:
    """Two OSDs whose write counters grow between the sampler's start and stop."""

    osd_ids = [0, 1]

    def __init__(self) -> None:
        self.calls = 0

    def perf_dump(self, osd: int) -> dict:
        self.calls += 1
        return {"osd": {"op_w": 0 if self.calls <= 2 else 50}}

    def osd_perf(self) -> dict:
        return {"osd_perf_infos": [{"id": 1, "perf_stats": {"apply_latency_ms": 4}}]}

    def daemon_usage(self) -> dict:
        return {"osd.0": (1.0 + self.calls, 200.0), "mon.a": None}


def test_cluster_sampler_reports_per_osd_and_cluster_metrics() -> None:
    sampler = perf.ClusterSampler(FakeCluster())
    sampler.start()
    metrics = sampler.stop()
    assert metrics["ceph.osd.0.op_w_per_s"] > 0 and metrics["ceph.osd.1.op_w_per_s"] > 0
    assert metrics["ceph.osd.op_w_per_s"] == pytest.approx(2 * metrics["ceph.osd.0.op_w_per_s"])
    assert metrics["ceph.osd.1.apply_latency_ms"] == 4.0
    assert metrics["ceph.osd.0.rss_mb"] == 200.0 and metrics["ceph.osd.0.cpu_pct"] > 0
    assert not any(k.startswith("ceph.mon.a") for k in metrics)


def test_an_interrupted_cleanup_leaves_no_rados_process_behind() -> None:
    """Ctrl-C or SIGTERM while `rados cleanup` runs: every cleanup process is killed, none is
    left hanging against a cluster that teardown then removes."""
    import signal
    import sys

    marker = f"stortune-cleanup-test-{os.getpid()}"
    hang = [sys.executable, "-c", "import time; time.sleep(60)", marker]

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(1)
    try:
        with pytest.raises(KeyboardInterrupt):
            RadosWorkload.named("rados-write")._cleanup(hang, ["a", "b"], time.monotonic() + 30)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    time.sleep(0.3)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert left.strip() == ""


def test_a_socket_path_too_long_to_bind_moves_to_a_short_stable_one(tmp_path: Path) -> None:
    import socket

    from stortune.ceph.client import SOCKET_PATH_MAX, short_socket_path

    short = tmp_path / "c.asok"
    assert short_socket_path(short) == short
    deep = tmp_path / ("d" * 120) / "client.fuse.asok"
    moved = short_socket_path(deep)
    assert moved != deep and moved == short_socket_path(deep)  # the same long path, same name
    assert len(str(moved)) <= SOCKET_PATH_MAX
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(moved))  # binds where the long path could not
    moved.unlink()


def test_a_cluster_too_deep_for_its_sockets_gets_a_short_socket_folder(tmp_path: Path) -> None:
    from stortune.ceph.client import SOCKET_PATH_MAX
    from stortune.ceph.local import LocalCluster

    shallow = LocalCluster(tmp_path / "c", osds=1)
    assert shallow.asok("osd.0") == tmp_path / "c" / "run" / "ceph-osd.0.asok"
    deep = LocalCluster(tmp_path / ("d" * 80) / "c", osds=1)
    assert not deep.sockets.is_relative_to(deep.root)
    assert deep.sockets == LocalCluster(deep.root, osds=1).sockets  # found again after a restart
    assert all(len(str(deep.asok(name))) <= SOCKET_PATH_MAX for name in ("osd.12", "mds.a"))
