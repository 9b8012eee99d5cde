"""Value constraints and activation conditions among Ceph options (SAPPHIRE Table 1, rows 3-4).

A constraint or condition is added only when every option it names is in the space (Pacific,
for instance, has no ``ms_async_max_op_threads``: it caps ``ms_async_op_threads`` at 24 with a
declared max instead). Besides the listed ones, every ``X_min``/``X_max`` pair whose defaults
agree gets ``X_min <= X_max``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from stortune.space import Kind, Parameter

# (expression, why): the source of each is in its message.
KNOWN: list[tuple[str, str]] = [
    (
        "bluestore_cache_kv_ratio + bluestore_cache_meta_ratio <= 1",
        "SAPPHIRE Table 1; BlueStore refuses to mount otherwise (_set_cache_sizes)",
    ),
    (
        "not bluestore_cache_autotune or bluestore_cache_kv_ratio + bluestore_cache_meta_ratio"
        " + bluestore_cache_kv_onode_ratio <= 1",
        "the autotuner gives the data cache the rest of the three ratios; below 0 ceph-osd "
        "aborts (PriorityCache mem_avail >= 0), and Pacific checks only kv + meta",
    ),
    (
        "ms_async_op_threads <= ms_async_max_op_threads",
        "SAPPHIRE Table 1 (Luminous)",
    ),
    (
        "pg_per_osd <= mon_max_pg_per_osd",
        "SAPPHIRE Table 1: PGs per OSD within the monitor's limit, or pool creation is refused",
    ),
    (
        "osd_memory_base + osd_memory_cache_min"
        " <= osd_memory_target * (1 - osd_memory_expected_fragmentation)",
        "the cache autotuner's share of the target after fragmentation must hold the base and "
        "the minimum cache (else ceph-osd aborts: PriorityCache mem_avail >= 0)",
    ),
    (
        "osd_heartbeat_interval < osd_heartbeat_grace",
        "a peer would be reported dead between two of its heartbeats",
    ),
    (
        "osd_max_write_size * 1048576 <= osd_client_message_size_cap",
        "a write (osd_max_write_size, MiB) larger than the client message cap is never admitted",
    ),
]

# (parameter name pattern, condition): the option takes effect only when the condition holds.
CONDITIONS: list[tuple[str, str]] = [
    # mclock's built-in profiles set these themselves (a tuned value is overridden: seen here);
    # only the custom profile reads them
    (r"^osd_mclock_scheduler_", "osd_mclock_profile == 'custom'"),
    (r"^osd_mclock_", "osd_op_queue == 'mclock_scheduler'"),
    # ... and these the profile sets too (left to it under mclock)
    (
        r"^osd_(max_backfills|recovery_max_active|recovery_sleep|delete_sleep|snap_trim_sleep"
        r"|scrub_sleep)$",
        "osd_op_queue != 'mclock_scheduler'",
    ),
    (r"^bluestore_compression_(?!mode$)", "bluestore_compression_mode != 'none'"),
    (r"^compressor_zlib_", "bluestore_compression_algorithm == 'zlib'"),
    (r"^compressor_zstd_", "bluestore_compression_algorithm == 'zstd'"),
    (
        r"^(osd_memory_(target|base|expected_fragmentation|cache_min|cache_resize_interval)"
        r"|bluestore_cache_autotune_interval)$",
        "bluestore_cache_autotune",
    ),
    # the ratios share the cache out in both modes (the autotuner divides what it sizes by them)
    (r"^bluestore_cache_size$", "not bluestore_cache_autotune"),
    (r"^bluestore_2q_cache_", "bluestore_cache_type == '2q'"),
    (r"^bluestore_avl_alloc_", "bluestore_allocator in ('avl', 'hybrid')"),
    (r"^bluestore_hybrid_alloc_", "bluestore_allocator == 'hybrid'"),
    (r"^bluestore_bitmapallocator_", "bluestore_allocator in ('bitmap', 'hybrid')"),
    (r"^bdev_aio_", "bdev_aio"),
    (r"^osd_scrub_auto_repair_num_errors$", "osd_scrub_auto_repair"),
    (r"^mon_osdmap_full_prune_(min|interval|txsize)$", "mon_osdmap_full_prune_enabled"),
    (r"^mon_memory_target$", "mon_memory_autotune"),
    (r"^osd_op_history_", "osd_enable_op_tracker"),
    (r"^rocksdb_cf_compact_on_deletion_", "rocksdb_cf_compact_on_deletion"),
]
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORDS = {"and", "or", "not", "in", "True", "False"}


def names_in(expression: str) -> set[str]:
    return set(_IDENTIFIER.findall(re.sub(r"'[^']*'", "", expression))) - _WORDS


def conditions(params: Mapping[str, Parameter]) -> dict[str, str]:
    """name -> condition, for the parameters in `params` that have one."""
    out = {}
    for name in params:
        for pattern, condition in CONDITIONS:
            needed = names_in(condition)
            if re.search(pattern, name) and needed <= params.keys() and name not in needed:
                out[name] = condition
                break
    return out


def _comparable(p: Parameter) -> bool:
    """Numbers on a line: numeric parameters and ordinals of numbers (powers-of-two sizes)."""
    return p.is_numeric or (
        p.kind is Kind.ORDINAL and all(isinstance(v, int | float) for v in p.values)
    )


def constraints(params: Mapping[str, Parameter]) -> list[tuple[str, str]]:
    """(expression, message) for the known constraints and min/max pairs that apply."""
    out = [(expr, why) for expr, why in KNOWN if names_in(expr) <= params.keys()]
    for name, low in params.items():
        for a, b in (("_min_", "_max_"), ("_min", "_max")):
            other = name.replace(a, b, 1) if a in name else None
            high = params.get(other) if other and other != name else None
            if high is None or not (_comparable(low) and _comparable(high)):
                continue
            if high.default and low.default <= high.default:
                out.append((f"{name} <= {other}", "a minimum must not exceed its maximum"))
            break
    return out
