"""The demo: stortune's whole flow on an embedded default, in a few minutes.

As root: the whole local stack (the `stack` space: file system, its mkfs and mount options, the
block layer, vm) on a 2 GiB loop image, under a database-like fsync workload (dbfsync), the
benchmark's page cache capped below its file set so the runs reach the stack (Carver's S2
setting). A Latin hypercube of short runs ranks the parameters (Carver and Lasso); the default
tuner tunes the top few with intensification (racing the incumbent), starting from the sample's
best config with the others held there; default and best are
re-measured side by side, and beside them each risky value the default file system has
(barrier off, ...) so the page lists what the risks would buy without recommending them.

Without root: fio against a file in a temporary directory, tuning the client-side `fio-client`
space through the `command` target, tuned and verified the same way. Either way an HTML report.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stortune.errors import StortuneError
from stortune.measure.runner import RunRules
from stortune.measure.tuning import TuneSettings
from stortune.objective import Objective
from stortune.space import Space, load_space
from stortune.space.risk import risky_variants, safe_space
from stortune.store import Store
from stortune.targets.base import Target
from stortune.workflows.rank import RankOptions
from stortune.workflows.reporting import Reporter
from stortune.workflows.tune import TuneJob, TuneResult, start_tuning
from stortune.workloads.base import Workload
from stortune.workloads.declared import objective_for

FALLBACK_METRIC = "total.bw_mbs"  # the command target's fio job declares no objective


@dataclass
class DemoResult:
    campaign: str
    store: Path
    report: Path
    headline: str
    finding: str
    tuned: TuneResult

    def to_dict(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "store": str(self.store),
            "report": str(self.report),
            "headline": self.headline,
            "finding": self.finding,
            "gains": {k: g.to_dict() for k, g in self.tuned.gains.items()},
            "verification": (
                None if self.tuned.verification is None else self.tuned.verification.to_dict()
            ),
            "risks": [r.to_dict() for r in self.tuned.risks],
            "in_loop": None if self.tuned.in_loop is None else self.tuned.in_loop.to_dict(),
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
            load_space("stack"),
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
    repetitions: int = 3,
    runtime: float = 3.0,
    workload: str = "dbfsync",
    tuner: str = "bo",
    sample: int = 12,
    top_k: int = 4,
    verify: int = 5,
    verify_max: int = 20,
) -> DemoResult:
    from stortune.report import write_report  # matplotlib: only when a report is made

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StortuneError(
            f"cannot make the demo's folder {out}: {exc.strerror} (run it where you may write, "
            "or give --out FOLDER)"
        ) from None
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
            # what the workload exists for (dbfsync: commits per second) and its guardrails
            objective=objective_for(
                workloads, None, fallback=Objective(FALLBACK_METRIC), say=reporter.note
            ),
            settings=TuneSettings(
                budget=budget, repetitions=repetitions, baseline=True, intensify=True
            ),
            rules=RunRules(timeout=runtime * 10 + 120),
            tuner=tuner,
            name=name,
            # as `stortune tune --rank` does: the others held at the sample's best, where the
            # tuning starts, so a good sampled config is not lost for want of a top-K place
            rank=RankOptions("carver", top_k, "best", sample) if len(space) > top_k else None,
            verify=verify,
            verify_max=verify_max,
            compare=risky_variants(space, space.default_config()),
        )
        tuned = start_tuning(db, job, reporter)
        finding = _finding(tuned, safe_space(space))
        reporter.note("writing the report ...")
        report = write_report(db, name, out, subject=subject)
    return DemoResult(name, store_path, report.path, report.headline, finding, tuned)


def _finding(tuned: TuneResult, space: Space) -> str:
    best = tuned.outcome.best_config
    if best is None:
        return "no evaluation succeeded; see `stortune show` for each run's error"
    default = space.default_config()
    changed = {k: v for k, v in best.items() if default.get(k) != v}
    if not changed:
        return f"no config beat the default in {tuned.outcome.evaluations} evaluations"
    return f"the best config found changes {changed}"
