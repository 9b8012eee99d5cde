"""Everything a report reads, loaded once: the campaign, its space, a device profile, and what
`stortune.findings` derived from it (trials, analysis table, importance, models, curves,
verification, recommendation). Sections and the headline only look things up here, so a
missing piece is found in one place and each section says why.

A campaign tuned after a ranking (`tune --rank`) searched a space cut from a whole one: the
untuned parameters pinned ("held") at one value each, and with `--hold best` every parameter
starting at the ranking sample's best config. Its own space's defaults are then where tuning
started, not the defaults. `whole` is the whole space (the verification's, which keeps it, or
the bundled space of that name), `held` the pinned parameters, and `started_at_default` whether
the first evaluation measured the whole space's default: what the report calls "default" is
always the whole space's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stortune.enums import CampaignKind
from stortune.errors import StortuneError
from stortune.findings import Findings, derive_findings, source_of
from stortune.space import Config, Space, load_space, parse_space
from stortune.store import Campaign, Run, Store, Trial


@dataclass
class Context:
    """The loaded inputs of one report; `space_note` says why `space` is None."""

    store: Store
    campaign: Campaign
    space: Space | None  # the campaign's own (a ranked campaign's: pinned)
    space_note: str
    findings: Findings
    profile: dict[str, Any] | None
    profile_source: str
    subject: str = ""
    whole: Space | None = None  # the whole space (module doc); `space` when not cut from one
    held: Config = field(default_factory=dict)  # parameters pinned to one value: that value
    started_at_default: bool = True  # the first evaluation measured the whole space's default

    @property
    def trials(self) -> list[Trial]:
        return self.findings.trials

    @property
    def ok_trials(self) -> list[Trial]:
        return self.findings.ok_trials

    @property
    def runs(self) -> list[Run]:
        return [r for t in self.trials for r in t.runs]

    @property
    def default(self) -> Config:
        """The whole space's default config ({} without a space)."""
        space = self.whole or self.space
        return space.default_config() if space is not None else {}

    @property
    def start(self) -> Config:
        """The config tuning started from: the campaign's own space's default."""
        return self.space.default_config() if self.space is not None else {}

    @property
    def start_name(self) -> str:
        """What to call the first evaluation's config."""
        if self.started_at_default:
            return "default"
        if self.held:
            return "start (held at the sample's best)"
        return "start"

    @property
    def start_words(self) -> str:
        """The config tuning started from, in a sentence."""
        if self.started_at_default:
            return "the default"
        if self.held:
            return "the ranking sample's best config, where the untuned parameters were held"
        return "a config other than the default"


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
    whole = whole_space(space, findings.verification)
    held = held_values(space, whole)
    first = next((t for t in findings.trials if source_of(t) == "default"), None)
    started = first is None or at_default(first, whole)
    return Context(
        store, campaign, space, space_note, findings, profile, profile_source, subject,
        whole, held, started,
    )  # fmt: skip


def whole_space(own: Space | None, verification: Campaign | None) -> Space | None:
    """The whole space `own` was cut from: the verification's (which keeps it), else the
    bundled space of the same name when `own` pins parameters it lets vary, else `own`."""
    if verification is not None:
        try:
            return parse_space(verification.space_yaml, f"campaign {verification.name!r}")
        except StortuneError:
            pass
    if own is None:
        return None
    try:
        bundled = load_space(own.name)
    except StortuneError:
        return own
    if set(own.names) <= set(bundled.names) and held_values(own, bundled):
        return bundled
    return own


def held_values(own: Space | None, whole: Space | None) -> Config:
    """The parameters `own` pins to one value where `whole` lets them vary, with that value."""
    if own is None or whole is None or own is whole:
        return {}
    return {
        p.name: p.default
        for p in own.parameters
        if p.cardinality == 1 and p.name in whole and whole[p.name].cardinality > 1
    }


def at_default(first: Trial, whole: Space | None) -> bool:
    """Whether the first evaluation measured the whole space's default config (without a
    space to tell: taken as so)."""
    if whole is None:
        return True
    try:
        return whole.validate(dict(first.config)) == whole.default_config()
    except StortuneError:
        return False


def stored_profile(store: Store) -> tuple[dict[str, Any] | None, str]:
    """The latest campaign of kind ``profile`` that carries a profile (``settings['profile']``,
    the JSON `stortune profile` writes)."""
    for campaign in reversed(store.campaigns()):
        if campaign.kind == CampaignKind.PROFILE and isinstance(
            campaign.settings.get("profile"), dict
        ):
            return campaign.settings["profile"], f"campaign {campaign.name}"
    return None, ""
