"""Where a command may write: every output path is checked before any work starts, and a write
that fails anyway (a full device) is one line.

A campaign that measured for an hour and then finds that its report cannot be written has lost
the hour's output, so an output path is checked when the command line is read: its folder
exists and is a writable directory (a folder output may be made, with its parents, under one
that is), the path is no directory where a file goes, nothing under /proc or /sys, no block
device, and no FIFO that no process reads (a write would wait for ever). A character device
(/dev/null, a terminal) is allowed; writing to one that is full fails as any full device does,
in `writing`, which turns the failure into one line naming the file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from stortune.errors import StortuneError

KERNEL_FOLDERS = ("/proc", "/sys")  # the kernel's files: writing there changes the machine


class OutputError(StortuneError):
    """An output path stortune will not, or cannot, write."""


def check_file(path: str | os.PathLike[str], what: str = "output", made: bool = False) -> Path:
    """`path` if a file may be written there (made or replaced), else one OutputError line;
    `made`: the command makes the missing folders above it (under one that is writable)."""
    checked = _common(path, what)
    info = _stat(checked)
    if info is not None:
        _existing(checked, info, what, folder=False)
    _writable_folder(checked.parent, what, checked, made=made)
    return checked


def check_prefix(path: str | os.PathLike[str], suffixes: tuple[str, ...], what: str) -> Path:
    """`path` if PATH.SUFFIX may be written for each suffix (a figure as PNG and SVG), the
    folders above it made."""
    checked = _common(path, what)
    for suffix in suffixes:
        check_file(f"{checked}{suffix}", what, made=True)
    return checked


def check_folder(path: str | os.PathLike[str], what: str = "output folder") -> Path:
    """`path` if files may be written in it: a writable directory, or one that can be made
    (with its parents) under a writable directory."""
    checked = _common(path, what)
    info = _stat(checked)
    if info is not None:
        _existing(checked, info, what, folder=True)
        return checked
    _writable_folder(checked.parent, what, checked, made=True)
    return checked


@contextmanager
def writing(path: str | os.PathLike[str], what: str = "") -> Iterator[None]:
    """Writing `path`: an OSError (a full device, a file too large, a folder removed in the
    meantime) becomes one line naming it."""
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        named = f"{what} {_shown(path)}" if what else _shown(path)
        raise OutputError(f"cannot write {named}: {reason}") from None


def _common(path: str | os.PathLike[str], what: str) -> Path:
    """The checks every output path gets: text, no NUL, no name too long, not the kernel's."""
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise OutputError(f"{what}: an empty path")
    if "\x00" in text:
        raise OutputError(f"{what} {_shown(text)}: a path cannot hold a NUL character")
    absolute = Path(os.path.abspath(os.path.expanduser(text)))
    for part in absolute.parts:
        if len(os.fsencode(part)) > 255:
            raise OutputError(f"{what} {_shown(text)}: a name longer than 255 bytes")
    if len(os.fsencode(str(absolute))) >= 4096:
        raise OutputError(f"{what} {_shown(text)}: a path longer than 4095 bytes")
    for shown in {absolute, Path(os.path.realpath(absolute))}:
        if any(shown == Path(k) or Path(k) in shown.parents for k in KERNEL_FOLDERS):
            info = _stat(absolute)
            if info is None or not (stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
                raise OutputError(
                    f"{what} {_shown(text)}: under /{shown.parts[1]}, the kernel's files"
                )
    return absolute


def _existing(path: Path, info: os.stat_result, what: str, folder: bool) -> None:
    mode = info.st_mode
    named = f"{what} {_shown(path)}"
    if folder:
        if not stat.S_ISDIR(mode):
            raise OutputError(f"{named}: not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise OutputError(f"{named}: not writable")
        return
    if stat.S_ISDIR(mode):
        raise OutputError(f"{named}: a directory (name a file in it)")
    if stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
        kind = "a block device" if stat.S_ISBLK(mode) else "a socket"
        raise OutputError(f"{named}: {kind}, not a file to write")
    if stat.S_ISFIFO(mode):
        _read_by_someone(path, named)
    elif not os.access(path, os.W_OK):
        raise OutputError(f"{named}: not writable")


def _read_by_someone(fifo: Path, named: str) -> None:
    """A FIFO is written only while a process reads it: otherwise the write waits for ever."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OutputError(f"{named}: a FIFO no process reads (the write would wait)") from None
        raise OutputError(f"{named}: {exc.strerror}") from None
    os.close(fd)


def _writable_folder(folder: Path, what: str, path: Path, made: bool) -> None:
    """`folder` exists and is a writable directory; with `made`, the nearest folder above it
    that exists is (the folders below it are made)."""
    while made and _stat(folder) is None and folder != folder.parent:
        folder = folder.parent
    info = _stat(folder)
    named = f"{what} {_shown(path)}"
    if info is None:
        raise OutputError(f"{named}: folder {folder} does not exist")
    if not stat.S_ISDIR(info.st_mode):
        raise OutputError(f"{named}: {folder} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{named}: folder {folder} is not writable")


def _stat(path: Path) -> os.stat_result | None:
    """The file `path` names (symbolic links followed), or None when nothing is there."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a loop of links, a name too long, a part that is a file
        if exc.errno == errno.ENOTDIR:
            return None
        raise OutputError(f"{_shown(path)}: {exc.strerror}") from None


def _shown(path: str | os.PathLike[str], most: int = 120) -> str:
    text = os.fspath(path)
    text = text if isinstance(text, str) else text.decode(errors="replace")
    return repr(text) if len(text) <= most else repr(text[:most] + "...")
