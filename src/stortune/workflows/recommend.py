"""A tuned campaign's config in the target's native form (ceph.conf sections; mkfs, mount and
sysfs/sysctl lines; name = value otherwise), with the gain measured against the default."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stortune.enums import CampaignKind
from stortune.measure.campaigns import space_of
from stortune.measure.verify import Gain, latest_verification, recommended_config, stored_gains
from stortune.space import Config
from stortune.space.risk import Risk, risks_of
from stortune.store import Campaign, Store
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
    """The recommendation of a campaign (a verification stands for the campaign it verified):
    the config `measure.verify.recommended_config` chooses, every verified gain beside it (the
    best, the best safe, compared configs), and the risks of any config shown."""
    tuned = store.campaign(name)
    if tuned.kind == CampaignKind.VERIFY and tuned.settings.get("of"):
        tuned = store.campaign(tuned.settings["of"])
    verification = latest_verification(store, tuned)
    config, why = recommended_config(store, tuned)
    gains = stored_gains(store, tuned)
    gain = gains.get("best")
    space = space_of(verification or tuned)
    lines = [f"stortune recommendation from campaign {tuned.name} (tuner {tuned.tuner or '-'})"]
    lines.append(f"recommended: {why}")
    if not gains:
        lines.append(f"{tuned.metric}: not re-measured (tune with --verify N to measure the gain)")
    labelled = _verified_configs(store, verification)
    for label, g in gains.items():
        lines.append(g.text() + ("" if g.significant else " (within noise)"))
        for risk in risks_of(space, labelled.get(label, {})):
            lines.append(f"RISK of {label}: {risk.text()}")
    risks = risks_of(space, config)
    lines += [f"RISK: {risk.text()}" for risk in risks]
    text = render(str(tuned.target.get("kind", "")), config, space, "\n".join(lines))
    return Recommendation(tuned.name, config, why, gain, text, risks)


def _verified_configs(store: Store, verification: Campaign | None) -> dict[str, Config]:
    if verification is None:
        return {}
    return {(t.info or {}).get("label", ""): dict(t.config) for t in store.trials(verification.id)}
