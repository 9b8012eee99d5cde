"""Everything a report reads, loaded once: the campaign, its space, a device profile, and what
`stortune.findings` derived from it (trials, analysis table, importance, models, curves,
verification, recommendation). Sections and the headline only look things up here, so a
missing piece is found in one place and each section says why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stortune.enums import CampaignKind
from stortune.errors import StortuneError
from stortune.findings import Findings, derive_findings
from stortune.space import Space, parse_space
from stortune.store import Campaign, Run, Store, Trial


@dataclass
class Context:
    """The loaded inputs of one report; `space_note` says why `space` is None."""

    store: Store
    campaign: Campaign
    space: Space | None
    space_note: str
    findings: Findings
    profile: dict[str, Any] | None
    profile_source: str
    subject: str = ""

    @property
    def trials(self) -> list[Trial]:
        return self.findings.trials

    @property
    def ok_trials(self) -> list[Trial]:
        return self.findings.ok_trials

    @property
    def runs(self) -> list[Run]:
        return [r for t in self.trials for r in t.runs]


def load_context(
    store: Store,
    name: str,
    workload: str | None = None,
    profile: dict[str, Any] | None = None,
    profile_source: str = "",
    subject: str = "",
) -> Context:
    """Read a campaign (a verification campaign stands for the campaign it verified)."""
    campaign = store.campaign(name)
    if campaign.kind == CampaignKind.VERIFY and campaign.settings.get("of"):
        campaign = store.campaign(campaign.settings["of"])
    findings = derive_findings(store, campaign, workload)
    try:
        space, space_note = parse_space(campaign.space_yaml, f"campaign {campaign.name!r}"), ""
    except StortuneError as exc:
        space, space_note = None, f"The stored space cannot be read: {exc}"
    if profile is None:
        profile, profile_source = stored_profile(store)
    return Context(store, campaign, space, space_note, findings, profile, profile_source, subject)


def stored_profile(store: Store) -> tuple[dict[str, Any] | None, str]:
    """The latest campaign of kind ``profile`` that carries a profile (``settings['profile']``,
    the JSON `stortune profile` writes)."""
    for campaign in reversed(store.campaigns()):
        if campaign.kind == CampaignKind.PROFILE and isinstance(
            campaign.settings.get("profile"), dict
        ):
            return campaign.settings["profile"], f"campaign {campaign.name}"
    return None, ""
