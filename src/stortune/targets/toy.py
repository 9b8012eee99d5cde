"""The `toy` target: a made-up storage device answered by a formula.

For trying stortune without root, a disk or minutes per run, and for tests and examples that
need a target whose optimum is known. Its space (`spaces/toy.yaml`) has a request size, a queue
depth, an I/O scheduler and read-ahead. Throughput follows Little's law (requests in flight over
the time each takes) up to the device's bandwidth ceiling; requests beyond its 16 internal
queues only wait; the scheduler costs a share of the device's time; read-ahead helps small
requests a little and wastes bandwidth when it is much larger than them. Seeded multiplicative
noise (``--toy-noise``) makes repetitions differ as real runs do, the same stream again on
resume.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stortune.errors import TargetError
from stortune.space import Config, Space
from stortune.targets.base import Target, TargetSettings, noise_fraction, setting
from stortune.workloads.base import Measurement

CEILING_MBS = 2000.0  # the device's bandwidth
SERVICE_MS = 0.08  # a request's fixed cost
TRANSFER_KB_PER_MS = 2000.0
INTERNAL_QUEUES = 16
SCHEDULER_SHARE = {"none": 1.0, "mq-deadline": 0.97, "kyber": 0.98, "bfq": 0.85}
METRICS = frozenset({"bw_mbs", "iops", "lat_mean_ms"})


@dataclass(frozen=True)
class ToySettings(TargetSettings):
    toy_noise: float = setting(
        0.03,
        flag="--toy-noise",
        implies=True,
        help="toy target: multiplicative noise of each run, as a fraction (0 for none).",
    )
    toy_seed: int = setting(0)


def toy_metrics(config: Config) -> dict[str, float]:
    """What the toy device does for `config`, without noise."""
    block = float(config["block_kb"])
    depth = int(config["queue_depth"])
    latency = SERVICE_MS + block / TRANSFER_KB_PER_MS
    latency *= 1.0 + max(0, depth - INTERNAL_QUEUES) / INTERNAL_QUEUES  # waiting, not serving
    iops = min(depth, INTERNAL_QUEUES) / latency * 1000.0
    bandwidth = min(iops * block / 1024.0, CEILING_MBS)
    bandwidth *= SCHEDULER_SHARE[str(config["scheduler"])]
    read_ahead = int(config["read_ahead_kb"])
    if block <= 16:
        bandwidth *= {0: 1.0, 128: 1.05, 1024: 0.9}[read_ahead]
    iops = bandwidth * 1024.0 / block
    return {"bw_mbs": bandwidth, "iops": iops, "lat_mean_ms": depth / iops * 1000.0}


class ToyTarget(Target):
    """A formula standing in for a storage device (see the module doc)."""

    kind = "toy"
    Settings = ToySettings
    summary = "a made-up device answered by a formula: no root, runs take no time"
    measures_machine = False
    default_space = "toy"
    default_objective = "bw_mbs:max"
    settings: ToySettings

    def __init__(
        self,
        space: Space | str | None = None,
        settings: ToySettings | None = None,
        **values: Any,
    ) -> None:
        super().__init__(space, settings, **values)
        self.noise = noise_fraction(self.settings.toy_noise, "--toy-noise")
        self._rng = np.random.default_rng(int(self.settings.toy_seed))
        self._metrics: dict[str, float] | None = None

    def metric_names(self) -> frozenset[str]:
        return METRICS

    def apply(self, config: Config) -> None:
        assert self.space is not None
        self._metrics = toy_metrics(self.space.root.full_config(config))

    def measure(self, timeout: float | None = None, repetition: int = 0) -> Measurement:
        if self._metrics is None:
            raise TargetError("the toy target was run before a config was applied")
        factor = 1.0 + self.noise * float(self._rng.standard_normal())
        factor = max(factor, 0.01)
        return Measurement(
            {
                "bw_mbs": self._metrics["bw_mbs"] * factor,
                "iops": self._metrics["iops"] * factor,
                "lat_mean_ms": self._metrics["lat_mean_ms"] / factor,
            }
        )
