"""Block-layer sysfs and vm sysctl settings: validated names, reads, checked writes.

A setting is a file under /sys/block/DEV/queue/ or /proc/sys/. Names come from a space's
``option`` field and values from configs, so both are checked against narrow patterns before a
path is built or a value is written, and every write is read back: a kernel that silently
clamps a value would otherwise measure a config other than the one recorded.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from stortune.errors import TargetError

_SYSCTL = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")
_QUEUE_ATTR = re.compile(r"^[a-z0-9_]+(/[a-z0-9_]+)?$")
_VALUE = re.compile(r"^[A-Za-z0-9_.-]+$")
_SELECTED = re.compile(r"\[([^\]]+)\]")


def sysctl_path(name: str) -> Path:
    """``vm.dirty_ratio`` -> /proc/sys/vm/dirty_ratio."""
    if not _SYSCTL.match(name):
        raise TargetError(f"sysctl name {name!r} is not of the form vm.dirty_ratio")
    return Path("/proc/sys", *name.split("."))


def queue_path(queue_dir: Path, attribute: str) -> Path:
    """``scheduler`` -> QUEUE_DIR/scheduler (``iosched/fifo_batch`` for scheduler tunables)."""
    if not _QUEUE_ATTR.match(attribute):
        raise TargetError(f"block queue attribute {attribute!r} is not a plain sysfs name")
    return queue_dir / attribute


def format_value(value: Any) -> str:
    """The text written for a config value (booleans as 1/0), refusing anything but plain
    words and numbers."""
    if isinstance(value, bool):
        text = "1" if value else "0"
    elif isinstance(value, float) and value == int(value):
        text = str(int(value))
    else:
        text = str(value)
    if not _VALUE.match(text):
        raise TargetError(f"setting value {value!r} has characters a setting never needs")
    return text


def read(path: Path) -> str:
    """The current value; for selector files (``none [mq-deadline] bfq``) the selected word."""
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise TargetError(f"cannot read {path}: {exc.strerror}") from None
    selected = _SELECTED.search(text)
    return selected.group(1) if selected else text


def write(path: Path, value: str) -> None:
    """Write `value` and check that it took (TargetError saying what the kernel kept)."""
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise TargetError(f"cannot set {path} to {value!r}: {reason}") from None
    now = read(path)
    if now != value and not _same_number(now, value):
        raise TargetError(f"set {path} to {value!r} but the kernel kept {now!r}")


def _same_number(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return False
