"""What a job file declares (objective, guardrails, start state), how a campaign's objective is
chosen from it, and that every bundled template's declared metrics are metrics of a real run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stortune.enums import Direction, StartState
from stortune.errors import ConfigError, StortuneError
from stortune.objective import Guardrail, Objective
from stortune.workloads import TEMPLATES, FioWorkload, Venue
from stortune.workloads.declared import Declarations, objective_for, parse_declarations
from stortune.workloads.rados import RadosWorkload
from stortune.workloads.rows import RowsWorkload

JOB = """\
# my job: a log and its data
# stortune objective: log.write.iops:max
# stortune guardrail: data.total.iops:max:10%
#   stortune guardrail: log.sync.lat_p99_ms:min:0.5
; stortune start: cold
[global]
directory=${DIR}
ioengine=psync
size=4m
bs=4k
[log]
rw=write
fdatasync=1
[data]
rw=randrw
"""


def test_declarations_are_parsed_from_comment_lines() -> None:
    declared = parse_declarations(JOB, "my.fio")
    assert declared.objective is not None
    assert (declared.objective.metric, declared.objective.direction) == (
        "log.write.iops",
        Direction.MAX,
    )
    assert declared.guardrails == (
        Guardrail("data.total.iops", Direction.MAX, 0.1),
        Guardrail("log.sync.lat_p99_ms", Direction.MIN, 0.5),
    )
    assert declared.start is StartState.COLD
    assert declared.lines()[0] == "objective: log.write.iops:max"
    assert parse_declarations("[j]\nrw=read\n# stortune start: warm\n", "j").start == "warm"
    assert parse_declarations("# a stortune job, without declarations\n[j]\n", "j").empty


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("# stortune objective: total.iops:up", "objective 'total.iops:up'"),
        ("# stortune objective: total.iops:max:2", "write METRIC:max|min"),
        ("# stortune guardrail: total.iops", "guardrail 'total.iops'"),
        ("# stortune guardrail: total.iops:max:150%", "below 100%"),
        ("# stortune start: lukewarm", "start 'lukewarm': write cold or warm"),
        ("# stortune objectiv: total.iops:max", "unknown declaration 'stortune objectiv'"),
        ("# stortune objective: read.iops:max\n# stortune objective: x:max", "a second objective"),
        ("# stortune start: warm\n# stortune start: cold", "a second start"),
    ],
)
def test_a_malformed_declaration_names_its_file_and_line(line: str, says: str) -> None:
    text = f"# a job\n[global]\nbs=4k\n{line}\n[j]\nrw=read\n"
    number = 4 + line.count("\n")
    with pytest.raises(ConfigError, match=f"my.fio, line {number}: ") as caught:
        parse_declarations(text, "my.fio")
    assert says in str(caught.value)


def test_a_job_file_declares_through_its_workload(tmp_path: Path) -> None:
    path = tmp_path / "mine.fio"
    path.write_text(JOB)
    # --runtime adds lines to a file without a runtime: a bad line is still named as written
    bad = tmp_path / "bad.fio"
    bad.write_text(JOB.replace("cold", "hot"))
    with pytest.raises(ConfigError, match=r"bad.fio, line 5: start 'hot'"):
        FioWorkload(str(bad), runtime=3, runtime_given=True)
    workload = FioWorkload(str(path), runtime=3, runtime_given=True)
    assert workload.runtime_added
    assert workload.declared == parse_declarations(JOB, "x")
    again = FioWorkload.from_spec(workload.describe())  # a stored campaign's job keeps them
    assert again.declared == workload.declared
    assert {"log.write.iops", "data.total.iops", "log.sync.lat_p99_ms"} <= workload.metric_names()
    assert FioWorkload("dbfsync").declared.objective.metric == "dblog.write.iops"  # type: ignore[union-attr]


def test_workloads_without_job_files_declare_nothing() -> None:
    for workload in (RowsWorkload("pg"), RadosWorkload("rand")):
        assert workload.declared == Declarations()
    assert RowsWorkload("pg").metric_names() is None  # a dataset's columns: the table knows
    assert {"bw_mbs", "iops", "prefill_bw_mbs"} <= RadosWorkload("rand").metric_names()
    assert "prefill_bw_mbs" not in RadosWorkload("write").metric_names()


def test_a_warm_start_keeps_the_page_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stortune.workloads.base import Measurement

    dropped: list[str] = []
    for start in ("cold", "warm"):
        text = JOB.replace("start: cold", f"start: {start}")
        workload = FioWorkload("j.fio", text=text)
        monkeypatch.setattr(FioWorkload, "prepare", lambda *a, **k: None)
        monkeypatch.setattr(FioWorkload, "measure", lambda *a, **k: Measurement({"x": 1.0}))
        workload.run(Venue(directory=tmp_path, before_measure=lambda s=start: dropped.append(s)))
    assert dropped == ["cold"]


# ---- choosing a campaign's objective ------------------------------------------------------
def test_the_declared_objective_and_guardrails_are_taken_when_none_is_given() -> None:
    said: list[str] = []
    objective = objective_for([FioWorkload("dbfsync")], None, say=said.append)
    assert objective.text() == "dblog.write.iops:max"
    assert [g.text() for g in objective.guardrails] == [
        "dbdata.total.iops:max:10%",
        "dblog.sync.lat_p99_ms:min:50%",
    ]
    assert said[0] == "objective: dblog.write.iops:max (declared by dbfsync)"
    assert said[1].startswith("guardrails: dbdata.total.iops:max:10%, dblog.sync")
    # a given objective keeps the declared guardrails; given guardrails replace them
    given = objective_for([FioWorkload("dbfsync")], Objective.parse("total.bw_mbs:max"))
    assert given.metric == "total.bw_mbs" and len(given.guardrails) == 2
    mine = [Guardrail.parse("dbdata.read.lat_p99_ms:min:20%")]
    replaced = objective_for([FioWorkload("dbfsync")], None, mine)
    assert replaced.metric == "dblog.write.iops" and replaced.guardrails == tuple(mine)
    assert objective_for([FioWorkload("dbfsync")], None, []).guardrails == ()


def test_an_objective_the_workload_guards_is_guarded_by_what_it_declares() -> None:
    """pgbench exists for tps with its p99 latency as guardrail: judged on the p99 latency,
    its tps may fall as far as the latency could rise."""
    from stortune.workloads import workload_named

    said: list[str] = []
    latency = Objective.parse("lat_p99_ms:min")
    reverse = objective_for([workload_named("pgbench", 10)], latency, say=said.append)
    assert [g.text() for g in reverse.guardrails] == ["tps:max:20%"]
    assert said == ["guardrails: tps:max:20% (declared by pgbench)"]
    # dbfsync judged on its sync latency: its data IOPS still guard it, its commits too
    synced = objective_for([FioWorkload("dbfsync")], Objective.parse("dblog.sync.lat_p99_ms:min"))
    assert [g.text() for g in synced.guardrails] == [
        "dbdata.total.iops:max:10%",
        "dblog.write.iops:max:50%",
    ]


def test_workloads_that_declare_differently_need_an_objective() -> None:
    workloads = [FioWorkload("dbfsync"), FioWorkload("stream")]
    with pytest.raises(StortuneError, match=r"dbfsync declares dblog.write.iops:max; stream"):
        objective_for(workloads, None)
    with pytest.raises(StortuneError, match="needs --space and --objective"):
        objective_for([None], None)
    fallback = Objective.parse("total.bw_mbs:max")
    assert objective_for([None], None, fallback=fallback) == fallback
    said: list[str] = []
    assert objective_for(workloads, None, [], fallback=fallback, say=said.append) == fallback
    assert said[0].startswith("objective: total.bw_mbs:max (the default: dbfsync declares")
    # both declare total.bw_mbs: taken; a guardrail on a job only one of them has is left out
    said.clear()
    both = objective_for([FioWorkload("stream"), FioWorkload("fileserver")], None, say=said.append)
    assert both.metric == "total.bw_mbs" and both.guardrails == ()
    assert said == [
        "objective: total.bw_mbs:max (declared by stream, fileserver)",
        "declared guardrails left out, on metrics another workload of the campaign lacks: "
        "writer.write.bw_mbs:max:10% (stream), reader.read.bw_mbs:max:10% (stream), "
        "fileserver.read.bw_mbs:max:10% (fileserver)",
    ]
    # randomrw has a reader and a writer too: stream's guardrails hold for both, once each
    alike = objective_for([FioWorkload("stream"), FioWorkload("randomrw")], None)
    assert [g.metric for g in alike.guardrails] == ["writer.write.bw_mbs", "reader.read.bw_mbs"]


# ---- every bundled template, run for real -------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_every_template_reports_the_metrics_it_declares(tmp_path: Path) -> None:
    for template in TEMPLATES:
        # videoserver's files (SIZE/40) must hold its writer's 1 MiB requests
        workload = FioWorkload(
            template, runtime=1, size="64m" if template == "videoserver" else "16m"
        )
        folder = tmp_path / template
        folder.mkdir()
        workload.prepare(folder)
        measured = workload.measure(folder)
        assert measured.ok, (template, measured.error)
        declared = workload.declared
        assert declared.objective is not None and declared.guardrails, template
        names = workload.metric_names()
        wanted = [declared.objective.metric, *(g.metric for g in declared.guardrails)]
        for metric in wanted:
            assert metric in measured.metrics, (template, metric)
            assert metric in names, (template, metric)
        reported = {k for k in measured.metrics if not k.startswith(("sys.", "device."))}
        assert reported <= names, (template, sorted(reported - names))
