"""A tuned campaign's config in the target's native form (ceph.conf sections; mkfs, mount and
sysfs/sysctl lines; name = value otherwise), with the gain measured against the default."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from stortune.enums import CampaignKind
from stortune.measure.campaigns import space_of
from stortune.measure.verify import (
    Advice,
    Gain,
    Verification,
    recommended_config,
)
from stortune.space import Config
from stortune.space.risk import Risk, risks_of
from stortune.store import Store
from stortune.targets.install import InstallFile, install_files_for, render_files

__all__ = ["Advice", "Recommendation", "advice_line", "advise", "recommend"]


@dataclass
class Recommendation:
    campaign: str
    config: Config
    why: str
    gain: Gain | None
    text: str
    risks: list[Risk] = field(default_factory=list)
    advice: Advice = Advice.MEASURE_MORE
    files: list[InstallFile] = field(default_factory=list)
    verification: Verification | None = None

    @property
    def decided(self) -> bool:
        """Whether the verdict says what to do: an open one (measure more, undecided) rests on
        noise, so its config is no file to install."""
        return self.advice not in (Advice.MEASURE_MORE, Advice.UNDECIDED)

    def to_dict(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "advice": str(self.advice),
            "config": self.config,
            "why": self.why,
            "gain": self.gain.to_dict() if self.gain else None,
            "verification": None if self.verification is None else self.verification.to_dict(),
            "text": self.text,
            "risks": [r.to_dict() for r in self.risks],
            "files": [asdict(f) for f in self.files],
        }


def recommend(store: Store, name: str) -> Recommendation:
    """The recommendation of a campaign (a verification stands for the campaign it verified):
    the config its `Verification` recommends, what to do with it, every verified gain beside
    it (the best, the best safe, compared configs) with its guardrails, the risks of any
    config shown, and the files that install it."""
    tuned = store.campaign(name)
    if tuned.kind == CampaignKind.VERIFY and tuned.settings.get("of"):
        tuned = store.campaign(tuned.settings["of"])
    verification = Verification.of(store, tuned)
    config, why = recommended_config(store, tuned)
    space = space_of(verification.campaign if verification else tuned)
    advice, verdict = advise(verification, tuned.name)
    lines = [
        f"stortune recommendation from campaign {tuned.name} (tuner {tuned.tuner or '-'}, "
        f"objective {tuned.metric}:{tuned.direction})",
        _verdict_line(advice, verdict),
        f"recommended: {why}",
    ]
    risks = risks_of(space, config)
    lines.append("risky values: " + ("; ".join(r.text() for r in risks) if risks else "none"))
    results = verification.results if verification else {}
    for label, result in results.items():
        lines.append(f"{result.gain.text()}: {result.judgement}")
        lines.extend(f"  guardrail {check.text()}" for check in result.guardrails)
        for risk in risks_of(space, verification.configs.get(label, {}) if verification else {}):
            lines.append(f"RISK of {label}: {risk.text()}")
    files = install_files_for(str(tuned.target.get("kind", "")), config, space)
    text = render_files(files, "\n".join(lines))
    gain = results["best"].gain if "best" in results else None
    return Recommendation(tuned.name, config, why, gain, text, risks, advice, files, verification)


def advise(verification: Verification | None, campaign: str) -> tuple[Advice, str]:
    """What to do, and the verified numbers that say so (`Verification.recommended`)."""
    if verification is None or "best" not in verification.results:
        return Advice.MEASURE_MORE, (
            "not re-measured, so its gain is unknown; `stortune tune --resume "
            f"{campaign} --verify 5` measures it against the default first"
        )
    _, advice, why = verification.recommended()
    return advice, why


def advice_line(verification: Verification | None, campaign: str) -> str:
    """The verdict of a campaign's verification as one line (what `recommend` says)."""
    return _verdict_line(*advise(verification, campaign))


def _verdict_line(advice: Advice, verdict: str) -> str:
    return f"{advice.upper()}: {verdict}"
