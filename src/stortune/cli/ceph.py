"""`stortune ceph`: the Ceph space from Ceph's own metadata, local mini-clusters, and configs
rendered as ceph.conf."""

from __future__ import annotations

from pathlib import Path

import typer
import yaml

from stortune.ceph.client import CephClient
from stortune.ceph.conf import BASELINE
from stortune.ceph.health import status, wait_healthy
from stortune.ceph.local import DEFAULT_OSD_SIZE, LocalCluster
from stortune.cli import checks
from stortune.cli.common import console, print_json
from stortune.errors import StortuneError
from stortune.outputs import writing
from stortune.space import load_space
from stortune.units import parse_size

JsonOption = typer.Option(False, "--json", help="Print JSON.")
DirOption = typer.Option(..., "--dir", help="The mini-cluster's directory.")


def register(app: typer.Typer) -> None:
    ceph_app = typer.Typer(
        help="Ceph: the parameter space from Ceph's metadata, local mini-clusters, ceph.conf."
        "\n\nExample: stortune ceph space --out ceph.yaml",
        no_args_is_help=True,
    )
    app.add_typer(ceph_app, name="ceph")

    @ceph_app.command("space")
    def space_command(
        out: Path = typer.Option(
            ..., "--out", "-o", help="Write the space (YAML) here.", callback=checks.OUTPUT_FILE
        ),
        conf: Path = typer.Option(
            None, "--conf", help="Read an existing cluster's metadata (nothing is changed)."
        ),
        keyring: Path = typer.Option(None, "--keyring", help="Keyring of the existing cluster."),
        probe: bool = typer.Option(
            True, help="Local cluster: ask live daemons which runtime changes they observe."
        ),
        state_dir: Path = typer.Option(
            Path("/var/lib/stortune"), help="Where the throwaway local cluster lives."
        ),
        json_out: bool = JsonOption,
    ) -> None:
        """Generate the Ceph space: every option (config ls / config help), washed, pruned,
        bounded and constrained, with a summary by reason. Without --conf a throwaway 1-OSD
        cluster is made for it (about 20 s).

        Example: stortune ceph space --out ceph.yaml
        """
        from stortune.cephspace.live import space_from_client, space_from_local_cluster

        if conf is not None:
            space, cleaning = space_from_client(CephClient(conf, keyring))
        else:
            space, cleaning = space_from_local_cluster(state_dir, probe=probe)
        with writing(out):
            out.write_text(yaml.safe_dump(space.to_dict(), sort_keys=False, width=100))
        if json_out:
            print_json({"out": str(out), **cleaning.to_dict()})
            return
        console.print(cleaning.text(), highlight=False)
        console.print(f"wrote {out}: {len(space)} parameters", highlight=False)

    @ceph_app.command("up")
    def up(
        directory: Path = DirOption,
        osds: int = typer.Option(1, help="Number of OSDs."),
        osd_size: str = typer.Option(
            DEFAULT_OSD_SIZE, help="Size of each OSD's block file (sparse)."
        ),
        json_out: bool = JsonOption,
    ) -> None:
        """Start a local mini-cluster (127.0.0.1 only) that stays up until `ceph down`.

        Example: stortune ceph up --dir /tmp/c1 --osds 2
        """
        cluster = LocalCluster(directory, osds, parse_size(osd_size), persistent=True)
        try:
            cluster.create(BASELINE)
            seconds = wait_healthy(cluster.client, 180, osds, alive=cluster.check_alive)
        except BaseException:
            cluster.destroy()
            raise
        cluster.release_owner()
        result = {"dir": str(directory), "conf": str(cluster.conf), "pids": cluster.pids}
        if json_out:
            print_json(result)
            return
        console.print(
            f"cluster up in {directory} ({osds} OSDs, healthy {seconds:.1f} s after start); "
            f"use: ceph -c {cluster.conf} status",
            highlight=False,
        )

    @ceph_app.command("down")
    def down(directory: Path = DirOption) -> None:
        """Stop a mini-cluster's daemons (by the pids it recorded) and remove its directory.

        Example: stortune ceph down --dir /tmp/c1
        """
        cluster = LocalCluster.attach(directory)
        cluster.lock_owner()  # refuses a cluster that a running target owns
        killed = cluster.destroy()
        console.print(f"removed {directory}" + (f" (killed {killed})" if killed else ""))

    @ceph_app.command("status")
    def status_command(
        directory: Path = typer.Option(None, "--dir", help="A mini-cluster's directory."),
        conf: Path = typer.Option(None, "--conf", help="Or an existing cluster's ceph.conf."),
        json_out: bool = JsonOption,
    ) -> None:
        """Say whether a cluster serves: OSDs up, PGs active+clean, health.

        Example: stortune ceph status --dir /tmp/c1
        """
        if (directory is None) == (conf is None):
            raise StortuneError("give --dir (a mini-cluster) or --conf (an existing cluster)")
        client = LocalCluster.attach(directory).client if directory else CephClient(conf)
        health = status(client)
        if json_out:
            print_json({**health.__dict__, "checks": sorted(health.checks)})
            return
        console.print(
            f"{health.status}: {health.osds_up} OSDs up, {health.osds_in} in; "
            f"{health.pgs_clean} of {health.pgs} PGs active+clean"
            + (f"; checks: {', '.join(sorted(health.checks))}" if health.checks else ""),
            highlight=False,
        )

    @ceph_app.command("conf")
    def conf_command(
        config: str = typer.Argument(..., help="A config file (YAML) or 'expert'."),
        space: str = typer.Option("ceph", "--space", "-s", help="Space file or bundled name."),
    ) -> None:
        """Print a config as ceph.conf sections (only what differs from the defaults).

        Example: stortune ceph conf expert
        """
        from stortune.cephspace.configs import load_config, read_config_file
        from stortune.targets.ceph import ceph_conf_section

        s = load_space(space)
        doc = read_config_file(config)
        header = f"{doc.get('name', config)}: {doc.get('description', '')}".strip()
        text = ceph_conf_section(load_config(config, s), s, header)
        typer.echo(text, nl=False)
