"""Sweeps and the noise study: a stored design measured with interleaved repetitions and a
reference config (`measure.sweeping`)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from stortune.enums import CampaignKind
from stortune.measure.campaigns import Measuring, new_campaign, open_campaign
from stortune.measure.log import CampaignLog
from stortune.measure.runner import Outcome, RunRules, workload_name
from stortune.measure.sweeping import SweepSettings, store_design
from stortune.objective import Objective
from stortune.space import Config, Space
from stortune.store import Store
from stortune.targets.base import Target
from stortune.workflows.reporting import Reporter, Silent, run_measuring
from stortune.workloads.base import Workload


def new_sweep(
    store: Store,
    name: str,
    space: Space,
    target: Target,
    workloads: Sequence[Workload | None],
    objective: Objective,
    configs: Sequence[Config],
    settings: SweepSettings,
    rules: RunRules,
    kind: CampaignKind = CampaignKind.SWEEP,
    reference: Config | None = None,
    seconds: float | None = None,
) -> Measuring:
    """A stored design (reference first, then `configs`), opened as any stored campaign is;
    `seconds`: a time limit on this sitting."""
    campaign = new_campaign(
        store, name, kind, space, target, workloads, objective,
        {**settings.to_dict(), **rules.to_dict()}, tuner="factorial", seed=settings.seed,
    )  # fmt: skip
    log = CampaignLog(store, campaign, [workload_name(w) for w in workloads])
    try:
        store_design(log, space, configs, reference)
    except BaseException:  # a config the space refuses, Ctrl-C: a sweep without its design
        store.delete_campaign(name)
        raise
    return open_campaign(store, campaign.name, seconds=seconds, target=target, workloads=workloads)


def noise_study(
    store: Store,
    space: Space,
    target: Target,
    workloads: Sequence[Workload | None],
    metric: str,
    config: Config,
    repetitions: int,
    rules: RunRules,
    reporter: Reporter | None = None,
    name: str | None = None,
    seconds: float | None = None,
) -> tuple[str, Outcome]:
    """`config` measured `repetitions` times, alternating with the reference (the default
    config): a sweep of one config with the reference after every run. `seconds` is a hard
    limit: a busy machine's waits count against it."""
    name = name or f"noise-{space.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    measuring = new_sweep(
        store, name, space, target, workloads, Objective(metric), [config],
        SweepSettings(repetitions, reference_every=1), rules, CampaignKind.NOISE, seconds=seconds,
    )  # fmt: skip
    return name, run_measuring(measuring, reporter or Silent(), name)
