"""The configs of SPA's three prediction scenarios (Noorshams et al., ICPE 2013, section 6) over
the bundled `spa` space: interpolation (random configs inside the trained ranges, Table 4),
extrapolation (values outside them, Table 5) and consolidation (the workload split over 2 and 3
co-located instances, section 6.2). Deterministic for a seed, so a measured campaign and its
evaluation agree on the configs.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np

from stortune.space import Config, Space

CONSOLIDATION_PER_CELL = 12  # the paper: 25 per scheduler x access
TRAIN_SCHEDULERS = ("none", "mq-deadline", "bfq", "kyber")
PAPER_SCHEDULERS = ("none", "bfq")  # NOOP and CFQ in the paper
ACCESSES = ("random", "sequential")
SMALL_REQUESTS = (1024, 2048)  # Table 5: below the trained 4-32 KiB
LARGE_REQUESTS = (36864, 40960)
READ_SHARES = (15, 20, 80, 85)
SMALL_SETS = (0.5, 0.75)  # of the smallest trained file set (the paper: 512, 768 MB vs 1 GB)
LARGE_SETS = (1.1, 1.2)  # of the largest (110, 120 GB vs 100 GB)


def wide_space(space: Space) -> Space:
    """The spa space with room for the extrapolation's values (outside the trained ranges)."""
    wider = {"request_size": (512, 65536), "file_set_size": (16, 8192)}
    params = [
        dataclasses.replace(p, low=wider[p.name][0], high=wider[p.name][1])
        if p.name in wider
        else p
        for p in space.parameters
    ]
    return Space("spa-wide", params, list(space.constraints), space.description, space.source)


def interpolation_configs(space: Space, n: int, seed: int, request_step: int = 512) -> list[Config]:
    """Random configs inside the factorial's ranges, request sizes rounded to `request_step`
    bytes (SPA's Table 4: 512; 4096 keeps buffered I/O page-aligned, as the factorial is),
    file sets to 16 MiB."""
    rng = np.random.default_rng(seed)
    size = space["file_set_size"]
    request = space["request_size"]
    out = []
    for _ in range(n):
        log_size = rng.uniform(math.log(size.low), math.log(size.high))
        out.append(
            space.validate(
                {
                    "request_size": int(
                        request_step * round(rng.uniform(request.low, request.high) / request_step)
                    ),
                    "read_share": int(rng.integers(0, 101)),
                    "access": str(rng.choice(["random", "sequential"])),
                    "file_set_size": int(16 * round(math.exp(log_size) / 16)),
                    "scheduler": str(rng.choice(TRAIN_SCHEDULERS)),
                }
            )
        )
    return out


def extrapolation_configs(space: Space) -> list[Config]:
    """Table 5: every combination of request sizes and file set sizes outside the trained
    ranges, read shares between the trained levels, both access patterns and both of the
    paper's schedulers (256 configs). Validate them with `wide_space`."""
    size = space["file_set_size"]
    sizes = [int(16 * round(f * size.low / 16)) for f in SMALL_SETS]
    sizes += [int(16 * round(f * size.high / 16)) for f in LARGE_SETS]
    out = []
    for request, fileset, read, access, scheduler in itertools.product(
        SMALL_REQUESTS + LARGE_REQUESTS, sizes, READ_SHARES, ACCESSES, PAPER_SCHEDULERS
    ):
        out.append(
            {
                "request_size": request,
                "file_set_size": fileset,
                "read_share": read,
                "access": access,
                "scheduler": scheduler,
            }
        )
    return out


def consolidation_configs(space: Space, seed: int) -> list[Config]:
    """Random configs inside the ranges, 12 per scheduler (none, bfq) x access, each as 2 and
    as 3 instances."""
    base = interpolation_configs(space, 8 * CONSOLIDATION_PER_CELL, seed + 1)
    out = []
    for scheduler, access in itertools.product(PAPER_SCHEDULERS, ACCESSES):
        cell = [c for c in base if c["access"] == access][:CONSOLIDATION_PER_CELL]
        for config in cell:
            for instances in (2, 3):
                out.append({**config, "scheduler": scheduler, "instances": instances})
    return out
