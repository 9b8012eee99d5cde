"""ceph.conf text: a mini-cluster's plumbing, and a config rendered as ceph.conf sections.

A tuned option lives in exactly one place (options in ceph.conf override ``ceph config set``,
so an option in both silently keeps the file's value). The plumbing file therefore holds only
what no space tunes: identity, addresses, paths, auth, and the settings a one-host replica-1
cluster needs to be healthy (`PINNED` lists them, and the space generator washes them out).
Everything tuned goes through the monitor's config database.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Settings of a mini-cluster that are not tuned: health policy for one host and replica 1 (the
# two insecure-global-id warnings and the pool-redundancy warning would keep it out of
# HEALTH_OK), a fast stats period so that health is seen within a second, and OSD creation.
PINNED: dict[str, str] = {
    "auth_cluster_required": "none",
    "auth_service_required": "none",
    "auth_client_required": "none",
    "ms_bind_msgr1": "false",
    "ms_bind_ipv6": "false",
    "public_addr": "127.0.0.1",
    "osd_pool_default_size": "1",
    "osd_pool_default_min_size": "1",
    "osd_pool_default_pg_autoscale_mode": "off",
    "osd_crush_chooseleaf_type": "0",
    "mon_allow_pool_size_one": "true",
    "mon_allow_pool_delete": "true",
    "mon_warn_on_pool_no_redundancy": "false",
    "mon_warn_on_insecure_global_id_reclaim": "false",
    "mon_warn_on_insecure_global_id_reclaim_allowed": "false",
    "mon_data_avail_warn": "2",
    "mon_data_avail_crit": "1",
    "mgr_stats_period": "1",
    "osd_objectstore": "bluestore",
    "bluestore_block_create": "true",
}
# What a mini-cluster starts with in its config database (tunable, so not in the file): small
# memory for a shared 2-core machine. The generated space takes these as its defaults.
BASELINE: dict[str, str] = {
    "osd_memory_target": str(1 << 30),
    "bluestore_cache_autotune": "false",
    "bluestore_cache_size": str(256 << 20),
}
# Paths of a mini-cluster, under its root directory ($name expands to e.g. osd.0).
_PATHS = {
    "run_dir": "run",
    "admin_socket": "run/$cluster-$name.asok",
    "log_file": "log/$cluster-$name.log",
    "mon_cluster_log_file": "log/$cluster.log",
    "mon_data": "mon/$id",
    "mgr_data": "mgr/$id",
    "osd_data": "osd/$id",
    "mds_data": "mds/$id",
    "crash_dir": "crash",
}
PATH_OPTIONS = frozenset(_PATHS)

# A parameter's layer (the daemon that reads it) -> its ceph.conf section.
SECTIONS = {
    "common": "global",
    "osd": "osd",
    "mon": "mon",
    "mgr": "mgr",
    "mds": "mds",
    "client": "client",
}


def plumbing_conf(root: Path, fsid: str, mon_addr: str, block_size: int, sockets: Path) -> str:
    """The ceph.conf of a mini-cluster in `root` whose monitor listens on `mon_addr`, its
    daemons' admin sockets in `sockets`."""
    lines = [
        "# written by stortune: plumbing only; tuned options live in the config database",
        "[global]",
        f"fsid = {fsid}",
        f"mon_host = [v2:{mon_addr}]",
    ]
    paths = {key: root / rel for key, rel in _PATHS.items()}
    paths["admin_socket"] = sockets / Path(_PATHS["admin_socket"]).name
    lines += [f"{key} = {path}" for key, path in paths.items()]
    lines += [f"{key} = {value}" for key, value in PINNED.items()]
    lines.append(f"bluestore_block_size = {block_size}")
    # Clients (rados bench processes, the ceph CLI) run several at once: no admin socket,
    # which they would all try to create under the same name.
    lines += ["[client]", "admin_socket ="]
    return "\n".join(lines) + "\n"


def format_value(value: Any) -> str:
    """A value as Ceph reads it: booleans as true/false, whole floats without a fraction."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    return str(value)


_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}


def _number(text: str) -> float | None:
    raw = text.strip().lower().removesuffix("b")
    for table in (_BINARY, _SUFFIX):
        for suffix, factor in table.items():
            if raw.endswith(suffix):
                try:
                    return float(raw[: -len(suffix)]) * factor
                except ValueError:
                    return None
    try:
        return float(raw)
    except ValueError:
        return None


def _shown_precision(text: str) -> float:
    """Half a unit in the last decimal a number was printed with (1e-9 for other forms)."""
    whole, dot, fraction = text.partition(".")
    if not dot or not fraction.isdigit():
        return 1e-9
    return 0.5 * 10.0 ** -len(fraction) + 1e-12


def same_value(shown: str, wanted: Any) -> bool:
    """Whether a daemon's value as ``ceph config show`` prints it (``0.300000``, ``true``,
    ``256Mi``) is `wanted`."""
    want = format_value(wanted).strip().lower()
    have = str(shown).strip().lower()
    if have == want:
        return True
    a, b = _number(have), _number(want)
    if a is not None and b is not None:
        # Ceph prints doubles with 6 decimals: 0.052820 is how it shows 0.05281965762...
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=_shown_precision(have))
    return {"true": "1", "false": "0"}.get(have, have) == {"true": "1", "false": "0"}.get(want)


def render_ceph_conf(config: Mapping[str, Any], layers: Mapping[str, str], header: str = "") -> str:
    """`config` as ceph.conf sections, each option under the section of the daemon that reads
    it (`layers`: name -> layer); parameters that are not ceph options (the bench pool's
    ``pg_per_osd``) become comments saying how to set them."""
    sections: dict[str, list[str]] = {}
    notes: list[str] = []
    for name, value in config.items():
        section = SECTIONS.get(layers.get(name, ""))
        if section is None:
            notes.append(f"# {name} = {format_value(value)} (not a ceph.conf option)")
            continue
        sections.setdefault(section, []).append(f"{name} = {format_value(value)}")
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += notes
    order = ["global", "mon", "mgr", "osd", "client"]
    for section in sorted(sections, key=order.index):
        lines += ["", f"[{section}]", *sections[section]]
    return "\n".join(lines).lstrip("\n") + "\n"
