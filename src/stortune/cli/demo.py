"""`stortune demo`: the main job on an embedded default, end to end, in a few minutes.

As root: a loop-device file system (the `localfs` space) under a fileserver-like fio workload.
Without root: fio against a file in a temporary directory, tuning the client-side `fio-client`
space through the `command` target. Either way: a SQLite store, a tuning campaign that starts
from the default config, default and best re-measured side by side, and an HTML report.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import typer

from stortune.cli.common import console, err_console, print_json
from stortune.cli.run import run_with_progress
from stortune.experiment import Experiment, LoopSettings, Objective
from stortune.space import load_space
from stortune.store import Store
from stortune.verify import remeasure

METRIC = "total.bw_mbs"


def _fio_command(runtime: float) -> str:
    return (
        "fio --name=demo --directory={workdir} --filename=demo.dat --rw=randrw --size=256m "
        f"--runtime={runtime:g} --time_based --bs={{bs}} --iodepth={{iodepth}} "
        "--ioengine={ioengine} --direct={direct} --numjobs={numjobs} --group_reporting "
        "--output-format=json"
    )


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        out: Path = typer.Option(Path("stortune-demo"), "--out", help="Folder for store+report."),
        budget: int = typer.Option(10, help="Evaluations, the default config included."),
        repetitions: int = typer.Option(2, "--repetitions", "-r", help="Runs per config."),
        runtime: float = typer.Option(3.0, help="Seconds each fio run lasts."),
        workload: str = typer.Option("fileserver", help="fio template (localfs only)."),
        tuner: str = typer.Option("tpe", help="Tuner to use."),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Tune a real storage stack for a few minutes and write an HTML report.

        Example: stortune demo --budget 10 --runtime 3
        """
        from stortune.report import write_report  # matplotlib: only when a report is made

        out.mkdir(parents=True, exist_ok=True)
        note = (err_console if json_out else console).print  # stdout stays pure JSON
        root = os.geteuid() == 0
        if root:
            from stortune.targets.localfs import LocalFsTarget
            from stortune.workloads.fio import FioWorkload

            space = load_space("localfs")

            def make_target() -> LocalFsTarget:
                # page cache capped below the file set, so the runs reach the file system and
                # the device instead of measuring RAM (Carver's S2 setting)
                return LocalFsTarget(
                    space, image_size="2g", image=out.resolve() / "demo.img", memory_limit="128m"
                )

            workloads = [FioWorkload(workload, runtime=runtime)]
            where = f"{workload} on a loop-device file system"
        else:
            from stortune.targets.command import CommandTarget

            note(
                "not root: the demo tunes fio's client-side options on a directory instead of "
                "formatting a loop device (run as root for the file-system demo)",
                highlight=False,
            )
            space = load_space("fio-client")

            def make_target() -> CommandTarget:
                return CommandTarget(_fio_command(runtime), output="fio")

            workloads = [None]
            where = "random read/write with fio in a directory"
        name = f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
        settings = LoopSettings(
            budget=budget, repetitions=repetitions, timeout=runtime * 10 + 120, baseline=True
        )
        with Store(str(out / "demo.db")) as db:
            experiment = Experiment.start(
                db,
                name,
                space,
                make_target(),
                workloads,
                Objective(METRIC, "max"),
                tuner,
                settings,
                seed=0,
            )
            outcome = run_with_progress(experiment, quiet=json_out)
            if outcome.best_config is None:
                raise SystemExit("demo: no evaluation succeeded; see `stortune show` for errors")
            default = space.default_config()
            changed = {k: v for k, v in outcome.best_config.items() if default.get(k) != v}
            gain = None
            if changed:
                note("re-measuring default and best side by side ...", highlight=False)
                gain = remeasure(
                    db,
                    db.campaign(name),
                    make_target(),
                    workloads,
                    {"default": default, "best": outcome.best_config},
                    repetitions=3,
                    timeout=settings.timeout,
                )["best"]
                finding = f"best config changes {changed}"
            else:
                finding = f"no config beat the default in {outcome.trials} evaluations"
            note("writing the report ...", highlight=False)
            # As root the headline names the workload and the winning file system itself.
            report = write_report(db, name, out, subject="" if root else where)
        if json_out:
            print_json(
                {
                    "campaign": name,
                    "store": str(out / "demo.db"),
                    "report": str(report.path),
                    "headline": report.headline,
                    "finding": finding,
                    "gain": gain.to_dict() if gain else None,
                }
            )
            return
        console.print(report.headline, highlight=False, soft_wrap=True)
        console.print(finding, highlight=False, soft_wrap=True)
        console.print(f"report: {report.path.resolve()}", highlight=False)
        console.print(
            f"store:  {(out / 'demo.db').resolve()}  (try: stortune show {name} "
            f"--store {out / 'demo.db'})",
            highlight=False,
        )
        sys.stdout.flush()
