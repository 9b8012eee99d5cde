"""The Ceph part of the stack gains benchmark (`stack_gains.py --ceph`): a ranking from samples
drawn until it stands above the noise, bo on its top K with the rest at Ceph's defaults
(`stortune tune --rank carver-lasso --hold default`), the peers on the whole safe space,
verified on 3 OSDs; see stack_gains.py's docstring.

A helper module of stack_gains.py: running it does nothing.
"""

from __future__ import annotations

import argparse
import math
import re
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gains import (
    PEERS,
    TUNER_NAMES,
    Console,
    best_of,
    exists,
    finish,
    no_run,
    ranked,
    runs_of,
    sample_best,
    seconds_of,
    tune_campaign,
    verified_labels,
    verify_all,
)

from stortune.measure.runner import RunRules
from stortune.measure.verify import in_loop_gain, latest_verification
from stortune.objective import Objective
from stortune.space import Config, Space, load_space
from stortune.space.risk import risks_of, safe_space
from stortune.space.risk import risky_values as values_at_risk
from stortune.store import Store
from stortune.workflows.rank import Hold, RankMethod, RankOptions, sample_space

RADOS = ("rados-write", "rados-seq", "rados-rand")


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


def ceph(
    args: argparse.Namespace, store: Store, console: Console, results: Path
) -> list[dict[str, Any]]:
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
            no_run(name)
            sample_space(
                store, name, space, target, workloads, Objective("bw_mbs"), batch,
                rules, console, seed=args.seed + step,
            )  # fmt: skip
        else:
            finish(store, name, console)
        names = [f"{sample}-{i}" for i in range(1, step + 1)]
        merged = merge_samples(store, names, space, results)
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
    options = RankOptions(RankMethod.CARVER_LASSO, args.top_k, Hold.DEFAULT)
    ranking = ranked(store, merged, None, space, options)
    top = ranking.free
    start = sample_best(store, merged, None, space)
    console.note(f"ceph: top {args.top_k} {top}; sample's best {start}")
    # The rest at Ceph's defaults (`--hold default`, SAPPHIRE's way): the sample's best holds
    # some 430 random values, and bo's result held at them re-measured at 0.78-0.87x of the
    # default on 3 OSDs, though 1.10x its start.
    focused = ranking.space
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
        if (best := best_of(store, campaign, whole)) is not None:
            configs[label] = best
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


def merge_samples(store: Store, names: list[str], space: Space, results: Path) -> str:
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
    path = results / "ceph-sample.csv"
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


def pooled(values: dict[str, list[float]], labels: dict[str, list[str]]) -> dict[str, list[float]]:
    """Each label's re-measurements, over every label that measured its config (the Ceph
    part's per-workload values)."""
    return {label: [v for m in same for v in values.get(m, [])] for label, same in labels.items()}


def main_failure(errors: list[str]) -> str:
    """The most frequent own error of a config's failed runs (not a later run skipped for an
    earlier one's failure), without the stage's prefix."""
    own = [e for e in errors if not e.startswith("not run:")] or errors
    if not own:
        return "no run finished"
    short = [re.sub(r"^(before the run|apply): ", "", e.splitlines()[0]) for e in own]
    return Counter(short).most_common(1)[0][0]
