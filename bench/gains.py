"""What the gains benchmarks (stack_gains.py, magpie.py, app_gains.py) share: campaigns that
resume through the library's workflows, `--no-run` (read the store, measure nothing), the
sample's best config and ranking as `stortune tune --rank` makes them, one verification of
every config, its table rows, and the Markdown table.

A helper module, not a benchmark: running it does nothing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from stortune.enums import CampaignKind, CampaignStatus
from stortune.errors import StortuneError
from stortune.measure.campaigns import open_campaign
from stortune.measure.results import campaign_best
from stortune.measure.runner import RunRules
from stortune.measure.tuning import TuneSettings
from stortune.measure.verify import (
    Gain,
    Verification,
    VerifyRules,
    in_loop_gain,
    latest_verification,
    new_verification,
    paired_gain,
    round_values,
)
from stortune.objective import Objective
from stortune.space import Config, Space
from stortune.space.risk import risks_of
from stortune.store import Campaign, Store
from stortune.targets.base import Target
from stortune.workflows.rank import Ranking, RankOptions, best_known, ranked_space
from stortune.workflows.reporting import run_measuring
from stortune.workflows.tune import TuneJob, resume_tuning, start_tuning

METRIC = "total.bw_mbs"
PEERS = ("tpe", "random")
TUNER_NAMES = {"best": "stortune (bo)", "risky": "stortune (bo)", "wide": "wide search"}
NO_RUN = False  # --no-run: every campaign must be in the store, finished; nothing is measured


def no_run(what: str) -> None:
    """Stop where `--no-run` would measure."""
    if NO_RUN:
        raise StortuneError(f"--no-run: {what} is not finished in the store")


class Console:
    """Progress lines with the time they were printed (runs take hours)."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def note(self, text: str) -> None:
        print(f"[{(time.monotonic() - self.started) / 60:6.1f} min] {text}", flush=True)

    def measuring(self, label: str, measuring: Any) -> Any:
        from contextlib import nullcontext

        self.note(f"measuring {label}")
        return nullcontext(lambda _event: None)


# ---- campaigns that resume ------------------------------------------------------------------
def done(store: Store, name: str) -> bool:
    found = {c.name: c for c in store.campaigns()}
    return name in found and found[name].status == CampaignStatus.FINISHED


def exists(store: Store, name: str) -> bool:
    return name in {c.name for c in store.campaigns()}


def finish(store: Store, name: str, console: Console, agent: Path | None = None) -> None:
    """Resume an unfinished campaign (a tuning one through the workflow, for its extras; a
    DDPG one loads and saves back its `agent`)."""
    if exists(store, name) and not done(store, name):
        no_run(name)
        campaign = store.campaign(name)
        if campaign.kind == CampaignKind.TUNE:
            resume_tuning(store, name, agent=agent, reporter=console)
        else:
            run_measuring(open_campaign(store, name), console, name)


# Between two runs of a campaign nothing takes this long (a run's time limit and an OSD restart
# are minutes at most): a longer gap is the bench stopped and resumed later, not tuning time.
STOPPED_GAP = 600.0


def seconds_of(store: Store, name: str) -> float:
    """Wall time of a campaign: first run's start to last run's end, less the gaps during which
    the bench was stopped (0 without runs)."""
    runs = sorted(
        (r for t in store.trials(store.campaign(name).id) for r in t.runs),
        key=lambda r: r.started_at,
    )
    seconds, last_end = 0.0, None
    for run in runs:
        if last_end is not None and run.started_at - last_end <= STOPPED_GAP:
            seconds += max(0.0, run.started_at - last_end)
        seconds += run.ended_at - run.started_at
        last_end = run.ended_at if last_end is None else max(last_end, run.ended_at)
    return seconds


def runs_of(store: Store, name: str) -> int:
    return store.run_count(store.campaign(name).id)


def tune_campaign(
    store: Store,
    name: str,
    space: Space,
    target: Target,
    workloads: list[Any],
    tuner: str,
    budget: int,
    rules: RunRules,
    console: Console,
    intensify: bool,
    repetitions: int,
    allow_risk: bool = False,
    seed: int = 0,
    objective: Objective | None = None,
    rank: RankOptions | None = None,
) -> None:
    """A tuning campaign through `start_tuning` (ranked first when `rank` is given, as
    `stortune tune --rank` does), or the one in the store, finished."""
    if done(store, name):
        return
    if exists(store, name):
        finish(store, name, console)
        return
    no_run(name)
    settings = TuneSettings(
        budget=budget,
        repetitions=repetitions if intensify else 1,
        intensify=intensify,
        baseline=intensify,
        reference_every=10,
    )
    job = TuneJob(
        space=space,
        target=target,
        workloads=workloads,
        objective=objective or Objective(METRIC),
        settings=settings,
        rules=rules,
        tuner=tuner,
        seed=seed,
        name=name,
        allow_risk=allow_risk,
        rank=rank,
    )
    start_tuning(store, job, console)


def verify_all(
    store: Store,
    tuned: str,
    target: Target,
    space: Space,
    configs: dict[str, Config],
    repetitions: int,
    console: Console,
    max_rounds: int | None = None,
) -> None:
    """One verification of every distinct config, in paired rounds until each tuner's result
    is decided (`VerifyRules`). The latest one is kept (and finished) when it measured each of
    them, under any label, with the same rules; otherwise a new one is made. With `--no-run`,
    the latest one that measured each of them is read, whatever its rules."""
    unique = distinct(space, configs)
    sequential = tuple(label for label in unique if label != "default")
    rules = VerifyRules.of(repetitions, max_rounds, sequential=sequential)
    latest = latest_verification(store, store.campaign(tuned))
    measured = latest is not None and set(verified_labels(store, latest, space, configs)) == set(
        configs
    )
    if NO_RUN and measured and latest is not None and done(store, latest.name):
        return
    if not measured or latest is None or VerifyRules.from_settings(latest.settings) != rules:
        no_run(f"a verification of {', '.join(configs)} for {tuned}")
        latest = new_verification(
            store, store.campaign(tuned), target.describe(), unique, rules, space
        )
    if not done(store, latest.name):
        no_run(latest.name)
        run_measuring(open_campaign(store, latest.name, target=target), console, latest.name)


def distinct(space: Space, configs: dict[str, Config]) -> dict[str, Config]:
    """`configs` with each config once, under its first label (a tuner's best can be the
    sample's best, where it started: one config, measured once)."""
    out: dict[str, Config] = {}
    for label, config in configs.items():
        if all(space.validate(config) != space.validate(c) for c in out.values()):
            out[label] = config
    return out


def verified_labels(
    store: Store, verification: Campaign, space: Space, configs: dict[str, Config]
) -> dict[str, list[str]]:
    """For each label of `configs`, the labels under which `verification` measured that
    config (a campaign's best can be a config measured under another label)."""
    measured = []
    for trial in store.trials(verification.id):
        try:
            measured.append(((trial.info or {}).get("label", ""), space.validate(trial.config)))
        except StortuneError:  # a config of another space: it matches none of these
            continue
    out = {}
    for label, config in configs.items():
        wanted = space.validate(config)
        same = [m for m, c in measured if c == wanted]
        if same:
            out[label] = same
    return out


def guardrail_ratios(result: Any) -> dict[str, float | None]:
    """Each guardrail metric's verified ratio (a `LabelResult`'s checks), by metric."""
    return {
        c.guardrail.metric: None if c.ratio is None else c.ratio.ratio for c in result.guardrails
    }


def paired_over(
    store: Store, checked: Verification, space: Space, configs: dict[str, Config], ours: str
) -> dict[str, Gain]:
    """The config of label `ours` over each other label's config of the verification
    `checked`, paired from the rounds both were measured in (each found under whatever label
    the verification measured its config)."""
    verification = checked.campaign
    measured_as = verified_labels(store, verification, space, configs)
    values = round_values(store.trials(verification.id), checked.objective.value, n_workloads=1)
    mine = values.get((measured_as.get(ours) or [ours])[0])
    over = {}
    for label in configs:
        theirs = values.get((measured_as.get(label) or [label])[0])
        if label == ours or not mine or not theirs or theirs is mine or not set(theirs) & set(mine):
            continue
        over[label] = paired_gain(
            checked.objective.metric, checked.objective.direction, theirs, mine, label=ours
        )
    return over


def rows_for(
    store: Store,
    workload: str,
    space: Space,
    campaigns: dict[str, str],
    configs: dict[str, Config],
    extra_seconds: dict[str, float],
    objective: Objective | None = None,
) -> list[dict[str, Any]]:
    """Table rows from the verification of `configs`, by the label of the tuning campaign
    (`campaigns`) that found each: the paired gain on the workload's primary objective, its
    judgement, every guardrail's verified ratio and whether the runs reached the device
    (judged on `objective` when given: guardrails a campaign stored before they were
    declared, checked on the same runs)."""
    verification = latest_verification(store, store.campaign(campaigns["best"]))
    assert verification is not None
    found = Verification.read(store, verification, store.campaign(campaigns["best"]), objective)
    measured_as = verified_labels(store, verification, space, configs)
    out = []
    for label, campaign in campaigns.items():
        same = measured_as.get(label) or [label]
        alias = label if label in same else same[0]  # its own runs, where it has some
        result = found.results.get(alias)
        gain = result.gain if result else None
        tuned = store.campaign(campaign)
        config = configs.get(label, {})
        in_loop = in_loop_gain(store, tuned) if label == "best" else None
        reached = [found.reached.get(k) for k in ("default", alias)]
        row: dict[str, Any] = {
            "workload": workload,
            "tuner": TUNER_NAMES.get(label, label),
            "label": label,
            "risk_allowed": label == "risky",
            "objective": f"{found.objective.metric}:{found.objective.direction}",
            "evaluations": sum(1 for t in store.trials(tuned.id) if t.seq >= 0),
            "runs": runs_of(store, campaign),
            "seconds": seconds_of(store, campaign) + extra_seconds.get(label, 0.0),
            "gain": gain.ratio if gain else None,
            "ci_low": gain.ratio_low if gain else None,
            "ci_high": gain.ratio_high if gain else None,
            "rounds": gain.rounds if gain else None,
            "judgement": str(result.judgement) if result else None,
            "default_mean": gain.default_mean if gain else None,
            "mean": gain.best_mean if gain else None,
            "guardrails": guardrail_ratios(result) if result else {},
            "guardrail_checks": [c.to_dict() for c in result.guardrails] if result else [],
            "device_reached": None if None in reached else all(reached),
            "changes": {k: v for k, v in config.items() if space.default_config().get(k) != v},
            "risks": [r.text() for r in risks_of(space, config)],
        }
        if in_loop is not None:
            # the tuner's own gain is over its first incumbent, the sample's best: the
            # verification measured both, so the same ratio re-measured is beside it
            start = found.results.get((measured_as.get("sample") or ["sample"])[0])
            row.update(
                in_loop=in_loop.ratio,
                in_loop_low=in_loop.ratio_low,
                in_loop_high=in_loop.ratio_high,
                verified_over_start=gain.best_mean / start.gain.best_mean
                if gain and start
                else None,
            )
        out.append(row)
    return out


def full_config(config: Config, campaign: Any) -> Config:
    """A tuned config of a pinned space, with its held values (the whole stack's config)."""
    from stortune.measure.campaigns import space_of

    space = space_of(campaign)
    return {**space.default_config(), **config}


def sample_data(store: Store, sample: str, workload: str | None, objective: Objective | None):
    """A sample campaign's (or dataset file's) runs of one workload, and the objective to rank
    and pick its best on: `objective`'s metric relative to the sample's reference runs (the
    sample's own metric without one)."""
    from stortune.sources import load_source

    named = [f"{objective.metric}_rel"] if objective else None
    data = load_source(sample, store, metrics=named, workload=workload)
    direction = objective.direction if objective else "max"
    return data, Objective(data.metrics[0], direction)


def sample_best(
    store: Store,
    sample: str,
    workload: str | None,
    space: Space,
    objective: Objective | None = None,
) -> Config:
    """The sample's best config for a workload among those `space` holds (`best_known`)."""
    data, relative = sample_data(store, sample, workload, objective)
    return space.validate(best_known(data, space, relative))


def ranked(
    store: Store,
    sample: str,
    workload: str | None,
    space: Space,
    options: RankOptions,
    objective: Objective | None = None,
) -> Ranking:
    """`stortune tune --rank`'s ranking (`ranked_space`) of one sample campaign or dataset
    file alone: its runs of one workload, on `objective`'s metric relative to its reference
    runs (a tuning ranks on every run of its workloads stored for the space)."""
    data, relative = sample_data(store, sample, workload, objective)
    return ranked_space(data, space, options, relative, [sample])


def ranked_start(store: Store, name: str, space: Space) -> tuple[list[str], Config]:
    """What the ranking of a `rank`ed tuning campaign chose, from the space it stored: the
    parameters it tunes and the config it started from (with `--hold best`, the best config
    of the runs it ranked on; the others are held there)."""
    from stortune.measure.campaigns import space_of
    from stortune.tuners.topk import varies

    focused = space_of(store.campaign(name))
    free = [p.name for p in focused.parameters if varies(p)]
    return free, space.validate(focused.default_config())


def best_of(store: Store, name: str, space: Space) -> Config | None:
    """A tuning campaign's best config, with the values its (pinned) space held."""
    campaign = store.campaign(name)
    best = campaign_best(campaign, store.trials(campaign.id))
    return None if best is None else space.validate(full_config(best.config, campaign))


def wide_search(
    store: Store,
    name: str,
    safe: Space,
    target: Target,
    workloads: list[Any],
    objective: Objective,
    n: int,
    rules: RunRules,
    console: Console,
    seed: int,
) -> str:
    """A much larger search than the tuners': a Latin hypercube of `n` safe configs (resumed
    when the campaign `name` exists), a reference run every 10, so its best is judged on
    values relative to them; the campaign's name."""
    from stortune.workflows.rank import sample_space

    if exists(store, name):
        finish(store, name, console)
    else:
        no_run(name)
        sample_space(
            store, name, safe, target, workloads, objective, n, rules, console, seed=seed,
            reference_every=10,
        )  # fmt: skip
    return name


def wide_row(
    store: Store,
    wide: str,
    workload: str,
    space: Space,
    target: Target,
    ours: Config,
    objective: Objective,
    repetitions: int,
    console: Console,
    max_rounds: int | None = None,
) -> dict[str, Any]:
    """The wide search's best re-measured in paired rounds beside the default and `ours`
    (stortune's recommendation), in a verification of the wide campaign: its row says whether
    a safe gain was there to find, and how far stortune's result is from it
    (`best_over_wide`, from the same rounds)."""
    configs = {
        "default": space.default_config(),
        "best": space.validate(ours),
        "wide": sample_best(store, wide, workload, space, objective),
    }
    verify_all(store, wide, target, space, configs, repetitions, console, max_rounds)
    verification = latest_verification(store, store.campaign(wide))
    assert verification is not None
    checked = Verification.read(store, verification)
    over = paired_over(store, checked, space, configs, "best")
    wide_label = verified_labels(store, verification, space, configs)["wide"][0]
    result = checked.results.get(wide_label)
    row: dict[str, Any] = {
        "workload": workload,
        "tuner": TUNER_NAMES["wide"],
        "label": "wide",
        "risk_allowed": False,
        "objective": f"{checked.objective.metric}:{checked.objective.direction}",
        "evaluations": sum(1 for t in store.trials(store.campaign(wide).id) if t.seq >= 0),
        "runs": runs_of(store, wide),
        "seconds": seconds_of(store, wide),
        "changes": {k: v for k, v in configs["wide"].items() if space.default_config().get(k) != v},
        "risks": [],
    }
    if result is not None:
        found = result.gain
        row.update(
            gain=found.ratio, ci_low=found.ratio_low, ci_high=found.ratio_high,
            rounds=found.rounds, judgement=str(result.judgement),
            default_mean=found.default_mean, mean=found.best_mean,
            guardrails=guardrail_ratios(result),
            guardrail_checks=[c.to_dict() for c in result.guardrails],
            device_reached=checked.reached.get(wide_label),
        )  # fmt: skip
    if "wide" in over:  # stortune's best over the wide search's
        ours_over = over["wide"]
        row.update(best_over_wide=1 + ours_over.gain, best_over_wide_low=1 + ours_over.ci_low,
                   best_over_wide_high=1 + ours_over.ci_high)  # fmt: skip
    return row
