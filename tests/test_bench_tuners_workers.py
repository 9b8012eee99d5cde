"""A killed tuner bench leaves no worker behind running campaigns nobody will record."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from stortune.system.processes import pid_alive

BENCH = Path(__file__).resolve().parents[1] / "bench"

KILLED_BENCH = f"""\
import os, signal, sys, time
sys.path.insert(0, {str(BENCH)!r})
from concurrent.futures import ProcessPoolExecutor
import benchdata
pool = ProcessPoolExecutor(1, initializer=benchdata.die_with_parent)
print(pool.submit(os.getpid).result(), flush=True)
pool.submit(time.sleep, 120)
time.sleep(0.5)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_workers_end_when_the_bench_is_killed() -> None:
    bench = subprocess.Popen(
        [sys.executable, "-c", KILLED_BENCH], stdout=subprocess.PIPE, text=True
    )
    worker = int(bench.stdout.readline())
    try:
        bench.wait(timeout=60)
        deadline = time.monotonic() + 20
        while pid_alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not pid_alive(worker), "the worker outlived the bench that was killed"
    finally:
        bench.stdout.close()
        if pid_alive(worker):
            os.kill(worker, signal.SIGKILL)
