"""A tuned campaign's config in the target's native form (ceph.conf sections; mkfs, mount and
sysfs/sysctl lines; name = value otherwise), with the gain measured against the default."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stortune.enums import CampaignKind
from stortune.measure.campaigns import space_of
from stortune.measure.verify import Gain, latest_verification, recommended_config, stored_gain
from stortune.space import Config
from stortune.space.risk import Risk, risks_of
from stortune.store import Store
from stortune.tuners.render import render


@dataclass
class Recommendation:
    campaign: str
    config: Config
    why: str
    gain: Gain | None
    text: str
    risks: list[Risk] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "config": self.config,
            "why": self.why,
            "gain": self.gain.to_dict() if self.gain else None,
            "text": self.text,
            "risks": [r.to_dict() for r in self.risks],
        }


def recommend(store: Store, name: str) -> Recommendation:
    """The recommendation of a campaign (a verification stands for the campaign it verified)."""
    tuned = store.campaign(name)
    if tuned.kind == CampaignKind.VERIFY and tuned.settings.get("of"):
        tuned = store.campaign(tuned.settings["of"])
    verification = latest_verification(store, tuned)
    config, why = recommended_config(store, tuned)
    gain = stored_gain(store, tuned)
    space = space_of(verification or tuned)
    header = f"stortune recommendation from campaign {tuned.name} (tuner {tuned.tuner or '-'})\n"
    header += (
        gain.text()
        if gain
        else f"{tuned.metric}: not re-measured (tune with --verify N to measure the gain)"
    )
    if gain is not None and gain.gain <= 0:
        header += "\nwarning: measured again, this config was no better than the default"
    risks = risks_of(space, config)
    for risk in risks:
        header += f"\nRISK: {risk.text()}"
    text = render(str(tuned.target.get("kind", "")), config, space, header)
    return Recommendation(tuned.name, config, why, gain, text, risks)
