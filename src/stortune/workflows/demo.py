"""The demo: the main job on an embedded default, end to end, in a few minutes.

As root: a loop-device file system (the `localfs` space) under a fio workload, the benchmark's
page cache capped below the file set so the runs reach the file system and the device instead of
measuring RAM (Carver's S2 setting). Without root: fio against a file in a temporary directory,
tuning the client-side `fio-client` space through the `command` target. Either way: a tuning
campaign that starts from the default config, default and best re-measured side by side, and an
HTML report.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stortune.measure.objective import Objective
from stortune.measure.runner import RunRules
from stortune.measure.tuning import TuneSettings
from stortune.space import load_space
from stortune.store import Store
from stortune.targets.base import Target
from stortune.workflows.reporting import Reporter
from stortune.workflows.tune import TuneJob, TuneResult, start_tuning
from stortune.workloads.base import Workload

METRIC = "total.bw_mbs"


@dataclass
class DemoResult:
    campaign: str
    store: Path
    report: Path
    headline: str
    finding: str
    tuned: TuneResult

    def to_dict(self) -> dict[str, Any]:
        gain = self.tuned.gain
        return {
            "campaign": self.campaign,
            "store": str(self.store),
            "report": str(self.report),
            "headline": self.headline,
            "finding": self.finding,
            "gain": gain.to_dict() if gain else None,
        }


def _fio_command(runtime: float) -> str:
    return (
        "fio --name=demo --directory={workdir} --filename=demo.dat --rw=randrw --size=256m "
        f"--runtime={runtime:g} --time_based --bs={{bs}} --iodepth={{iodepth}} "
        "--ioengine={ioengine} --direct={direct} --numjobs={numjobs} --group_reporting "
        "--output-format=json"
    )


def demo_target(
    out: Path, workload: str, runtime: float
) -> tuple[Target, list[Workload | None], str]:
    """The demo's target, workloads and what to call them."""
    if os.geteuid() == 0:
        from stortune.targets.localfs import LocalFsTarget

        target = LocalFsTarget(
            load_space("localfs"),
            image_size="2g",
            image=str(out.resolve() / "demo.img"),
            memory_limit="128m",
        )
        return target, target.workloads([workload], runtime), ""
    from stortune.targets.command import CommandTarget

    target = CommandTarget(load_space("fio-client"), command=_fio_command(runtime), output="fio")
    return target, [None], "random read/write with fio in a directory"


def run_demo(
    out: Path,
    reporter: Reporter,
    budget: int = 10,
    repetitions: int = 2,
    runtime: float = 3.0,
    workload: str = "fileserver",
    tuner: str = "tpe",
) -> DemoResult:
    from stortune.report import write_report  # matplotlib: only when a report is made

    out.mkdir(parents=True, exist_ok=True)
    target, workloads, subject = demo_target(out, workload, runtime)
    if subject:
        reporter.note(
            "not root: the demo tunes fio's client-side options on a directory instead of "
            "formatting a loop device (run as root for the file-system demo)"
        )
    space = target.space
    assert space is not None
    name = f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    store_path = out / "demo.db"
    with Store(str(store_path)) as db:
        job = TuneJob(
            space=space,
            target=target,
            workloads=workloads,
            objective=Objective(METRIC),
            settings=TuneSettings(budget=budget, repetitions=repetitions, baseline=True),
            rules=RunRules(timeout=runtime * 10 + 120),
            tuner=tuner,
            name=name,
            verify=3,
        )
        tuned = start_tuning(db, job, reporter)
        best = tuned.outcome.best_config or {}
        changed = {k: v for k, v in best.items() if space.default_config().get(k) != v}
        if tuned.outcome.best_config is None:
            finding = "no evaluation succeeded; see `stortune show` for each run's error"
        elif changed:
            finding = f"best config changes {changed}"
        else:
            finding = f"no config beat the default in {tuned.outcome.evaluations} evaluations"
        reporter.note("writing the report ...")
        report = write_report(db, name, out, subject=subject)
    return DemoResult(name, store_path, report.path, report.headline, finding, tuned)
