"""A tuned config in the form a production system takes it (SAPPHIRE's test-cluster-to-
production recommendation): a ceph.conf section, mkfs/mount command lines and sysfs/sysctl
settings, or plain ``name = value`` lines for targets without a native form.

The renderings reuse the targets' own builders (`targets.ceph.ceph_conf_section`, the localfs
target's `plan`), so a recommendation says exactly what the measured config set.
"""

from __future__ import annotations

from typing import Any

from stortune.space import Config, Space


def render(kind: str, config: Config, space: Space, header: str) -> str:
    """`config` for a target of `kind`, under `header` (comment lines)."""
    if kind == "ceph":
        from stortune.targets.ceph import ceph_conf_section

        return ceph_conf_section(config, space, header)
    comments = [f"# {line}" if line else "#" for line in header.splitlines()]
    if kind == "localfs":
        return "\n".join([*comments, *_localfs(config, space)]) + "\n"
    values = space.validate(config)
    return "\n".join([*comments, *(f"{k} = {_text(v)}" for k, v in values.items())]) + "\n"


def _localfs(config: Config, space: Space) -> list[str]:
    from stortune.targets.localfs import LocalFsTarget

    plan = LocalFsTarget(space).plan(config)
    lines = ["", "# format (DEVICE: the production device; this erases it)"]
    lines.append(" ".join([*plan.mkfs, "DEVICE"]))
    lines += ["", "# mount (and the same options in /etc/fstab)"]
    options = f" -o {plan.mount}" if plan.mount else ""
    lines.append(f"mount -t {plan.fs}{options} DEVICE MOUNTPOINT")
    if plan.block:
        lines += ["", "# block queue settings of DEVICE (sysfs; e.g. from a udev rule)"]
        lines += [f"echo {v} > /sys/block/DEVICE/queue/{attr}" for attr, v in plan.block]
    if plan.vm:
        lines += ["", "# kernel settings (sysctl; keep them in /etc/sysctl.d/90-stortune.conf)"]
        lines += [f"sysctl -w {name}={v}" for name, v in plan.vm]
    return lines


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
