"""A tuned campaign's config in the target's native form (ceph.conf sections; mkfs, mount and
sysfs/sysctl lines; name = value otherwise), with the gain measured against the default."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from stortune.enums import CampaignKind
from stortune.measure.campaigns import space_of
from stortune.measure.verify import (
    SAFE_LABEL,
    Gain,
    latest_verification,
    recommended_config,
    stored_gains,
)
from stortune.space import Config
from stortune.space.risk import Risk, risks_of
from stortune.store import Campaign, Store
from stortune.tuners.render import InstallFile, install_files, render_files


class Advice(StrEnum):
    """What to do with a recommendation."""

    APPLY = "apply it"  # verified: its gain's interval lies above no change
    KEEP_DEFAULT = "keep the default"  # verified: within noise of the default (or worse)
    MEASURE_MORE = "measure more"  # not re-measured: one noisy run may have put it first


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "advice": str(self.advice),
            "config": self.config,
            "why": self.why,
            "gain": self.gain.to_dict() if self.gain else None,
            "text": self.text,
            "risks": [r.to_dict() for r in self.risks],
            "files": [asdict(f) for f in self.files],
        }


def recommend(store: Store, name: str) -> Recommendation:
    """The recommendation of a campaign (a verification stands for the campaign it verified):
    the config `measure.verify.recommended_config` chooses, what to do with it, every verified
    gain beside it (the best, the best safe, compared configs), the risks of any config shown,
    and the files that install it."""
    tuned = store.campaign(name)
    if tuned.kind == CampaignKind.VERIFY and tuned.settings.get("of"):
        tuned = store.campaign(tuned.settings["of"])
    verification = latest_verification(store, tuned)
    config, why = recommended_config(store, tuned)
    gains = stored_gains(store, tuned)
    space = space_of(verification or tuned)
    labelled = _verified_configs(store, verification)
    advice, verdict = advise(gains, tuned.name)
    lines = [
        f"stortune recommendation from campaign {tuned.name} (tuner {tuned.tuner or '-'}, "
        f"objective {tuned.metric}:{tuned.direction})",
        _verdict_line(advice, verdict),
        f"recommended: {why}",
    ]
    risks = risks_of(space, config)
    lines.append("risky values: " + ("; ".join(r.text() for r in risks) if risks else "none"))
    for label, g in gains.items():
        lines.append(g.text() + ("" if g.significant else " (within noise)"))
        for risk in risks_of(space, labelled.get(label, {})):
            lines.append(f"RISK of {label}: {risk.text()}")
    files = install_files(str(tuned.target.get("kind", "")), config, space)
    text = render_files(files, "\n".join(lines))
    return Recommendation(tuned.name, config, why, gains.get("best"), text, risks, advice, files)


def advise(gains: dict[str, Gain], campaign: str) -> tuple[Advice, str]:
    """What to do, and the verified numbers that say so. The config applied is the one
    `recommended_config` picks: the best when its gain lies above the noise, else the best
    safe one when that does."""
    best = gains.get("best")
    chosen = next(
        (gains[k] for k in ("best", SAFE_LABEL) if k in gains and gains[k].ci_low > 0), None
    )
    if best is None:
        return Advice.MEASURE_MORE, (
            "not re-measured, so its gain is unknown; `stortune tune --resume "
            f"{campaign} --verify 5` measures it against the default first"
        )
    if chosen is not None:
        return Advice.APPLY, f"verified {_ratio(chosen)} the default"
    if not best.known:
        return Advice.MEASURE_MORE, (
            f"a run measured {best.metric} at 0 or less, so no ratio to the default exists; "
            "compare the runs themselves"
        )
    noise = "" if best.significant else "within noise: "
    return Advice.KEEP_DEFAULT, f"{noise}the best config found measured {_ratio(best)} the default"


def advice_line(gains: dict[str, Gain], campaign: str) -> str:
    """The verdict of a campaign's verified gains as one line (what `recommend` says)."""
    return _verdict_line(*advise(gains, campaign))


def _verdict_line(advice: Advice, verdict: str) -> str:
    return f"{advice.upper()}: {verdict}"


def _ratio(g: Gain) -> str:
    return (
        f"{g.ratio:.2f}x ({g.confidence:.0%} CI {1 + g.ci_low:.2f}-{1 + g.ci_high:.2f}; "
        f"{g.n_default} + {g.n_best} runs)"
    )


def _verified_configs(store: Store, verification: Campaign | None) -> dict[str, Config]:
    if verification is None:
        return {}
    return {(t.info or {}).get("label", ""): dict(t.config) for t in store.trials(verification.id)}
