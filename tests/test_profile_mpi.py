"""The MPI master/worker path (1 master + 2 workers through mpiexec and mpi4py.futures)
measures the same tasks as the serial path with the same seed."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fixtures.localfs import direct_io_dir, needs_fio

pytestmark = needs_fio
MPIEXEC = shutil.which("mpiexec")
ARGS = ["--file-size", "4m", "--intervals", "8k:32k:8k,32k:256k:32k", "--seed", "11"]
ARGS += ["--repetitions", "2", "--json", "--no-plot"]
TIMEOUT = 240

# Until the lead registers "profile" in stortune.cli, a two-line app stands for `-m stortune`.
DRIVER = textwrap.dedent(
    """\
    import typer
    from stortune.cli.profile import register

    app = typer.Typer()
    register(app)
    if __name__ == "__main__":
        app()
    """
)


def _mpi_works() -> bool:
    if MPIEXEC is None:
        return False
    probe = [sys.executable, "-c", "from mpi4py import MPI"]
    return subprocess.run(probe, capture_output=True, timeout=60, check=False).returncode == 0


needs_mpi = pytest.mark.skipif(not _mpi_works(), reason="needs mpiexec and a working mpi4py")


def run(argv: list[str], cwd: Path) -> dict:
    """Run in a new process group, killed as a whole if it hangs (no MPI process left)."""
    proc = subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{argv[0]} did not finish in {TIMEOUT} s")
    assert proc.returncode == 0, err[-2000:]
    return json.loads(out)


def tasks(profile: dict) -> set[tuple[int, str, int]]:
    return {(m["size"], m["pattern"], m["rep"]) for m in profile["measurements"]}


@needs_mpi
def test_mpi_workers_measure_the_same_tasks_as_the_serial_path(tmp_path: Path) -> None:
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    data = direct_io_dir(tmp_path / "data")
    python = sys.executable
    serial = run([python, str(driver), "profile", str(data), *ARGS, "--out", "s.json"], tmp_path)
    mpi = run(
        [MPIEXEC, "-n", "3", "--allow-run-as-root", "--oversubscribe", python, "-m",
         "mpi4py.futures", str(driver), "profile", str(data), *ARGS, "--mpi", "--out", "m.json"],
        tmp_path,
    )  # fmt: skip
    assert mpi["picked_sizes"] == serial["picked_sizes"]
    assert tasks(mpi) == tasks(serial) and len(mpi["measurements"]) == len(tasks(serial))
    assert mpi["runner"]["mode"] == "mpi" and mpi["runner"]["workers"] == 2
    workers = {m["pid"] for m in mpi["measurements"]}
    assert len(workers) == 2  # both workers ran tasks (master only hands them out)
    assert mpi["runner"]["shared_hosts"]  # one machine: the contention is reported
    assert [row["size"] for row in mpi["curve"]] == [row["size"] for row in serial["curve"]]
    assert not list(data.iterdir())  # workers' test files removed
