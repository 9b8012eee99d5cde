"""Magpie on a real distributed file system: DDPG against BestConfig and stortune's default tuner
tuning CephFS's static parameters (the `cephfs` target and space) under Magpie's five workloads.

For each workload (fio jobs after Filebench's fileserver, videoserver, and sequential write,
sequential read and random read/write: `seqwrite`, `seqread`, `randomrw`):

1. DDPG as Magpie runs it: `--steps` (30) steps starting at the default config, the agent saved;
   then continued from the saved agent to `--long` (100) steps in all (Magpie's progressive
   tuning, V-E).
2. BestConfig and stortune's default tuner at `--steps` evaluations each.
3. One interleaved re-measurement (`--verify`, >= 3 repetitions each) of the default and every
   tuner's best, so every gain comes from the same runs: the gain with its 90% CI.

The state DDPG reads is the cephfs target's: ceph-mgr's prometheus module and the node exporter
(server side), ceph-fuse's admin socket (client side). The objective is throughput
(`total.bw_mbs`, Magpie V-C); `--objective total.bw_mbs:max,total.iops:max` tunes Magpie's
V-D pair, scalarised around the default's runs. Either way every verified config's gain on
throughput and on IOPS is reported separately too, from the same runs. Every campaign lives in
one store (`--store`); an interrupted run resumes where it stopped. Results:
bench/results/magpie.json (`rows`: workload x tuner x steps, with the verified gain and its 90%
CI, evaluations, wall time) and the Markdown table printed at the end.

`--tuners` runs some of them only (Magpie V-D compares DDPG with BestConfig); the first one named
in the table's order (default tuner, DDPG, BestConfig) holds the verification.

Needs root. Run: python bench/magpie.py [--workloads fileserver,videoserver,seqwrite,seqread,
randomrw] [--steps 30] [--long 100] [--runtime 5] [--verify 3] [--osds 1] [--osd-size 8g]
[--tuners bo,ddpg,bestconfig]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import gains
from gains import (
    Console,
    best_of,
    done,
    exists,
    finish,
    no_run,
    rows_for,
    runs_of,
    seconds_of,
    verify_all,
)
from gains_table import gain_cell, json_plain, minutes_cell, number

from stortune.errors import StortuneError
from stortune.measure.runner import RunRules
from stortune.measure.tuning import TuneSettings
from stortune.measure.verify import latest_verification, stored_gains
from stortune.objective import Objective
from stortune.space import Config, load_space
from stortune.store import Store
from stortune.targets.base import Target
from stortune.tuners import DEFAULT_TUNER
from stortune.workflows.tune import TuneJob, start_tuning

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "magpie.json"
WORKLOADS = ("fileserver", "videoserver", "seqwrite", "seqread", "randomrw")
# Magpie's gains over the default on Lustre (V-C, single indicator): only the sequential write
# is given as a number in the text (+250.4%); the average over the five workloads is +91.8%.
PAPER_GAIN = {"seqwrite": 3.504}
PAPER_AVERAGE_GAIN = 1.918
# Magpie V-D tunes throughput and IOPS together; every verified config's gain on each, from the
# same interleaved runs, whatever the objective tuned.
METRICS = {"throughput": "total.bw_mbs", "iops": "total.iops"}
TUNERS = (DEFAULT_TUNER, "ddpg", "bestconfig")  # in the table's order
TUNER_OF = {"best": DEFAULT_TUNER, "ddpg-long": "ddpg"}  # a table label's tuner


def tune(
    store: Store,
    name: str,
    job: dict[str, Any],
    tuner: str,
    budget: int,
    console: Console,
    agent: Path | None = None,
) -> None:
    """One tuning campaign, one run per evaluation, the default config first (resumes)."""
    if done(store, name):
        return
    if exists(store, name):
        finish(store, name, console, agent)
        return
    no_run(name)
    settings = TuneSettings(budget=budget, repetitions=1, baseline=True, reference_every=10)
    start_tuning(
        store,
        TuneJob(settings=settings, tuner=tuner, name=name, agent=agent, **job),
        console,
    )


def workload_rows(
    args: argparse.Namespace, store: Store, target: Target, w: str, console: Console
) -> list[dict[str, Any]]:
    from stortune.workloads.fio import FioWorkload

    space = load_space("cephfs")
    rules = RunRules(
        timeout=args.runtime * 10 + 300,
        check_disturbance=args.check_disturbance,
        busy_wait=3600,
    )
    job = dict(
        space=space,
        target=target,
        workloads=[FioWorkload(w, runtime=args.runtime)],
        objective=Objective.of(args.objective.split(",")),
        rules=rules,
        seed=args.seed,
    )
    store_path = Path(args.store)  # each store its own agents: a second objective starts fresh
    agent = store_path.with_name(f"{store_path.stem}-{w}-ddpg.pt")
    short, long_ = f"{w}-ddpg-{args.steps}", f"{w}-ddpg-{args.long}"
    mine = f"{w}-{DEFAULT_TUNER}"
    # label -> campaign, in the table's order; the first one holds the verification
    campaigns: dict[str, str] = {}
    if DEFAULT_TUNER in args.tuners:
        campaigns["best"] = mine
    if "ddpg" in args.tuners:
        campaigns["ddpg"] = short
    if "bestconfig" in args.tuners:
        campaigns["bestconfig"] = f"{w}-bestconfig"
    if "ddpg" in args.tuners and args.long > args.steps:  # from the saved agent: steps 31..100
        campaigns["ddpg-long"] = long_
    for label in ("ddpg", "ddpg-long", "bestconfig", "best"):  # Magpie's first, as it ran
        if label in campaigns:
            tuner = TUNER_OF.get(label, label)
            budget = args.long - args.steps if label == "ddpg-long" else args.steps
            ddpg_agent = agent if tuner == "ddpg" else None
            if label == "ddpg-long" and not exists(store, long_) and not agent.exists():
                raise SystemExit(f"error: {agent} is missing: {long_} continues {short}'s agent")
            tune(store, campaigns[label], job, tuner, budget, console, ddpg_agent)
    # the verification calls the first campaign's config "best" (it needs one): its label there
    anchor = next(iter(campaigns))
    verified_as = {label: "best" if label == anchor else label for label in campaigns}
    configs: dict[str, Config] = {"default": space.default_config()}
    for label, name in campaigns.items():
        config = best_of(store, name, space)
        if config is not None:
            configs[verified_as[label]] = config
    verify_all(store, campaigns[anchor], target, space, configs, args.verify, console)
    steps = {label: args.steps for label in campaigns} | {"ddpg-long": args.long}
    before = {"ddpg-long": seconds_of(store, short)} if "ddpg-long" in campaigns else {}
    by_verified = {verified_as[label]: name for label, name in campaigns.items()}
    rows = rows_for(store, w, space, by_verified, configs, before)  # 100 steps' time from step 1
    add_metric_gains(store, campaigns[anchor], rows)
    label_of = {v: k for k, v in verified_as.items()}
    for row in rows:
        label = row["label"] = label_of[row["label"]]
        row["tuner"] = TUNER_OF.get(label, label)
        row["steps"] = steps[label]
        if label == "ddpg-long":
            row["evaluations"] += args.steps  # the first campaign's, counted from step one
            row["runs"] += runs_of(store, short)
        row["paper_gain"] = PAPER_GAIN.get(w) if label.startswith("ddpg") else None
    verification = latest_verification(store, store.campaign(campaigns[anchor]))
    assert verification is not None
    osd_size = verification.target.get("osd_size")  # as verified
    for row in rows:
        row["osd_size"] = osd_size
    return rows


def add_metric_gains(store: Store, tuned: str, rows: list[dict[str, Any]]) -> None:
    """Each row's verified gain on throughput and on IOPS separately (`throughput_gain`,
    `iops_gain`, each with its 90% CI), from the verification's runs."""
    for name, metric in METRICS.items():
        gains = stored_gains(store, store.campaign(tuned), Objective(metric))
        for row in rows:
            gain = gains.get(row["label"])
            row[f"{name}_gain"] = 1 + gain.gain if gain else None
            row[f"{name}_ci_low"] = 1 + gain.ci_low if gain else None
            row[f"{name}_ci_high"] = 1 + gain.ci_high if gain else None


def write(path: Path, rows: list[dict[str, Any]], settings: dict[str, Any]) -> None:
    result = {"bench": "magpie", "when": time.strftime("%Y-%m-%d %H:%M:%S"), "rows": rows}
    result["settings"] = settings
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, default=json_plain) + "\n")


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| workload | OSD | tuner | steps | minutes | default | gain (90% CI) | throughput gain "
        "| IOPS gain | Magpie on Lustre |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        paper = f"{r['paper_gain']:.2f}x" if r.get("paper_gain") else "-"
        by_metric = [gain_cell(metric_gain(r, name)) for name in METRICS]
        lines.append(
            f"| {r['workload']} | {r.get('osd_size') or '-'} | {r['tuner']} | {r['steps']} "
            f"| {minutes_cell(r)} "
            f"| {number(r.get('default_mean'))} | {gain_cell(r)} | {' | '.join(by_metric)} "
            f"| {paper} |"
        )
    return "\n".join(lines)


def metric_gain(row: dict[str, Any], name: str) -> dict[str, Any]:
    """One metric's gain and CI under the keys `gain_cell` reads."""
    return {k: row.get(f"{name}_{k}") for k in ("gain", "ci_low", "ci_high")}


def main() -> None:
    from stortune.targets.cephfs import CephFSTarget

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=lambda s: s.split(","), default=list(WORKLOADS))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--long", type=int, default=100, help="DDPG's steps in all, continued")
    parser.add_argument("--runtime", type=float, default=5.0)
    parser.add_argument("--verify", type=int, default=3)
    parser.add_argument("--osds", type=int, default=1)
    parser.add_argument("--osd-size", default="8g", help="each OSD's (sparse) image")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--objective", default="total.bw_mbs:max")
    parser.add_argument(
        "--tuners",
        type=lambda s: s.split(","),
        default=list(TUNERS),
        help=f"which of {', '.join(TUNERS)} tune (default: all)",
    )
    parser.add_argument(
        "--no-check-disturbance",
        dest="check_disturbance",
        action="store_false",
        help="measure even while other work loads the machine (a smoke run)",
    )
    parser.add_argument("--store", default=str(REPO / "bench" / "results" / "magpie.db"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--no-run", action="store_true", help="measure nothing: the rows from the store as it is"
    )
    args = parser.parse_args()
    gains.NO_RUN = args.no_run
    if args.verify < 3:
        parser.error("--verify: Magpie re-measures 3 times at least")
    if not args.tuners or set(args.tuners) - set(TUNERS):
        parser.error(f"--tuners: name some of {', '.join(TUNERS)}")
    console = Console()
    started = time.monotonic()
    target = CephFSTarget("cephfs", osds=args.osds, osd_size=args.osd_size)
    rows: list[dict[str, Any]] = []
    try:
        with Store(args.store) as store:  # each campaign sets the cluster up and removes it
            for w in args.workloads:
                rows += workload_rows(args, store, target, w, console)
                settings = {**vars(args), "out": str(args.out), "osds": args.osds}
                settings.pop("no_run")
                settings["page_cache_cap"] = "none: ceph-fuse caches in its object cacher"
                settings["paper_average_gain"] = PAPER_AVERAGE_GAIN
                settings["wall_seconds"] = time.monotonic() - started
                write(args.out, rows, settings)
    except StortuneError as error:
        raise SystemExit(f"error: {error}; the same command resumes") from None
    print(table(json.loads(args.out.read_text())["rows"]))


if __name__ == "__main__":
    main()
