"""Verified gains for real applications on the tuned stack: PostgreSQL (pgbench) and RocksDB
(db_bench), their own storage options tuned together with the stack beneath them.

For each application workload, on a 4 GiB loop image with the benchmark's memory capped at
384 MiB (so the database does not fit in the page cache), in one store that resumes:

1. stortune's flow, exactly as `stortune tune --space APP-stack -w WORKLOAD --rank carver
   --hold best --budget N --verify ...` runs it (`start_tuning`): a Latin hypercube sample of the
   safe joint space, Carver's ranking, the default tuner (bo) with paired races on the top K,
   the others held at the sample's best.
2. The peers a user would pick instead, as a user of Optuna runs them: TPE and random search
   on the whole safe joint space, one run per config, the best single value, the same number
   of evaluations.
3. One verification, interleaved in paired rounds: the default of both the application and
   the stack, each tuner's best, and stortune's best split into its two parts (its stack
   settings with the application at its defaults, its application settings on the default
   stack: which part of the gain comes from where; stortune's flow verifies them too, and
   recommends a part verified at least as good as the whole), and stortune's best with each
   risky application option (fsync off, synchronous_commit off, an unsynced WAL ...): what each
   would buy, never recommended.

4. `--confirm`: what each tuner delivers (stortune's recommendation, each peer's best) and the
   default re-measured in fresh paired rounds, which chose nothing, so no interval carries
   the luck of a choice.
5. Where stortune verifies no gain (`--wide N`): a much larger search, a Latin hypercube of N
   safe joint configs, its best re-measured in paired rounds beside the default and
   stortune's best: are the defaults within noise of the best safe config there is to find?

Every gain is on the workload's declared objective (pgbench: tps; db_bench: ops_per_s; or a
latency with `--objective`), with its guardrails (p99 latency; or tps) beside it.

Needs root. Run: python bench/app_gains.py [--workloads pgbench,rocksdb-fillrandom]
  [--objective lat_p99_ms:min] [--budget 10] [--sample 16] [--runtime 20] [--verify 5]
  [--confirm] [--wide 48]
Results: bench/results/app-gains.json and the Markdown table printed at the end (`--no-run`:
measure nothing, the rows from the store as it is).
"""

from __future__ import annotations

import argparse
import json
import sys
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
    guardrail_ratios,
    no_run,
    paired_over,
    rows_for,
    seconds_of,
    tune_campaign,
    verified_labels,
    verify_all,
    wide_row,
    wide_search,
)
from gains_table import json_plain, table

from stortune.enums import CampaignKind
from stortune.errors import StortuneError
from stortune.measure.runner import RunRules
from stortune.measure.tuning import TuneSettings
from stortune.measure.verify import (
    Advice,
    Verification,
    latest_verification,
)
from stortune.objective import Objective
from stortune.space import Config, Space, load_space
from stortune.space.parts import layer_parts
from stortune.space.risk import risky_variants, safe_space
from stortune.store import Store
from stortune.workflows.rank import RankOptions
from stortune.workflows.tune import TuneJob, start_tuning
from stortune.workloads import workload_named
from stortune.workloads.declared import objective_for

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "app-gains.json"
SPACES = {"pgbench": "postgres-stack", "rocksdb": "rocksdb-stack"}
PEERS = ("tpe", "random")


def space_for(workload: str) -> Space:
    """The joint space of the workload's application and the stack."""
    return load_space(SPACES["pgbench" if workload.startswith("pgbench") else "rocksdb"])


def measure_workload(
    args: argparse.Namespace, store: Store, console: Console, name: str
) -> list[dict[str, Any]]:
    from stortune.targets.localfs import LocalFsTarget

    space = space_for(name)
    target = LocalFsTarget(space, image_size=args.image_size, memory_limit=args.memory_limit)
    workloads = [workload_named(name, args.runtime)]
    objective = objective_for(
        workloads, Objective.of([args.objective]) if args.objective else None, say=console.note
    )
    rules = RunRules(timeout=args.runtime * 10 + 300, check_disturbance=True, busy_wait=3600)
    tag = f"{name}-{objective.metric}"
    stortune = f"{tag}-bo"
    if not done(store, stortune):
        if exists(store, stortune):
            finish(store, stortune, console)
        else:
            no_run(stortune)
            job = TuneJob(
                space=space,
                target=target,
                workloads=workloads,
                objective=objective,
                settings=TuneSettings(
                    budget=args.budget,
                    repetitions=args.pairs,
                    intensify=True,
                    baseline=True,
                    reference_every=10,
                ),
                rules=rules,
                tuner="bo",
                seed=args.seed,
                name=stortune,
                rank=RankOptions("carver", args.top_k, "best", args.sample),
            )
            start_tuning(store, job, console)
    campaigns = {"best": stortune}
    for peer in PEERS:
        campaigns[peer] = f"{tag}-{peer}"
        tune_campaign(
            store, campaigns[peer], space, target, workloads, peer, args.budget, rules, console,
            intensify=False, repetitions=1, seed=args.seed, objective=objective,
        )  # fmt: skip
    configs: dict[str, Config] = {"default": space.default_config()}
    for label, campaign in campaigns.items():
        found = best_of(store, campaign, space)
        if found is not None:
            configs[label] = found
    if "best" in configs:
        for label, config in {
            **layer_parts(space, configs["best"]),
            **risky_variants(space, configs["best"], application_only=True),
        }.items():
            configs[label] = config
            campaigns[label] = stortune
    verify_all(store, stortune, target, space, configs, args.verify, console, args.verify_max)
    samples = [c.name for c in store.campaigns() if c.name.startswith(f"{stortune}-rank")]
    ranking = sum(seconds_of(store, sample) for sample in samples)  # part of stortune's time
    rows = rows_for(store, name, space, campaigns, configs, {"best": ranking}, objective)
    add_stortune_over_peers(store, stortune, space, configs, rows, objective)
    ours = next(r for r in rows if r["label"] == "best")
    if args.confirm and ours.get("recommended") not in (None, "default"):
        delivered = {
            "best": configs[ours["recommended"]],
            **{p: configs[p] for p in PEERS if p in configs},
        }
        ours["confirmation"] = confirm(store, f"{tag}-confirm", stortune, target, space,
                                       delivered, args, console)  # fmt: skip
    if args.wide and "best" in configs and ours.get("advice") != str(Advice.APPLY):
        # no safe gain verified: a much larger search's best, re-measured beside the default
        # and stortune's best, shows whether one was there to find
        wide = wide_search(
            store, f"{tag}-wide", safe_space(space), target, workloads, objective, args.wide,
            rules, console, args.seed + 1,
        )  # fmt: skip
        rows.append(
            wide_row(store, wide, name, space, target, configs["best"], objective, args.verify,
                     console, args.verify_max)
        )  # fmt: skip
    return rows


def add_stortune_over_peers(
    store: Store,
    tuned: str,
    space: Space,
    configs: dict[str, Config],
    rows: list[dict[str, Any]],
    objective: Objective,
) -> None:
    """On stortune's row, the config its flow recommends (``recommended``: the best, a part of
    it verified at least as good, or the default when none is verified better) and that
    config's verified gain; beside each peer's row, stortune's recommendation over the peer's
    best, paired from the same rounds of the verification (``stortune_over``: above 1 with its
    interval is beyond noise)."""
    verification = latest_verification(store, store.campaign(tuned))
    if verification is None:
        return
    checked = Verification.read(store, verification, objective=objective)
    chosen, advice, _ = checked.recommended()
    over = paired_over(store, checked, space, configs, chosen)
    for row in rows:
        if row["label"] == "best":
            gain = checked.results.get(chosen)
            row.update(recommended=chosen, advice=str(advice))
            if gain is not None:
                row.update(recommended_gain=gain.gain.ratio, recommended_low=gain.gain.ratio_low,
                           recommended_high=gain.gain.ratio_high)  # fmt: skip
        if row["label"] in PEERS and row["label"] in over:
            ours = over[row["label"]]
            row.update(stortune_over=1 + ours.gain, stortune_over_low=1 + ours.ci_low,
                       stortune_over_high=1 + ours.ci_high)  # fmt: skip


def confirm(
    store: Store,
    name: str,
    tuned: str,
    target: Any,
    space: Space,
    delivered: dict[str, Config],
    args: argparse.Namespace,
    console: Console,
) -> dict[str, Any]:
    """What each tuner delivers, re-measured in fresh paired rounds: stortune's recommendation
    (``best``), each peer's best and the default. The verification that chose the
    recommendation among the best and its parts also judged it, so its interval carries a
    little of that choice's luck; these rounds chose nothing. Stored as the verification of an
    empty campaign `name`, a copy of stortune's settings, so the tuning campaign's own latest
    verification stays the one that chose."""
    if not exists(store, name):
        no_run(name)
        source = store.campaign(tuned)
        store.create_campaign(
            name, kind=CampaignKind.TUNE, space_name=source.space_name,
            space_yaml=source.space_yaml, target=source.target, workload=source.workload,
            objective=source.objective, tuner=source.tuner, seed=source.seed,
            settings={**source.settings, "confirms": tuned},
        )  # fmt: skip
    configs = {"default": space.default_config(), **delivered}
    verify_all(store, name, target, space, configs, args.verify, console, args.verify_max)
    verification = latest_verification(store, store.campaign(name))
    assert verification is not None
    checked = Verification.read(store, verification)
    over = paired_over(store, checked, space, configs, "best")
    result = checked.results.get(verified_labels(store, verification, space, configs)["best"][0])
    out: dict[str, Any] = {"campaign": verification.name, "rounds": checked.rounds}
    if result is not None:
        out.update(gain=result.gain.ratio, ci_low=result.gain.ratio_low,
                   ci_high=result.gain.ratio_high, judgement=str(result.judgement),
                   guardrails=guardrail_ratios(result))  # fmt: skip
    for peer in PEERS:
        if peer in over:
            out[f"over_{peer}"] = [
                1 + over[peer].gain,
                1 + over[peer].ci_low,
                1 + over[peer].ci_high,
            ]
    return out


def write(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Merge the rows into the results file, each with the command that measured it: rows of
    workloads not measured now stay (with `--no-run`, a row keeps the command recorded)."""
    existing = json.loads(args.out.read_text()) if args.out.exists() else {}
    command = "python bench/app_gains.py " + " ".join(sys.argv[1:])
    recorded = {
        (r["workload"], r["objective"], r["label"]): r.get("command")
        for r in existing.get("rows", [])
    }
    for row in rows:
        key = (row["workload"], row["objective"], row["label"])
        row["command"] = recorded.get(key) or command if args.no_run else command
    measured = {(r["workload"], r["objective"]) for r in rows}
    kept = [r for r in existing.get("rows", []) if (r["workload"], r["objective"]) not in measured]
    result = {
        "bench": "app-gains",
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "rows": kept + rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=json_plain) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=lambda s: s.split(","), default=["pgbench"])
    parser.add_argument("--objective", default=None, help="METRIC:max|min (default: declared)")
    parser.add_argument("--budget", type=int, default=10)
    parser.add_argument("--sample", type=int, default=16, help="configs sampled for the ranking")
    parser.add_argument("--runtime", type=float, default=20.0)
    parser.add_argument("--pairs", type=int, default=2, help="race pairs of a challenger")
    parser.add_argument("--verify", type=int, default=5, help="the fewest verification rounds")
    parser.add_argument("--verify-max", type=int, default=10, help="the most rounds")
    parser.add_argument("--top-k", type=int, default=6)
    parser.add_argument(
        "--confirm",
        action="store_true",
        help="re-measure stortune's recommendation, the peers' bests and the default in fresh "
        "paired rounds",
    )
    parser.add_argument(
        "--wide",
        type=int,
        default=0,
        help="where stortune verifies no gain: a Latin hypercube of N safe configs, its best "
        "re-measured beside the default (0: none)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--image-size", default="4g")
    parser.add_argument("--memory-limit", default="384m")
    parser.add_argument("--store", default=str(REPO / "bench" / "results" / "app-gains.db"))
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results file")
    parser.add_argument(
        "--no-run", action="store_true", help="measure nothing: the rows from the store as it is"
    )
    args = parser.parse_args()
    gains.NO_RUN = args.no_run
    console = Console()
    rows: list[dict[str, Any]] = []
    try:
        with Store(args.store) as store:
            for name in args.workloads:
                rows += measure_workload(args, store, console, name)
                write(rows, args)
    except (StortuneError, OSError) as exc:
        print(f"app-gains: {exc} (the same command resumes)", file=sys.stderr)
        sys.exit(1)
    print(table(rows))
    for row in rows:
        if "recommended" in row:
            gain = (
                f": {row['recommended_gain']:.2f}x ({row['recommended_low']:.2f}-"
                f"{row['recommended_high']:.2f})"
                if "recommended_gain" in row
                else ""
            )
            what = f"{row['recommended']} ({row['advice']})"
            print(f"{row['workload']}: stortune recommends its {what}{gain}")
        if "confirmation" in row:
            c = row["confirmation"]
            overs = ", ".join(
                f"over {p}'s best {v[0]:.2f}x ({v[1]:.2f}-{v[2]:.2f})"
                for p in PEERS
                if (v := c.get(f"over_{p}"))
            )
            print(
                f"{row['workload']}: confirmed in {c['rounds']} fresh rounds: "
                f"{c.get('gain', 0):.2f}x ({c.get('ci_low', 0):.2f}-{c.get('ci_high', 0):.2f}) "
                f"of the default; {overs}"
            )
        if "stortune_over" in row:
            print(
                f"{row['workload']}: stortune's recommendation over {row['tuner']}'s best, paired: "
                f"{row['stortune_over']:.2f}x ({row['stortune_over_low']:.2f}-"
                f"{row['stortune_over_high']:.2f})"
            )
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
