"""Ceph option values that let corrupt data through unnoticed.

BlueStore writes every transaction durably whatever its tuning, so Ceph has no `barrier=0`;
what a tuner can trade for speed is the checking: a checksum not kept or not verified, a
message's CRC not computed. A bit flip on the device or the wire then reaches clients as good
data. Each value here carries its `risk` into the space, so tuning leaves it out unless the
user allows risk, and a recommendation holding it says so (`stortune.space.risk`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stortune.space import Parameter

RISKS: dict[str, dict[Any, str]] = {
    "bluestore_csum_type": {
        "none": "data is stored without checksums: a bit flip or torn write on the device is "
        "read back as good data, and scrub cannot find it",
    },
    "bluestore_ignore_data_csum": {
        True: "a checksum mismatch on read returns the corrupt data instead of an error",
    },
    "ms_crc_data": {
        False: "messages' data travels without a CRC: corruption on the wire is stored as data",
    },
    "ms_crc_header": {
        False: "message headers travel without a CRC: a corrupt header is acted on",
    },
}


def risks(params: Mapping[str, Parameter]) -> dict[str, dict[Any, str]]:
    """name -> {risky value: what is at stake}, for the parameters in `params` that can take
    a risky value."""
    out = {}
    for name, by_value in RISKS.items():
        p = params.get(name)
        if p is None:
            continue
        held = {v: why for v, why in by_value.items() if v in p.values}
        if held:
            out[name] = held
    return out
