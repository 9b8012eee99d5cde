"""Ceph's own metadata about its options, and which changes live daemons actually observe.

`read_options` asks the monitor ``config ls`` and then ``config help NAME`` for every option
(the same mon commands as ``ceph config ls`` / ``ceph config help NAME --format json``), over one
connection. `probe_observed` sets each runtime-updatable option to another value through a
daemon's admin socket and reads the daemon's answer: Ceph appends "(not observed, change may
require restart)" when no component of the daemon watches the option. The override is removed
right after (``config unset``). Only ever run it on a throwaway cluster.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stortune.ceph.client import CephClient, asok_command
from stortune.ceph.conf import format_value
from stortune.cephspace.params import layer_of, typed
from stortune.cephspace.rules import Option
from stortune.errors import TargetError

NOT_OBSERVED = "not observed"


def read_options(client: CephClient) -> list[dict[str, Any]]:
    """Every option's metadata, as ``ceph config help NAME --format json`` gives it."""
    ((status, output, message),) = client.mon_commands([{"prefix": "config ls", "format": "json"}])
    if status != 0:
        raise TargetError(f"ceph config ls: {message.strip() or status}")
    names = json.loads(output)
    answers = client.mon_commands(
        [{"prefix": "config help", "key": name, "format": "json"} for name in names],
        timeout=120,
    )
    options = []
    for name, (status, output, message) in zip(names, answers, strict=True):
        if status != 0:
            raise TargetError(f"ceph config help {name}: {message.strip() or status}")
        options.append(json.loads(output))
    return options


def _other_value(option: Option, current: str) -> str | None:
    """A valid value different from `current`, to see whether a daemon observes a change."""
    kind = option["type"]
    if kind == "bool":
        return format_value(not typed(option, current))
    if option.get("enum_values"):
        others = [v for v in option["enum_values"] if v and v != current]
        return others[0] if others else None
    try:
        value = typed(option, current)
    except ValueError:
        return None
    high = option.get("max")
    bump: float = max(1, abs(value) // 8) if kind != "float" else (abs(value) * 0.25 or 0.1)
    candidate = value + bump
    if high not in ("", None) and candidate > float(high):
        candidate = value - bump
    return format_value(type(value)(candidate))


def probe_observed(options: Sequence[Option], sockets: Mapping[str, Path]) -> dict[str, bool]:
    """name -> whether the daemon of the option's layer observes a runtime change. `sockets`
    maps a layer (``osd``, ``mon``, ``mgr``) to an admin socket; ``common`` options are probed on
    the OSD. Options that are not runtime-updatable, or that a daemon refuses, are left out."""
    observed: dict[str, bool] = {}
    for option in options:
        if not option.get("can_update_at_runtime") or {"startup", "create"} & set(
            option.get("flags") or ()
        ):
            continue
        layer = layer_of(option)
        socket = sockets.get("osd" if layer == "common" else layer)
        if socket is None:
            continue
        name = option["name"]
        current = asok_command(socket, "config get", var=name)
        if not isinstance(current, dict) or name not in current:
            continue
        value = _other_value(option, str(current[name]))
        if value is None:
            continue
        reply = asok_command(socket, "config set", var=name, val=[value])
        asok_command(socket, "config unset", var=name)
        if isinstance(reply, dict) and "success" in reply:
            observed[name] = NOT_OBSERVED not in str(reply["success"])
    return observed
