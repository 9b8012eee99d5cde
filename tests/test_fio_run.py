"""fio really running (in a temporary folder, no root needed): metrics of a real report, and the
runs that must not count: fio failing, hanging past the timeout, or stopping early."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from stortune.system.sysmetrics import SystemSampler, snapshot
from stortune.workloads import FioWorkload, parse_fio_output

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")

READER = """\
[reader]
directory=${DIR}
filename=data
size=${SIZE}
bs=4k
rw=randread
ioengine=psync
time_based=1
runtime=${RUNTIME}
thread=1
"""


def job(text: str, **kwargs) -> FioWorkload:
    return FioWorkload("job.fio", text=text, **kwargs)


def fio_in(folder: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and os.readlink(proc / "cwd") == str(folder)
                and (proc / "comm").read_text().strip() == "fio"
            ):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_real_report_parses_consistently(tmp_path: Path) -> None:
    text = job(READER, runtime=1, size="4m").render(tmp_path)
    (tmp_path / "job.fio").write_text(text)
    out = subprocess.run(
        ["fio", "--output-format=json", "job.fio"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    m = parse_fio_output(out)
    raw = json.loads(out[out.index("{") :])["jobs"][0]
    assert m["read.iops"] == pytest.approx(raw["read"]["total_ios"] / (raw["job_runtime"] / 1e3))
    assert m["read.bw_mbs"] == pytest.approx(m["read.iops"] * 4096 / 2**20)
    assert m["read.lat_p50_ms"] <= m["read.lat_p99_ms"] <= m["read.lat_p999_ms"]
    assert m["write.iops"] == 0 and "write.lat_mean_ms" not in m
    assert 0.9 <= m["runtime_s"] <= 1.5


def test_workload_run_has_fio_and_system_metrics(tmp_path: Path) -> None:
    w = job(READER, runtime=2, size="4m")
    w.prepare(tmp_path)
    assert (tmp_path / "data").stat().st_size == 4 << 20
    m = w.measure(tmp_path, timeout=30)
    assert m.ok, m.error
    assert m.metrics["read.iops"] > 0 and m.metrics["runtime_s"] >= 1.8
    for name in (
        "sys.cpu_idle_pct",
        "sys.cpu_iowait_pct",
        "sys.mem_used_mb",
        "sys.dirty_mb",
        "sys.writeback_mb",
        "sys.loadavg_start",
        "sys.loadavg_end",
        "sys.other_io_mb",
    ):
        assert name in m.metrics
    assert 0 <= m.metrics["sys.cpu_idle_pct"] <= 100
    assert m.info["fio_version"].startswith("fio-")


def test_fio_failure_is_a_failed_measurement(tmp_path: Path) -> None:
    m = job("[bad]\ndirectory=${DIR}\nioengine=nonsense\nsize=1m\nrw=read\n").measure(tmp_path, 30)
    assert m.status == "failed"
    assert "engine nonsense not loadable" in m.error and "\n" not in m.error


def test_timeout_kills_fio_and_says_so(tmp_path: Path) -> None:
    slow = READER + "rate_iops=10\n"
    started = time.monotonic()
    m = job(slow, size="1m").measure(tmp_path, timeout=1.5, runtime=30)
    assert m.status == "timeout" and "1.5 s" in m.error
    assert time.monotonic() - started < 10
    assert fio_in(tmp_path) == []


def test_short_run_is_rejected(tmp_path: Path) -> None:
    """MEASURING.md's trap: file_append makes one pass under time_based, with absurd IOPS."""
    append = (
        "[append]\ndirectory=${DIR}\nfilename=log\nsize=1m\nfile_append=1\nrw=write\n"
        "bs=4k\ntime_based=1\nruntime=${RUNTIME}\n"
    )
    m = job(append).measure(tmp_path, timeout=30, runtime=2)
    assert m.status == "failed" and "of the 2 s asked" in m.error


def test_sampler_summarises_and_snapshot_reads_gauges() -> None:
    sampler = SystemSampler(["loop0"], interval=0.2).start()
    time.sleep(0.7)
    summary = sampler.stop()
    assert summary["sys.cpu_idle_pct_max"] >= summary["sys.cpu_idle_pct"] - 1e-9
    assert summary["sys.mem_used_mb"] > 0 and "sys.loadavg_end" in summary
    assert snapshot()["sys.loadavg"] >= 0
