"""Verified gains on the real stack: stortune's flow against Optuna TPE and random search.

Local stack (the `stack` space: ext4/xfs/btrfs with their mkfs and mount options, block layer,
vm; a 2 GiB loop image, the benchmark's page cache capped at 128 MiB so runs reach the stack),
for each workload:

1. One Latin hypercube of the safe stack space, measured once under every workload with short
   runs (the default config as a reference every 10), shared by all workloads: the ranking's
   data.
2. stortune's flow, as `stortune tune --rank` runs it: Carver and Lasso rank the parameters
   from the sample; the default tuner (bo) tunes the top K (with the parameters their
   conditions read), starting from the sample's best config and holding the others there, with
   intensification (paired races; the best is the last incumbent), `--budget` evaluations.
   Once more with risk allowed: the top K plus every parameter whose values carry a risk.
3. The peers, as a user of Optuna would run them: TPE and random search on the whole safe
   space, one run per config, the best single value, the same number of evaluations.
4. One verification per workload, interleaved, `--verify` repetitions each: the default, each
   tuner's best, the sample's best and the risky best, so every gain comes from the same runs.
5. Where stortune's safe result is not verified at 1.1x the default or more (`--wide N`): a
   much larger search, a Latin hypercube of N safe configs for that workload alone, its best
   verified in the same way beside the others: was there a safe gain to find?

Ceph (`--ceph`): the cleaned Ceph space on a 1-OSD mini-cluster, rados bench write, sequential
and random read measured together (their geometric mean is the objective): a Lasso ranking
from samples drawn until it stands above the noise (the top K of bootstrap resamples agree with
the whole sample's), then bo on the top K, the other options at Ceph's defaults (as SAPPHIRE
leaves them), and the peers on the whole safe space, verified on 3 OSDs beside the default,
the expert config, the sample's best and bo's result with Ceph's checks turned off (its risky
values: no checksums, no message CRC), what risk would buy. A config that does not run on the
3-OSD cluster keeps its row, with the reason in place of a gain.

Every campaign lives in one store (`--store`); an interrupted run resumes where it stopped.
Results: bench/results/stack-gains.json (`rows`: workload x tuner x risk setting, with the
verified gain and its 90% CI) and the Markdown table printed at the end.

Needs root. Run: python bench/stack_gains.py [--workloads metadata,stream,rand4k,dbfsync]
                 [--budget 60] [--wide N [--wide-only]] [--ceph] [--only-ceph]
(--wide-only: step 5 alone, for the local rows already in the results file, beside the
recommendation recorded there)
"""

from __future__ import annotations

import argparse
import json
import math
import re
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stortune.enums import CampaignKind, CampaignStatus
from stortune.errors import StortuneError
from stortune.measure.campaigns import open_campaign
from stortune.measure.results import campaign_best
from stortune.measure.runner import RunRules
from stortune.measure.tuning import TuneSettings
from stortune.measure.verify import (
    Verification,
    VerifyRules,
    in_loop_gain,
    latest_verification,
    new_verification,
    paired_gain,
    round_values,
)
from stortune.objective import Objective
from stortune.space import Config, Space, load_space
from stortune.space.risk import risks_of, safe_space
from stortune.space.risk import risky_values as values_at_risk
from stortune.store import Campaign, Store
from stortune.targets.base import Target
from stortune.tuners.topk import pin, with_parents
from stortune.workflows.rank import sample_space
from stortune.workflows.reporting import run_measuring
from stortune.workflows.tune import TuneJob, resume_tuning, start_tuning
from stortune.workloads.declared import objective_for

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "stack-gains.json"
METRIC = "total.bw_mbs"
LOCAL_WORKLOADS = ("metadata", "stream", "rand4k", "dbfsync")
RADOS = ("rados-write", "rados-seq", "rados-rand")
PEERS = ("tpe", "random")
TUNER_NAMES = {"best": "stortune (bo)", "risky": "stortune (bo)", "wide": "wide search"}


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


# ---- campaigns that resume -------------------------------------------------------------------
def done(store: Store, name: str) -> bool:
    found = {c.name: c for c in store.campaigns()}
    return name in found and found[name].status == CampaignStatus.FINISHED


def exists(store: Store, name: str) -> bool:
    return name in {c.name for c in store.campaigns()}


def finish(store: Store, name: str, console: Console, agent: Path | None = None) -> None:
    """Resume an unfinished campaign (a tuning one through the workflow, for its extras; a
    DDPG one loads and saves back its `agent`)."""
    if exists(store, name) and not done(store, name):
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


# ---- ranking from the sample ------------------------------------------------------------------
def ranked(
    store: Store, sample: str, workload: str | None, space: Space, k: int, metric: str | None = None
) -> list[str]:
    """Carver's and Lasso's top parameters for one workload, interleaved (Carver first), on
    `metric` relative to the sample's reference runs (default: the sample's objective)."""
    from dataclasses import replace

    from stortune.importance import rank_dataset
    from stortune.sources import load_source
    from stortune.tuners.topk import rankable, top_k

    named = [f"{metric}_rel"] if metric else None
    dataset = load_source(sample, store, metrics=named, workload=workload)
    dataset = replace(dataset, params=rankable(space, dataset.params))
    carver = top_k(rank_dataset(dataset, "carver", dataset.metrics[0], "top-n", k), k)
    lasso = top_k(rank_dataset(dataset, "lasso", dataset.metrics[0]), k)
    out: list[str] = []
    for pair in zip(carver, lasso, strict=False):
        for name in pair:
            if name not in out and name in space and len(out) < k:
                out.append(name)
    return out


def sample_best(
    store: Store,
    sample: str,
    workload: str | None,
    space: Space,
    objective: Objective | None = None,
) -> Config:
    """The sample's best config for a workload (mean of its runs relative to the reference,
    on `objective`'s metric, else the sample's) among those `space` holds: a sample drawn
    before a value was found risky can hold it."""
    from stortune.sources import load_source

    named = [f"{objective.metric}_rel"] if objective else None
    data = load_source(sample, store, metrics=named, workload=workload).aggregated()
    metric = data.metrics[0]
    lowest_first = objective is not None and objective.direction == "min"
    frame = data.frame.dropna(subset=[metric]).sort_values(metric, ascending=lowest_first)
    for _, row in frame.iterrows():
        raw = {p: row[p] for p in data.params if p in space and str(row[p]) not in ("n/a", "nan")}
        try:
            return space.validate(
                {k: (v.item() if hasattr(v, "item") else v) for k, v in raw.items()}
            )
        except StortuneError:
            continue
    raise StortuneError(f"no config of {sample} is in the space {space.name!r}")


# ---- one workload's campaigns ---------------------------------------------------------------
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
) -> None:
    if done(store, name):
        return
    if exists(store, name):
        finish(store, name, console)
        return
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
    them, under any label, with the same rules; otherwise a new one is made."""
    unique = distinct(space, configs)
    sequential = tuple(label for label in unique if label != "default")
    rules = VerifyRules.of(repetitions, max_rounds, sequential=sequential)
    latest = latest_verification(store, store.campaign(tuned))
    if (
        latest is None
        or VerifyRules.from_settings(latest.settings) != rules
        or set(verified_labels(store, latest, space, configs)) != set(configs)
    ):
        latest = new_verification(
            store, store.campaign(tuned), target.describe(), unique, rules, space
        )
    if not done(store, latest.name):
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


def pooled(values: dict[str, list[float]], labels: dict[str, list[str]]) -> dict[str, list[float]]:
    """Each label's re-measurements, over every label that measured its config (the Ceph
    part's per-workload values)."""
    return {label: [v for m in same for v in values.get(m, [])] for label, same in labels.items()}


def rows_for(
    store: Store,
    workload: str,
    space: Space,
    campaigns: dict[str, str],
    configs: dict[str, Config],
    extra_seconds: dict[str, float],
) -> list[dict[str, Any]]:
    """Table rows from the verification of `configs`, by the label of the tuning campaign
    (`campaigns`) that found each: the paired gain on the workload's primary objective, its
    judgement, every guardrail's verified ratio and whether the runs reached the device."""
    verification = latest_verification(store, store.campaign(campaigns["best"]))
    assert verification is not None
    found = Verification.read(store, verification, store.campaign(campaigns["best"]))
    measured_as = verified_labels(store, verification, space, configs)
    out = []
    for label, campaign in campaigns.items():
        alias = (measured_as.get(label) or [label])[0]
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
            "guardrails": {
                c.guardrail.metric: None if c.ratio is None else c.ratio.ratio
                for c in (result.guardrails if result else ())
            },
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


def local(args: argparse.Namespace, store: Store, console: Console) -> list[dict[str, Any]]:
    from stortune.targets.localfs import LocalFsTarget
    from stortune.workloads.fio import FioWorkload

    stack = load_space("stack")
    safe = safe_space(stack)
    target = LocalFsTarget(stack, image_size="2g", memory_limit="128m")
    rules = RunRules(timeout=args.runtime * 10 + 120, check_disturbance=True, busy_wait=3600)
    names = list(args.workloads)
    sample = "stack-sample"
    if not done(store, sample):
        if exists(store, sample):
            finish(store, sample, console)
        else:
            short = [FioWorkload(w, runtime=args.sample_runtime) for w in names]
            sample_space(
                store, sample, safe, target, short, Objective(METRIC), args.sample, rules,
                console, seed=args.seed, reference_every=10,
            )  # fmt: skip
    sampled = sampled_workloads(store, sample)
    if missing := [w for w in names if w not in sampled]:
        raise StortuneError(
            f"the sample in {args.store} measured {', '.join(sampled)}, not "
            f"{', '.join(missing)}: measure those with another --store"
        )
    sample_seconds = seconds_of(store, sample)
    rows = []
    for w in names:
        workload = [FioWorkload(w, runtime=args.runtime)]
        # what the workload exists for (dbfsync: commits per second), its guardrails beside
        objective = objective_for(workload, None, say=console.note)
        top = with_parents(safe, ranked(store, sample, w, safe, args.top_k, objective.metric))
        best_row = sample_best(store, sample, w, safe, objective)
        console.note(f"{w}: top {args.top_k} {top}; sample's best {best_row}")
        # as `stortune tune --rank` does (--hold best): the others held at the sample's best,
        # where the campaign starts, so its first incumbent is that config
        focused = pin(safe, top, best_row, best_row)
        risky_params = [p.name for p in stack.parameters if p.extra.get("risk")]
        risky_free = with_parents(stack, list(dict.fromkeys([*top, *risky_params])))
        risky_focus = pin(stack, risky_free, best_row, best_row)
        common = dict(target=target, workloads=workload, budget=args.budget, rules=rules,
                      console=console, repetitions=args.pairs, seed=args.seed,
                      objective=objective)  # fmt: skip
        campaigns = {"best": f"{w}-bo", "risky": f"{w}-bo-risk"}
        tune_campaign(store, f"{w}-bo", space=focused, tuner="bo", intensify=True, **common)
        for peer in PEERS:
            campaigns[peer] = f"{w}-{peer}"
            tune_campaign(store, f"{w}-{peer}", space=safe, tuner=peer, intensify=False, **common)
        tune_campaign(
            store, f"{w}-bo-risk", space=risky_focus, tuner="bo", intensify=True,
            allow_risk=True, **common,
        )  # fmt: skip
        configs = {"default": stack.default_config()}
        for label, campaign in campaigns.items():
            c = store.campaign(campaign)
            best = campaign_best(c, store.trials(c.id))
            if best is not None:
                configs[label] = stack.validate(full_config(best.config, c))
        configs["sample"] = best_row
        verify_all(store, f"{w}-bo", target, stack, configs, args.verify, console, args.verify_max)
        campaigns["sample"] = sample
        extra = {"best": sample_seconds, "risky": sample_seconds}
        found = rows_for(store, w, stack, campaigns, configs, extra)
        if args.wide and not shows_gain(found):
            # no safe gain: a much larger search's best, verified beside stortune's result,
            # shows whether one was there to find
            wide = wide_search(store, w, safe, target, rules, console, args, args.sample_runtime)
            campaigns["wide"] = wide
            configs["wide"] = sample_best(store, wide, w, safe, objective)
            verify_all(
                store, f"{w}-bo", target, stack, configs, args.verify, console, args.verify_max
            )
            found = rows_for(store, w, stack, campaigns, configs, extra)
        rows += found
        write(rows, args, "local", partial=True)
    return rows


def sampled_workloads(store: Store, sample: str) -> list[str]:
    """The workloads the shared sample was measured under (the ranking needs each one's)."""
    described = store.campaign(sample).workload.get("workloads", [])
    return [w["name"] for w in described]


def wide_search(
    store: Store,
    workload: str,
    safe: Space,
    target: Target,
    rules: RunRules,
    console: Console,
    args: argparse.Namespace,
    runtime: float,
) -> str:
    """Step 5's larger search: a Latin hypercube of `--wide` safe configs for one workload
    (resumed when it exists); its campaign's name."""
    from stortune.workloads.fio import FioWorkload

    wide = f"{workload}-wide"
    if exists(store, wide):
        finish(store, wide, console)
    else:
        sample_space(
            store, wide, safe, target, [FioWorkload(workload, runtime=runtime)],
            Objective(METRIC), args.wide, rules, console, seed=args.seed + 1, reference_every=10,
        )  # fmt: skip
    return wide


def wide_of_recorded(
    args: argparse.Namespace, store: Store, console: Console
) -> list[dict[str, Any]]:
    """Step 5 for a local part already in the results file, without tuning again: for each
    workload whose recorded safe result is not a verified gain, a Latin hypercube of `--wide`
    safe configs, its best re-measured interleaved beside the default and stortune's recorded
    recommendation. Its row says whether a safe gain was there to find, and how far stortune's
    result is from it (`best_over_wide`, from the same runs)."""
    from stortune.targets.localfs import LocalFsTarget
    from stortune.workloads.fio import FioWorkload

    stack = load_space("stack")
    safe = safe_space(stack)
    target = LocalFsTarget(stack, image_size="2g", memory_limit="128m")
    rules = RunRules(timeout=args.runtime * 10 + 120, check_disturbance=True, busy_wait=3600)
    recorded = json.loads(RESULTS.read_text())["rows"] if RESULTS.exists() else []
    rows = []
    for w in args.workloads:
        best = next((r for r in recorded if r["workload"] == w and r["label"] == "best"), None)
        if best is None or shows_gain([best]):
            continue
        objective = objective_for([FioWorkload(w)], None)
        wide = wide_search(store, w, safe, target, rules, console, args, args.runtime)
        configs = {
            "default": stack.default_config(),
            "best": stack.validate({**stack.default_config(), **best["changes"]}),
            "wide": sample_best(store, wide, w, safe, objective),
        }
        verify_all(store, wide, target, stack, configs, args.verify, console, args.verify_max)
        verification = latest_verification(store, store.campaign(wide))
        assert verification is not None
        checked = Verification.read(store, verification)
        measured_as = verified_labels(store, verification, stack, configs)
        wide_label, best_label = measured_as["wide"][0], measured_as["best"][0]
        found = checked.results[wide_label].gain
        values = round_values(store.trials(verification.id), checked.objective.value, n_workloads=1)
        ours = paired_gain(
            checked.objective.metric, checked.objective.direction, values[wide_label],
            values[best_label], label="best",
        )  # fmt: skip
        rows.append(
            {
                "workload": w,
                "tuner": TUNER_NAMES["wide"],
                "label": "wide",
                "risk_allowed": False,
                "evaluations": args.wide,
                "runs": runs_of(store, wide),
                "seconds": seconds_of(store, wide),
                "gain": 1 + found.gain,
                "ci_low": 1 + found.ci_low,
                "ci_high": 1 + found.ci_high,
                "default_mean": found.default_mean,
                "mean": found.best_mean,
                "changes": {
                    k: v for k, v in configs["wide"].items() if stack.default_config().get(k) != v
                },
                "risks": [],
                "best_over_wide": 1 + ours.gain,
                "best_over_wide_low": 1 + ours.ci_low,
                "best_over_wide_high": 1 + ours.ci_high,
            }
        )
    return rows


def write_wide(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Add the wide searches' rows to the results file, replacing older ones of the same
    workloads; the local part's other rows stay as they were measured."""
    existing = json.loads(RESULTS.read_text())
    measured = {r["workload"] for r in rows}
    kept = [r for r in existing["rows"] if r["label"] != "wide" or r["workload"] not in measured]
    existing["rows"] = kept + rows
    existing["settings"]["wide"] = {
        "wide": args.wide, "runtime": args.runtime, "verify": args.verify, "seed": args.seed,
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }  # fmt: skip
    RESULTS.write_text(json.dumps(existing, indent=1, default=json_plain) + "\n")


def shows_gain(rows: list[dict[str, Any]]) -> bool:
    """Whether stortune's safe result is verified at least 1.1x the default (lower bound)."""
    best = next((r for r in rows if r["label"] == "best"), None)
    return best is not None and (best.get("ci_low") or 0.0) >= 1.1


def full_config(config: Config, campaign: Any) -> Config:
    """A tuned config of a pinned space, with its held values (the whole stack's config)."""
    from stortune.measure.campaigns import space_of

    space = space_of(campaign)
    return {**space.default_config(), **config}


# ---- Ceph -------------------------------------------------------------------------------------
STABLE_SHARE = 0.8  # of the resamples whose top K must hold a parameter for it to be stable


@dataclass(frozen=True)
class Stability:
    agreement: float  # mean Jaccard of the resamples' top K with the whole sample's
    stable: list[str]  # in the top K of STABLE_SHARE of the resamples
    measured: int  # configs of the sample that ran


def stable_top(store: Store, sample: str, space: Space, k: int, seed: int = 0) -> Stability:
    """How much bootstrap resamples' Lasso top K agree with the whole sample's (mean Jaccard):
    a ranking of noise changes with every resample, one of effects does not. And the
    parameters in the top K of at least 80% of the resamples (stability selection, Meinshausen
    and Buehlmann 2010): the part of the ranking that stands above the noise even when the
    rest of the top K does not."""
    from stortune.importance import rank_dataset
    from stortune.sources import load_source
    from stortune.tuners.topk import top_k

    data = load_source(sample, store).aggregated()
    whole = set(top_k(rank_dataset(data, "lasso", data.metrics[0]), k))
    rng = np.random.default_rng(seed)
    scores, held = [], Counter[str]()
    for _ in range(20):
        rows = rng.integers(0, len(data.frame), len(data.frame))
        part = type(data)(
            data.frame.iloc[rows].reset_index(drop=True), data.params, data.metrics,
            data.directions, data.source,
        )  # fmt: skip
        try:
            found = set(top_k(rank_dataset(part, "lasso", part.metrics[0]), k))
        except Exception:  # noqa: BLE001 - a degenerate resample agrees with nothing
            found = set()
        scores.append(len(found & whole) / len(found | whole) if found | whole else 0.0)
        held.update(found)
    stable = [name for name, n in held.most_common() if n >= STABLE_SHARE * len(scores)]
    return Stability(float(np.mean(scores)), stable, len(data.frame))


def ceph(args: argparse.Namespace, store: Store, console: Console) -> list[dict[str, Any]]:
    from stortune.cephspace.configs import load_config
    from stortune.targets.ceph import CephTarget
    from stortune.workloads.rados import RadosWorkload

    space = safe_space(load_space("ceph"))
    target = CephTarget(space, osds=1, health_timeout=90)
    rules = RunRules(timeout=120, check_disturbance=True, busy_wait=3600)
    workloads = [RadosWorkload.named(n, duration=args.ceph_runtime) for n in RADOS]
    sample = "ceph-sample"
    batch, stability = args.ceph_batch, []
    for step in range(1, args.ceph_max_samples // batch + 1):
        name = f"{sample}-{step}"
        if not exists(store, name):
            sample_space(
                store, name, space, target, workloads, Objective("bw_mbs"), batch,
                rules, console, seed=args.seed + step,
            )  # fmt: skip
        else:
            finish(store, name, console)
        merged = merge_samples(store, [f"{sample}-{i}" for i in range(1, step + 1)], space)
        found = stable_top(store, merged, space, args.top_k, args.seed)
        stability.append({"samples": step * batch, **asdict(found)})
        console.note(
            f"ceph ranking from {step * batch} samples ({found.measured} ran): top-{args.top_k} "
            f"agreement {found.agreement:.2f}; in {STABLE_SHARE:.0%} of the resamples' top "
            f"{args.top_k}: {', '.join(found.stable) or 'none'}"
        )
        if found.agreement >= args.ceph_agreement:
            break
    batches = [f"{sample}-{i}" for i in range(1, step + 1)]
    top = with_parents(space, ranked(store, merged, None, space, args.top_k))
    start = sample_best(store, merged, None, space)
    console.note(f"ceph: top {args.top_k} {top}; sample's best {start}")
    # The rest at Ceph's defaults (`--hold default`, SAPPHIRE's way): the sample's best holds
    # some 430 random values, and bo's result held at them re-measured at 0.78-0.87x of the
    # default on 3 OSDs, though 1.10x its start.
    focused = pin(space, top)
    common = dict(target=target, workloads=workloads, budget=args.ceph_budget, rules=rules,
                  console=console, repetitions=args.pairs, seed=args.seed,
                  objective=Objective("bw_mbs"))  # fmt: skip
    campaigns = {"best": "ceph-bo"}
    tune_campaign(store, "ceph-bo", space=focused, tuner="bo", intensify=True, **common)
    for peer in PEERS:
        campaigns[peer] = f"ceph-{peer}"
        # as in the local part: a peer's user has no ranking, so it searches the whole safe space
        tune_campaign(store, f"ceph-{peer}", space=space, tuner=peer, intensify=False, **common)
    whole = load_space("ceph")
    configs = {"default": whole.default_config(), "expert": load_config("expert", whole)}
    for label, campaign in campaigns.items():
        c = store.campaign(campaign)
        best = campaign_best(c, store.trials(c.id))
        if best is not None:
            configs[label] = whole.validate(full_config(best.config, c))
    configs["sample"] = whole.validate(start)
    if "best" in configs:
        # Ceph's risky values are its checks (BlueStore stays durable whatever its tuning):
        # what turning every one off buys on top of stortune's result, measured beside it
        unchecked = {p.name: next(iter(values_at_risk(p))) for p in whole.parameters
                     if values_at_risk(p)}  # fmt: skip
        configs["risky"] = whole.validate({**configs["best"], **unchecked})
    three = CephTarget(whole, osds=3, health_timeout=120)
    verify_all(store, "ceph-bo", three, whole, configs, args.verify, console)
    rows = []
    for workload in RADOS:
        rows += [
            {**r, "workload": workload}
            for r in rows_for_workload(
                store, "ceph-bo", workload, whole, campaigns, configs, samples=batches
            )
        ]
    add_in_loop(store, "ceph-bo", rows)
    for row in rows:
        row["ranking"] = {"top": top, "stability": stability}
    return rows


def add_in_loop(store: Store, tuned: str, rows: list[dict[str, Any]]) -> None:
    """bo's own gain over the default (the objective: the three workloads' geometric mean)
    on its rows, beside the same ratio re-measured: the geometric mean over the workloads of
    its verified gains."""
    in_loop = in_loop_gain(store, store.campaign(tuned))
    if in_loop is None:
        return
    best = [r for r in rows if r["label"] == "best"]
    gains = [r["gain"] for r in best if r.get("gain")]
    over_start = math.exp(np.mean(np.log(gains))) if len(gains) == len(RADOS) else None
    for row in best:
        row.update(
            in_loop=1 + in_loop.gain,
            in_loop_low=1 + in_loop.ci_low,
            in_loop_high=1 + in_loop.ci_high,
            verified_over_start=over_start,
        )


def merge_samples(store: Store, names: list[str], space: Space) -> str:
    """The sample batches' configs and their objective values (the geometric mean over the
    rados workloads), as one dataset file for the rankings."""
    import pandas as pd

    from stortune.measure.reference import is_reference

    rows = []
    for name in names:
        for trial in store.trials(store.campaign(name).id):
            if trial.value is not None and not is_reference(trial):
                rows.append(
                    {**{p: trial.config.get(p) for p in space.names}, "bw_mbs+": trial.value}
                )
    path = RESULTS.parent / "ceph-sample.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return str(path)


def rows_for_workload(
    store: Store,
    tuned: str,
    workload: str,
    space: Space,
    campaigns: dict[str, str],
    configs: dict[str, Config],
    samples: list[str],
) -> list[dict[str, Any]]:
    """Per-workload gains of a verification that measured several workloads; the sample's
    best counts the ranking's `samples` batches as its evaluations and time."""
    from stortune.measure.reference import is_reference
    from stortune.measure.verify import gain

    verification = latest_verification(store, store.campaign(tuned))
    assert verification is not None
    measured: dict[str, list[float]] = {}
    errors: dict[str, list[str]] = {}
    for trial in store.trials(verification.id):
        label = (trial.info or {}).get("label")
        runs = [r for r in trial.runs if r.workload == workload]
        measured[label] = [
            r.metrics["bw_mbs"] for r in runs if r.status == "ok" and "bw_mbs" in r.metrics
        ]
        errors[label] = [r.error for r in runs if r.status != "ok" and r.error]
    labels = verified_labels(store, verification, space, configs)
    values = pooled(measured, labels)
    out = []
    for label in [*campaigns, "risky", "expert", "sample"]:
        if label not in configs or not values.get("default"):
            continue
        campaign = campaigns.get("best" if label == "risky" else label)  # bo's, checks off
        found_by = [campaign] if campaign else samples if label == "sample" else []
        row = {
            "tuner": TUNER_NAMES.get(label, label),
            "label": label,
            "risk_allowed": label == "risky",
            "evaluations": sum(
                1
                for name in found_by
                for t in store.trials(store.campaign(name).id)
                if t.seq >= 0 and not is_reference(t)
            )
            or None,
            "runs": sum(runs_of(store, name) for name in found_by) or None,
            "seconds": sum(seconds_of(store, name) for name in found_by) or None,
            "risks": [r.text() for r in risks_of(space, configs.get(label, {}))],
        }
        if values.get(label):
            g = gain("bw_mbs", "max", values["default"], values[label], label=label)
            row.update(gain=1 + g.gain, ci_low=1 + g.ci_low, ci_high=1 + g.ci_high,
                       default_mean=g.default_mean, mean=g.best_mean)  # fmt: skip
        else:  # its config did not run on the verifying cluster: a result, so a row
            failures = [e for m in labels.get(label, []) for e in errors.get(m, [])]
            row.update(gain=None, ci_low=None, ci_high=None, failed=main_failure(failures),
                       default_mean=float(np.mean(values["default"])))  # fmt: skip
        out.append(row)
    return out


def main_failure(errors: list[str]) -> str:
    """The most frequent own error of a config's failed runs (not a later run skipped for an
    earlier one's failure), without the stage's prefix."""
    own = [e for e in errors if not e.startswith("not run:")] or errors
    if not own:
        return "no run finished"
    short = [re.sub(r"^(before the run|apply): ", "", e.splitlines()[0]) for e in own]
    return Counter(short).most_common(1)[0][0]


# ---- output -----------------------------------------------------------------------------------
def settings_of(args: argparse.Namespace, part: str) -> dict[str, Any]:
    """The options that shaped one part's rows (the other part's options did not)."""
    ceph = part == "ceph"
    return {
        k: v
        for k, v in vars(args).items()
        if k not in {"ceph", "only_ceph", "wide_only"}
        and k.startswith("ceph_") == ceph
        or k in {"seed", "top_k", "verify", "pairs", "store"}
    }


def write(
    rows: list[dict[str, Any]], args: argparse.Namespace, part: str, partial: bool = False
) -> None:
    """Merge one part's rows into the results file; rows of workloads not measured now stay
    when they were measured with the same settings (an older run's are dropped)."""
    existing = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    before = existing.get("settings", {}).get(part) or {}
    same = shaping(before) == shaping(settings_of(args, part))
    measured = {x["workload"] for x in rows}
    kept = [
        r
        for r in existing.get("rows", [])
        if part_of(r) != part or (same and r["workload"] not in measured)
    ]
    settings = settings_of(args, part)
    if same:  # workloads measured by another command with the same settings, in its store
        kept_workloads = [w for w in before.get("workloads", []) if w not in measured]
        settings["workloads"] = kept_workloads + settings.get("workloads", [])
        settings["stores"] = {
            **before.get("stores", dict.fromkeys(kept_workloads, before.get("store"))),
            **dict.fromkeys(measured, args.store),
        }
    result = {
        "bench": "stack-gains",
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "partial": partial,
        "settings": {**existing.get("settings", {}), part: settings},
        "rows": kept + rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1, default=json_plain) + "\n")


def shaping(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings that shaped a part's rows: not which workloads one command measured, nor
    the store it kept them in (a workload added later, in its own store, joins the rows)."""
    return {k: v for k, v in settings.items() if k not in {"workloads", "store", "stores"}}


def part_of(row: dict[str, Any]) -> str:
    return "ceph" if row["workload"] in RADOS else "local"


def json_plain(value: Any) -> Any:
    """JSON for numpy scalars and non-finite floats (null)."""
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


def risky_values(row: dict[str, Any]) -> str:
    """The risky name=value pairs of a row (what each risks is in the JSON's `risks`)."""
    return ", ".join(risk.split(":", 1)[0] for risk in row.get("risks") or [])


def number(value: Any) -> str:
    """A table cell: two decimals, or - for none."""
    return f"{value:.2f}" if isinstance(value, int | float) and math.isfinite(value) else "-"


def gain_cell(row: dict[str, Any]) -> str:
    """A verified gain with its 90% CI, as the tables print it, or why there is none."""
    if row.get("failed"):
        return f"failed: {row['failed']}"
    return f"{number(row.get('gain'))}x ({number(row.get('ci_low'))}-{number(row.get('ci_high'))})"


def minutes_cell(row: dict[str, Any]) -> str:
    return f"{row['seconds'] / 60:.0f}" if row.get("seconds") else "-"


def risk_cell(row: dict[str, Any]) -> str:
    """`allowed` when the tuning could pick risky values; a config given, not tuned (the
    expert's), is `risky` when it holds one, so no risky config reads as safe."""
    if row["risk_allowed"]:
        return "allowed"
    return "risky" if row.get("risks") else "safe"


def guardrail_cell(row: dict[str, Any]) -> str:
    """Each guardrail's verified ratio and whether it held (`!` broken, `?` unclear)."""
    marks = {"held": "", "broken": " !", "unclear": " ?", "unknown": " -"}
    return ", ".join(
        f"{c['guardrail']['metric']} {number((c.get('ratio') or {}).get('ratio'))}x"
        f"{marks.get(c['status'], '')}"
        for c in row.get("guardrail_checks") or []
    )


def device_cell(row: dict[str, Any]) -> str:
    reached = row.get("device_reached")
    return "-" if reached is None else "yes" if reached else "NO: memory"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| workload | objective | tuner | risk | evals | minutes | default | gain (90% CI) "
        "| verdict | guardrails | device | in loop | re-measured | risky values |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ci = gain_cell(r)
        loop = (
            f"{number(r['in_loop'])}x ({number(r['in_loop_low'])}-{number(r['in_loop_high'])})"
            if "in_loop" in r
            else ""
        )
        again = f"{number(r['verified_over_start'])}x" if r.get("verified_over_start") else ""
        if "best_over_wide" in r:
            again = (
                f"stortune's {number(r['best_over_wide'])}x "
                f"({number(r['best_over_wide_low'])}-{number(r['best_over_wide_high'])}) of it"
            )
        verdict = r.get("judgement") or "-"
        if r.get("rounds"):
            verdict += f" ({r['rounds']} rounds)"
        lines.append(
            f"| {r['workload']} | {r.get('objective', METRIC)} | {r['tuner']} | {risk_cell(r)} "
            f"| {r.get('evaluations') or '-'} | {minutes_cell(r)} | "
            f"{number(r.get('default_mean'))} | {ci} | {verdict} | {guardrail_cell(r)} | "
            f"{device_cell(r)} | {loop} | {again} | {risky_values(r)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=lambda s: s.split(","), default=list(LOCAL_WORKLOADS))
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--sample", type=int, default=120, help="configs in the shared sample")
    parser.add_argument("--sample-runtime", type=float, default=3.0)
    parser.add_argument(
        "--wide",
        type=int,
        default=0,
        help="configs of a larger search for workloads without a verified safe gain (0: none)",
    )
    parser.add_argument(
        "--wide-only",
        action="store_true",
        help="only --wide's search, for the local results already in the results file",
    )
    parser.add_argument("--runtime", type=float, default=5.0)
    parser.add_argument("--pairs", type=int, default=3, help="race pairs of a challenger")
    parser.add_argument("--verify", type=int, default=5, help="the fewest verification rounds")
    parser.add_argument(
        "--verify-max", type=int, default=None, help="the most rounds (default: 4 x --verify)"
    )
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ceph", action="store_true", help="also the Ceph part")
    parser.add_argument("--only-ceph", action="store_true")
    parser.add_argument("--ceph-budget", type=int, default=40)
    parser.add_argument("--ceph-runtime", type=float, default=5.0)
    parser.add_argument("--ceph-batch", type=int, default=20)
    parser.add_argument("--ceph-max-samples", type=int, default=120)
    parser.add_argument("--ceph-agreement", type=float, default=0.7)
    parser.add_argument("--store", default=str(REPO / "bench" / "results" / "stack-gains.db"))
    args = parser.parse_args()
    console = Console()
    try:
        with Store(args.store) as store:
            if args.wide_only:
                write_wide(wide_of_recorded(args, store, console), args)
            elif not args.only_ceph:
                write(local(args, store, console), args, "local")
            if args.ceph or args.only_ceph:
                write(ceph(args, store, console), args, "ceph")
    except StortuneError as error:
        raise SystemExit(f"error: {error}; the same command resumes") from None
    print(table(json.loads(RESULTS.read_text())["rows"]))


if __name__ == "__main__":
    main()
