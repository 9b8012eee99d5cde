"""Reading a file a user names: a dataset, a fio job file, a space or config file, a profile.

Every such file is read here, with the same rules, because a name can point anywhere: at
/dev/zero or /dev/urandom, which never end, at a FIFO, which blocks until someone writes, at a
directory, or at a file far larger than anything stortune reads. Anything but a regular file is
refused in one line before it is opened (opening some devices does something), the file is
opened without blocking and checked again (it may have been swapped), and read up to a bound: a
file larger than the bound is refused, not read in part.
"""

from __future__ import annotations

import os
import stat

from stortune.errors import StortuneError

MIB = 1 << 20
DATASET_BYTES = 256 * MIB  # a table of runs: the largest in use is a few MiB
TEXT_BYTES = 4 * MIB  # a job, space, config or profile file: a few KiB each
MODEL_BYTES = 256 * MIB  # a fitted model or a saved agent


class InputError(StortuneError):
    """A file named as input is not one stortune can read."""


def read_bytes(
    path: str | os.PathLike[str],
    what: str,
    limit: int,
    error: type[StortuneError] = InputError,
) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them; anything else is refused
    with `error`, one line naming the file as `what` ("dataset", "fio job file"), before it is
    read."""
    named = f"{what} {_shown(path)}"
    try:
        _check(os.stat(path).st_mode, named, error)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        raise error(f"{named}: {_reason(exc)}") from None
    try:
        info = os.fstat(fd)
        _check(info.st_mode, named, error)
        if info.st_size > limit:
            raise error(f"{named}: {_too_large(limit)}")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(MIB, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise error(f"{named}: {_reason(exc)}") from None
    finally:
        os.close(fd)
    if size > limit:  # it grew while it was read
        raise error(f"{named}: {_too_large(limit)}")
    return b"".join(chunks)


def read_text(
    path: str | os.PathLike[str],
    what: str,
    limit: int = TEXT_BYTES,
    error: type[StortuneError] = InputError,
) -> str:
    """The UTF-8 text of a regular file, read as `read_bytes` reads it."""
    data = read_bytes(path, what, limit, error)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {_shown(path)}: not UTF-8 text (byte {exc.start})") from None


def _check(mode: int, named: str, error: type[StortuneError]) -> None:
    if not stat.S_ISREG(mode):
        raise error(f"{named}: {_kind(mode)}, not a regular file")


def _kind(mode: int) -> str:
    kinds = [
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (it would wait for a writer)"),
        (stat.S_ISCHR, "a character device (it may never end)"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ]
    return next((text for test, text in kinds if test(mode)), "not a file")


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def _too_large(limit: int) -> str:
    size = f"{limit // MIB} MiB" if limit >= MIB else f"{limit:,} bytes"
    return f"larger than {size}, the most stortune reads of such a file"


def _shown(path: str | os.PathLike[str], most: int = 120) -> str:
    text = os.fspath(path)
    text = text if isinstance(text, str) else text.decode(errors="replace")
    return repr(text) if len(text) <= most else repr(text[:most] + "...")
