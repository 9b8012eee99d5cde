"""A fingerprint of the machine a campaign ran on, stored with its runs, because storage
numbers mean little without the kernel, CPU, memory and tool versions behind them."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

_PACKAGES = (
    "stortune",
    "numpy",
    "scipy",
    "pandas",
    "scikit-learn",
    "optuna",
    "torch",
    "botorch",
    "sqlalchemy",
)


def fingerprint() -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "os": _os_release(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_mb": _memory_mb(),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in _PACKAGES},
        "fio": _tool_version(["fio", "--version"]),
        "disks": disks(),
        "root": os.geteuid() == 0,
        "loadavg": os.getloadavg()[0],
    }


def disks() -> dict[str, dict[str, Any]]:
    """The machine's block devices other than loop, RAM and zram ones: model (or vendor and
    driver when the device has no model, as virtio disks do), rotational flag, size."""
    out: dict[str, dict[str, Any]] = {}
    root = Path("/sys/block")
    if not root.exists():
        return out
    for dev in sorted(root.iterdir()):
        if dev.name.startswith(("loop", "ram", "zram")):
            continue
        out[dev.name] = {
            "model": _read(dev / "device" / "model")
            or " ".join(filter(None, (_read(dev / "device" / "vendor"), _driver(dev)))),
            "rotational": _read(dev / "queue" / "rotational") == "1",
            "size_gb": round(int(_read(dev / "size") or 0) * 512 / 1e9, 1),
        }
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _driver(dev: Path) -> str:
    link = dev / "device" / "driver"
    return link.resolve().name if link.exists() else ""


def _os_release() -> str:
    path = Path("/etc/os-release")
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    return platform.platform()


def _cpu_model() -> str:
    path = Path("/proc/cpuinfo")
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def _memory_mb() -> int | None:
    path = Path("/proc/meminfo")
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return None


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _tool_version(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None
