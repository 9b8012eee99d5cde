"""Which Ceph options a space leaves out, and why (SAPPHIRE section 3.2).

Washing removes what must never be tuned, whatever the deployment: identities and keys,
addresses and ports, paths, debugging and logging, fault injection, free-form strings, options
the monitor cannot hand out, and what the target itself sets. Pruning removes what this
deployment does not use: other object stores, other messengers and device drivers, unused
services (RGW, CephFS, RBD, ...), cache tiering and erasure coding (a replicated pool), pool
creation defaults (the target makes its pool), and media-specific variants of an option that is
tuned instead (``osd_op_num_shards`` rather than ``osd_op_num_shards_hdd``/``_ssd``).

Each rule is a (reason, test) pair; the first rule that matches an option names its reason, so
every option is counted once in the summary.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

Option = Mapping[str, Any]  # one `ceph config help NAME --format json` answer

_NUMERIC = {"int", "uint", "size", "secs", "millisecs", "float"}
MEDIA = ("_hdd", "_ssd", "_hybrid")


@dataclass(frozen=True)
class Context:
    """What the deployment uses: its object store, which options the target pins, every
    option's name (to find an option's media-specific variants) and its kind of media."""

    objectstore: str = "bluestore"
    pinned: Collection[str] = ()
    names: Collection[str] = field(default_factory=frozenset)
    rotational: bool = True


Rule = tuple[str, Callable[[Option, Context], bool]]


def _name(pattern: str) -> Callable[[Option, Context], bool]:
    regex = re.compile(pattern)
    return lambda o, _c: bool(regex.search(o["name"]))


def _str_name(pattern: str) -> Callable[[Option, Context], bool]:
    regex = re.compile(pattern)
    return lambda o, _c: o["type"] == "str" and bool(regex.search(o["name"]))


def _flags(*flags: str) -> Callable[[Option, Context], bool]:
    return lambda o, _c: bool(set(o.get("flags") or ()) & set(flags))


def _tags(*tags: str) -> Callable[[Option, Context], bool]:
    return lambda o, _c: bool(set(o.get("tags") or ()) & set(tags))


def _services_only(services: Collection[str]) -> Callable[[Option, Context], bool]:
    wanted = set(services)
    return lambda o, _c: bool(o.get("services")) and set(o["services"]) <= wanted


def _any(*tests: Callable[[Option, Context], bool]) -> Callable[[Option, Context], bool]:
    return lambda o, c: any(t(o, c) for t in tests)


def media_base(name: str, names: Collection[str]) -> str | None:
    """``osd_op_num_shards`` for ``osd_op_num_shards_hdd`` when that option exists."""
    for suffix in MEDIA:
        if name.endswith(suffix) and name[: -len(suffix)] in names:
            return name[: -len(suffix)]
    return None


WASH: list[Rule] = [
    ("set by the target", lambda o, c: o["name"] in c.pinned),
    (
        "identity or key",
        _any(
            lambda o, _c: o["type"] == "uuid",
            _name(r"(^|_)(fsid|uuid|key|keys|keyring|keyfile|secret|cephx|gss)(_|$)|^auth_"),
        ),
    ),
    (
        "address, port or network",
        _any(
            lambda o, _c: o["type"] in ("addr", "addrvec"),
            _name(r"(^|_)(addr|host|hosts|port|network|bind|iface|ipv4|ipv6|dns)(_|$)"),
        ),
    ),
    ("path", _str_name(r"(^|_)(path|dir|file|sock|socket|data|prefix|chdir|image)(_|$)")),
    (
        "debugging or logging",
        _name(
            r"(^|_)debug(_|$)|^(log|clog|err|mon_cluster_log|restapi_log)_|graylog|syslog"
            r"|_to_clog|_logging|(^|_)dump(_|$)|lockdep|(^|_)tracing$|_log_(age|threshold)$"
            r"|_log_op_age$|^mon_health_.*(clog|log)|^mon_client_log_|^fatal_signal"
            r"|(^|_)trace(_|$)|fsck|_bench_|objectstore_fuse|env_mirror"
        ),
    ),
    (
        "health reporting threshold (no effect on I/O)",
        _name(r"(^|_)warn(_|$)|_complaint_time$|^mon_health_|_err_op_age|_quota_(warn|crit)_"),
    ),
    ("needed for stortune's measurements (perf counters)", lambda o, _c: o["name"] == "perf"),
    (
        "testing or fault injection",
        _any(
            _tags("testing", "fault injection"),
            _name(
                r"inject|(^|_)kill(_|$)|die_on|(^|_)fake|(^|_)test(ing)?(_|$)|blackhole"
                r"|_smoke_test|assert|experimental"
            ),
        ),
    ),
    ("plain string", lambda o, _c: o["type"] == "str" and not o.get("enum_values")),
    (
        "cannot be set through the monitor or after creation",
        _flags("no_mon_update", "cluster_create"),
    ),
    # when an OSD stops taking writes, not how fast it takes them: a low value passes a short run
    # on an empty test pool and then blocks every write once data grows (seen: failsafe 0.48
    # marked a 2 GiB OSD full), a high one lets an OSD run out of space
    ("capacity threshold (when writes stop, not how fast they run)", _name(r"full_ratio$")),
    ("machine placement (NUMA, CRUSH layout)", _name(r"numa|(^|_)crush(_|$)|_affinity")),
    # the device's logical block size, not a choice: 8192 on a 4 KiB device aborts ceph-osd
    # at mkfs (seen on this machine)
    ("a property of the device", lambda o, _c: o["name"] == "bdev_block_size"),
    (
        "measured by the OSD at startup (stored for osd.N, over any tuned value)",
        _name(r"^osd_mclock_(max_capacity_iops|force_run_benchmark_on_init|skip_benchmark)"),
    ),
]

_UNUSED_SERVICES = {
    "rgw",
    "mds",
    "mds_client",
    "rbd",
    "rbd-mirror",
    "immutable-objet-cache",
    "cephfs-mirror",
}
_OTHER_STORES = re.compile(r"(filestore|journal|kstore|memstore|leveldb|osd_journal)_")
_BLUESTORE = re.compile(r"(bluestore|bluefs|bdev)_")
_SELECTORS = {
    "osd_objectstore",
    "ms_type",
    "ms_public_type",
    "ms_cluster_type",
    "bdev_type",
    "bdev_aio",  # false aborts ceph-osd at mkfs: "non-aio not supported" (KernelDevice.cc)
    "bluestore_bluefs",
    "mon_keyvaluedb",
    "device_failure_prediction_mode",
}

PRUNE: list[Rule] = [
    ("module selector (held at the chosen module)", lambda o, _c: o["name"] in _SELECTORS),
    (
        "object store not in use",
        lambda o, c: (
            bool(_OTHER_STORES.match(o["name"]))
            or (c.objectstore != "bluestore" and bool(_BLUESTORE.match(o["name"])))
        ),
    ),
    (
        "messenger or device driver not in use",
        _name(r"^ms_async_rdma_|^ms_dpdk_|spdk|^bdev_(nvme|pmem)|_zoned|^bdev_ioring|^qat_"),
    ),
    (
        "service not in use (RGW, CephFS, RBD, ...)",
        _any(
            _services_only(_UNUSED_SERVICES),
            _name(
                r"^(rgw|rbd|mds|client|fuse|journaler|cephfs|immutable_object_cache|nfs"
                r"|cephadm|cephsqlite|crimson|filer|osdc|seastore)_|(^|_)mds(map)?(_|$)"
            ),
        ),
    ),
    (
        "cache tiering or erasure coding not in use",
        _name(r"^osd_(tier|agent|hit_set)_|erasure_code|_ec_|^osd_pool_default_(cache|hit_set)"),
    ),
    ("pool creation default (the target makes its pool)", _name(r"^osd_pool_default_")),
    ("separate DB/WAL device not in use", _name(r"^bluestore_block_(db|wal)_|volume_selection")),
    ("stretch mode not in use", _name(r"stretch")),
    (
        "media-specific variant (its generic option is tuned)",
        lambda o, c: media_base(o["name"], c.names) is not None,
    ),
    (
        "variant for the other kind of media",
        lambda o, c: o["name"].endswith("_ssd" if c.rotational else "_hdd"),
    ),
]


# Options of manager modules (``mgr/MODULE/...``, listed once the manager runs): modules are
# services of their own, counted as one reason whatever their names look like.
FIRST: list[Rule] = [("manager module option (modules are not tuned)", _name(r"^mgr/"))]


def classify(option: Option, context: Context) -> tuple[str, str] | None:
    """(``washed`` or ``pruned``, reason) for an option left out; None for one kept."""
    for verdict, rules in (("pruned", FIRST), ("washed", WASH), ("pruned", PRUNE)):
        for reason, test in rules:
            if test(option, context):
                return verdict, reason
    if option["type"] not in _NUMERIC and option["type"] != "bool" and option["type"] != "str":
        return "washed", f"type {option['type']} is not tunable"
    return None
