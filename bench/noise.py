"""Trustworthy measurements on a noisy machine: raw vs reference-normalised repeat RSD.

One localfs config (the default of the `localfs` space unless --config) is measured for
--minutes, alternating with the reference config, with background I/O (a fio random-write job on
the root disk, outside stortune) during the middle third. The peer is what a user does without
stortune: plain repetitions, compared raw, every first attempt kept (disturbed or not). stortune
redoes disturbed runs (after a pause, and again in the sweep's second pass) and divides each
run by the reference measured around it. Reported per phase (before, during, after the load):
the peer's raw RSD, stortune's raw and normalised RSD of the runs it kept, and how many runs the
disturbance check flagged. Goal: normalised RSD <= 3%.

Needs root and a machine with nothing else running. Run:
    python bench/noise.py --minutes 30        (writes bench/results/noise.json)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from stortune.measure.noise import repetitions_needed
from stortune.measure.reference import campaign_relative, is_reference
from stortune.measure.runner import RunRules
from stortune.space import load_space
from stortune.stats import summarize
from stortune.store import Store
from stortune.targets.localfs import LocalFsTarget
from stortune.workflows.sweep import noise_study
from stortune.workloads.fio import FioWorkload

RESULTS = Path(__file__).parent / "results" / "noise.json"
METRIC = "total.bw_mbs"


def background_load(stop: threading.Event, start_at: float, end_at: float, folder: Path) -> None:
    """A fio random-write job on the root disk between two times (seconds since the start)."""
    began = time.monotonic()
    while time.monotonic() - began < start_at and not stop.is_set():
        time.sleep(1)
    if stop.is_set():
        return
    seconds = max(1, int(end_at - start_at))
    subprocess.run(
        [
            "fio",
            "--name=background",
            f"--directory={folder}",
            "--rw=randwrite",
            "--bs=64k",
            "--size=512m",
            "--direct=1",
            "--time_based",
            f"--runtime={seconds}",
            "--output=/dev/null",
        ],
        check=False,
    )


def phase_of(t: float, start_at: float, end_at: float) -> str:
    return "before" if t < start_at else ("during" if t < end_at else "after")


def first_attempt(run: Any) -> tuple[float, float | None]:
    """(start time, metric) of this slot's first attempt: what a user without disturbance checks
    would have kept, disturbed or not. The slot belongs to the phase of that time."""
    info = run.info or {}
    for earlier in info.get("replaced_disturbed", []):
        tries = earlier.get("attempts") or [{"metrics": earlier["metrics"]}]
        return earlier["started_at"], tries[0]["metrics"].get(METRIC)
    tries = info.get("disturbed_attempts") or []
    value = tries[0]["metrics"].get(METRIC) if tries else run.metrics.get(METRIC)
    # retries within one run keep the run's start time: the first try began then
    return run.started_at, value


def flagged(run: Any) -> bool:
    info = run.info or {}
    return bool(info.get("disturbed_attempts") or info.get("replaced_disturbed")) or (
        run.status == "disturbed"
    )


def analyse(db_path: Path, load_from: float, load_to: float) -> dict[str, dict]:
    """Per phase (by each slot's first attempt): slots, flagged, the peer's raw RSD (first
    attempts), stortune's raw and normalised RSD (the runs it kept)."""
    with Store(str(db_path)) as db:
        campaign = db.campaign("noise")
        trials = db.trials(campaign.id)
        relative = campaign_relative(db, campaign)
    studied = [r for t in trials if not is_reference(t) for r in t.runs]
    started = min(r.started_at for t in trials for r in t.runs)
    phases: dict[str, dict] = {}
    for phase in ("before", "during", "after", "all"):
        slots = [
            (r, *first_attempt(r))
            for r in studied
            if phase == "all"
            or phase_of(first_attempt(r)[0] - started, load_from, load_to) == phase
        ]
        kept = [r for r, _, _ in slots if r.status == "ok"]
        raw = summarize([r.metrics[METRIC] for r in kept])
        norm = summarize([relative[r.id] for r in kept if r.id in relative])
        peer = summarize([v for _, _, v in slots if v is not None])
        phases[phase] = {
            "runs": len(slots),
            "ok": len(kept),
            "flagged": sum(flagged(r) for r, _, _ in slots),
            "peer_raw_rsd": peer.rsd,
            "raw_rsd": raw.rsd,
            "normalised_rsd": norm.rsd,
            "repetitions_for_5pct_raw": repetitions_needed(raw.rsd),
            "repetitions_for_5pct_normalised": repetitions_needed(norm.rsd),
        }
    return phases


def measure(args: argparse.Namespace, load_from: float, load_to: float) -> Path:
    """The campaign: the default config alternating with the reference, load in the middle."""
    if os.geteuid() != 0:
        raise SystemExit("bench/noise.py needs root (loop devices, mkfs, mount)")
    seconds = args.minutes * 60
    space = load_space("localfs")
    pairs = max(3, int(seconds // (2 * (args.runtime + 3))))
    work = Path(tempfile.mkdtemp(prefix="stortune-noise-"))
    stop = threading.Event()
    loader = threading.Thread(target=background_load, args=(stop, load_from, load_to, work))
    with Store(str(work / "noise.db")) as db:
        loader.start()
        try:
            noise_study(
                db,
                space,
                LocalFsTarget(space, image_size="4g", memory_limit=args.memory_limit),
                [FioWorkload(args.workload, runtime=args.runtime)],
                METRIC,
                space.default_config(),
                pairs,
                # runs the load spoils are redone once it has passed (never given up on)
                RunRules(
                    timeout=args.runtime * 10 + 120, check_disturbance=True, busy_wait=seconds
                ),
                name="noise",
            )
        finally:
            stop.set()
            loader.join()
    return work / "noise.db"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--runtime", type=float, default=10.0)
    parser.add_argument("--workload", default="fileserver")
    parser.add_argument(
        "--memory-limit",
        default="128m",
        help="page-cache cap of the benchmark, as the first dataset was measured (data/README.md)",
    )
    parser.add_argument(
        "--analyse", type=Path, help="only analyse the noise.db of an earlier run (same --minutes)"
    )
    args = parser.parse_args()
    seconds = args.minutes * 60
    load_from, load_to = seconds / 3, 2 * seconds / 3
    began = time.time()
    db_path = args.analyse or measure(args, load_from, load_to)
    phases = analyse(db_path, load_from, load_to)
    result = {
        "minutes": args.minutes,
        "runtime": args.runtime,
        "workload": args.workload,
        "memory_limit": args.memory_limit,
        "load": {"from_s": load_from, "to_s": load_to},
        "phases": phases,
        "goal_normalised_rsd": 0.03,
        "met": phases["all"]["normalised_rsd"] <= 0.03,
        "wall_seconds": None if args.analyse else time.time() - began,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print("| phase | slots | flagged | peer raw RSD | stortune raw | normalised | peer/ours |")
    print("|---|---|---|---|---|---|---|")
    for phase, p in phases.items():
        ratio = p["peer_raw_rsd"] / p["normalised_rsd"] if p["normalised_rsd"] else float("nan")
        print(
            f"| {phase} | {p['runs']} | {p['flagged']} | {p['peer_raw_rsd']:.1%} | "
            f"{p['raw_rsd']:.1%} | {p['normalised_rsd']:.1%} | {ratio:.1f}x |"
        )
    print(f"goal: normalised RSD <= 3% overall: {'met' if result['met'] else 'NOT met'}")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
