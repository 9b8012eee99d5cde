"""`stortune worker`: a measuring node of a cluster; `stortune cluster local`: a scheduler and
nodes on this machine, for trying a cluster out."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import typer

from stortune import bounds
from stortune.cli import checks
from stortune.cli import targets as target_options
from stortune.cli.common import console, err_console
from stortune.errors import StortuneError


def register(app: typer.Typer) -> None:
    @app.command("worker")
    @target_options.with_target_options
    def worker_command(
        targets: target_options.TargetOptions,
        scheduler: str = typer.Option(
            ...,
            "--scheduler",
            envvar="STORTUNE_SCHEDULER",
            help="The Dask scheduler to join: tcp://HOST:8786.",
        ),
        node: str = typer.Option(
            ...,
            "--node",
            help="This node's name, unique in the cluster; each run is stored with it.",
            callback=checks.checked(_node_name),
        ),
    ) -> None:
        """Measure for a cluster's campaigns: a Dask worker that owns one target (the target
        options as `stortune tune` takes them: its loop image or --device, its Ceph client).
        Runs until Ctrl-C or SIGTERM, which tear the target down. Start one per test node
        and device; the campaign runs on the coordinator with --scheduler.

        Example: stortune worker --scheduler tcp://coordinator:8786 --node rack1-n07
        --target localfs --image-size 4g --memory-limit 384m

        Example: stortune worker --scheduler tcp://coordinator:8786 --node n07-nvme1
        --device /dev/nvme1n1 --destroy-data
        """
        from stortune.cluster.local import READY
        from stortune.cluster.node import serve

        target = targets.build(None)
        err_console.print(
            f"node {node}: a {target.kind} target, joining {scheduler}", highlight=False
        )
        serve(scheduler, node, target, ready=f"{READY}: {node}")

    cluster_app = typer.Typer(
        help="A cluster of measuring nodes on Dask distributed: `cluster local` starts a "
        "scheduler and N nodes on this machine to try it out (`stortune worker` starts one node "
        "on a test machine).\n\n"
        "Example: stortune cluster local --workers 3 --target toy"
    )
    app.add_typer(cluster_app, name="cluster")

    @cluster_app.command("local")
    @target_options.with_target_options
    def local_command(
        targets: target_options.TargetOptions,
        workers: int = typer.Option(
            2,
            "--workers",
            help="Nodes to start on this machine.",
            callback=checks.within(bounds.Range(1, 64, whole=True)),
        ),
        port: int = typer.Option(
            8786,
            "--port",
            help="The scheduler's port (0: any free one).",
            callback=checks.within(bounds.Range(0, 65535, whole=True)),
        ),
        prefix: str = typer.Option(
            "local",
            "--prefix",
            help="The nodes' names: PREFIX-1 .. PREFIX-N.",
            callback=checks.checked(_node_name),
        ),
        folder: Path = typer.Option(
            None,
            "--folder",
            help="Where each node keeps its state (loop image, mounts) and log \\[default: a "
            "new temporary folder].",
        ),
    ) -> None:
        """Start a Dask scheduler on 127.0.0.1 and N nodes on this machine, each with its own
        state folder (N localfs nodes format N loop images), and wait until Ctrl-C. They
        share one disk and its CPUs: this shows the flow, not the speed of N machines.

        Example: stortune cluster local --workers 3 --target command
        --command 'python3 bench.py --threads {threads}'

        Then: stortune tune --space my.yaml -o ops_per_s:max --budget 30
        --scheduler tcp://127.0.0.1:8786
        """
        from stortune.cluster.local import start_local
        from stortune.measure.runner import sigterm_as_interrupt

        targets.build(None)  # options that do not name one target fail here, once
        root = folder or Path(tempfile.mkdtemp(prefix="stortune-cluster-"))
        args = _target_args(sys.argv)
        with sigterm_as_interrupt(), start_local(workers, root, args, port, prefix) as cluster:
            console.print(
                f"scheduler {cluster.address}, nodes {', '.join(cluster.nodes)} "
                f"(logs and state in {root}); Ctrl-C stops them",
                highlight=False,
            )
            console.print(
                f"measure on them: stortune tune ... --scheduler {cluster.address}",
                highlight=False,
                soft_wrap=True,
            )
            told: set[str] = set()
            try:
                while any(p.poll() is None for p in cluster.nodes.values()):
                    for name, proc in cluster.nodes.items():
                        if proc.poll() is not None and name not in told:
                            told.add(name)  # a node lost is what a campaign copes with
                            err_console.print(
                                f"node {name} stopped (its log: {root / name}.log)",
                                highlight=False,
                            )
                    time.sleep(1)
            except KeyboardInterrupt:
                return
            raise StortuneError(f"every node stopped (their logs: {root})")


def _node_name(text: str) -> str:
    ok = text and len(text) <= 64 and all(c.isalnum() or c in "-_." for c in text)
    if not ok:
        raise StortuneError(f"a node's name is 1 to 64 letters, digits, '-', '_' or '.': {text!r}")
    return text


def _target_args(argv: list[str]) -> list[str]:
    """The command line's target options, handed on to each node: everything after `local`
    but this command's own options."""
    args = argv[argv.index("local") + 1 :] if "local" in argv else []
    own = {"--workers", "--port", "--folder", "--prefix"}
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in own:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out
