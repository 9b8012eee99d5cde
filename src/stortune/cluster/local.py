"""A cluster on this machine for trying one out: a Dask scheduler and N nodes as processes.

Each node gets a state folder of its own (``STORTUNE_STATE_DIR``: its loop image, mount point and
journal) and the same target options, so N localfs nodes format N loop images. They share this
machine's disk and CPUs, so their runs disturb each other: what a local cluster shows is the
flow, not the speed of N machines.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from stortune.errors import StortuneError

READY = "stortune node ready"  # what a node prints once it joined its scheduler
START_SECONDS = 60.0


@dataclass
class LocalCluster:
    """The scheduler's and the nodes' processes; `stop` ends them all."""

    address: str
    scheduler: subprocess.Popen
    nodes: dict[str, subprocess.Popen] = field(default_factory=dict)

    def stop(self) -> None:
        for proc in [*self.nodes.values(), self.scheduler]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in [*self.nodes.values(), self.scheduler]:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_scheduler(port: int, log: Path) -> tuple[str, subprocess.Popen]:
    """A Dask scheduler on 127.0.0.1:`port` (0: a free one), and its address once it listens."""
    log.parent.mkdir(parents=True, exist_ok=True)
    out = log.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", str(port), "--no-dashboard", "--no-show"],
        stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        for line in text.splitlines():
            if "Scheduler at:" in line:
                return line.split("Scheduler at:", 1)[1].strip(), proc
        if proc.poll() is not None:
            raise StortuneError(f"the Dask scheduler stopped: {text.strip()[-300:]}")
        time.sleep(0.2)
    proc.kill()
    raise StortuneError(f"the Dask scheduler did not start in {START_SECONDS:g} s (log: {log})")


def start_node(
    scheduler: str, name: str, state_dir: Path, target_args: Sequence[str], log: Path
) -> subprocess.Popen:
    """`stortune worker` for node `name`, its state in `state_dir`."""
    state_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "STORTUNE_STATE_DIR": str(state_dir)}
    return subprocess.Popen(
        [sys.executable, "-m", "stortune", "worker", "--scheduler", scheduler, "--node", name,
         *target_args],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )  # fmt: skip


def wait_ready(name: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if READY in text:
            return
        if proc.poll() is not None:
            last = text.strip().splitlines()[-1:] or ["no output"]
            raise StortuneError(f"node {name} stopped: {last[0]}")
        time.sleep(0.2)
    raise StortuneError(f"node {name} did not join in {START_SECONDS:g} s (log: {log})")


def start_local(
    workers: int, root: Path, target_args: Sequence[str], port: int = 0, prefix: str = "local"
) -> LocalCluster:
    """A scheduler and `workers` nodes named PREFIX-1..PREFIX-N, their folders under `root`."""
    address, scheduler = start_scheduler(port, root / "scheduler.log")
    cluster = LocalCluster(address, scheduler)
    try:
        for i in range(1, workers + 1):
            name = f"{prefix}-{i}"
            log = root / f"{name}.log"
            cluster.nodes[name] = start_node(address, name, root / name, target_args, log)
        for name, proc in cluster.nodes.items():
            wait_ready(name, proc, root / f"{name}.log")
    except BaseException:
        cluster.stop()
        raise
    return cluster
