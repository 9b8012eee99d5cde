"""A user's own fio job file: its placeholders, its runtime and fio's own parse are checked
before anything is stored or formatted; `stortune workload` lists, shows and checks jobs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import STORTUNE

from stortune.errors import ConfigError
from stortune.workloads import workload_named
from stortune.workloads.fio import TEMPLATES

GOOD = """\
[global]
directory=${DIR}
ioengine=psync
[reader]
filename=data
rw=randread
bs=4k
size=8m
"""


def job(tmp_path: Path, text: str, name: str = "my.fio") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def stortune(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STORTUNE, *args], capture_output=True, text=True, timeout=300)


def run_on_tmpfs(path: Path, db: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return stortune(
        "run", "-t", "tmpfs", "-s", "tmpfs", "-w", str(path), "-o", "total.iops:max",
        "--tuner", "random", "--budget", "1", "-r", "1", "--reference-every", "0",
        "--store", str(db), "--name", "mine", "-q", "--json", *extra,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (GOOD.replace("[reader]", "runtime={runtime}\n[reader]"), "{runtime} is not a placeholder"),
        (GOOD.replace("randread", "randreed"), "fio rejects it: failed parsing rw=randreed"),
        (GOOD.replace("bs=4k", "blocksizes=4k"), "fio rejects it: Bad option <blocksizes=4k>"),
        (GOOD.replace("${DIR}", "/var/tmp"), "outside the target directory"),
        (GOOD.replace("${DIR}", "${DIRECTORY}"), "unknown placeholder ${DIRECTORY}"),
    ],
)
def test_a_broken_job_file_is_one_line_before_anything_is_stored(
    tmp_path: Path, text: str, says: str
) -> None:
    db = tmp_path / "r.db"
    done = run_on_tmpfs(job(tmp_path, text), db, "--runtime", "2")
    assert done.returncode == 2
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr
    assert not db.exists()  # no store, no campaign, no mkfs: refused first


def test_a_job_that_sets_its_own_runtime_refuses_runtime_rather_than_ignore_it(
    tmp_path: Path,
) -> None:
    fixed = job(tmp_path, GOOD.replace("[reader]", "runtime=30\ntime_based=1\n[reader]"))
    with pytest.raises(ConfigError, match=r"sets its own runtime=30.*runtime=\$\{RUNTIME\}"):
        workload_named(str(fixed), 3)
    assert workload_named(str(fixed), None).text == fixed.read_text()  # as written, no --runtime


def test_runtime_is_applied_to_a_job_without_a_runtime_line(tmp_path: Path) -> None:
    path = job(tmp_path, GOOD)
    assert not workload_named(str(path), None).timed  # it runs as written
    timed = workload_named(str(path), 4)
    assert timed.timed and "time_based=1" in timed.text
    # the added lines stay in the [global] section, so every job takes them
    globals_part = timed.text.split("[reader]")[0]
    assert "runtime=${RUNTIME}" in globals_part


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting tmpfs needs root")
def test_a_job_without_a_runtime_line_runs_for_runtime_seconds(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    done = run_on_tmpfs(job(tmp_path, GOOD), db, "--runtime", "3")
    assert done.returncode == 0, done.stderr
    from stortune.store import Store

    with Store(str(db), existing=True) as store:
        runs = [r for t in store.trials(store.campaign("mine").id) for r in t.runs]
    assert runs and all(r.status == "ok" for r in runs)
    # an 8 MiB random read takes a fraction of a second in RAM: fio looped for the runtime
    assert all(2.5 <= r.metrics["runtime_s"] <= 4.5 for r in runs), [
        r.metrics.get("runtime_s") for r in runs
    ]


def test_workload_check_runs_fios_parse_and_says_how_long_a_run_lasts(tmp_path: Path) -> None:
    ok = stortune("workload", "check", str(job(tmp_path, GOOD)), "--runtime", "5", "--json")
    assert ok.returncode == 0, ok.stderr
    result = json.loads(ok.stdout)
    assert result["jobs"] == ["reader"] and result["placeholders"] == ["DIR", "RUNTIME"]
    assert "--runtime" in result["runtime"] and "added to its [global] section" in result["runtime"]
    shown = stortune("workload", "check", str(tmp_path / "my.fio"), "--runtime", "5")
    assert "added to its [global] section" in " ".join(shown.stdout.split())
    bad = stortune("workload", "check", str(job(tmp_path, GOOD.replace("randread", "sideways"))))
    assert bad.returncode == 2 and "fio rejects it" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_the_templates_are_listed_and_a_shown_one_checks_as_a_job_file(tmp_path: Path) -> None:
    listed = json.loads(stortune("workload", "list", "--json").stdout)
    assert list(listed) == list(TEMPLATES) and all(listed.values())
    shown = stortune("workload", "show", "dbfsync")
    assert shown.returncode == 0 and "${RUNTIME}" in shown.stdout
    copy = job(tmp_path, shown.stdout, "db.fio")
    assert stortune("workload", "check", str(copy), "--runtime", "3").returncode == 0


def test_the_placeholders_are_in_the_help() -> None:
    helped = stortune("run", "--help").stdout + stortune("workload", "check", "--help").stdout
    for placeholder in ("${DIR}", "${RUNTIME}", "${SIZE}"):
        assert placeholder in helped


def test_defaults_written_into_the_help_are_shown() -> None:
    """Rich reads "[default: ...]" as markup and drops it unless it is escaped."""
    wide = {**os.environ, "COLUMNS": "300"}
    helped = subprocess.run(
        [*STORTUNE, "run", "--help"], capture_output=True, text=True, env=wide
    ).stdout
    helped = " ".join(helped.replace("│", " ").split())  # unwrapped
    assert "[default: 5 on targets that measure this machine, else 0]" in helped
    assert "[default: 10; pgbench and db_bench 30]" in helped
    assert "[default: 30; on --resume: as stored]" in helped


def test_a_templates_file_set_takes_the_size_after_a_colon(tmp_path: Path) -> None:
    workload = workload_named("dbfsync:size=16m", 2)
    assert workload.name == "dbfsync" and workload.describe()["size"] == "16m"
    workload.prepare(tmp_path)  # fio lays the files out as the run would
    assert (tmp_path / "db.data").stat().st_size == 16 * 2**20
    assert (tmp_path / "db.log").stat().st_size == 2 * 2**20  # ${SIZE/8}
    assert workload_named("dbfsync", 2).describe()["size"] == "256m"  # the template's own
    own = workload_named(f"{job(tmp_path, GOOD)}:size=1g", None)
    assert own.size_bytes == 2**30


@pytest.mark.parametrize("size", ["abc", "0", "64m;rm -rf /", ""])
def test_a_bad_size_after_the_colon_is_one_line(size: str) -> None:
    with pytest.raises(ConfigError, match=r"give the file set's size as dbfsync:size=N"):
        workload_named(f"dbfsync:size={size}", 2)
