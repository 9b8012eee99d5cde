"""An objective or guardrail named after no metric the workloads report is refused, with the
closest names, before anything is stored or measured; a job file's declarations set a new
campaign's objective and guardrails unless the command line says otherwise."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import STORTUNE
from typer.testing import CliRunner

from stortune.errors import StortuneError
from stortune.measure.metricnames import check_metric_names, target_metric_names
from stortune.objective import Guardrail, Objective
from stortune.workloads.fio import FioWorkload
from stortune.workloads.rados import RadosWorkload
from stortune.workloads.rows import RowsWorkload

JOB = """\
# a log writer beside a reader
# stortune objective: log.write.iops:max
# stortune guardrail: data.read.iops:max:10%
[global]
directory=${DIR}
ioengine=psync
size=4m
bs=4k
runtime=${RUNTIME}
time_based=1
[log]
filename=log
rw=write
fdatasync=1
[data]
filename=data
rw=randread
"""


def stortune(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STORTUNE, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_known_names_pass_and_a_typo_names_the_closest() -> None:
    dbfsync = FioWorkload("dbfsync")
    for text in ("dblog.write.iops:max", "total.bw_mbs:max", "sys.cpu_pct:min", "device.x:max"):
        check_metric_names(Objective.parse(text), [dbfsync])
    with pytest.raises(StortuneError) as caught:
        check_metric_names(Objective.parse("total.bw_mb:max"), [dbfsync])
    assert str(caught.value).startswith(
        "objective metric 'total.bw_mb' is not a metric of workload dbfsync; closest: "
        "total.bw_mbs, "
    )
    guarded = Objective.parse("total.iops:max").with_guardrails(
        [Guardrail.parse("dblog.sync.lat_p99:min")]
    )
    with pytest.raises(StortuneError, match="guardrail metric 'dblog.sync.lat_p99' .* closest: "):
        check_metric_names(guarded, [dbfsync])
    several = Objective.of(["total.iops:max", "dblog.write.iop:max"])  # scalarised: each one
    with pytest.raises(StortuneError, match="'dblog.write.iop'.*dblog.write.iops"):
        check_metric_names(several, [dbfsync])


def test_every_workload_must_report_it_unless_its_names_are_unknown() -> None:
    objective = Objective.parse("dblog.write.iops:max")
    with pytest.raises(StortuneError, match="not a metric of workload fileserver"):
        check_metric_names(objective, [FioWorkload("dbfsync"), FioWorkload("fileserver")])
    check_metric_names(objective, [None, RowsWorkload("pg"), FioWorkload("dbfsync")])
    # rados bench: its own names, and what a Ceph target's samplers add
    rados = RadosWorkload("rand")
    check_metric_names(Objective.parse("bw_mbs:max"), [rados])
    with pytest.raises(StortuneError, match="closest: bw_mbs"):
        check_metric_names(Objective.parse("total.bw_mbs:max"), [rados])
    with pytest.raises(StortuneError, match="'ceph.osd.op_w'"):
        check_metric_names(Objective.parse("ceph.osd.op_w:max"), [rados])
    ceph = type("Ceph", (), {"kind": "ceph"})()
    check_metric_names(Objective.parse("ceph.osd.op_w:max"), [rados], target_metric_names(ceph))
    check_metric_names(Objective.parse("own:max"), [rados], ["own"])


# ---- the command line ---------------------------------------------------------------------
def test_a_misspelt_objective_stops_the_command_before_anything_runs(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    for command in ("run", "tune"):
        done = stortune(
            command, "-t", "tmpfs", "-s", "tmpfs", "-w", "dbfsync", "-o", "total.bw_mb:max",
            "--budget", "1", "-r", "1", "--store", str(db), cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in done.stderr
        assert lines[0].startswith(
            "error: objective metric 'total.bw_mb' is not a metric of workload dbfsync; "
            "closest: total.bw_mbs, "
        )
        assert not db.exists()  # no store, no campaign, no fio run
    bad = stortune(
        "sweep", "-t", "tmpfs", "-s", "tmpfs", "-w", "dbfsync", "--guardrail",
        "dbdata.iops:max", "--dry-run", "--store", str(db), cwd=tmp_path,
    )  # fmt: skip
    assert bad.returncode == 2 and "guardrail metric 'dbdata.iops'" in bad.stderr


class _Captured(StortuneError):
    pass


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The objective `run` and `tune` hand their workflow (which then stops: nothing runs)."""
    seen: dict[str, Any] = {}

    def start_tuning(store: Any, job: Any, reporter: Any = None) -> None:
        seen["objective"] = job.objective
        raise _Captured("captured")

    monkeypatch.setattr("stortune.cli.run.start_tuning", start_tuning)
    monkeypatch.setattr("stortune.cli.tune.start_tuning", start_tuning)
    return seen


def test_declared_guardrails_are_kept_replaced_or_left_out(
    tmp_path: Path, captured: dict[str, Any]
) -> None:
    from stortune.cli import app

    job = tmp_path / "mine.fio"
    job.write_text(JOB)
    common = ["-t", "tmpfs", "-s", "tmpfs", "-w", str(job), "--store", str(tmp_path / "s.db")]
    runner = CliRunner()
    for command in ("run", "tune"):
        result = runner.invoke(app, [command, *common])
        assert isinstance(result.exception, _Captured), result.output
        objective = captured["objective"]
        assert objective.text() == "log.write.iops:max"
        assert [g.text() for g in objective.guardrails] == ["data.read.iops:max:10%"]
        assert "objective: log.write.iops:max (declared by mine)" in result.output
    # --guardrail replaces the declared ones (also under a given objective)
    mine = ["--guardrail", "log.sync.lat_p99_ms:min:30%", "--guardrail", "data.read.bw_mbs:max"]
    runner.invoke(app, ["run", *common, "-o", "total.iops:max", *mine])
    objective = captured["objective"]
    assert objective.text() == "total.iops:max"
    assert [g.text() for g in objective.guardrails] == [
        "log.sync.lat_p99_ms:min:30%",
        "data.read.bw_mbs:max:10%",
    ]
    runner.invoke(app, ["run", *common, "--no-guardrails"])
    assert captured["objective"].guardrails == ()
    both = runner.invoke(app, ["run", *common, "--no-guardrails", "--guardrail", "x:max"])
    assert "give one or the other" in str(both.exception)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting tmpfs needs root")
def test_a_job_file_that_declares_its_objective_sets_the_campaigns(tmp_path: Path) -> None:
    job = tmp_path / "mine.fio"
    job.write_text(JOB)
    db = tmp_path / "r.db"
    done = stortune(
        "run", "-t", "tmpfs", "-s", "tmpfs", "-w", str(job), "--runtime", "1", "--budget", "1",
        "-r", "1", "--reference-every", "0", "--store", str(db), "--name", "mine", "-q", "--json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)  # --json: nothing else on stdout
    assert outcome["runs_ok"] == 1
    from stortune.store import Store

    with Store(str(db), existing=True) as store:
        campaign = store.campaign("mine")
        runs = [r for t in store.trials(campaign.id) for r in t.runs]
    assert campaign.objective["metric"] == "log.write.iops"
    assert campaign.objective["guardrails"] == [
        {"metric": "data.read.iops", "direction": "max", "tolerance": 0.1}
    ]
    assert runs[0].metrics["log.write.iops"] > 0 and runs[0].metrics["log.sync.iops"] > 0
