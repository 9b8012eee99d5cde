"""The ``ceph`` and ``rados`` tools pointed at one cluster, and its daemons' admin sockets.

Single commands go through the ``ceph`` CLI (`syscmd.run`: argv lists, one-line errors, a time
limit; ``--connect-timeout`` so that a dead monitor fails fast instead of hanging). Many mon
commands at once (1,700 ``config help`` calls, a config's ``config set`` calls) go through one
librados connection in the interpreter that runs ``ceph`` itself, which has the ``rados`` module:
0.15 s per CLI call would make reading all option metadata take minutes; one connection takes
about a second.
"""

from __future__ import annotations

import hashlib
import json
import socket
import struct
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stortune.errors import TargetError
from stortune.system import syscmd

# Run by the interpreter of the `ceph` script: argv conf, keyring ('' for none), timeout (s);
# stdin a JSON list of mon commands; stdout a JSON list of [status, output, message].
_BATCH = r"""
import json, sys
import rados
conf, keyring, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
cluster = rados.Rados(conffile=conf, conf={"keyring": keyring} if keyring else {})
cluster.connect(timeout=timeout)
results = []
for command in json.load(sys.stdin):
    status, output, message = cluster.mon_command(json.dumps(command), b"", timeout=timeout)
    results.append([status, output.decode(errors="replace"), message])
cluster.shutdown()
json.dump(results, sys.stdout)
"""


@dataclass(frozen=True)
class CephClient:
    """The ceph tools for the cluster that `conf` (and `keyring`, when auth is on) names."""

    conf: Path
    keyring: Path | None = None
    timeout: float = 60.0

    def _base(self, tool: str) -> list[str]:
        argv = [tool, "-c", str(self.conf)]
        if self.keyring is not None:
            argv += ["-k", str(self.keyring)]
        return argv

    def ceph(self, *args: str, timeout: float | None = None) -> str:
        """Run ``ceph ARGS`` and return its stdout (TargetError with ceph's message on failure)."""
        limit = timeout or self.timeout
        argv = [*self._base("ceph"), "--connect-timeout", str(max(1, int(limit))), *args]
        return syscmd.run(argv, f"ceph {' '.join(args[:4])}", timeout=limit + 10)

    def json(self, *args: str, timeout: float | None = None) -> Any:
        """``ceph ARGS --format json``, parsed."""
        text = self.ceph(*args, "--format", "json", timeout=timeout)
        try:
            return json.loads(text) if text.strip() else None
        except json.JSONDecodeError:
            raise TargetError(f"ceph {' '.join(args[:4])}: not JSON: {text[:200]}") from None

    def rados_argv(self, pool: str, *args: str) -> list[str]:
        """The argv of a ``rados`` command on `pool` (run by the workload)."""
        tool = syscmd.which("rados") or "rados"
        return [tool, *self._base("rados")[1:], "-p", pool, *args]

    def mon_commands(
        self, commands: Sequence[Mapping[str, Any]], timeout: float | None = None
    ) -> list[tuple[int, str, str]]:
        """Send mon commands over one connection; (status, output, message) for each, in order.
        A command that fails is reported in its status, not raised."""
        limit = timeout or self.timeout
        python = _ceph_interpreter()
        argv = [python, "-I", "-c", _BATCH, str(self.conf), str(self.keyring or ""), str(limit)]
        try:
            proc = subprocess.run(
                argv,
                input=json.dumps(list(commands)),
                capture_output=True,
                text=True,
                timeout=limit + 10 + 0.05 * len(commands),
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise TargetError(f"mon commands did not finish within {limit:g} s") from None
        if proc.returncode != 0:
            raise TargetError(f"mon commands failed: {syscmd.last_line(proc.stderr)}")
        return [(int(s), out, msg) for s, out, msg in json.loads(proc.stdout)]

    def config_set(
        self, settings: Mapping[str, str], who: str = "global", force: bool = False
    ) -> None:
        """``ceph config set WHO NAME VALUE`` for each setting (the monitor checks every value
        against the option's type and bounds); raises naming the first refused one. `force`
        sets a name the monitor does not know yet: a mgr module's options are known only once
        the mgr has reported its modules, which a loaded machine delays."""
        forced = {"force": True} if force else {}
        commands = [
            {"prefix": "config set", "who": who, "name": n, "value": v, **forced}
            for n, v in settings.items()
        ]
        self._all_ok(commands, "config set")

    def config_rm(self, names: Sequence[str], who: str = "global") -> None:
        self._all_ok([{"prefix": "config rm", "who": who, "name": n} for n in names], "config rm")

    def _all_ok(self, commands: list[dict[str, Any]], what: str) -> None:
        if not commands:
            return
        for command, (status, _, message) in zip(
            commands, self.mon_commands(commands), strict=True
        ):
            if status != 0:
                detail = message.strip() or f"status {status}"
                raise TargetError(f"{what} {command['name']}: {detail}")


def _ceph_interpreter() -> str:
    """The Python that runs the ``ceph`` CLI (Debian's, with the ``rados`` module)."""
    tool = syscmd.which("ceph")
    if tool is None:
        raise TargetError("ceph is not installed (see scripts/install-system.sh)")
    first = Path(tool).read_text(errors="replace").splitlines()[0]
    if not first.startswith("#!"):
        raise TargetError(f"{tool} is not a Python script; cannot find its interpreter")
    return first[2:].strip().split()[0]


SOCKET_PATH_MAX = 107  # a Unix socket's path: 108 bytes with its NUL (sun_path)


def _short_name(path: Path, suffix: str) -> Path:
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"stortune-{digest}{suffix}"


def short_socket_path(path: Path) -> Path:
    """`path`, or, when it is too long to bind a Unix socket to (a deep state folder), a name in
    the temporary folder derived from it: a daemon given the long one makes no admin socket and
    says so only in its log."""
    if len(str(path).encode()) <= SOCKET_PATH_MAX:
        return path
    return _short_name(path, ".asok")


def short_socket_folder(folder: Path, longest_name: int = 24) -> Path:
    """`folder`, or, when a socket named there (names up to `longest_name` bytes, such as
    ``ceph-osd.12.asok``) could not be bound, a folder in the temporary folder derived from it."""
    if len(str(folder).encode()) + 1 + longest_name <= SOCKET_PATH_MAX:
        return folder
    return _short_name(folder, ".sockets")


def asok_command(path: Path, prefix: str, timeout: float = 10.0, **args: Any) -> Any:
    """Send one command to a daemon's admin socket; the reply parsed as JSON when it is."""
    request = json.dumps({"prefix": prefix, **args}).encode() + b"\0"
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(path))
            sock.sendall(request)
            size = struct.unpack(">I", _receive(sock, 4))[0]
            reply = _receive(sock, size).decode(errors="replace")
    except OSError as exc:
        raise TargetError(f"admin socket {path}: {prefix}: {exc}") from None
    try:
        return json.loads(reply)
    except json.JSONDecodeError:
        return reply


def _receive(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise OSError("connection closed early")
        data += chunk
    return data
