"""How noisy is this machine? One config measured again and again, alternating with the
reference, before a campaign, to choose its runtime and repetitions.

The study is a sweep of one config with the reference measured after every run, so it is stored,
exported and resumed like any sweep. `analyse` reports the raw repeat RSD, the RSD of the same
runs relative to the reference interpolated at their start (what drift correction buys), and how
many repetitions a confidence interval of a given width needs, raw and normalised.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from stortune.enums import RunStatus
from stortune.measure.reference import campaign_relative, is_reference
from stortune.stats import summarize, t_quantile
from stortune.store import Campaign, Store


@dataclass
class NoiseReport:
    campaign: str
    metric: str
    runs: int
    mean: float
    raw_rsd: float
    normalised_rsd: float
    repetitions_for_target_raw: int | None
    repetitions_for_target_normalised: int | None
    target_ci: float
    drift: list[tuple[float, float, float | None]]  # (seconds, raw value, normalised value)

    def to_dict(self) -> dict:
        return asdict(self)


def repetitions_needed(
    rsd: float, target: float = 0.05, confidence: float = 0.9, most: int = 1000
) -> int | None:
    """Smallest n >= 2 with t(conf, n-1) * rsd / sqrt(n) <= target (None: more than `most`)."""
    if math.isnan(rsd):
        return None
    for n in range(2, most + 1):
        if t_quantile(0.5 + confidence / 2, n - 1) * rsd / math.sqrt(n) <= target:
            return n
    return None


def analyse(store: Store, campaign: Campaign, target: float = 0.05) -> NoiseReport:
    metric = campaign.metric
    trials = store.trials(campaign.id)
    studied = [t for t in trials if not is_reference(t)]
    runs = sorted(
        (r for t in studied for r in t.runs if r.status == RunStatus.OK), key=lambda r: r.started_at
    )
    relative = campaign_relative(store, campaign, metric)
    raw = summarize([r.metrics[metric] for r in runs])
    norm = summarize([relative[r.id] for r in runs if r.id in relative])
    start = runs[0].started_at if runs else 0.0
    drift = [(r.started_at - start, r.metrics[metric], relative.get(r.id)) for r in runs]
    return NoiseReport(
        campaign.name,
        metric,
        raw.n,
        raw.mean,
        raw.rsd,
        norm.rsd,
        repetitions_needed(raw.rsd, target),
        repetitions_needed(norm.rsd, target),
        target,
        drift,
    )
