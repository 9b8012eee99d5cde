"""Verification: default, best and compared configs re-measured in rounds until each verdict
is decided, read back as one `Verification` (`measure.verify`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from stortune.measure.campaigns import open_campaign
from stortune.measure.verify import Verification, VerifyRules, new_verification
from stortune.space import Config, Space
from stortune.store import Campaign, Store
from stortune.targets.base import Target
from stortune.workflows.reporting import Reporter, Silent, run_measuring

if TYPE_CHECKING:
    from stortune.cluster.client import Cluster


def verify(
    store: Store,
    tuned: Campaign,
    target: Target,
    configs: Mapping[str, Config],
    rules: VerifyRules,
    space: Space,
    reporter: Reporter | None = None,
    cluster: Cluster | None = None,
) -> Verification:
    """Re-measure `configs` ({"default": ..., "best": ..., other labels ...}) as a new
    verification campaign of `tuned` (resumable like any campaign) under `rules`, and read it
    back: each label's paired gain over the default, guardrails and judgement. On a `cluster`,
    the rounds are measured on one of its nodes."""
    reporter = reporter or Silent()
    campaign = new_verification(store, tuned, target.describe(), configs, rules, space)
    measuring = open_campaign(store, campaign.name, target=target, cluster=cluster)
    run_measuring(measuring, reporter, f"re-measuring {', '.join(configs)}")
    return Verification.read(store, store.campaign(campaign.name), tuned)
