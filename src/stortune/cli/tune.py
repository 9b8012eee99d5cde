"""`stortune tune` and `stortune recommend`: rank, tune, check the gain, hand the config over.

`tune` is the whole of SAPPHIRE's workflow on one target: optionally rank the parameters first
(Carver or Lasso, on the runs already stored for this space, sampling more by Latin hypercube
when they are too few), tune the top K with the others pinned at their best known values, then
measure the default and the best config again, interleaved, and report the gain with its
confidence interval. Several objectives are combined by Magpie's weighted scalarisation, and
their Pareto front is shown. `recommend` writes a tuned campaign's best config in the target's
native form, with the measured gain, for a production system.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import typer
import yaml
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from stortune.cli import targets as target_options
from stortune.cli.common import DEFAULT_STORE, STORE_HELP, console, print_json
from stortune.cli.run import run_with_progress
from stortune.datasets import METRIC_PREFIX, Dataset, from_frame
from stortune.errors import StortuneError
from stortune.experiment import Experiment, LoopSettings, Objective, measure_once
from stortune.space import Config, Space, load_space, parse_space
from stortune.store import Campaign, Store
from stortune.targets import Target, Workload, make_target
from stortune.tuners import DEFAULT_TUNER, tuner_names
from stortune.tuners.multiobjective import (
    SCORE,
    ObjectiveSpec,
    ScalarizedTarget,
    Scalarizer,
    pareto_front,
)
from stortune.tuners.render import render, target_kind
from stortune.tuners.topk import pin, top_k
from stortune.verify import (
    Gain,
    latest_verification,
    recommended_config,
    remeasure,
    stored_gain,
)

RANK_METHODS = ("carver", "lasso")


# ---- ranking ------------------------------------------------------------------------------
def stored_dataset(db: Store, space: Space, metric: str, direction: str) -> Dataset | None:
    """Every run stored for this space that measured `metric`, as one dataset."""
    frames = []
    for campaign in db.campaigns():
        if campaign.space_name != space.name or campaign.kind == "verify":
            continue
        frame = db.runs_frame(campaign.name, include_failed=False)
        column = METRIC_PREFIX + metric
        if frame.empty or column not in frame or not set(space.names) <= set(frame.columns):
            continue
        frames.append(frame[[*space.names, column]].dropna(subset=[column]))
    if not frames:
        return None
    data = from_frame(pd.concat(frames, ignore_index=True), metrics=[column], source="store")
    return data.with_metric_direction(metric, direction)


def rank_space(
    db: Store,
    space: Space,
    method: str,
    k: int,
    hold: str,
    objective: Objective,
    sample: Any,
    needed: int | None = None,
) -> tuple[Space, list[str], Config, int]:
    """The space to tune: the top `k` free, the rest pinned, and how many configs the ranking
    saw. Samples (by calling `sample(n)`) when the store has fewer than `needed` distinct
    configs (default: max(20, 2 x parameters); Lasso ranks with fewer samples than parameters,
    as SAPPHIRE did on Ceph)."""
    from stortune.importance import rank_dataset

    if method not in RANK_METHODS:
        raise StortuneError(f"--rank must be one of {', '.join(RANK_METHODS)}, not {method!r}")
    needed = needed or max(20, 2 * len(space))
    dataset = stored_dataset(db, space, objective.metric, objective.direction)
    have = 0 if dataset is None else len(dataset.aggregated().frame)
    if have < needed:
        sample(needed - have)
        dataset = stored_dataset(db, space, objective.metric, objective.direction)
    if dataset is None:
        raise StortuneError("no successful run to rank the parameters with")
    result = rank_dataset(
        dataset, method, objective.metric, "top-n" if method == "carver" else None, k
    )
    free = top_k(result, k)
    means = dataset.aggregated().frame
    best_row = means.sort_values(objective.metric, ascending=objective.direction == "min").iloc[0]
    held = {n: _plain(best_row[n]) for n in space.names if n not in free} if hold == "best" else {}
    held = {n: v for n, v in held.items() if v is not None}
    return pin(space, free, held), free, held, len(means)


def thin_ranking_warning(configs: int, parameters: int) -> str | None:
    """Why a ranking from fewer configs than parameters deserves doubt (measured on Ceph: 18
    configs for 439 options put monitor timeouts and scrub thresholds in the top 16)."""
    if configs >= parameters:
        return None
    return (
        f"the ranking saw {configs} configs for {parameters} parameters: beyond the strongest "
        f"few, its order is mostly noise; a larger --rank-budget makes it worth more"
    )


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and math.isnan(value) else value


# ---- objectives ---------------------------------------------------------------------------
def parse_bounds(items: list[str]) -> dict[str, tuple[float, float]]:
    out = {}
    for item in items:
        name, _, rest = item.partition("=")
        low, _, high = rest.partition(":")
        try:
            out[name.strip()] = (float(low), float(high))
        except ValueError:
            raise StortuneError(f"--bounds {item!r}: write METRIC=LOW:HIGH") from None
        if not out[name.strip()][0] < out[name.strip()][1]:
            raise StortuneError(f"--bounds {item!r}: LOW must be below HIGH")
    return out


def reference_metrics(
    target: Target, workloads: list[Workload | None], config: Config, metric: str, timeout: float
) -> dict[str, float]:
    """Each metric's mean over one run per workload of `config` (bounds for scalarisation)."""
    sums: dict[str, list[float]] = {}
    with target:
        target.apply(config)
        for workload in workloads:
            m = measure_once(target, workload, timeout, metric)
            if not m.ok:
                raise StortuneError(f"the default config's reference run failed: {m.error}")
            for k, v in m.metrics.items():
                sums.setdefault(k, []).append(v)
    return {k: sum(v) / len(v) for k, v in sums.items()}


def pareto_rows(db: Store, campaign: Campaign, objectives: list[ObjectiveSpec]) -> list[dict]:
    """The tuned campaign's Pareto-optimal trials (per-trial means of each objective)."""
    rows, points = [], []
    for trial in db.trials(campaign.id):
        runs = [r for r in trial.runs if r.status == "ok"]
        if not runs or any(o.metric not in r.metrics for r in runs for o in objectives):
            continue
        means = {o.metric: sum(r.metrics[o.metric] for r in runs) / len(runs) for o in objectives}
        rows.append({"seq": trial.seq, "config": trial.config, **means})
        points.append([means[o.metric] for o in objectives])
    front = pareto_front(points, [o.direction for o in objectives])
    return [rows[i] for i in front]


def compared_configs(files: list[str], space: Space) -> dict[str, Config]:
    """Configs to re-measure beside default and best, by the name their file gives."""
    from stortune.cephspace.configs import config_of, read_config_file

    out: dict[str, Config] = {}
    for item in files:
        doc = read_config_file(item)
        label = str(doc.get("name") or Path(item).stem)
        if label in out or label in ("default", "best"):
            raise StortuneError(f"--compare {item}: the label {label!r} is taken; rename it")
        out[label] = config_of(doc, item, space)
    return out


# ---- output -------------------------------------------------------------------------------
def print_pareto(rows: list[dict], objectives: list[ObjectiveSpec]) -> None:
    table = Table(title="Pareto front (no other trial is better on every objective)")
    table.add_column("trial", justify="right")
    for o in objectives:
        table.add_column(f"{o.metric} ({o.direction})", justify="right")
    table.add_column("config")
    for row in rows:
        config = ", ".join(f"{k}={v}" for k, v in row["config"].items())
        table.add_row(str(row["seq"]), *(f"{row[o.metric]:.4g}" for o in objectives), config)
    console.print(table)


def verify_with_progress(
    db: Store,
    experiment: Experiment,
    target: Target,
    configs: dict[str, Config],
    repetitions: int,
    timeout: float,
    space_yaml: str | None,
    quiet: bool,
) -> dict[str, Gain]:
    with Progress(
        TextColumn(f"[bold]re-measuring {', '.join(configs)}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        disable=quiet,
    ) as progress:
        task = progress.add_task("verify", total=len(configs) * repetitions)
        return remeasure(
            db,
            experiment.campaign,
            target,
            experiment.workloads,
            configs,
            repetitions,
            timeout,
            on_run=lambda: progress.advance(task),
            space_yaml=space_yaml,
        )


def register(app: typer.Typer) -> None:
    @app.command("tune")
    @target_options.with_target_options
    def tune_command(
        targets: target_options.TargetOptions,
        space: str = typer.Option(None, "--space", "-s", help="Space file or bundled name."),
        check_disturbance: bool = target_options.CHECK_DISTURBANCE,
        reference_every: int = target_options.REFERENCE_EVERY,
        tuner: str = typer.Option(
            DEFAULT_TUNER, help=f"One of {', '.join(tuner_names())} (bo: SAPPHIRE's GP-BO)."
        ),
        objective: list[str] = typer.Option(
            [],
            "--objective",
            "-o",
            help="METRIC[:max|min[:WEIGHT]]; repeat for several (weighted min-max "
            "scalarisation, Pareto front reported).",
        ),
        bounds: list[str] = typer.Option(
            [],
            "--bounds",
            help="Several objectives: METRIC=LOW:HIGH normalisation bounds [default: 0 to twice "
            "the default config's value].",
        ),
        budget: int = typer.Option(
            None, help="Evaluations in total [default: 30; on --resume: as stored]."
        ),
        seconds: float = typer.Option(None, help="Stop tuning after this many seconds."),
        repetitions: int = typer.Option(3, "--repetitions", "-r", help="Runs per config."),
        rank: str = typer.Option(
            None, "--rank", help="Rank parameters first (carver or lasso) and tune the top K."
        ),
        top_k: int = typer.Option(5, "--top-k", "-k", help="With --rank: parameters to tune."),
        rank_budget: int = typer.Option(
            None,
            "--rank-budget",
            help="With --rank: configs to sample (by LHS, one run each) for the ranking, counting "
            "runs already stored for this space [default: max(20, 2 x parameters)].",
        ),
        hold: str = typer.Option(
            "best", "--hold", help="With --rank: pin the others at their 'best' or 'default'."
        ),
        verify: int = typer.Option(
            5, "--verify", help="Re-measure default and best this many times each (0: skip)."
        ),
        compare: list[str] = typer.Option(
            [],
            "--compare",
            help="A config file (YAML with a 'config' mapping; 'expert' is the bundled Ceph "
            "expert config) re-measured beside default and best; repeatable.",
        ),
        agent: Path = typer.Option(
            None, "--agent", help="ddpg: continue from this saved agent and save it back."
        ),
        timeout: float = typer.Option(600.0, help="Kill a run after this many seconds."),
        seed: int = typer.Option(0, help="Random seed of the tuner."),
        name: str = typer.Option(None, "--name", "-n", help="Campaign name (default: made up)."),
        resume: str = typer.Option(None, "--resume", help="Continue this stored campaign."),
        store: str = typer.Option(
            DEFAULT_STORE, "--store", envvar="STORTUNE_STORE", help=STORE_HELP
        ),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
        json_out: bool = typer.Option(False, "--json", help="Print the outcome as JSON."),
    ) -> None:
        """Tune a target: rank first if asked, tune, then re-measure default and best and
        report the gain with its confidence interval. Ctrl-C loses nothing: --resume NAME.

        Example: stortune tune --space localfs --workload fileserver -o total.bw_mbs:max
        --rank carver --top-k 4 --budget 40 --runtime 10

        Example: stortune tune --target table --dataset runs.csv -o Performance:min --budget 30

        Example: stortune tune --space my.yaml --model cart.joblib -o iops:max --tuner bo
        --budget 30

        Example: stortune tune --space localfs -o total.bw_mbs:max -o total.lat_mean_us:min
        --tuner bo --budget 40

        Example: stortune tune --target ceph --osds 1 --space ceph --workload rados-rand
        -o bw_mbs:max --rank lasso --rank-budget 30 --top-k 16 --hold default --compare expert
        """
        if hold not in ("best", "default"):
            raise StortuneError(f"--hold must be 'best' or 'default', not {hold!r}")
        specs = [ObjectiveSpec.parse(o) for o in objective]
        quiet = quiet or json_out
        report: dict[str, Any] = {}
        with Store(store) as db:
            if resume:
                experiment = Experiment.resume(db, resume, budget=budget, seconds=seconds)
                # The default to compare with is the whole space's: given, or kept by an
                # earlier verification, else the campaign's (pinned) space's.
                previous = latest_verification(db, experiment.campaign)
                if space:
                    whole = load_space(space)
                elif previous is not None:
                    whole = parse_space(previous.space_yaml, f"campaign {previous.name!r}")
                else:
                    whole = experiment.space
                # the campaign's target knows only its (pinned) space; the default needs all
                checker = make_target(experiment.campaign.target, whole)
                compared = compared_configs(compare, whole)
            else:
                if not space or not specs:
                    raise StortuneError("a new campaign needs --space and --objective")
                whole = load_space(space)
                compared = compared_configs(compare, whole)  # a bad file fails before tuning
                built = targets.build(whole)
                loads = targets.workloads()
                goal = Objective(specs[0].metric, specs[0].direction)
                if len(specs) > 1:
                    given = parse_bounds(bounds)
                    if all(s.metric in given for s in specs):
                        scalarizer = Scalarizer(specs, given)
                    else:
                        ref = reference_metrics(
                            built, loads, whole.default_config(), specs[0].metric, timeout
                        )
                        scalarizer = Scalarizer.around(specs, {**ref, **given})
                        scalarizer.bounds.update(given)
                    built = ScalarizedTarget(built, scalarizer)
                    goal = Objective(SCORE, "max")
                    report["scalarizer"] = scalarizer.to_dict()
                name = name or f"{whole.name}-{tuner}-{time.strftime('%Y%m%d-%H%M%S')}"
                # a replayed table is not disturbed by what else the machine does
                disturbance = check_disturbance and built.measures_machine
                settings = LoopSettings(
                    budget=budget or 30,
                    seconds=seconds,
                    repetitions=repetitions,
                    timeout=timeout,
                    check_disturbance=disturbance,
                    reference_every=target_options.reference_every(reference_every, built),
                )
                tuned_space = whole
                if rank:

                    def sample(n: int) -> None:
                        sampling = LoopSettings(
                            budget=n,
                            repetitions=1,
                            timeout=timeout,
                            check_disturbance=disturbance,
                        )
                        taken = {c.name for c in db.campaigns()}
                        label = f"{name}-rank"
                        label += f"-{len(taken)}" if label in taken else ""
                        run_with_progress(
                            Experiment.start(
                                db,
                                label,
                                whole,
                                built,
                                loads,
                                goal,
                                "lhs",
                                sampling,
                                seed,
                                kind="sample",
                            ),
                            quiet=quiet,
                        )

                    tuned_space, free, held, seen = rank_space(
                        db, whole, rank, top_k, hold, goal, sample, rank_budget
                    )
                    warning = thin_ranking_warning(seen, len(whole))
                    report["ranking"] = {
                        "method": rank,
                        "tuned": free,
                        "pinned": held,
                        "configs": seen,
                        "warning": warning,
                    }
                    if not json_out:
                        console.print(
                            f"{rank} ranking from {seen} configs: tuning {', '.join(free)}; "
                            f"{len(held)} other parameter(s) pinned ({hold} values)",
                            highlight=False,
                        )
                        if warning:
                            console.print(f"warning: {warning}", highlight=False)
                experiment = Experiment.start(
                    db, name, tuned_space, built, loads, goal, tuner, settings, seed
                )
                checker = built
            if agent is not None and hasattr(experiment.tuner, "load") and agent.exists():
                experiment.tuner.load(agent)
            outcome = run_with_progress(experiment, quiet=quiet)
            if agent is not None and hasattr(experiment.tuner, "save"):
                experiment.tuner.save(agent)
            report["outcome"] = outcome.to_dict()
            grown = getattr(getattr(experiment.tuner, "bounds", None), "widenings", [])
            if grown:  # SAPPHIRE's dynamic bounds: say where the search left the declared box
                final = {w.name: (w.low, w.high) for w in grown}
                report["widened"] = {k: list(v) for k, v in final.items()}
                if not json_out:
                    ranges = ", ".join(f"{k} [{lo:g}, {hi:g}]" for k, (lo, hi) in final.items())
                    console.print(f"bounds grown: {ranges}", highlight=False)
            metric = experiment.objective.metric
            if not json_out:
                console.print(
                    f"campaign {outcome.campaign!r}: {outcome.trials} evaluations; best {metric} "
                    f"= {outcome.best_value} at {outcome.best_config}",
                    highlight=False,
                )
            if verify > 0 and outcome.best_config is not None:
                configs = {"default": whole.default_config(), "best": outcome.best_config}
                configs.update(compared)
                space_yaml = yaml.safe_dump(whole.to_dict(), sort_keys=False)
                gains = verify_with_progress(
                    db, experiment, checker, configs, verify, timeout, space_yaml, quiet
                )
                gain = gains.pop("best")
                report["gain"] = gain.to_dict()
                report["compared"] = {k: g.to_dict() for k, g in gains.items()}
                if not json_out:
                    for g in [gain, *gains.values()]:
                        console.print(g.text(), highlight=False)
            if len(specs) > 1 or isinstance(experiment.target, ScalarizedTarget):
                if isinstance(experiment.target, ScalarizedTarget):
                    specs = experiment.target.scalarizer.objectives
                rows = pareto_rows(db, experiment.campaign, specs)
                report["pareto"] = rows
                if not json_out:
                    print_pareto(rows, specs)
            if json_out:
                print_json(report)

    @app.command("recommend")
    def recommend_command(
        campaign: str = typer.Argument(..., help="A tuned campaign."),
        out: Path = typer.Option(None, "--out", help="Write the recommendation to this file."),
        store: str = typer.Option(
            DEFAULT_STORE, "--store", envvar="STORTUNE_STORE", help=STORE_HELP
        ),
        json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Write a tuned campaign's best config in the target's native form (ceph.conf
        sections; mkfs, mount and sysfs/sysctl lines; name = value otherwise) with the gain
        measured against the default, for a production system.

        Example: stortune recommend my-campaign --out recommended.conf
        """
        with Store(store) as db:
            tuned = db.campaign(campaign)
            if tuned.kind == "verify":
                tuned = db.campaign(tuned.settings["of"])
            verification = latest_verification(db, tuned)
            config = recommended_config(db, tuned)
            gain = stored_gain(db, tuned)
            space = parse_space((verification or tuned).space_yaml, f"campaign {tuned.name!r}")
        header = f"stortune recommendation from campaign {tuned.name} (tuner {tuned.tuner})\n"
        header += (
            gain.text()
            if gain
            else f"{tuned.metric}: not re-measured (tune with --verify N to measure the gain)"
        )
        if gain is not None and gain.gain <= 0:
            header += "\nwarning: measured again, this config was no better than the default"
        text = render(target_kind(tuned.target), config, space, header)
        if json_out:
            print_json({"config": config, "gain": gain.to_dict() if gain else None, "text": text})
        elif out is None:
            sys.stdout.write(text)  # verbatim: a terminal's width must not wrap config lines
        if out is not None:
            out.write_text(text)
            if not json_out:
                console.print(f"wrote {out}", highlight=False)
