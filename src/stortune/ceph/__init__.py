"""What the `ceph` target is made of: talking to a cluster, running a local mini-cluster,
waiting for health, reading daemon state, and writing ceph.conf text.

- `client`: the ``ceph`` and ``rados`` tools with a cluster's conf (and keyring), batches of mon
  commands over one connection, admin sockets.
- `local`: a mini-cluster (one mon, one mgr, BlueStore OSDs on files) in its own directory on
  127.0.0.1, whose daemons are started, stopped and recovered by pid.
- `health`: waiting until every OSD is up, every PG active+clean and the cluster HEALTH_OK.
- `perf`: per-OSD perf counters, commit/apply latency, CPU and memory of the daemons.
- `conf`: the plumbing ceph.conf of a mini-cluster and a config rendered as ceph.conf sections.
"""

from stortune.ceph.client import CephClient, asok_command
from stortune.ceph.conf import format_value, render_ceph_conf, same_value
from stortune.ceph.health import wait_healthy
from stortune.ceph.local import LocalCluster, recover_stale

__all__ = [
    "CephClient",
    "LocalCluster",
    "asok_command",
    "format_value",
    "recover_stale",
    "render_ceph_conf",
    "same_value",
    "wait_healthy",
]
