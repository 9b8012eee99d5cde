"""What a fio job file may not do: stortune runs fio as root, so a job file is checked line by
line before it is parsed, laid out or run, and refused with one line naming the option.

fio matches option names exactly (case-sensitive, no prefixes; ``mem`` has the alias
``iomem``), so the lists below are complete for fio 3.33's job options that run programs,
load code, reach other machines or devices, change the machine behind stortune's back, or
write files:

- `RUNS_PROGRAMS`: options that start a program, always refused.
- `DENIED`: options refused whatever their value, with why.
- `DENIED_ENGINES`: I/O engines refused (``ioengine=``): programs, loadable code, the network,
  raw devices; an engine given as a path or ``external:`` is refused too.
- `PATH_OPTIONS`: options naming files (``:``-separated lists); each path must stay under the
  job's directory (``${DIR}``): no absolute path outside it, no ``..``. fio runs in that
  directory, so a relative path lands there. ``mem``/``iomem`` name a file after their type
  (``mmapshared:/path``), checked the same way.

Every other option is allowed: they shape the I/O fio does on the files under ``${DIR}``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from stortune.errors import ConfigError

RUNS_PROGRAMS = {
    "exec_prerun": "runs a program before the job",
    "exec_postrun": "runs a program after the job",
}
DENIED = {
    **RUNS_PROGRAMS,
    "replay_redirect": "replays I/O onto a device it names, whatever the target",
    "ioscheduler": "changes the device's I/O scheduler behind stortune's back (tune it as a "
    "parameter of the space instead)",
    "cgroup": "moves the job out of the target's cgroup and its memory cap",
    "uid": "runs the job as another user",
    "gid": "runs the job as another group",
}
DENIED_ENGINES = {
    "exec": "runs a program",
    "external": "loads code from a file",
    "net": "sends I/O over the network",
    "netsplice": "sends I/O over the network",
    "rdma": "sends I/O over the network",
    "http": "sends I/O over the network",
    "nbd": "sends I/O to a network block device",
    "rbd": "writes to a Ceph cluster",
    "rados": "writes to a Ceph cluster",
    "nfs": "writes to an NFS server",
    "libiscsi": "writes to an iSCSI target",
    "sg": "sends SCSI commands to a device",
}
PATH_OPTIONS = (
    "directory",
    "filename",
    "filename_format",
    "opendir",
    "write_iolog",
    "read_iolog",
    "merge_blktrace_file",
    "write_bw_log",
    "write_lat_log",
    "write_iops_log",
    "write_hist_log",
)
MEMORY_OPTIONS = ("mem", "iomem")  # TYPE or TYPE:FILE


def options(text: str) -> Iterator[tuple[int, str, str]]:
    """(line number, option, value) of each option line of a job text (sections, comments and
    blank lines skipped; a flag without ``=`` has the value "")."""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        yield number, key.strip(), value.strip()


def check_job(text: str, directory: str, name: str) -> None:
    """Refuse `text` (a job whose placeholders are filled, run in `directory`) when an option
    may run a program, reach beyond the target, or touch a file outside `directory`."""
    base = os.path.normpath(directory)
    for _, key, value in options(text):
        where = f"fio job {name}: {key}={value}" if value else f"fio job {name}: {key}"
        if key.startswith("include "):
            raise ConfigError(f"fio job {name}: 'include' is not supported (paste the file in)")
        if key in DENIED:
            raise ConfigError(f"{where} is not allowed: it {DENIED[key]}")
        if key == "ioengine":
            engine = value.split(":", 1)[0]
            if "/" in value or engine in DENIED_ENGINES:
                why = DENIED_ENGINES.get(engine, "loads code from a file")
                raise ConfigError(f"{where} is not allowed: the engine {why}")
        if key in PATH_OPTIONS:
            for part in value.split(":"):
                _check_path(part, base, where, directory)
        if key in MEMORY_OPTIONS and ":" in value:
            _check_path(value.split(":", 1)[1], base, where, directory)


def _check_path(part: str, base: str, where: str, directory: str) -> None:
    if not part:
        return
    if ".." in Path(part).parts:
        raise ConfigError(f"{where} leaves the target directory")
    if part.startswith("/"):
        resolved = os.path.normpath(part)
        if resolved != base and not resolved.startswith(base + "/"):
            raise ConfigError(f"{where} is outside the target directory {directory} (use ${{DIR}})")
