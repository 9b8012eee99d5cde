"""A fio job file cannot run programs, reach beyond the target or write outside its directory:
every entry of the deny lists in `workloads.jobsafety` is refused, by `workload check` and
before any run, with one line naming the option (stortune runs fio as root)."""

import subprocess
import sys
from pathlib import Path

import pytest

from stortune.errors import ConfigError
from stortune.workloads.fio import TEMPLATES, FioWorkload
from stortune.workloads.jobsafety import DENIED, DENIED_ENGINES, PATH_OPTIONS, check_job

DIR = "/srv/stortune-dir"


def job(line: str) -> str:
    return f"[global]\ndirectory={DIR}\n\n[j]\nfilename=data\nsize=1m\nrw=write\n{line}\n"


@pytest.mark.parametrize("option", sorted(DENIED))
def test_an_option_that_runs_programs_or_escapes_is_refused(option: str) -> None:
    with pytest.raises(ConfigError, match=f"fio job t: {option}=.* is not allowed: it "):
        check_job(job(f"{option}=touch /tmp/canary"), DIR, "t")


@pytest.mark.parametrize("engine", sorted(DENIED_ENGINES))
def test_an_engine_that_runs_code_or_reaches_elsewhere_is_refused(engine: str) -> None:
    with pytest.raises(ConfigError, match=f"ioengine={engine} is not allowed: the engine"):
        check_job(job(f"ioengine={engine}"), DIR, "t")


@pytest.mark.parametrize("value", ["external:/tmp/evil.so", "/tmp/evil.so", "./evil.so"])
def test_an_engine_loaded_from_a_file_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="is not allowed: the engine"):
        check_job(job(f"ioengine={value}"), DIR, "t")


@pytest.mark.parametrize("option", PATH_OPTIONS)
def test_a_file_option_stays_under_the_directory(option: str) -> None:
    with pytest.raises(ConfigError, match=f"{option}=/etc/passwd is outside the target"):
        check_job(job(f"{option}=/etc/passwd"), DIR, "t")
    with pytest.raises(ConfigError, match="leaves the target directory"):
        check_job(job(f"{option}=sub/../../x"), DIR, "t")
    with pytest.raises(ConfigError, match="outside the target"):
        check_job(job(f"{option}={DIR}/ok:/dev/vda"), DIR, "t")  # each part of a list
    check_job(job(f"{option}={DIR}/inside.log"), DIR, "t")  # under the directory: fine
    check_job(job(f"{option}=relative.log"), DIR, "t")  # fio runs in the directory


@pytest.mark.parametrize("option", ["mem", "iomem"])
def test_memory_backed_by_a_file_stays_under_the_directory(option: str) -> None:
    with pytest.raises(ConfigError, match="outside the target"):
        check_job(job(f"{option}=mmapshared:/dev/shm/x"), DIR, "t")
    check_job(job(f"{option}=malloc"), DIR, "t")


def test_include_is_refused_and_ordinary_options_pass() -> None:
    with pytest.raises(ConfigError, match="'include' is not supported"):
        check_job(job("include other.fio"), DIR, "t")
    check_job(
        job("ioengine=libaio\niodepth=16\ndirect=1\nverify=crc32c\nlockfile=exclusive"), DIR, "t"
    )


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_bundled_template_passes(template: str) -> None:
    FioWorkload(template).render(DIR)


def test_workload_check_refuses_a_job_that_would_run_a_program(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    path = tmp_path / "evil.fio"
    path.write_text(
        "[global]\ndirectory=${DIR}\n[j]\nfilename=d\nsize=1m\nrw=write\n"
        f"exec_prerun=touch {canary}\n"
    )
    with pytest.raises(ConfigError, match="exec_prerun"):
        FioWorkload(str(path))
    done = subprocess.run(
        [sys.executable, "-m", "stortune", "workload", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "exec_prerun=touch" in done.stderr and "not allowed" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not canary.exists()
