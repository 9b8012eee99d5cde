"""Verified gains on the real stack: stortune's flow against Optuna TPE and random search.

Local stack (the `stack` space: ext4/xfs/btrfs with their mkfs and mount options, block layer,
vm; a 2 GiB loop image, the benchmark's page cache capped at 128 MiB so runs reach the stack),
for each workload:

1. One Latin hypercube of the safe stack space, measured once under every workload with short
   runs (the default config as a reference every 10), shared by all workloads: the ranking's.
2. stortune's flow, `stortune tune --rank carver-lasso --hold best` (`start_tuning` with
   `rank=RankOptions(...)`): Carver and Lasso rank the parameters (their top K in turns) on
   this workload's runs stored for the space (the sample's, when its tuning starts), relative
   to their reference runs; the default tuner (bo) tunes the top K (with the parameters their
   conditions read), starting from the sample's best config and holding the others there,
   with intensification (paired races; the best is the last incumbent), `--budget`
   evaluations. Once more with risk allowed: the top K plus every parameter whose values
   carry a risk.
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
Results: bench/results/stack-gains.json (`rows`: workload x tuner x risk, the verified gain and
its 90% CI) and the Markdown table. Needs root. Run: python bench/stack_gains.py [--workloads
metadata,stream,rand4k,dbfsync] [--budget 60] [--wide N [--wide-only]] [--ceph] [--only-ceph]
(--wide-only: step 5 alone, for the local rows in the results file; --no-run: measure nothing,
the rows from the store as it is; the Ceph part is in stack_gains_ceph.py)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import gains
from gains import (
    METRIC,
    PEERS,
    Console,
    best_of,
    done,
    exists,
    finish,
    no_run,
    ranked_start,
    rows_for,
    sample_best,
    seconds_of,
    tune_campaign,
    verify_all,
    wide_row,
    wide_search,
)
from gains_table import json_plain, table
from stack_gains_ceph import RADOS, ceph

from stortune.errors import StortuneError
from stortune.measure.runner import RunRules
from stortune.objective import Objective
from stortune.space import load_space
from stortune.space.risk import safe_space
from stortune.store import Store
from stortune.tuners.topk import pin, with_parents
from stortune.workflows.rank import Hold, RankMethod, RankOptions, sample_space
from stortune.workloads.declared import objective_for

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "stack-gains.json"
LOCAL_WORKLOADS = ("metadata", "stream", "rand4k", "dbfsync")


def local(args: argparse.Namespace, store: Store, console: Console) -> list[dict[str, Any]]:
    from stortune.targets.localfs import LocalFsTarget
    from stortune.workloads.fio import FioWorkload

    stack = load_space("stack")
    safe = safe_space(stack)
    target = LocalFsTarget(stack, image_size="2g", memory_limit="128m")
    rules = RunRules(timeout=args.runtime * 10 + 120, check_disturbance=True, busy_wait=3600)
    names = list(args.workloads)
    sample = "stack-sample"
    # the shared sample is the ranking's data: the tuning samples more only when its workload
    # has fewer configs there (failed runs)
    options = RankOptions(RankMethod.CARVER_LASSO, args.top_k, Hold.BEST, args.sample)
    if not done(store, sample):
        if exists(store, sample):
            finish(store, sample, console)
        else:
            no_run(sample)
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
        common = dict(target=target, workloads=workload, budget=args.budget, rules=rules,
                      console=console, repetitions=args.pairs, seed=args.seed,
                      objective=objective)  # fmt: skip
        campaigns = {"best": f"{w}-bo", "risky": f"{w}-bo-risk"}
        # `stortune tune --rank carver-lasso --hold best`: ranked on the shared sample's runs of
        # this workload, the others held at its best, where the campaign starts, so its first
        # incumbent is that config
        tune_campaign(
            store, f"{w}-bo", space=safe, tuner="bo", intensify=True, rank=options, **common
        )  # fmt: skip
        top, best_row = ranked_start(store, f"{w}-bo", safe)
        console.note(f"{w}: top {args.top_k} {top}; sample's best {best_row}")
        # with risk allowed: the same, and every parameter whose values carry a risk free too
        risky_params = [p.name for p in stack.parameters if p.extra.get("risk")]
        risky_free = with_parents(stack, list(dict.fromkeys([*top, *risky_params])))
        risky_focus = pin(stack, risky_free, best_row, best_row)
        for peer in PEERS:
            campaigns[peer] = f"{w}-{peer}"
            tune_campaign(store, f"{w}-{peer}", space=safe, tuner=peer, intensify=False, **common)
        tune_campaign(
            store, f"{w}-bo-risk", space=risky_focus, tuner="bo", intensify=True,
            allow_risk=True, **common,
        )  # fmt: skip
        configs = {"default": stack.default_config()}
        for label, campaign in campaigns.items():
            if (best := best_of(store, campaign, stack)) is not None:
                configs[label] = best
        configs["sample"] = best_row
        verify_all(store, f"{w}-bo", target, stack, configs, args.verify, console, args.verify_max)
        campaigns["sample"] = sample
        extra = {"best": sample_seconds, "risky": sample_seconds}
        found = rows_for(store, w, stack, campaigns, configs, extra)
        if args.wide and not shows_gain(found):
            # no safe gain: a much larger search's best, verified beside stortune's result,
            # shows whether one was there to find
            wide = wide_search(
                store, f"{w}-wide", safe, target, [FioWorkload(w, runtime=args.sample_runtime)],
                Objective(METRIC), args.wide, rules, console, args.seed + 1,
            )  # fmt: skip
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
    recorded = json.loads(args.out.read_text())["rows"] if args.out.exists() else []
    rows = []
    for w in args.workloads:
        best = next((r for r in recorded if r["workload"] == w and r["label"] == "best"), None)
        if best is None or shows_gain([best]):
            continue
        objective = objective_for([FioWorkload(w)], None)
        wide = wide_search(
            store, f"{w}-wide", safe, target, [FioWorkload(w, runtime=args.runtime)],
            Objective(METRIC), args.wide, rules, console, args.seed + 1,
        )  # fmt: skip
        ours = {**stack.default_config(), **best["changes"]}
        rows.append(
            wide_row(store, wide, w, stack, target, ours, objective, args.verify, console,
                     args.verify_max)
        )  # fmt: skip
    return rows


def write_wide(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Add the wide searches' rows to the results file, replacing older ones of the same
    workloads; the local part's other rows stay as they were measured."""
    existing = json.loads(args.out.read_text())
    measured = {r["workload"] for r in rows}
    kept = [r for r in existing["rows"] if r["label"] != "wide" or r["workload"] not in measured]
    existing["rows"] = kept + rows
    existing["settings"]["wide"] = {
        "wide": args.wide, "runtime": args.runtime, "verify": args.verify, "seed": args.seed,
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }  # fmt: skip
    args.out.write_text(json.dumps(existing, indent=1, default=json_plain) + "\n")


def shows_gain(rows: list[dict[str, Any]]) -> bool:
    """Whether stortune's safe result is verified at least 1.1x the default (lower bound)."""
    best = next((r for r in rows if r["label"] == "best"), None)
    return best is not None and (best.get("ci_low") or 0.0) >= 1.1


def settings_of(args: argparse.Namespace, part: str) -> dict[str, Any]:
    """The options that shaped one part's rows (the other part's options did not)."""
    ceph = part == "ceph"
    return {
        k: v
        for k, v in vars(args).items()
        if k not in {"ceph", "only_ceph", "wide_only", "no_run", "out"}
        and k.startswith("ceph_") == ceph
        or k in {"seed", "top_k", "verify", "pairs", "store"}
    }


def write(
    rows: list[dict[str, Any]], args: argparse.Namespace, part: str, partial: bool = False
) -> None:
    """Merge one part's rows into the results file; rows of workloads not measured now stay
    when they were measured with the same settings (an older run's are dropped)."""
    existing = json.loads(args.out.read_text()) if args.out.exists() else {}
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
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=json_plain) + "\n")


def shaping(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings that shaped a part's rows: not which workloads one command measured, nor
    the store it kept them in (a workload added later, in its own store, joins the rows)."""
    return {k: v for k, v in settings.items() if k not in {"workloads", "store", "stores"}}


def part_of(row: dict[str, Any]) -> str:
    return "ceph" if row["workload"] in RADOS else "local"


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
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results file")
    parser.add_argument(
        "--no-run", action="store_true", help="measure nothing: the rows from the store as it is"
    )
    args = parser.parse_args()
    gains.NO_RUN = args.no_run
    console = Console()
    try:
        with Store(args.store) as store:
            if args.wide_only:
                write_wide(wide_of_recorded(args, store, console), args)
            elif not args.only_ceph:
                write(local(args, store, console), args, "local")
            if args.ceph or args.only_ceph:
                write(ceph(args, store, console, args.out.parent), args, "ceph")
    except StortuneError as error:
        raise SystemExit(f"error: {error}; the same command resumes") from None
    print(table(json.loads(args.out.read_text())["rows"]))


if __name__ == "__main__":
    main()
