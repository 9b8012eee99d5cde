"""What stortune found in a stored campaign: everything a view shows that is derived rather
than stored. `derive_findings` computes it once from a store and a campaign: the trials with
their values, the analysis table, the re-measured gain, the best trial, which parameters matter
(Carver, Lasso, or why there is no ranking), how well models predict the metric (cross-
validated), the tuning curves, and the config to recommend and why.

Why a package of its own, beside `measure` and `importance` rather than in `report` or
`workflows`: the HTML report only renders, and the same findings serve any other view of a
campaign (--json, a notebook) without HTML; and `workflows` runs commands that measure or change
the system, while this only reads the store and analyses. It calls the one rule of each kind
where one exists: `measure.results.campaign_best`, `measure.verify.Verification` and
`recommended_config`, `importance.rank_carver` and `rank_lasso`.

An analysis that breaks unexpectedly does not stop the others: its exception is kept in
`Findings.errors` under the part's name, for the view to say why that part is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from stortune.enums import Direction, RunStatus
from stortune.errors import DatasetError, StortuneError
from stortune.findings.accuracy import Accuracy, assess_campaign
from stortune.findings.importance import Importance, rank_campaign
from stortune.findings.table import MIN_CONFIGS, Analysis, load_analysis, valued_trials
from stortune.findings.tuning import Curve, tuning_curves
from stortune.measure.reference import is_reference
from stortune.measure.results import campaign_best
from stortune.measure.verify import Gain, Verification, in_loop_gain, recommended_config
from stortune.space import Config, Space, parse_space
from stortune.space.risk import Risk, risks_of
from stortune.store import Campaign, Store, Trial
from stortune.values import plain

__all__ = [
    "MIN_CONFIGS",
    "Accuracy",
    "Analysis",
    "Curve",
    "Findings",
    "Importance",
    "derive_findings",
    "source_of",
]

T = TypeVar("T")


@dataclass
class Findings:
    """A campaign's derived results; `analysis_note` says why `analysis` is None."""

    trials: list[Trial]
    analysis: Analysis | None
    analysis_note: str
    verification: Campaign | None
    checked: Verification | None  # the verification read back: judgements, guardrails
    gain: Gain | None
    best: Trial | None
    default_value: float | None
    importance: Importance
    accuracy: Accuracy
    curves: list[Curve]
    recommended: Config | None
    recommended_why: str
    errors: dict[str, Exception] = field(default_factory=dict)
    gains: dict[str, Gain] = field(default_factory=dict)  # every verified label's gain
    verified: dict[str, Config] = field(default_factory=dict)  # the verified configs by label
    risks: dict[str, list[Risk]] = field(default_factory=dict)  # their risky values, by label
    in_loop: Gain | None = None  # the best config's gain as the tuning runs measured it
    disturbed: int = 0  # runs other work spoilt (redone, or left as placeholders)
    load_max: float | None = None  # the highest load average seen around a run

    @property
    def ok_trials(self) -> list[Trial]:
        return [t for t in self.trials if t.value is not None]

    @property
    def top(self) -> list[str]:
        """The parameters that matter most, in order (none when there is no ranking)."""
        return self.importance.top


def derive_findings(store: Store, campaign: Campaign, workload: str | None = None) -> Findings:
    """Everything derived about `campaign` (module doc); `workload` picks the workload analysed
    when it ran several (default: the first), and must be one it ran."""
    trials = valued_trials(store, campaign)
    names = sorted({r.workload for t in trials for r in t.runs})
    if workload is not None and names and workload not in names:
        raise DatasetError(
            f"campaign {campaign.name!r} has no runs of workload {workload!r} "
            f"(have: {', '.join(names)})"
        )
    analysis, note = load_analysis(store, campaign, trials, workload)
    try:
        checked = Verification.of(store, campaign)
    except StortuneError:
        checked = None
    gains = checked.gains if checked else {}
    gain = gains.get("best")
    verification = checked.campaign if checked else None
    verified = checked.configs if checked else {}
    space = _space(verification or campaign)
    risks = {label: risks_of(space, c) for label, c in verified.items()} if space else {}
    runs = [r for t in trials for r in t.runs]
    loads = [
        r.metrics[k]
        for r in runs
        for k in ("sys.loadavg_start", "sys.loadavg_end")
        if isinstance(r.metrics.get(k), int | float)
    ]
    errors: dict[str, Exception] = {}
    evaluations = [t for t in trials if not is_reference(t)]
    recommended, why = _attempt(
        errors, "recommendation", lambda: recommend(store, campaign, analysis), (None, "")
    )
    return Findings(
        trials=trials,
        analysis=analysis,
        analysis_note=note,
        verification=verification,
        checked=checked,
        gain=gain,
        best=campaign_best(campaign, evaluations),
        default_value=next((t.value for t in trials if source_of(t) == "default"), None),
        importance=_attempt(
            errors, "importance", lambda: rank_campaign(analysis, note), Importance()
        ),
        accuracy=_attempt(errors, "models", lambda: assess_campaign(analysis, note), Accuracy()),
        curves=_attempt(errors, "tuning", lambda: tuning_curves(store, campaign, trials), []),
        recommended=recommended,
        recommended_why=why,
        errors=errors,
        gains=gains,
        verified=verified,
        risks=risks,
        in_loop=_attempt(errors, "in_loop", lambda: in_loop_gain(store, campaign), None),
        disturbed=sum(
            r.status == RunStatus.DISTURBED or bool((r.info or {}).get("disturbed_attempts"))
            for r in runs
        ),
        load_max=max(loads) if loads else None,
    )


def _space(campaign: Campaign) -> Space | None:
    try:
        return parse_space(campaign.space_yaml, f"campaign {campaign.name!r}")
    except StortuneError:
        return None


def source_of(trial: Trial) -> str:
    """Where a trial's config came from: the tuner, the default, a reference, a label."""
    info = trial.info or {}
    return str(info.get("source") or info.get("label") or "tuner")


def recommend(
    store: Store, campaign: Campaign, analysis: Analysis | None
) -> tuple[Config | None, str]:
    """`measure.verify.recommended_config`; for a campaign whose trials carry no value (an
    imported dataset, a sweep whose configs are not finished) the best row of its table."""
    try:
        return recommended_config(store, campaign)
    except StortuneError:
        pass
    if analysis is None:
        return None, ""
    configs = analysis.configs
    frame = configs.frame.dropna(subset=[analysis.metric])
    if not len(frame):
        return None, ""
    column = frame[analysis.metric]
    index = column.idxmax() if campaign.direction == Direction.MAX else column.idxmin()
    row = frame.loc[index, configs.params]
    return {k: plain(v) for k, v in row.items()}, "the best measured config"


def _attempt(errors: dict[str, Exception], part: str, compute: Callable[[], T], empty: T) -> T:
    """`compute()`, or `empty` with the exception kept under `part`."""
    try:
        return compute()
    except Exception as exc:  # noqa: BLE001 - one broken analysis must not cost the others
        errors[part] = exc
        return empty
