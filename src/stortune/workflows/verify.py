"""Verification: default, best and compared configs re-measured interleaved, and each gain
over the default with its confidence interval (`measure.verify`)."""

from __future__ import annotations

from collections.abc import Mapping

from stortune.measure.campaigns import open_campaign
from stortune.measure.verify import Gain, new_verification, stored_gains
from stortune.space import Config, Space
from stortune.store import Campaign, Store
from stortune.targets.base import Target
from stortune.workflows.reporting import Reporter, Silent, run_measuring


def verify(
    store: Store,
    tuned: Campaign,
    target: Target,
    configs: Mapping[str, Config],
    repetitions: int,
    space: Space,
    reporter: Reporter | None = None,
) -> dict[str, Gain]:
    """Re-measure `configs` ({"default": ..., "best": ..., other labels ...}) as a new
    verification campaign of `tuned` (resumable like any campaign) and return each label's
    gain over the default: best's, and those of the compared configs that ran."""
    reporter = reporter or Silent()
    campaign = new_verification(store, tuned, target.describe(), configs, repetitions, space)
    measuring = open_campaign(store, campaign.name, target=target)
    run_measuring(measuring, reporter, f"re-measuring {', '.join(configs)}")
    return stored_gains(store, tuned)
