"""The measured phase of an application workload's run: what is sampled around it.

The system's metrics (`SystemSampler`: CPU, memory, the devices' utilisation), the venue's own
samplers (the bytes at the device under test) and the application's processes' I/O
(`ProcessIoSampler`: the bytes it moved, so the device accounting can tell a run the page cache
served from one that reached the device), started before the program runs and stopped after it,
also when it fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from stortune.system.sysmetrics import ProcessIoSampler, SystemSampler
from stortune.workloads.base import Venue


@contextmanager
def measured_phase(venue: Venue, program: str) -> Iterator[dict[str, float]]:
    """Sample the phase the block runs; the dict it yields holds the metrics once it ends."""
    samplers = [SystemSampler(venue.devices), *venue.samplers,
                ProcessIoSampler(program, venue.cgroup)]  # fmt: skip
    for sampler in samplers:
        sampler.start()
    metrics: dict[str, float] = {}
    try:
        yield metrics
    finally:
        for sampler in samplers:
            metrics.update(sampler.stop())
