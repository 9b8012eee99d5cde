"""Campaigns on a Dask cluster against the same campaign in one process: the speedup per node,
the quality reached at equal evaluations, and the coordinator's cost per proposal.

Target: the `table` target replaying PromiseTune's deeparch table (moot, MIT; 4,096 configs of
12 parameters, a full grid, one measured value each, so noise-free), minimising ``Aws-theano``;
every run sleeps `--replay-seconds` (4 s) as a real benchmark would take. Each campaign is
``stortune tune`` with the default tuner, `--budget` (150) evaluations of one run each
(``--no-intensify --repetitions 1 --verify 0``), its own store in /dev/shm:

* serial: the command in one process, no ``--scheduler``;
* on N workers (1, 2, 4, 8): a local cluster (`stortune.cluster.local.start_local`, a Dask
  scheduler and N ``stortune worker`` nodes on 127.0.0.1, each replaying the same table) runs
  the same command with ``--scheduler``, same seed; each node also measures the default once
  first, its reference.

Per campaign: the command's wall time (process start to exit, Python's start-up included),
the campaign's own seconds (the outcome's), the share of node time spent in runs, a node's
median wait between two runs, and the quality at `--quality-at` (50) evaluations and at the
budget: the best noise-free value among evaluations 1..n as a fraction of the table's optimum
(optimum / best: the metric is minimised). Medians over `--seeds` seeds. Speedup = median wall
at 1 worker / at N. The serial campaigns are compared by quality only, which does not depend on
how long a run takes (`--serial-replay-seconds 0` spares their wait).
"ideal" is the speedup with no overhead at all: (1 + budget) runs on one node against
1 + ceil(budget / N) rounds of runs on N (the reference is a round of its own). Control (none by
default): one seed per worker count of the same campaign with `--control random`, whose asks
cost nothing: what the cluster costs without the tuner's proposals.

Proposal cost (no cluster): the default tuner told 100 evaluations of the table, then
`ParallelTunePlan._propose` (copy the tuner, tell it the pending configs as lies, ask) timed
for 20 consecutive proposals with K = 8, 32 and 128 configs pending; after each, the oldest
pending config is told its value and the proposal becomes pending, as in a campaign.

Goals: speedup >= 0.8 x workers up to 8; median quality at `--budget` within 1% of the serial
campaigns'; a proposal under 1 s (mean) with 128 in flight. The load average is recorded around
every campaign: other benchmarks may share the machine. Finished campaigns are kept in the
results file and skipped when the bench runs again (--fresh starts over).

The coordinator proposes once per evaluation: with bo's ~0.25 s a proposal, 8 nodes whose runs
take 2 s keep it busy all the time, so the speedup is measured with runs of 4 s and 150
evaluations (a 50-evaluation campaign cannot reach 6.4x on 8 nodes even without overhead: its
reference round alone caps it at 6.38x).

Run: python bench/scale.py [--seeds 3] [--workers 1,2,4,8] [--budget 150] [--replay-seconds 4]
     [--serial-replay-seconds 0] [--quality-at 50] [--control random] [--fresh] [--no-run]
     (writes bench/results/scale.json and prints the Markdown table)
"""

from __future__ import annotations

import argparse
import atexit
import copy
import datetime
import json
import math
import os
import platform
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace

from stortune.tuners import DEFAULT_TUNER

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "scale.json"
DATASET = REPO.parent / "shared" / "datasets" / "moot-promisetune" / "deeparch.csv"
METRIC, DIRECTION = "Aws-theano", "min"
IN_FLIGHT = (8, 32, 128)
OBSERVATIONS, PROPOSALS = 100, 20  # four refits of the GP's hyperparameters each
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else None


def scratch() -> Path:
    folder = Path(tempfile.mkdtemp("-scale", dir=SCRATCH))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def others() -> list[str]:
    """Other benchmarks and stortune processes running beside this one (their command lines)."""
    seen = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in (os.getpid(), os.getppid()):
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        line = " ".join(a.decode(errors="replace") for a in argv if a)
        if "bench/" in line or "stortune worker" in line or "db_bench" in line:
            seen.append(line[:160])
    return sorted(set(seen))


def tune_argv(args, seed: int, store: Path, scheduler: str | None, tuner: str) -> list[str]:
    replay = args.replay_seconds if scheduler else args.serial_replay_seconds
    argv = [
        sys.executable, "-m", "stortune", "tune", "--target", "table", "--dataset", str(DATASET),
        "--replay-seconds", str(replay), "-o", f"{METRIC}:{DIRECTION}",
        "--budget", str(args.budget), "--no-intensify", "--repetitions", "1", "--verify", "0",
        "--seed", str(seed), "--store", str(store), "--name", "scale", "--json", "--quiet",
        "--tuner", tuner,
    ]  # fmt: skip
    return argv + (["--scheduler", scheduler] if scheduler else [])


def campaign(
    args, table, folder: Path, seed: int, workers: int | None, scheduler=None, tuner=DEFAULT_TUNER
) -> dict:
    """One campaign (module doc), serial when `scheduler` is None."""
    store = folder / f"{workers or 'serial'}-{seed}.db"
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    argv = tune_argv(args, seed, store, scheduler, tuner)
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"tune failed ({done.returncode}): {done.stderr[-2000:]}")
    outcome = json.loads(done.stdout)["outcome"]
    with sqlite3.connect(store) as db:
        trials = db.execute(
            "select seq, config, status from trials where seq >= 0 order by seq"
        ).fetchall()
        runs = db.execute("select started_at, ended_at, info from runs").fetchall()
    store.unlink()
    values = [table.true_value(json.loads(c), METRIC) for _, c, s in trials if s == "ok"]
    optimum = table.optimum(METRIC, DIRECTION)
    by_node: dict[str, list[tuple[float, float]]] = {}
    for start, end, info in runs:
        by_node.setdefault(json.loads(info or "{}").get("node", "serial"), []).append((start, end))
    waits = [b[0] - a[1] for spans in by_node.values() for a, b in pairwise(sorted(spans))]
    busy = sum(end - start for spans in by_node.values() for start, end in spans)
    return {
        "mode": "cluster" if scheduler else "serial",
        "tuner": tuner,
        "workers": workers or 1,
        "seed": seed,
        "wall_seconds": round(wall, 2),
        "campaign_seconds": round(outcome["seconds"], 2),
        "evaluations": len(trials),
        "runs": len(runs),
        **{at(n): round(optimum / min(values[:n]), 6) for n in (args.quality_at, args.budget)},
        "busy_share": round(busy / ((workers or 1) * outcome["seconds"]), 3),
        "node_wait_median": round(statistics.median(waits), 3) if waits else None,
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def proposal_cost() -> dict:
    """The coordinator's proposal with K configs pending (module doc)."""
    from stortune.measure.parallel import ParallelTunePlan
    from stortune.targets.table import TableSettings, TableTarget
    from stortune.tuners import make_tuner

    table = TableTarget(settings=TableSettings(str(DATASET)))
    configs = table.configs()
    order = random.Random(0).sample(range(len(configs)), len(configs))
    queue = [configs[i] for i in order]
    base = make_tuner(DEFAULT_TUNER, table.space, DIRECTION, 0, OBSERVATIONS + PROPOSALS)
    for config in queue[:OBSERVATIONS]:
        base.tell(config, table.true_value(config, METRIC))
    base.ask()  # the first fit of the model, as the campaign's earlier proposals made it
    rows = []
    for k in IN_FLIGHT:
        tuner = copy.deepcopy(base)
        pending = [SimpleNamespace(config=c) for c in queue[OBSERVATIONS : OBSERVATIONS + k]]
        plan = SimpleNamespace(real=tuner, _pending=lambda p=pending: p)
        started = time.perf_counter()
        copy.deepcopy(tuner)
        copied = time.perf_counter() - started
        seconds = []
        for _ in range(PROPOSALS):
            started = time.perf_counter()
            config = ParallelTunePlan._propose(plan)  # type: ignore[arg-type]
            seconds.append(time.perf_counter() - started)
            oldest = pending.pop(0).config
            tuner.tell(oldest, table.true_value(oldest, METRIC))
            pending.append(SimpleNamespace(config=config))
        rows.append({
            "in_flight": k, "mean_seconds": round(statistics.fmean(seconds), 3),
            "median_seconds": round(statistics.median(seconds), 3),
            "max_seconds": round(max(seconds), 3), "copy_seconds": round(copied, 4),
        })  # fmt: skip
        print(f"  proposal with {k} pending: {rows[-1]['mean_seconds']} s (mean)", file=sys.stderr)
    return {"tuner": DEFAULT_TUNER, "observations": OBSERVATIONS, "proposals": PROPOSALS,
            "rows": rows, "load_after": round(os.getloadavg()[0], 2)}  # fmt: skip


def median_of(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def rows_of(runs: list[dict], tuner: str, s: dict, serial: dict | None) -> list[dict]:
    """A row per worker count of the campaigns on the cluster with `tuner`: medians over seeds,
    speedups over the 1-worker row."""
    rows = []
    for n in s["workers"]:
        mine = [r for r in runs if r["mode"] == "cluster" and r["workers"] == n
                and r.get("tuner", DEFAULT_TUNER) == tuner]  # fmt: skip
        if not mine:
            continue
        keys = ("wall_seconds", "campaign_seconds", "busy_share", "node_wait_median")
        rounds = 1 + math.ceil(s["budget"] / n)  # the references, then the evaluations
        rows.append(
            {"workers": n, "tuner": tuner, "seeds": len(mine),
             **{k: median_of(mine, k) for k in keys},
             **{key: median_of(mine, key) for key in points(s)},
             **{f"serial_{key}": serial and serial[key] for key in points(s)},
             "qualities": [r[at(s)] for r in sorted(mine, key=lambda r: r["seed"])],
             "ideal_speedup": round((1 + s["budget"]) / rounds, 3),
             "load_max": max(max(r["load_before"], r["load_after"]) for r in mine)}
        )  # fmt: skip
    one = next((r for r in rows if r["workers"] == 1), None)
    for row in rows:
        for key, of in (("speedup", "wall_seconds"), ("campaign_speedup", "campaign_seconds")):
            row[key] = round(one[of] / row[of], 3) if one else None
    return rows


def at(settings: dict | int) -> str:
    """The key of the quality reached at `settings`' quality point, or at n evaluations."""
    n = settings if isinstance(settings, int) else settings["quality_at"]
    return f"quality_at_{n}"


def points(settings: dict) -> list[str]:
    """The quality keys a row has: at the quality point (50) and at the budget."""
    return [at(n) for n in sorted({settings["quality_at"], settings["budget"]})]


def summarise(result: dict) -> None:
    """rows, control, serial and check from the campaigns."""
    s, runs = result["settings"], result["campaigns"]
    serial = [r for r in runs if r["mode"] == "serial"]
    serial_quality = median_of(serial, at(s))
    result["serial"] = {
        "seeds": len(serial),
        "replay_seconds": s["serial_replay_seconds"],
        "wall_seconds": median_of(serial, "wall_seconds"),
        "campaign_seconds": median_of(serial, "campaign_seconds"),
        **{key: median_of(serial, key) for key in points(s)},
        "qualities": [r[at(s)] for r in sorted(serial, key=lambda r: r["seed"])],
    }
    rows = result["rows"] = rows_of(runs, DEFAULT_TUNER, s, result["serial"])
    control = s.get("control")
    result["control"] = rows_of(runs, control, s, None) if control else []
    speed = {
        str(r["workers"]): r["speedup"] is not None and r["speedup"] >= 0.8 * r["workers"]
        for r in rows
        if r["workers"] > 1
    }
    quality = {
        str(r["workers"]): serial_quality is not None and r[at(s)] >= 0.99 * serial_quality
        for r in rows
    }
    cost = result.get("proposal_cost") or {"rows": []}
    at_128 = next((r for r in cost["rows"] if r["in_flight"] == 128), None)
    result["check"] = {
        "speedup_at_least_0.8x_workers": {"met": bool(speed) and all(speed.values()), **speed},
        "quality_within_1pct_of_serial": {"met": bool(quality) and all(quality.values()),
                                          **quality},
        "proposal_under_1s_at_128": {
            "met": at_128 is not None and at_128["mean_seconds"] < 1.0,
            "mean_seconds": at_128 and at_128["mean_seconds"],
            "max_seconds": at_128 and at_128["max_seconds"],
        },
    }  # fmt: skip


def markdown(result: dict) -> str:
    def num(v, fmt="{:.2f}"):
        return "-" if v is None else fmt.format(v)

    s, serial = result["settings"], result["serial"]
    lines = [
        "| workers | tuner | seeds | wall s | campaign s | speedup (ideal) | campaign speedup "
        "| node busy | node wait s "
        + "".join(f"| {k.replace('_', ' ')} | serial's " for k in points(s))
        + "|",
        "|---" * (9 + 2 * len(points(s))) + "|",
        f"| serial | {DEFAULT_TUNER} | {serial['seeds']} | {num(serial['wall_seconds'], '{:.1f}')} "
        f"| {num(serial['campaign_seconds'], '{:.1f}')} | | | | "
        + "".join(f"| {num(serial[k], '{:.4f}')} | " for k in points(s))
        + "|",
    ]
    for r in result["rows"] + result["control"]:
        lines.append(
            f"| {r['workers']} | {r['tuner']} | {r['seeds']} | {r['wall_seconds']:.1f} | "
            f"{r['campaign_seconds']:.1f} | {num(r['speedup'])}x ({r['ideal_speedup']:.2f}x) | "
            f"{num(r['campaign_speedup'])}x | {r['busy_share']:.0%} | "
            f"{num(r['node_wait_median'])} "
            + "".join(f"| {r[k]:.4f} | {num(r[f'serial_{k}'], '{:.4f}')} " for k in points(s))
            + "|"
        )
    cost = result.get("proposal_cost")
    if cost:
        lines += ["", f"Proposal cost ({cost['tuner']}, {cost['observations']} evaluations told, "
                  f"{cost['proposals']} proposals each):", "",
                  "| in flight | mean s | median s | max s | copy of the tuner s |",
                  "|---|---|---|---|---|"]  # fmt: skip
        lines += [
            f"| {r['in_flight']} | {r['mean_seconds']:.3f} | {r['median_seconds']:.3f} | "
            f"{r['max_seconds']:.3f} | {r['copy_seconds']:.4f} |"
            for r in cost["rows"]
        ]
    lines.append("")
    for name, check in result["check"].items():
        detail = ", ".join(f"{k}: {v}" for k, v in check.items() if k != "met")
        lines.append(f"{name}: {'met' if check['met'] else 'NOT met'} ({detail})")
    return "\n".join(lines)


def git_state() -> dict:
    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True).stdout

    dirty = git("status", "--porcelain", "--", "src").split("\n")
    return {"commit": git("rev-parse", "HEAD").strip(), "uncommitted_src": [d for d in dirty if d]}


def main() -> None:
    from stortune.cluster.local import start_local
    from stortune.targets.table import TableSettings, TableTarget

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--budget", type=int, default=150)
    parser.add_argument("--replay-seconds", type=float, default=4.0)
    parser.add_argument(
        "--serial-replay-seconds", type=float, default=0.0, help="each run's sleep in the "
        "serial campaigns; only their quality is compared, which does not depend on it"
    )  # fmt: skip
    parser.add_argument("--quality-at", type=int, default=50, help="the evaluations at which "
                        "quality is compared with the serial campaigns'")  # fmt: skip
    parser.add_argument(
        "--control", default="", help="a tuner whose asks cost nothing, one seed a worker "
        "count, to tell the coordinator's proposals from the rest (random; none by default)"
    )  # fmt: skip
    parser.add_argument("--fresh", action="store_true", help="forget the finished campaigns")
    parser.add_argument("--no-run", action="store_true", help="re-print from the results file")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    # SIGTERM (kill, nohup's stop) unwinds like Ctrl-C: the running campaign's command is
    # killed and the local cluster's scheduler and nodes are stopped, none left behind
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    settings = {
        "dataset": str(DATASET), "metric": METRIC, "direction": DIRECTION,
        "budget": args.budget, "replay_seconds": args.replay_seconds,
        "serial_replay_seconds": args.serial_replay_seconds, "quality_at": args.quality_at,
        "workers": [int(n) for n in args.workers.split(",")], "seeds": args.seeds,
        "control": args.control or None,
    }  # fmt: skip
    if not DATASET.exists():
        sys.exit(f"{DATASET} is missing (../shared/datasets)")
    old = json.loads(args.out.read_text()) if args.out.exists() else {}
    if args.no_run:
        summarise(old)
        print(markdown(old))
        return
    same = not args.fresh and {k: v for k, v in old.get("settings", {}).items()
                               if k not in ("workers", "seeds", "control")} == {
        k: v for k, v in settings.items() if k not in ("workers", "seeds", "control")}  # fmt: skip
    result = {
        "command": "python bench/scale.py " + " ".join(sys.argv[1:]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "nproc": os.cpu_count(),
                    "loadavg_at_start": os.getloadavg(), "running_beside": others()},
        "git": git_state(),
        "settings": settings,
        "campaigns": old.get("campaigns", []) if same else [],
        "proposal_cost": old.get("proposal_cost") if same else None,
    }  # fmt: skip

    def write() -> None:
        summarise(result)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")

    folder = scratch()
    os.environ["STORTUNE_LOCK_DIR"] = str(folder)  # replayed runs: no other benchmark to wait for
    table = TableTarget(settings=TableSettings(str(DATASET)))
    done = {(r["mode"], r["workers"], r["seed"], r["tuner"]) for r in result["campaigns"]}
    if result["proposal_cost"] is None:
        print("proposal cost", file=sys.stderr)
        result["proposal_cost"] = proposal_cost()
        write()
    for seed in range(args.seeds):
        if ("serial", 1, seed, DEFAULT_TUNER) not in done:
            result["campaigns"].append(run := campaign(args, table, folder, seed, None))
            print(f"serial seed {seed}: {run['wall_seconds']} s, quality {run[at(settings)]}",
                  file=sys.stderr)  # fmt: skip
            write()
    for n in settings["workers"]:
        jobs = [(s, DEFAULT_TUNER) for s in range(args.seeds)]
        jobs += [(0, args.control)] if args.control else []
        jobs = [(s, t) for s, t in jobs if ("cluster", n, s, t) not in done]
        if not jobs:
            continue
        target = ["--target", "table", "--dataset", str(DATASET),
                  "--replay-seconds", str(args.replay_seconds)]  # fmt: skip
        started = time.perf_counter()
        with start_local(n, folder / f"cluster-{n}", target, port=0) as cluster:
            print(f"{n} workers up in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            for seed, tuner in jobs:
                run = campaign(args, table, folder, seed, n, cluster.address, tuner)
                result["campaigns"].append(run)
                print(
                    f"{n} workers {tuner} seed {seed}: {run['wall_seconds']} s, quality "
                    f"{run[at(settings)]}, busy {run['busy_share']:.0%}",
                    file=sys.stderr,
                )
                write()
    result["machine"]["loadavg_at_end"] = os.getloadavg()
    write()
    print(markdown(result))


if __name__ == "__main__":
    main()
