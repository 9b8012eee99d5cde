"""A tuned config as the files a production system installs (SAPPHIRE's test-cluster-to-
production recommendation). Each target says which files its config makes
(`Target.install_files`): for localfs an mkfs command without the benchmark's own flags, an
/etc/fstab line, an /etc/sysctl.d file, and the block-queue settings as an /etc/tmpfiles.d file
and a udev rule (`localfs_files`); for Ceph a ceph.conf section; ``name = value`` lines
otherwise (`plain_files`). An application's own options follow, where it reads them:
postgresql.conf lines (saying whether a reload or a restart applies them), RocksDB's
OPTIONS-file sections and WriteOptions. Only values away from the space's defaults appear:
what there is to change.

The renderings reuse the targets' own builders (`targets.ceph.ceph_conf_section`, the localfs
target's `changes`), so a recommendation says exactly what the measured config set. Two
placeholders stand for the production machine: ``/dev/DEVICE`` (the device or partition the
file system lives on) and ``DISK`` (the whole disk's name under /sys/block, ``sdb`` for
/dev/sdb1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stortune.space import Application, Config, Cost, Parameter, Space

UUID_PLACEHOLDER = "UUID=YOUR-FILESYSTEM-UUID"
MOUNT_POINT = "/srv/data"
NO_BOOT_FSCK = ("xfs", "btrfs")  # fstab pass 0: fsck.xfs does nothing, btrfs has no fsck


@dataclass(frozen=True)
class InstallFile:
    """One file to install: where it goes (relative to /, or a script), how, and its text."""

    path: str
    how: str
    text: str


def install_files_for(kind: str, config: Config, space: Space) -> list[InstallFile]:
    """What a stored campaign of target `kind` installs (`Target.install_files`); ``name =
    value`` lines when `kind` is no target this version knows."""
    from stortune.errors import TargetError
    from stortune.targets import target_class
    from stortune.targets.base import Target

    try:
        cls = target_class(kind)
    except TargetError:
        cls = Target
    return cls.install_files(config, space)


def plain_files(config: Config, space: Space) -> list[InstallFile]:
    """A target with no native form of its own: its changed values as ``name = value`` lines."""
    parent = space.root
    values = space.full_config(config)
    lines = [
        f"{k} = {_text(v)}"
        for k, v in values.items()
        if v != parent[k].default and not parent[k].applied_by_workload
    ]
    if not lines:
        return []
    return [
        InstallFile("stortune.conf", "set these values in your system", "\n".join(lines) + "\n")
    ]


def render_files(files: list[InstallFile], header: str) -> str:
    """`header` as comment lines, then each file to install under a line saying where it goes
    and how."""
    out = [f"# {line}" if line else "#" for line in header.splitlines()]
    if not files:
        out += ["#", "# nothing to install: every value is the default"]
    for f in files:
        out += ["", f"# ==> {f.path}: {f.how}", f.text.rstrip("\n")]
    return "\n".join(out) + "\n"


def fsck_pass(fs: str) -> int:
    """The fstab's last field: 2 (checked at boot, after the root) for ext4; 0 where a boot-time
    fsck does nothing (xfs's fsck.xfs is a no-op, repair is xfs_repair by hand) or there is
    none (btrfs)."""
    return 0 if fs in NO_BOOT_FSCK else 2


def localfs_files(config: Config, space: Space) -> list[InstallFile]:
    """The localfs target's changes as mkfs, fstab, sysctl.d, tmpfiles.d and udev files."""
    from stortune.targets.localfs import LocalFsTarget

    target = LocalFsTarget(space)
    plan = target.changes(config)
    default_fs = target.changes(space.root.default_config()).fs
    files = []
    if len(plan.mkfs) > 1 or plan.fs != default_fs:
        files.append(
            InstallFile(
                "mkfs.sh",
                "run by hand on a new file system only: it ERASES /dev/DEVICE",
                f"{' '.join(plan.mkfs)} /dev/DEVICE\n",
            )
        )
    if plan.mount or plan.fs != default_fs:
        files.append(
            InstallFile(
                "etc/fstab",
                "add this line to /etc/fstab; UUID= comes from "
                f"`blkid -s UUID -o value /dev/DEVICE`, {MOUNT_POINT} is your mount point",
                f"{UUID_PLACEHOLDER}  {MOUNT_POINT}  {plan.fs}  {plan.mount or 'defaults'}  0  "
                f"{fsck_pass(plan.fs)}\n",
            )
        )
    if plan.vm:
        files.append(
            InstallFile(
                "etc/sysctl.d/90-stortune.conf",
                "install as /etc/sysctl.d/90-stortune.conf, then `sysctl --system`",
                "".join(f"{name} = {value}\n" for name, value in plan.vm),
            )
        )
    if plan.block:
        files.append(
            InstallFile(
                "etc/tmpfiles.d/90-stortune.conf",
                "install as /etc/tmpfiles.d/90-stortune.conf (DISK: the disk under /sys/block, "
                "sdb for /dev/sdb1); applied at boot, or now by `systemd-tmpfiles --create`",
                "".join(
                    f"w /sys/block/DISK/queue/{attr} - - - - {value}\n"
                    for attr, value in plan.block
                ),
            )
        )
        assignments = ", ".join(f'ATTR{{queue/{attr}}}="{value}"' for attr, value in plan.block)
        files.append(
            InstallFile(
                "etc/udev/rules.d/90-stortune.rules",
                "or, for disks that come and go, this udev rule as "
                "/etc/udev/rules.d/90-stortune.rules, then `udevadm trigger`",
                f'ACTION=="add|change", SUBSYSTEM=="block", KERNEL=="DISK", {assignments}\n',
            )
        )
    return files


def application_files(config: Config, space: Space) -> list[InstallFile]:
    """The application options `config` changes, where each application reads them. RocksDB's
    are written whole: db_bench's defaults are not the library's (the block cache, and the
    space's synced WAL, which the library leaves off), so a value at the space's default still
    needs setting."""
    parent = space.root
    values = space.full_config(config)
    chosen: dict[Application, list[Parameter]] = {}
    for p in parent.parameters:
        if p.application is None or p.name not in values:
            continue
        if p.application is Application.ROCKSDB or values[p.name] != p.default:
            chosen.setdefault(p.application, []).append(p)
    files = []
    if Application.POSTGRES in chosen:
        files.append(_postgresql_conf(chosen[Application.POSTGRES], values))
    if Application.ROCKSDB in chosen:
        files += _rocksdb(chosen[Application.ROCKSDB], values)
    return files


def _option(p: Parameter, value: Any) -> tuple[str, str]:
    """The option's name and its value as the application reads it (`format` applied)."""
    name = str(p.extra.get("option", p.name))
    if isinstance(value, bool):
        return name, "true" if value else "false"
    return name, str(p.formatted(value))


def _postgresql_conf(params: list[Parameter], values: Config) -> InstallFile:
    restart = [p.extra.get("option", p.name) for p in params if p.cost is not Cost.RUNTIME]
    how = "add these lines to postgresql.conf (or ALTER SYSTEM SET each), then " + (
        f"restart the server ({', '.join(map(str, restart))} "
        f"{'takes' if len(restart) == 1 else 'take'} effect only at a start)"
        if restart
        else "reload it (SELECT pg_reload_conf(), or pg_ctl reload)"
    )
    lines = []
    for p in params:
        name, text = _option(p, values[p.name])
        if isinstance(values[p.name], bool):
            text = "on" if values[p.name] else "off"
        lines.append(f"{name} = '{text}'\n")
    return InstallFile("postgresql.conf", how, "".join(lines))


# Where each db_bench flag lives among RocksDB's options: the OPTIONS file's sections, or the
# WriteOptions of every write (which no file holds).
_ROCKSDB_SECTION = {
    "max_background_jobs": "DBOptions",
    "bytes_per_sync": "DBOptions",
    "wal_bytes_per_sync": "DBOptions",
    "use_direct_reads": "DBOptions",
    "use_direct_io_for_flush_and_compaction": "DBOptions",
    "cache_size": 'TableOptions/BlockBasedTable "default"',
    "bloom_bits": 'TableOptions/BlockBasedTable "default"',
    "sync": "WriteOptions",
    "disable_wal": "WriteOptions",
}
_ROCKSDB_NAME = {
    "cache_size": "block_cache",
    "bloom_bits": "filter_policy",
    "disable_wal": "disableWAL",
}
_COMPACTION_STYLE = {"level": "kCompactionStyleLevel", "universal": "kCompactionStyleUniversal",
                     "fifo": "kCompactionStyleFIFO"}  # fmt: skip


def _rocksdb(params: list[Parameter], values: Config) -> list[InstallFile]:
    from stortune.workloads.rocksdb import NAMED_VALUES

    flags, sections = [], {}
    for p in params:
        name, text = _option(p, values[p.name])
        flags.append(f"--{name}={NAMED_VALUES.get(name, {}).get(text, text)}")
        section = _ROCKSDB_SECTION.get(name, 'CFOptions "default"')
        if name == "bloom_bits" and int(values[p.name]) < 0:
            continue  # no filter: RocksDB's own default, nothing to set
        if name == "bloom_bits":
            text = f"bloomfilter:{text}:false"
        elif name == "compaction_style":
            text = _COMPACTION_STYLE.get(text, text)
        sections.setdefault(section, []).append(f"  {_ROCKSDB_NAME.get(name, name)}={text}\n")
    write = sections.pop("WriteOptions", [])
    ini = "".join(f"[{section}]\n{''.join(lines)}" for section, lines in sections.items())
    files = []
    if ini:
        files.append(
            InstallFile(
                "OPTIONS.ini",
                "merge into the database's RocksDB OPTIONS file (rocksdb::LoadOptionsFromFile), "
                "or set the same fields in the code that opens it; every measured value is "
                "here, as db_bench's defaults are not the library's",
                ini,
            )
        )
    if write:
        files.append(
            InstallFile(
                "WriteOptions",
                "set on the WriteOptions of every write (no OPTIONS file holds them)",
                "".join(line.strip() + "\n" for line in write),
            )
        )
    files.append(
        InstallFile(
            "db_bench.flags",
            "the same as db_bench flags, to reproduce the runs",
            " ".join(flags) + "\n",
        )
    )
    return files


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
