"""fio job templates, placeholders and the report parser, without running a benchmark."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from stortune.errors import ConfigError
from stortune.units import parse_size
from stortune.workloads import TEMPLATES, FioWorkload, make_workload, parse_fio_output


def _lat(mean: float, n: int, **pct: int) -> dict:
    out = {"min": 0, "max": 0, "mean": mean, "N": n}
    if pct:
        names = {"p50": "50.000000", "p99": "99.000000", "p999": "99.900000"}
        out["percentile"] = {names[k]: v for k, v in pct.items()}
    return out


def _dir(io_bytes: int, ios: int, clat: dict, lat: dict) -> dict:
    return {
        "io_bytes": io_bytes,
        "bw_bytes": 0,
        "iops": 0.0,
        "runtime": 1001,
        "total_ios": ios,
        "clat_ns": clat,
        "lat_ns": lat,
    }


_IDLE = _dir(0, 0, _lat(0.0, 0), _lat(0.0, 0))

# Trimmed from a real fio 3.33 --output-format=json report: a psync random reader and a random
# writer with fsync=8, 4 KiB, 1 s, preceded by a line fio printed before its JSON.
FIXTURE = "fio: this line came before the report\n" + json.dumps(
    {
        "fio version": "fio-3.33",
        "global options": {"bs": "4k", "time_based": "1", "runtime": "1", "ioengine": "psync"},
        "jobs": [
            {
                "jobname": "reader",
                "groupid": 0,
                "error": 0,
                "job_runtime": 1000,
                "job options": {"rw": "randread"},
                "read": _dir(
                    22790144,
                    5564,
                    _lat(178237.490474, 5564, p50=62720, p99=3981312, p999=8847360),
                    _lat(178343.702732, 5564),
                ),
                "write": _IDLE,
                "trim": _IDLE,
                "sync": {"total_ios": 0, "lat_ns": _lat(0.0, 0)},
            },
            {
                "jobname": "writer",
                "groupid": 0,
                "error": 0,
                "job_runtime": 1000,
                "job options": {"rw": "randwrite", "fsync": "8"},
                "read": _IDLE,
                "write": _dir(
                    20480000,
                    5000,
                    _lat(9970.237, 5000, p50=3984, p99=44800, p999=2211840),
                    _lat(10071.7912, 5000),
                ),
                "trim": _IDLE,
                "sync": {
                    "total_ios": 625,
                    "lat_ns": _lat(1506013.6576, 625, p50=501760, p99=9240576, p999=18743296),
                },
            },
        ],
    },
    indent=1,
)


def test_parse_saved_report() -> None:
    m = parse_fio_output(FIXTURE)
    assert m["runtime_s"] == 1.0 and m["error"] == 0
    assert m["read.bw_mbs"] == pytest.approx(22790144 / 2**20)
    assert m["read.iops"] == 5564
    assert m["read.lat_mean_ms"] == pytest.approx(0.178343702732)
    assert m["read.lat_p50_ms"] == pytest.approx(0.06272)
    assert m["read.lat_p99_ms"] == pytest.approx(3.981312)
    assert m["read.lat_p999_ms"] == pytest.approx(8.84736)
    assert m["write.iops"] == 5000
    assert m["write.bw_mbs"] == pytest.approx(20480000 / 2**20)
    assert m["write.lat_p99_ms"] == pytest.approx(0.0448)
    assert m["total.iops"] == 10564
    assert m["total.bw_mbs"] == pytest.approx(m["read.bw_mbs"] + m["write.bw_mbs"])
    mean = (178343.702732 * 5564 + 10071.7912 * 5000) / 10564 / 1e6
    assert m["total.lat_mean_ms"] == pytest.approx(mean)
    assert m["read.lat_p50_ms"] > m["total.lat_p50_ms"] > m["write.lat_p50_ms"]
    assert m["sync.iops"] == 625
    assert m["sync.lat_mean_ms"] == pytest.approx(1.5060136576)
    assert m["sync.lat_p99_ms"] == pytest.approx(9.240576)


def test_parse_merges_histograms_of_json_plus() -> None:
    """json+ histograms give exact percentiles over all jobs (not an average of theirs)."""

    def job(bins: dict[str, int]) -> dict:
        n = sum(bins.values())
        clat = {**_lat(1e6, n, p50=1, p99=1, p999=1), "bins": bins}
        return {
            "jobname": "j",
            "groupid": 0,
            "error": 0,
            "job_runtime": 2000,
            "read": _dir(4096 * n, n, clat, _lat(1e6, n)),
            "write": _IDLE,
        }

    report = {"jobs": [job({"1000000": 98, "9000000": 2}), job({"2000000": 100})]}
    m = parse_fio_output(json.dumps(report))
    assert m["read.iops"] == 100  # 200 I/Os over the 2 s both jobs ran
    assert m["read.lat_p50_ms"] == 2.0  # the 100th of 200 sorted latencies (not 1.5)
    assert m["read.lat_p99_ms"] == 2.0
    assert m["read.lat_p999_ms"] == 9.0


def test_parse_counts_metadata_engines_apart() -> None:
    """filestat/filecreate report their operations as reads: they must not become read MB/s."""
    stat = {
        "jobname": "stat",
        "groupid": 0,
        "error": 0,
        "job_runtime": 1000,
        "job options": {"ioengine": "filestat"},
        "read": _dir(4096 * 900, 900, _lat(5000.0, 900), _lat(5000.0, 900)),
        "write": _IDLE,
    }
    m = parse_fio_output(json.dumps({"jobs": [stat]}))
    assert m["read.bw_mbs"] == 0 and m["read.iops"] == 0
    assert m["meta.iops"] == 900
    assert m["meta.lat_mean_ms"] == pytest.approx(0.005)


def test_parse_rejects_output_without_a_report() -> None:
    with pytest.raises(ValueError, match="no fio JSON report"):
        parse_fio_output("fio: engine nonsense not loadable\n")
    with pytest.raises(ValueError, match="no fio JSON report"):
        parse_fio_output('{"not": "fio"}')


def test_placeholders_fill_and_divide(tmp_path: Path) -> None:
    w = FioWorkload("fileserver", runtime=3, size="64m")
    text = w.render(tmp_path)
    assert f"directory={tmp_path}" in text and "runtime=3" in text
    assert "nrfiles=64" in text  # 64 MiB / (8 jobs x 128 KiB)
    assert f"size={64 * 2**20 // 8}" in text
    assert "${" not in text
    custom = "[j]\ndirectory=${DIR}\nsize=${SIZE/3}\nbs=${BS}\nruntime=${RUNTIME}\n"
    text = FioWorkload("j.fio", text=custom, size=10, variables={"BS": "4k"}).render(tmp_path)
    assert "size=3" in text and "bs=4k" in text
    with pytest.raises(ConfigError, match=r"unknown placeholder \$\{OTHER\}"):
        FioWorkload("j.fio", text="[j]\nsize=${OTHER}\n")


def test_jobs_may_not_leave_their_directory(tmp_path: Path) -> None:
    for line in (
        "filename=/dev/vda",
        "directory=/etc",
        "filename=a:../../x",
        "opendir=/",
        "filename_format=/dev/sd$jobnum",
        "include /tmp/other.fio",
    ):
        with pytest.raises(ConfigError, match="directory|leaves|include"):
            FioWorkload("j.fio", text=f"[j]\ndirectory=${{DIR}}\n{line}\n").render(tmp_path)
    FioWorkload("j.fio", text="[j]\nfilename=${DIR}/a:b\n").render(tmp_path)


def test_spec_round_trip_and_make_workload(tmp_path: Path) -> None:
    for job in ("varmail", "oltp", "seqread"):
        w = FioWorkload(job, runtime=5)
        again = make_workload(w.describe())
        assert again.describe() == w.describe() and again.text == w.text
    assert FioWorkload("varmail").name == "mailserver"
    path = tmp_path / "mine.fio"
    path.write_text("[mine]\ndirectory=${DIR}\nsize=${SIZE}\n")
    spec = FioWorkload(path, size="8m").describe()
    path.write_text("changed")  # the spec keeps the text that ran
    again = make_workload(spec)
    assert again.name == "mine" and "size=${SIZE}" in again.text
    with pytest.raises(ConfigError, match="unknown workload kind"):
        make_workload({"kind": "nfsbench"})
    with pytest.raises(ConfigError, match="unknown fio template"):
        FioWorkload("postmark")


def test_parse_size() -> None:
    assert parse_size("256m") == 256 << 20
    assert parse_size("1g") == 1 << 30
    assert parse_size("512KiB") == 512 << 10
    assert parse_size(4096) == 4096
    for bad in ("-1m", "lots", 0, True):
        with pytest.raises(ConfigError):
            parse_size(bad)


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
@pytest.mark.parametrize("template", TEMPLATES)
def test_templates_parse_in_fio(template: str, tmp_path: Path) -> None:
    job = tmp_path / "job.fio"
    job.write_text(FioWorkload(template).render(tmp_path))
    proc = subprocess.run(["fio", "--parse-only", str(job)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr or proc.stdout
    header = FioWorkload(template).text.splitlines()[0]
    assert header.startswith(f"# {template}:")


# ---- per-job metrics, on real fio reports -------------------------------------------------
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")

MIXED_JOB = """\
[global]
directory={dir}
time_based=1
runtime=1
thread=1
ioengine=psync
bs=4k
size=4m
{extra}
[reader]
rw=randread
numjobs=2

[logger]
filename=log.dat
rw=write
fdatasync=1

[read]
rw=randwrite
name=read
"""


def _fio_report(tmp_path: Path, text: str) -> tuple[str, dict]:
    """Run fio (json+) on a job text in `tmp_path`; its report, as text and parsed."""
    (tmp_path / "d").mkdir(exist_ok=True)
    job = tmp_path / "job.fio"
    job.write_text(text.format(dir=tmp_path / "d", extra=""))
    out = tmp_path / "out.json"
    done = subprocess.run(
        ["fio", "--output-format=json+", f"--output={out}", str(job)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    report = out.read_text()
    return report, json.loads(report[report.index("{") :])


@needs_fio
def test_each_job_has_its_own_metrics_clones_merged(tmp_path: Path) -> None:
    report, data = _fio_report(tmp_path, MIXED_JOB)
    m = parse_fio_output(report)
    jobs = data["jobs"]
    readers = [j for j in jobs if j["jobname"] == "reader"]
    assert len(readers) == 2  # numjobs clones: one entry each, one name
    wall = max(j["job_runtime"] for j in jobs) / 1000
    ios = sum(j["read"]["total_ios"] for j in readers)
    assert m["reader.read.iops"] == pytest.approx(ios / wall)
    moved = sum(j["read"]["io_bytes"] for j in readers)
    assert m["reader.read.bw_mbs"] == pytest.approx(moved / 2**20 / wall)
    assert m["reader.write.iops"] == 0 and "reader.write.lat_p99_ms" not in m
    # the clones' histograms merged: the p99 lies within the largest of the bins of both
    bins = sorted((int(v), c) for j in readers for v, c in j["read"]["clat_ns"]["bins"].items())
    total, seen = sum(c for _, c in bins), 0
    for value, count in bins:
        seen += count
        if seen >= 0.99 * total:
            assert m["reader.read.lat_p99_ms"] == value / 1e6
            break
    # totals as before: every job together
    assert m["total.iops"] == pytest.approx(
        sum(j[d]["total_ios"] for j in jobs for d in ("read", "write")) / wall
    )
    assert m["read.iops"] == pytest.approx(m["reader.read.iops"])
    # fdatasync: fio counts it in the latency's N, not in total_ios; it is still sync.*
    logger = next(j for j in jobs if j["jobname"] == "logger")
    assert logger["sync"]["lat_ns"]["N"] > 0
    assert m["logger.sync.iops"] == pytest.approx(logger["sync"]["lat_ns"]["N"] / wall)
    assert m["sync.iops"] == pytest.approx(m["logger.sync.iops"])
    assert m["logger.sync.lat_p99_ms"] > 0 and "reader.sync.iops" not in m
    # a job named like a total is written job.NAME, never mixed into the totals' names
    assert m["job.read.write.iops"] > 0 and "read.write.iops" not in m
    written = sum(j["write"]["io_bytes"] for j in jobs)
    assert m["workload.write_mb"] == pytest.approx(written / 2**20)
    assert m["workload.read_mb"] == pytest.approx(moved / 2**20)
    assert not any(k.startswith("group") for k in m)  # one group: no groupN.*
    names = FioWorkload("mixed.fio", text=MIXED_JOB.format(dir="${DIR}", extra="")).metric_names()
    assert set(m) <= names


@needs_fio
def test_stonewall_groups_have_their_own_metrics(tmp_path: Path) -> None:
    text = MIXED_JOB.replace("[logger]", "[logger]\nstonewall")
    report, data = _fio_report(tmp_path, text)
    m = parse_fio_output(report)
    groups = {j["jobname"]: j["groupid"] for j in data["jobs"]}
    assert groups == {"reader": 0, "logger": 1, "read": 1}
    walls = {
        g: max(j["job_runtime"] for j in data["jobs"] if j["groupid"] == g) / 1000 for g in (0, 1)
    }
    assert m["runtime_s"] == pytest.approx(walls[0] + walls[1])
    reads = sum(j["read"]["total_ios"] for j in data["jobs"] if j["jobname"] == "reader")
    assert m["reader.read.iops"] == pytest.approx(reads / walls[0])  # over its group's time
    assert m["group0.read.iops"] == pytest.approx(m["reader.read.iops"])
    assert m["group1.write.iops"] == pytest.approx(
        m["logger.write.iops"] + m["job.read.write.iops"]
    )
    assert "group1.sync.iops" in m and "group0.sync.iops" not in m
    assert set(m) <= FioWorkload("g.fio", text=text.format(dir="${DIR}", extra="")).metric_names()


def test_job_names_that_clash_are_written_job_name() -> None:
    from stortune.workloads.fio import job_prefixes

    names = ["dblog", "total", "group2", "my job", "my.job", "job", "a-b_1", "dblog"]
    assert job_prefixes(names) == {
        "dblog": "dblog",
        "total": "job.total",
        "group2": "job.group2",
        "my job": "job.my_job",
        "my.job": "job.my_job-2",
        "job": "job.job",
        "a-b_1": "a-b_1",
    }


def test_metric_names_follow_the_job_text() -> None:
    from stortune.workloads.fio import job_metric_names

    names = job_metric_names(
        "[global]\nioengine=psync\ngroup_reporting\n[a]\nrw=read\nnumjobs=4\n[b]\nrw=write\n"
        "fsync=4\n[c]\nstonewall\nioengine=filestat\n[d]\nnew_group\nname=total\nrw=randrw\n"
    )
    # group_reporting: fio reports a group as one job named after its first
    assert {"a.read.lat_p99_ms", "a.write.lat_p99_ms", "a.sync.iops"} <= names
    assert not any(n.startswith("b.") for n in names)
    assert {"c.meta.iops", "group1.meta.lat_p99_ms", "job.total.write.lat_p50_ms"} <= names
    assert {"group2.read.iops", "group0.sync.iops"} <= names and "group3.total.iops" not in names
    assert "c.read.iops" not in names  # a metadata engine's operations are never read I/O
    assert {"total.bw_mbs", "sync.lat_p99_ms", "workload.read_mb", "runtime_s"} <= names
