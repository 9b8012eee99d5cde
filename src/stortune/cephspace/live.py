"""Generating the space from a real cluster: a throwaway local one (with the probe of live
daemons) or an existing one (metadata only: nothing on it is changed)."""

from __future__ import annotations

import os
import time
from collections.abc import Collection
from pathlib import Path

from stortune.ceph.client import CephClient
from stortune.ceph.conf import BASELINE, PATH_OPTIONS, PINNED
from stortune.ceph.health import wait_healthy
from stortune.ceph.local import LocalCluster
from stortune.cephspace.generate import Cleaning, generate_space
from stortune.cephspace.metadata import probe_observed, read_options
from stortune.cephspace.rules import Context, classify
from stortune.space import Space

# Options a local target sets in its ceph.conf (never tuned, so never in a space).
TARGET_PINNED = frozenset(PINNED) | PATH_OPTIONS | {"bluestore_block_size"}


def version(client: CephClient) -> str:
    """``16.2.15`` from ``ceph version``."""
    words = client.ceph("version").split()
    return words[2] if len(words) > 2 else ""


def rotational(client: CephClient) -> bool:
    """Whether the first OSD's data device is rotational (which media defaults apply)."""
    for meta in client.json("osd", "metadata") or []:
        flag = meta.get("bluestore_bdev_rotational", meta.get("rotational"))
        if flag is not None:
            return str(flag) == "1"
    return True


def wait_for_module_options(client: CephClient, timeout: float = 60.0) -> None:
    """Wait until the monitor lists the manager modules' options (``mgr/...``), which it
    learns a little after the manager starts: the total then does not depend on timing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(name.startswith("mgr/") for name in client.json("config", "ls") or []):
            return
        time.sleep(1.0)


def space_from_client(
    client: CephClient,
    sockets: dict[str, Path] | None = None,
    pinned: Collection[str] = TARGET_PINNED,
) -> tuple[Space, Cleaning]:
    """The space of the cluster `client` reaches; live daemons behind `sockets` (layer ->
    admin socket) are probed, which changes their options for a moment: throwaway clusters
    only."""
    wait_for_module_options(client)
    options = read_options(client)
    media = rotational(client)
    observed = None
    if sockets:
        names = frozenset(o["name"] for o in options)
        context = Context(pinned=frozenset(pinned), names=names, rotational=media)
        kept = [o for o in options if classify(o, context) is None]
        observed = probe_observed(kept, sockets)
    return generate_space(
        options,
        pinned=pinned,
        overrides=BASELINE,
        observed=observed,
        rotational=media,
        version=version(client),
    )


def space_from_local_cluster(state_dir: Path, probe: bool = True) -> tuple[Space, Cleaning]:
    """Make a 1-OSD cluster under `state_dir`, generate the space from it, remove it."""
    root = Path(state_dir) / f"ceph-space-{os.getpid()}"
    cluster = LocalCluster(root, osds=1)
    try:
        cluster.create(BASELINE)
        wait_healthy(cluster.client, 180, osds=1, alive=cluster.check_alive)
        sockets = {"osd": cluster.asok("osd.0"), "mon": cluster.asok("mon.a")}
        sockets["mgr"] = cluster.asok("mgr.x")
        return space_from_client(cluster.client, sockets if probe else None)
    finally:
        cluster.destroy()
