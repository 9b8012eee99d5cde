"""Time the cephfs target's costs: bring-up (cluster, MDS, exporters, ceph-fuse mount), one
fileserver evaluation, a remount with a new layout, an OSD restart, a runtime option, teardown.

Needs root and Ceph (scripts/install-system.sh). Run: python scripts/cephfs_timing.py
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from stortune.targets.cephfs import CephFSTarget
from stortune.workloads.fio import FioWorkload


def timed(label: str, step: Callable[[], Any]) -> Any:
    started = time.monotonic()
    result = step()
    print(f"{label}: {time.monotonic() - started:.1f} s", flush=True)
    return result


def main() -> None:
    target = CephFSTarget("cephfs", osds=1, osd_size="8g")
    try:
        timed("bring-up (cluster, MDS, exporters, mount)", target.setup)
        default = target.space.default_config()
        timed("apply the default", lambda: target.apply(default))
        run = timed(
            "one fileserver evaluation (5 s run)",
            lambda: target.run(FioWorkload("fileserver", runtime=5), timeout=300),
        )
        print(f"  ok={run.ok} throughput={run.metrics.get('total.bw_mbs', 0):.1f} MiB/s")
        remount = dict(default, client_oc_size=104857600, stripe_count=4, stripe_unit=1048576)
        timed("apply a remount and a new layout", lambda: target.apply(remount))
        restart = dict(remount, osd_op_num_shards=2)
        timed("apply an OSD restart", lambda: target.apply(restart))
        runtime = dict(restart, mds_cache_memory_limit=1073741824)
        timed("apply a runtime option (MDS cache)", lambda: target.apply(runtime))
    finally:
        timed("teardown", target.teardown)


if __name__ == "__main__":
    main()
