"""Reference runs: a fixed config measured every few evaluations, so each run can be read
relative to the reference measured around it.

On these VMs the same config's throughput drifts up to 2x within an hour (MEASURING.md);
ratios to a reference interpolated at the run's start time cancel slow drift. Sweeps and tuning
campaigns store their reference as one trial marked ``info['source'] == 'reference'`` whose runs
carry increasing repetition numbers, one per visit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from stortune.enums import RunStatus
from stortune.store import Campaign, Run, Store, Trial

REFERENCE = "reference"


def is_reference(trial: Trial) -> bool:
    return (trial.info or {}).get("source") == REFERENCE


def relative_values(
    runs: Sequence[Run], reference_runs: Sequence[Run], metric: str, workload: str
) -> dict[int, float]:
    """Each run's metric divided by the reference's, linearly interpolated at the run's start
    time between the reference runs around it (the nearest one outside their span). Keyed by
    run id; runs without a successful reference of their workload are left out."""
    points = sorted(
        (r.started_at, r.metrics[metric])
        for r in reference_runs
        if r.workload == workload and r.status == RunStatus.OK and metric in r.metrics
    )
    if not points:
        return {}
    times = np.array([t for t, _ in points])
    values = np.array([v for _, v in points], dtype=float)
    out = {}
    for run in runs:
        if run.workload != workload or run.status != RunStatus.OK or metric not in run.metrics:
            continue
        ref = float(np.interp(run.started_at, times, values))
        if ref > 0 and not math.isnan(ref):
            out[run.id] = run.metrics[metric] / ref
    return out


def campaign_relative(
    store: Store, campaign: Campaign, metric: str | None = None
) -> dict[int, float]:
    """Relative values of every run of a campaign with a reference trial, for any workload."""
    metric = metric or campaign.metric
    trials = store.trials(campaign.id)
    reference = [t for t in trials if is_reference(t)]
    if not reference:
        return {}
    ref_runs = reference[0].runs
    all_runs = [r for t in trials for r in t.runs]
    out: dict[int, float] = {}
    for name in {r.workload for r in all_runs}:
        out.update(relative_values(all_runs, ref_runs, metric, name))
    return out


DEFAULT_REFERENCE_EVERY = 5


def default_reference_every(target: Any) -> int:
    """How often a campaign measures the reference unless told: every 5 evaluations on a
    target whose numbers drift (one that measures this machine), never on a replayed table
    or a model."""
    return DEFAULT_REFERENCE_EVERY if target.measures_machine else 0
