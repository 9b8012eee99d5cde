"""Default vs expert (vs tuned) Ceph configs on a local mini-cluster, under rados bench.

A 2-OSD cluster (stortune's `ceph` target, local mode) runs the three workloads (write,
sequential read, random read: SAPPHIRE's Table 4 scaled to this machine) under each config.
MEASURING.md: absolute numbers drift on this VM, so configs are interleaved (each repetition
applies every config in turn, in alternating order, and runs all workloads under it) and each
config is reported as its ratio to the default measured in the same repetition, with a
t-based confidence interval over the repetitions. Also recorded: the space-cleaning summary of
the live cluster's options (with the probe of its daemons), and how long installing Ceph,
bringing the cluster up and one evaluation (apply + restart + a random-read run) took.

The tuned column: ``--tuned-campaign NAME --store DB``, a campaign of ``stortune tune --target
ceph`` (its recommended config, the one ``stortune recommend`` writes; the gains its own
verification measured on the tuning cluster are copied beside this run's, so "tune on a small
test cluster, verify on a bigger one" reads from one file), or ``--tuned FILE``, a config file
(see `stortune.cephspace.configs`).

Usage: python bench/ceph.py [--osds 2] [--repetitions 3] [--duration 10]
       [--tuned FILE | --tuned-campaign NAME --store DB]
       [--out bench/results/ceph.json] [--state-dir /var/lib/stortune] [--wait 3600]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from stortune.cephspace.configs import load_config
from stortune.cephspace.live import space_from_client, version
from stortune.errors import BusyError
from stortune.measure.verify import recommended_config, stored_gains
from stortune.space import Config, load_space
from stortune.stats import summarize
from stortune.store import Store
from stortune.targets.ceph import CephTarget
from stortune.workloads.rados import PRESETS, RadosWorkload

REPO = Path(__file__).resolve().parents[1]
CONFIDENCE = 0.9
METRICS = ("bw_mbs", "iops", "lat_mean_ms", "lat_max_ms")
console = Console()


def ensure_ceph() -> float | None:
    """Seconds spent installing Ceph's packages, None when they were there already."""
    if shutil.which("ceph-osd"):
        return None
    started = time.monotonic()
    subprocess.run([str(REPO / "scripts" / "install-system.sh")], check=True)
    return time.monotonic() - started


def setup_when_free(target: CephTarget, wait: float) -> float:
    """Bring the cluster up once no other benchmark holds the machine lock (one benchmark at a
    time, MEASURING.md); the seconds the bring-up took."""
    deadline = time.monotonic() + wait
    while True:
        started = time.monotonic()
        try:
            target.setup()
            return time.monotonic() - started
        except BusyError as exc:
            if time.monotonic() > deadline:
                raise
            console.print(f"waiting: {exc}", highlight=False)
            time.sleep(30)


def measure(
    target: CephTarget,
    configs: dict[str, Config],
    workloads: list[RadosWorkload],
    repetitions: int,
) -> list[dict[str, Any]]:
    """Every (repetition, config, workload) run, with the seconds its apply and run took."""
    runs: list[dict[str, Any]] = []
    names = list(configs)
    for rep in range(repetitions):
        order = names if rep % 2 == 0 else names[::-1]
        for name in order:
            started = time.monotonic()
            try:
                target.apply(configs[name])
                error = None
            except Exception as exc:  # a config the cluster refuses is a result, not a crash
                error = str(exc)
            applied = time.monotonic() - started
            for workload in workloads:
                record: dict[str, Any] = {"repetition": rep, "config": name}
                record.update(workload=workload.name, apply_s=applied, load=os.getloadavg()[0])
                if error is None:
                    began = time.monotonic()
                    m = target.run(workload)
                    record.update(ok=m.ok, error=m.error, run_s=time.monotonic() - began)
                    record.update({k: m.metrics.get(k) for k in METRICS})
                else:
                    record.update(ok=False, error=f"apply: {error}")
                runs.append(record)
                status = f"{record.get('bw_mbs') or 0:8.1f} MiB/s" if record["ok"] else "failed"
                console.print(f"rep {rep} {name:8s} {workload.name:12s} {status}", highlight=False)
    return runs


def evaluation_seconds(runs: list[dict[str, Any]]) -> float | None:
    """One evaluation, timed end to end: applying a config that restarts the OSDs, then a
    random-read run (its prefill writes, the reads, the clean-up)."""
    for r in runs:
        if r["config"] != "default" and r["workload"] == "rados-rand" and r["ok"]:
            return r["apply_s"] + r["run_s"]
    return None


def summaries(runs: list[dict[str, Any]], configs: list[str]) -> dict[str, Any]:
    """Per workload and config: bandwidth (and IOPS, latency) mean and CI, and the ratio to
    the default of the same repetition."""
    out: dict[str, Any] = {}
    for workload in dict.fromkeys(r["workload"] for r in runs):
        rows = [r for r in runs if r["workload"] == workload and r["ok"]]
        default = {r["repetition"]: r["bw_mbs"] for r in rows if r["config"] == "default"}
        out[workload] = {}
        for name in configs:
            mine = [r for r in rows if r["config"] == name]
            base = [default.get(r["repetition"]) for r in mine]
            ratios = [r["bw_mbs"] / d for r, d in zip(mine, base, strict=True) if d]
            failed = [r for r in runs if (r["workload"], r["config"]) == (workload, name)]
            out[workload][name] = {
                "bw_mbs": summarize([r["bw_mbs"] for r in mine], CONFIDENCE).to_dict(),
                "iops": summarize([r["iops"] for r in mine], CONFIDENCE).mean,
                "lat_mean_ms": summarize([r["lat_mean_ms"] for r in mine], CONFIDENCE).mean,
                "ratio_to_default": summarize(ratios, CONFIDENCE).to_dict(),
                "failed": sum(1 for r in failed if not r["ok"]),
            }
    return out


def tuned_campaign(name: str, store_url: str, space: Any) -> tuple[Config, dict[str, Any]]:
    """A ceph tuning campaign's recommended config, and what its own run measured: the
    cluster it tuned on, the ranking, and each re-measured config's gain over the default."""
    with Store(store_url) as db:
        campaign = db.campaign(name)
        config = space.validate(recommended_config(db, campaign))
        gains = {label: g.to_dict() for label, g in stored_gains(db, campaign).items()}
        trials = len([t for t in db.trials(campaign.id) if t.seq >= 0])
        tuned = {
            "campaign": name,
            "tuner": campaign.tuner,
            "metric": campaign.metric,
            "workload": campaign.workload,
            "osds": campaign.target.get("osds"),
            "evaluations": trials,
            "tuned_parameters": [p.name for p in _space_of(campaign).parameters],
            "gains_on_tuning_cluster": gains,
        }
    return config, tuned


def _space_of(campaign: Any) -> Any:
    from stortune.space import parse_space

    return parse_space(campaign.space_yaml, f"campaign {campaign.name!r}")


def finite(value: Any) -> Any:
    """JSON without Infinity/NaN (a one-repetition interval is unbounded: null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def print_table(result: dict[str, Any]) -> None:
    configs = result["configs"]
    table = Table(title="rados bench bandwidth, MiB/s (90% CI); ratio to default (90% CI)")
    table.add_column("workload")
    for name in configs:
        table.add_column(name, justify="right")
    for workload, by_config in result["summary"].items():
        cells = []
        for name in configs:
            s = by_config[name]
            bw, ratio = s["bw_mbs"], s["ratio_to_default"]
            text = f"{bw['mean']:.1f} [{bw['ci_low']:.1f}, {bw['ci_high']:.1f}]"
            if name != "default":
                text += f"\nx{ratio['mean']:.2f} [{ratio['ci_low']:.2f}, {ratio['ci_high']:.2f}]"
            cells.append(text)
        table.add_row(workload, *cells)
    console.print(table)
    console.print(result["cleaning_text"], highlight=False)
    tuning = result.get("tuning")
    if tuning:
        console.print(
            f"tuned on {tuning['osds']} OSD(s) by {tuning['tuner']} ({tuning['evaluations']} "
            f"evaluations of {len(tuning['tuned_parameters'])} parameters), gains measured "
            "there: "
            + "; ".join(
                f"{label} {g['gain']:+.1%} [{g['ci_low']:+.1%}, {g['ci_high']:+.1%}]"
                for label, g in tuning["gains_on_tuning_cluster"].items()
            ),
            highlight=False,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--osds", type=int, default=2)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0, help="Seconds per measured run.")
    parser.add_argument("--tuned", help="A tuned config file (the third column).")
    parser.add_argument("--tuned-campaign", help="A stored ceph tuning campaign instead.")
    parser.add_argument("--store", default="stortune.db", help="Store of --tuned-campaign.")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "ceph.json"))
    parser.add_argument("--state-dir", default="/var/lib/stortune")
    parser.add_argument("--wait", type=float, default=3600, help="Seconds to wait for the lock.")
    args = parser.parse_args(argv)

    install_s = ensure_ceph()
    space = load_space("ceph")
    configs = {"default": {}, "expert": load_config("expert", space)}
    tuning = None
    if args.tuned_campaign:
        configs["tuned"], tuning = tuned_campaign(args.tuned_campaign, args.store, space)
    elif args.tuned:
        configs["tuned"] = load_config(args.tuned, space)
    workloads = [RadosWorkload.named(name, duration=args.duration) for name in PRESETS]
    target = CephTarget(space, osds=args.osds, state_dir=args.state_dir)
    bringup_s = setup_when_free(target, args.wait)
    with target:
        assert target.cluster is not None
        daemons = {"osd": "osd.0", "mon": "mon.a", "mgr": "mgr.x"}
        sockets = {layer: target.cluster.asok(name) for layer, name in daemons.items()}
        _, cleaning = space_from_client(target.client, sockets)
        ceph_version = version(target.client)
        runs = measure(target, configs, workloads, args.repetitions)
    result = {
        "bench": "ceph",
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {"cpus": os.cpu_count(), "kernel": platform.release()},
        "ceph_version": ceph_version,
        "osds": args.osds,
        "repetitions": args.repetitions,
        "workloads": [w.describe() for w in workloads],
        "configs": list(configs),
        "config_values": configs,
        "times_s": {
            "install": install_s,
            "bring_up": bringup_s,
            "evaluation": evaluation_seconds(runs),
        },
        "tuning": tuning,
        "cleaning": cleaning.to_dict(),
        "cleaning_text": cleaning.text(),
        "summary": summaries(runs, list(configs)),
        "runs": runs,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(finite(result), indent=2, default=str) + "\n")
    print_table(result)
    console.print(f"wrote {args.out}", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
