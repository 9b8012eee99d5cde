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
from pathlib import Path

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


def plot_drift(report: NoiseReport, directory: Path) -> list[Path]:
    """Raw values and values relative to the reference over time (PNG and SVG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    times = [t for t, _, _ in report.drift]
    top.plot(times, [v for _, v, _ in report.drift], "o-", color="#369")
    top.set_ylabel(f"{report.metric} (raw)")
    top.set_title(
        f"{report.campaign}: raw RSD {report.raw_rsd:.1%}, "
        f"normalised RSD {report.normalised_rsd:.1%}"
    )
    rel = [(t, n) for t, _, n in report.drift if n is not None]
    bottom.plot([t for t, _ in rel], [n for _, n in rel], "o-", color="#c60")
    bottom.set_ylabel("relative to reference")
    bottom.set_xlabel("seconds since the first run")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{report.campaign}-drift.{ext}" for ext in ("png", "svg")]
    for path in paths:
        fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return paths
