"""mkfs command lines and mount options per file system, built from a space's ``option`` fields.

``option`` syntax (a string, or a mapping from file system to string when the same parameter
maps to different options, e.g. ``{ext4: -b, xfs: "-b size"}``):

- mkfs layer: ``fstype`` (the parameter chooses the file system); ``-b`` (``-b VALUE``; a boolean
  gives ``-b`` or nothing); ``-b size`` (``-b size=VALUE``, sub-options of one flag are joined
  with commas; a boolean under ``-O`` is a feature, ``flex_bg`` or ``^flex_bg``, else 1/0);
  ``{}`` marks where the value goes when it needs a unit (``-l size={}m``).
- mount layer: ``commit`` (``commit=VALUE``; a boolean gives ``barrier`` or ``nobarrier``);
  ``{}`` (the value is the option itself: ``noatime``); ``logbsize={}k``.

Values must be plain words or numbers, so nothing a config holds can become another option.
Every mkfs gets its no-discard option (discards punch holes in the image, MEASURING.md) and
ext* get their inode tables and journal written at mkfs time (no lazy init writing in the
background during a benchmark) and the same layout rules whatever the image size (``-T default``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from stortune.errors import TargetError
from stortune.system import syscmd

# file system -> fixed mkfs arguments (force, quiet, no discard, no lazy init)
MKFS_BASE: dict[str, tuple[list[str], dict[str, list[str]]]] = {
    "ext2": (["-F", "-q", "-T", "default"], {"-E": ["nodiscard", "lazy_itable_init=0"]}),
    "ext3": (
        ["-F", "-q", "-T", "default"],
        {"-E": ["nodiscard", "lazy_itable_init=0", "lazy_journal_init=0"]},
    ),
    "ext4": (
        ["-F", "-q", "-T", "default"],
        {"-E": ["nodiscard", "lazy_itable_init=0", "lazy_journal_init=0"]},
    ),
    "xfs": (["-f", "-q", "-K"], {}),
    "btrfs": (["-f", "-q", "-K"], {}),
    "f2fs": (["-f", "-q", "-t", "0"], {}),
}
FSTYPE = "fstype"
_FLAG = re.compile(r"^--?[A-Za-z][A-Za-z0-9-]*$")
# KEY, KEY={}UNIT or {} (a mkfs sub-option or a mount option)
_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*(=[^,=\s]*\{\}[^,=\s]*)?$|^\{\}$")
_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$")


def option_for(option: Any, fs: str, name: str) -> str | None:
    """The option string of a parameter for file system `fs` (None: not given for `fs`)."""
    if isinstance(option, Mapping):
        option = option.get(fs)
        return None if option is None else str(option)
    if not isinstance(option, str) or not option.strip():
        raise TargetError(f"parameter {name!r} has no 'option' saying what it sets")
    return option.strip()


def _value_text(value: Any, name: str) -> str:
    if isinstance(value, float) and value == int(value):
        value = int(value)
    text = str(value)
    if not _VALUE.match(text):
        raise TargetError(f"parameter {name!r}: value {value!r} is not a plain word or number")
    return text


def _fill(template: str, value: Any, name: str) -> str:
    return template.replace("{}", _value_text(value, name))


def mkfs_argv(
    fs: str, device: str, options: Iterable[tuple[str, str, Any]], benchmark: bool = True
) -> list[str]:
    """``mkfs.FS`` argv for `device`; `options` are (parameter, option string, value).
    `benchmark`: with the flags a benchmark needs (force, quiet, no discard, eager init), which
    a production file system does not."""
    if fs not in MKFS_BASE:
        raise TargetError(f"no mkfs support for {fs!r} (supported: {', '.join(MKFS_BASE)})")
    fixed, grouped = MKFS_BASE[fs] if benchmark else ([], {})
    subopts: dict[str, list[str]] = {k: list(v) for k, v in grouped.items()}
    argv = [f"mkfs.{fs}", *fixed]
    for name, option, value in options:
        flag, _, sub = option.partition(" ")
        sub = sub.strip()
        if not _FLAG.match(flag) or (sub and not _KEY.match(sub)):
            raise TargetError(
                f"parameter {name!r}: mkfs option {option!r} is not FLAG or 'FLAG sub-option'"
            )
        if not sub:
            if isinstance(value, bool):
                argv += [flag] if value else []
            else:
                argv += [flag, _value_text(value, name)]
        elif isinstance(value, bool):
            if flag == "-O":
                subopts.setdefault(flag, []).append(sub if value else f"^{sub}")
            else:
                subopts.setdefault(flag, []).append(f"{sub}={int(value)}")
        else:
            text = _fill(sub, value, name) if "{}" in sub else f"{sub}={_value_text(value, name)}"
            subopts.setdefault(flag, []).append(text)
    for flag, items in subopts.items():
        argv += [flag, ",".join(items)]
    return [*argv, device]


def mount_options(options: Iterable[tuple[str, str, Any]]) -> str:
    """The ``-o`` string; `options` are (parameter, option string, value)."""
    out = []
    for name, option, value in options:
        if not _KEY.match(option):
            raise TargetError(
                f"parameter {name!r}: mount option {option!r} is not KEY, KEY={{}}UNIT or {{}}"
            )
        if "{}" in option:
            out.append(_fill(option, value, name))
        elif isinstance(value, bool):
            out.append(option if value else f"no{option}")
        else:
            out.append(f"{option}={_value_text(value, name)}")
    return ",".join(out)


def _kernel_filesystems() -> set[str]:
    try:
        lines = Path("/proc/filesystems").read_text().splitlines()
    except OSError:
        return set()
    return {line.split()[-1] for line in lines if line.split() and not line.startswith("nodev")}


def _kernel_can_mount(fs: str) -> bool:
    """Listed in /proc/filesystems, or listed after a trial load of its module."""
    if fs in _kernel_filesystems():
        return True
    if syscmd.which("modprobe") is None:
        return False
    try:
        syscmd.run(["modprobe", "-q", fs], f"loading the {fs} module", timeout=30)
    except TargetError:
        return False
    return fs in _kernel_filesystems()


@lru_cache(maxsize=1)
def available_filesystems() -> tuple[str, ...]:
    """The file systems this machine can both make (mkfs.FS installed) and mount (kernel)."""
    return tuple(
        fs for fs in MKFS_BASE if syscmd.which(f"mkfs.{fs}") is not None and _kernel_can_mount(fs)
    )
