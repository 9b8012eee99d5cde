"""One kept Ceph option -> one `Parameter`: type, domain, default, layer and apply cost.

Bounds (SAPPHIRE section 3.2, "parameter boundary"): an option's declared min and max when both
are given and the range is narrow next to its default (at most 16 times the default's
magnitude); otherwise a default-relative range, [default/4, 4 x default] (log-scaled), or for a
zero default (usually "off" or "automatic") [0, `ZERO_HIGH`], marked ``extendable`` so that BO's
dynamic bounds can grow it, with the declared min/max (or 0) as hard limits. Sizes that must be
powers of two (allocation and block sizes) become ordinals of powers of two in the same range,
and so do the object store's byte sizes whose default is a whole number of 4 KiB device blocks
(BlueFS runways, flush and prefetch sizes, BlueStore caches): an unaligned value there made
ceph-osd abort at mkfs with ``FAILED ceph_assert(is_valid_io(off, len))`` on this machine, as
did an allocation size below the 4 KiB device block (``bdev_block_size <= min_alloc_size``).

Layer: the daemon that reads the option (``osd``, ``mon``, ``mgr``; ``client`` for librados
and the objecter, read by each new rados bench process; ``common`` for all). Cost: ``reformat``
for options read at OSD creation (Ceph's ``create`` flag), ``restart`` for startup-only ones,
``runtime`` for options a running daemon observes. Ceph's metadata calls most numeric options
runtime-updatable even when no code looks at a new value; when a probe of live daemons is
available (`metadata.probe_observed`), its answer decides, and without one only options Ceph
flags ``runtime`` (and client options) count as runtime.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from stortune.cephspace.rules import Option
from stortune.space import Cost, Kind, Parameter

ZERO_HIGH = {
    "int": 16,
    "uint": 16,
    "size": 16 << 20,
    "secs": 60,
    "millisecs": 1000,
    "float": 1.0,
}
_INTEGER_TYPES = {"int", "uint", "size", "secs", "millisecs"}
_UNITS = {"size": "bytes", "secs": "s", "millisecs": "ms"}
_UNIT_OVERRIDES = {"osd_max_write_size": "MiB"}  # a "size" counted in megabytes
_POWER_OF_TWO = re.compile(r"(alloc|block)_size$")
_OBJECT_STORE = ("bluefs_", "bluestore_", "bdev_")
_ALLOCATION = re.compile(r"^(bluefs|bluestore)_.*_alloc_size$")
_DEVICE_BLOCK = 4096
_UNUSABLE_VALUES = {"", "debug_random", "zoned"}  # enum values this deployment cannot use
_WIDE = 16.0  # a declared range wider than this many defaults is searched default-relative
_SCALE = 4.0


def layer_of(option: Option) -> str:
    """The daemon that reads an option (see the module docstring)."""
    name, services = option["name"], set(option.get("services") or ())
    for daemon in ("osd", "mon", "mgr"):
        if services == {daemon}:
            return daemon
    if name.startswith("mon_client_") or "common" in services:
        return "common"
    if name.startswith(("osd_", "bluestore_", "bluefs_", "bdev_", "rocksdb_")):
        return "osd"
    if name.startswith(("mon_", "paxos_")):
        return "mon"
    if name.startswith("mgr_"):
        return "mgr"
    if name.startswith(("objecter_", "rados_", "librados_")):
        return "client"
    return "common"


def cost_of(option: Option, layer: str, observed: Mapping[str, bool] | None) -> Cost:
    flags = set(option.get("flags") or ())
    if "create" in flags:
        return Cost.REFORMAT
    if "startup" in flags or not option.get("can_update_at_runtime", False):
        return Cost.RESTART
    if layer == "client":
        return Cost.RUNTIME
    if observed is not None and option["name"] in observed:
        return Cost.RUNTIME if observed[option["name"]] else Cost.RESTART
    return Cost.RUNTIME if "runtime" in flags else Cost.RESTART


def typed(option: Option, raw: Any) -> Any:
    """A value of the option's type from metadata or a setting (``"4096"``, ``"true"``)."""
    kind = option["type"]
    if kind == "bool":
        return raw if isinstance(raw, bool) else str(raw).strip().lower() in ("true", "1", "yes")
    if kind in _INTEGER_TYPES:
        return int(float(raw))
    if kind == "float":
        return float(raw)
    return str(raw)


def _declared(option: Option, key: str) -> float | None:
    raw = option.get(key, "")
    if raw in ("", None):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and abs(value) < 2**62 else None


def _block_sized(option: Option, default: float) -> bool:
    """An object-store size counted in whole device blocks (module docstring)."""
    return (
        option["type"] == "size"
        and option["name"].startswith(_OBJECT_STORE)
        and default % _DEVICE_BLOCK == 0
    )


def build(
    option: Option, default: Any, observed: Mapping[str, bool] | None = None
) -> Parameter | None:
    """The parameter for a kept option with its effective `default`; None when the option has
    fewer than two usable values."""
    name, kind = option["name"], option["type"]
    layer = layer_of(option)
    common: dict[str, Any] = dict(
        name=name,
        default=None,
        layer=layer,
        cost=cost_of(option, layer, observed),
        unit=_UNIT_OVERRIDES.get(name, _UNITS.get(kind, "")),
        description=str(option.get("desc") or "").strip()[:200],
    )
    if kind == "bool":
        parameter = Parameter(kind=Kind.BOOL, **common)
    elif option.get("enum_values"):
        values = [v for v in option["enum_values"] if v not in _UNUSABLE_VALUES]
        if default not in values:
            values.insert(0, default)
        if len(values) < 2:
            return None
        parameter = Parameter(kind=Kind.CATEGORICAL, values=tuple(values), **common)
    else:
        parameter = _numeric(option, default, common)
    parameter.default = parameter.check(default)
    return parameter


def _numeric(option: Option, default: float, common: dict[str, Any]) -> Parameter:
    kind = option["type"]
    integer = kind in _INTEGER_TYPES
    lo, hi = _declared(option, "min"), _declared(option, "max")
    magnitude = max(abs(default), 1.0)
    if lo is not None and hi is not None and hi - lo <= _WIDE * magnitude:
        low, high, extendable = lo, hi, False
    else:
        if default > 0:
            low, high = default / _SCALE, default * _SCALE
        else:
            low, high = min(default, 0), ZERO_HIGH[kind]
        if integer and default >= 1:
            low = max(1.0, math.floor(low))
        if lo is not None:
            low = max(low, lo)
        if hi is not None:
            high = min(high, hi)
        extendable = True
    if integer:
        low, high = math.floor(low), math.ceil(high)
    low, high = min(low, default), max(high, default)
    if (
        integer
        and default > 0
        and (_POWER_OF_TWO.search(option["name"]) or _block_sized(option, default))
    ):
        powers = [2**k for k in range(int(math.log2(max(low, 1))), int(math.log2(high)) + 1)]
        values = sorted({p for p in powers if low <= p <= high} | {int(default)})
        if _ALLOCATION.search(option["name"]):  # nothing below one device block
            values = [v for v in values if v >= min(_DEVICE_BLOCK, default)]
        return Parameter(kind=Kind.ORDINAL, values=tuple(values), **common)
    hard_low = lo if lo is not None else (0 if default >= 0 else None)
    if integer:
        hard_low = None if hard_low is None else math.floor(hard_low)
        hi = None if hi is None else math.ceil(hi)
    return Parameter(
        kind=Kind.INT if integer else Kind.FLOAT,
        low=low,
        high=high,
        log=low > 0 and high / low >= _WIDE,
        extendable=extendable,
        hard_low=hard_low if extendable else None,
        hard_high=hi if extendable else None,
        **common,
    )
