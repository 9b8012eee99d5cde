"""Running the measurements: in this process, or master/worker over MPI (mpi4py.futures).

Parallel SeRRa's master picks the sizes, hands tasks to workers until none are left, then fits
and reports; a worker runs benchmarks, one worker per node (two on one node would contend for
the same device). The paper's tasks were whole request sizes (four patterns each) and the
workers finished at very different times, because a fixed file read in small requests takes
much longer than in large ones. Here a task is one (size, pattern, repetition) and tasks are
handed out longest-first within each repetition round (`schedule`, by an estimate of each run's
cost from its requests and bytes) and the short runs fill the gaps at the end.

Under MPI the program must be started by ``python -m mpi4py.futures`` so that ranks above 0
wait for tasks (see docs/profiling.md)::

    mpiexec -n 3 python -m mpi4py.futures -m stortune profile /scratch --mpi
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Protocol

from stortune.errors import TargetError
from stortune.profile.design import OPERATIONS, Task
from stortune.profile.measure import TargetSpec, TaskResult, run_task

Callback = Callable[[TaskResult], None]
_RANDOM = {rand for _, rand in OPERATIONS.values()}
REQUEST_COST = 64 * 1024  # a request's own cost, in bytes moved: a guess that orders runs well

MPI_HINT = (
    "--mpi needs the MPI pool of mpi4py.futures: start it as "
    "`mpiexec -n WORKERS+1 python -m mpi4py.futures -m stortune profile ... --mpi`"
)


def schedule(
    tasks: Sequence[Task], file_size: int | None = None, max_requests: int | None = None
) -> list[Task]:
    """Repetition rounds in order; inside a round, the longest run first by its estimated
    cost (requests x (size + `REQUEST_COST`): with the whole file read, the smallest requests;
    with `max_requests`, the largest size that still makes that many) and random before
    sequential (slower at the same size)."""

    def cost(task: Task) -> int:
        requests = (file_size or 2**40) // task.size
        if max_requests:
            requests = min(requests, max_requests)
        return requests * (task.size + REQUEST_COST)

    return sorted(tasks, key=lambda t: (t.rep, -cost(t), t.pattern not in _RANDOM, t.pattern))


class Runner(Protocol):
    """What `run_profile` needs: run tasks, say how (``mode``) and on how many workers."""

    mode: str
    workers: int

    def run(self, spec: TargetSpec, tasks: Sequence[Task], on_done: Callback) -> list[TaskResult]:
        """Measure every task; raise TargetError on the first failed one."""

    def close(self) -> None: ...


class SerialRunner:
    """Every task in this process, one after the other (sequential SeRRa)."""

    mode = "serial"
    workers = 1

    def run(self, spec: TargetSpec, tasks: Sequence[Task], on_done: Callback) -> list[TaskResult]:
        results = []
        for task in schedule(tasks, spec.file_size, spec.max_requests):
            result = run_task(spec, task)
            _check(result)
            on_done(result)
            results.append(result)
        return results

    def close(self) -> None:
        """Nothing to release."""


class MpiRunner:
    """Tasks on the workers of mpi4py.futures' shared pool (every rank but 0)."""

    mode = "mpi"

    def __init__(self) -> None:
        # `python -m mpi4py.futures` has imported its core and set up the pool before running
        # us; looking it up (rather than importing mpi4py) never initialises MPI by accident.
        core = sys.modules.get("mpi4py.futures._core")
        if getattr(core, "SharedPool", None) is None:
            raise TargetError(MPI_HINT)
        from mpi4py.futures import MPIPoolExecutor

        # main=False: workers must not import our __main__ (it would start the CLI again)
        self._executor = MPIPoolExecutor(main=False)
        self.workers = int(self._executor.num_workers)
        if self.workers < 1:
            raise TargetError("the MPI pool has no workers: start at least 2 processes")

    def run(self, spec: TargetSpec, tasks: Sequence[Task], on_done: Callback) -> list[TaskResult]:
        from concurrent.futures import as_completed

        futures = [
            self._executor.submit(run_task, spec, task)
            for task in schedule(tasks, spec.file_size, spec.max_requests)
        ]
        results = []
        try:
            for future in as_completed(futures):
                result = future.result()
                _check(result)
                on_done(result)
                results.append(result)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return sorted(results, key=lambda r: r.task)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


def _check(result: TaskResult) -> None:
    if result.error is not None:
        task = result.task
        raise TargetError(
            f"{task.pattern} with {task.size}-byte requests on {result.host}: {result.error}"
        )


def worker_stats(results: Sequence[TaskResult], elapsed: float) -> dict[str, object]:
    """Per worker: tasks and busy time; `imbalance` is the busiest worker's time over the mean
    (1.0 is perfect balance); `shared_hosts` lists hosts that ran more than one worker."""
    busy: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    pids: dict[str, set[int]] = defaultdict(set)
    for result in results:
        worker = f"{result.host}:{result.pid}"
        busy[worker] += result.seconds
        count[worker] += 1
        pids[result.host].add(result.pid)
    mean = sum(busy.values()) / len(busy) if busy else 0.0
    return {
        "per_worker": [
            {"worker": w, "tasks": count[w], "busy_s": round(busy[w], 3)} for w in sorted(busy)
        ],
        "imbalance": round(max(busy.values()) / mean, 3) if mean > 0 else None,
        "utilisation": round(sum(busy.values()) / (elapsed * len(busy)), 3) if elapsed else None,
        "shared_hosts": sorted(h for h, p in pids.items() if len(p) > 1),
    }
