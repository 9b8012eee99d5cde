"""HEBO and SMAC3 behind stortune's ask/tell interface, for bench/tuners.py.

Their pins clash with stortune's (HEBO wants numpy < 1.25), so they live in a virtualenv of
their own, bench/peers/.venv (both fit in one), made on first use by `ensure_peer_venv` from
bench/peers/requirements-{hebo,smac}.txt. A `PeerTuner` runs bench/peers/bridge.py with that
venv's python and speaks its JSON-lines protocol (described there); `register_peer` lets
campaigns build one by name, as they build stortune's own tuners. Ordinals travel as their
value index, categoricals and booleans as text; inactive parameters are told at their default.
The peers know nothing of constraints: a proposal that breaks one is told as failed and another
is asked for; after `MAX_MISSES` such misses a random valid config is used instead.

A helper module, not a benchmark: running it does nothing.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from stortune.errors import StortuneError
from stortune.space import Config, Kind, Parameter, Space
from stortune.system.processes import cpu_seconds
from stortune.tuners import register_tuner
from stortune.tuners.base import Tuner
from stortune.tuners.baselines import RandomTuner

PEERS = Path(__file__).resolve().parent / "peers"
BRIDGE = PEERS / "bridge.py"
VENV = PEERS / ".venv"
PYTHON = VENV / "bin" / "python"
PEER_NAMES = ("hebo", "smac")
# A HEBO proposal takes seconds; minutes without a reply, in which the bridge used next to no CPU
# (under 1% of them), mean it is stuck. A bridge starved by a busy machine (a niced bench beside
# others) still uses CPU, and is waited for, up to ten times as long (a bridge spinning without
# an answer is stuck too).
REPLY_SECONDS = 300.0
WORKING_REPLY_LIMITS = 10
DEFAULT_BUDGET = 100  # SMAC sizes its initial design from the budget
MAX_MISSES = 20
# The bridge's environment: one thread, as the bench gives its own tuners, and a fixed hash
# seed, without which SMAC's proposals vary between runs of the same seed (set orders).
BRIDGE_ENV = {
    **dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1"),
    "PYTHONHASHSEED": "0",
}


def installed_python(name: str) -> Path | None:
    """The peer venv's python when `name`'s requirements are installed as pinned now."""
    stamp = VENV / f"installed-{name}.txt"
    requirements = PEERS / f"requirements-{name}.txt"
    if PYTHON.exists() and stamp.exists() and stamp.read_text() == requirements.read_text():
        return PYTHON
    return None


def ensure_peer_venv(name: str) -> Path | str:
    """The python of the venv holding peer `name`, made and installed when missing (a minute
    or two, once: do it from the main process before starting workers; after that a call only
    compares a stamp), or a one-line reason why it cannot be installed, for the bench's table."""
    if name not in PEER_NAMES:
        return f"unknown peer {name!r} (choose from {', '.join(PEER_NAMES)})"
    python = installed_python(name)
    if python is not None:
        return python
    requirements = PEERS / f"requirements-{name}.txt"
    pins = requirements.read_text()
    steps = [] if PYTHON.exists() else [[sys.executable, "-m", "venv", str(VENV)]]
    # torch goes first and alone: its exact pin takes the CPU wheel (see the requirements file).
    torch = [line for line in pins.splitlines() if line.startswith("torch==")]
    pip = [str(PYTHON), "-m", "pip", "install", "--disable-pip-version-check"]
    if torch:
        steps.append([*pip, *torch])
    steps.append([*pip, "-r", str(requirements)])
    VENV.mkdir(parents=True, exist_ok=True)  # also holds the install log (gitignored)
    for step in steps:
        result = subprocess.run(step, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            log = VENV / f"install-{name}.log"
            log.write_text(f"$ {' '.join(step)}\n{result.stdout}\n{result.stderr}")
            lines = [line for line in result.stderr.splitlines() if line.strip()] or ["no output"]
            errors = [line for line in lines if line.startswith("ERROR:")]
            return f"{(errors or lines)[-1].strip()} (log: {log})"
    (VENV / f"installed-{name}.txt").write_text(pins)
    return PYTHON


def register_peer(name: str) -> str | None:
    """Have `stortune.tuners.make_tuner` build peer `name` by name, as campaigns and their
    resumes do (its venv made first when missing): None, or why it cannot run here."""
    python = ensure_peer_venv(name)
    if not isinstance(python, Path):
        return python

    class Peer(PeerTuner):
        def __init__(
            self, space: Space, direction: str = "max", seed: int = 0, budget: int | None = None
        ) -> None:
            super().__init__(space, direction, seed, budget, peer=name, python=str(python))

    register_tuner(name, Peer)
    return None


def bridge_param(p: Parameter) -> dict[str, Any]:
    """A parameter as the bridge declares it: ordinals by value index, the unordered kinds by
    their values' text."""
    if p.kind is Kind.INT:
        return {"name": p.name, "type": "int", "low": int(p.low), "high": int(p.high), "log": p.log}
    if p.kind is Kind.FLOAT:
        return {"name": p.name, "type": "float", "low": p.low, "high": p.high, "log": p.log}
    if p.kind is Kind.ORDINAL:
        return {"name": p.name, "type": "int", "low": 0, "high": len(p.values) - 1}
    return {"name": p.name, "type": "cat", "values": [str(v) for v in p.values]}


class PeerTuner(Tuner):
    """A peer's optimiser (`peer`: hebo or smac) in a bridge subprocess run by `python`."""

    def __init__(
        self,
        space: Space,
        direction: str = "max",
        seed: int = 0,
        budget: int | None = None,
        *,
        peer: str,
        python: str,
        timeout: float = REPLY_SECONDS,
    ) -> None:
        super().__init__(space, direction, seed, budget)
        self.name = peer
        self.timeout = timeout
        self._labels = {  # categorical and boolean values by the text the bridge sends
            p.name: {str(v): v for v in p.values}
            for p in space.parameters
            if p.kind in (Kind.CATEGORICAL, Kind.BOOL)
        }
        self._fallback = RandomTuner(space, direction, seed + 7)
        # The bridge's stderr, quoted when it fails; it lives as long as the bridge.
        self._log = tempfile.TemporaryFile("w+")  # noqa: SIM115
        try:
            self._process = subprocess.Popen(
                [python, str(BRIDGE), peer],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                text=True,
                env={**os.environ, **BRIDGE_ENV},
            )
        except OSError as exc:
            raise StortuneError(f"cannot start the {peer} bridge with {python}: {exc}") from None
        self._replies: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read_replies, daemon=True).start()
        self._request(
            {
                "op": "init",
                "seed": seed,
                "direction": self.direction.value,
                "budget": budget or DEFAULT_BUDGET,
                "params": [bridge_param(p) for p in space.parameters],
            }
        )

    def ask(self) -> Config:
        for _ in range(MAX_MISSES):
            values = self._request({"op": "ask"})["config"]
            config = self._active(
                {p.name: self._from_bridge(p, values) for p in self.space.parameters}
            )
            if self.space.first_violation(config) is None:
                return self.space.validate(config)
            self._request({"op": "tell", "config": values, "value": None})
        return self._fallback.ask()

    def _observe(self, config: Config, value: float | None) -> None:
        self._request({"op": "tell", "config": self._to_bridge(config), "value": value})

    def withdraw(self, config: Config) -> None:
        """Nothing to do: the bridge learns the config measured instead when it is told, and
        SMAC's withdrawn trial stays pending harmlessly (bridge.py)."""

    def close(self) -> None:
        """Ask the bridge to quit, and kill it when it does not within a few seconds."""
        process = getattr(self, "_process", None)
        if process is None or process.poll() is not None:
            return
        try:
            process.stdin.write(json.dumps({"op": "quit"}) + "\n")
            process.stdin.close()
            process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()

    def __del__(self) -> None:
        self.close()

    # ---- the bridge ------------------------------------------------------------------------
    def _read_replies(self) -> None:
        for line in self._process.stdout:
            self._replies.put(line)
        self._replies.put("")  # end of output: the bridge exited

    def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message["op"]
        try:
            self._process.stdin.write(json.dumps(message) + "\n")
            self._process.stdin.flush()
        except OSError:
            pass  # the bridge has exited: its last reply, if any, is still to be read
        line = self._reply(op)
        if not line:
            self._replies.put("")  # for every later request too
            raise StortuneError(f"{self.name} bridge exited during {op!r}: {self._last_error()}")
        reply = json.loads(line)
        if "error" in reply:
            raise StortuneError(f"{self.name} bridge, {op!r}: {reply['error']}")
        return reply

    def _reply(self, op: str) -> str:
        """The bridge's next line, waiting while the bridge works: it is killed as stuck only
        after `timeout` seconds in which it neither replied nor used 1% of them on CPU, or
        after `WORKING_REPLY_LIMITS` of them however busy it was."""
        used = cpu_seconds(self._process.pid)
        for _ in range(WORKING_REPLY_LIMITS):
            try:
                return self._replies.get(timeout=self.timeout)
            except queue.Empty:
                now = cpu_seconds(self._process.pid)
                if used is None or now is None or now < used + 0.01 * self.timeout:
                    self._process.kill()
                    raise StortuneError(
                        f"{self.name} bridge gave no reply to {op!r} "
                        f"and sat idle for {self.timeout:g} s"
                    ) from None
                used = now  # slow, not stuck: a busy machine gives it a small share
        self._process.kill()
        raise StortuneError(
            f"{self.name} bridge gave no reply to {op!r} "
            f"in {WORKING_REPLY_LIMITS * self.timeout:g} s of work"
        )

    def _last_error(self) -> str:
        self._log.seek(0)
        lines = [line.strip() for line in self._log.read().splitlines() if line.strip()]
        return lines[-1] if lines else "no message"

    # ---- values ----------------------------------------------------------------------------
    def _from_bridge(self, p: Parameter, values: dict[str, Any]) -> Any:
        value = values[p.name]
        if p.kind is Kind.ORDINAL:
            return p.values[int(value)]
        if p.kind in (Kind.CATEGORICAL, Kind.BOOL):
            return self._labels[p.name][value]
        return value

    def _to_bridge(self, config: Config) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for p in self.space.parameters:
            value = p.check(config.get(p.name, p.default))
            if p.kind is Kind.ORDINAL:
                value = p.values.index(value)
            elif p.kind in (Kind.CATEGORICAL, Kind.BOOL):
                value = str(value)
            out[p.name] = value
        return out

    def _active(self, values: Config) -> Config:
        """The values of the parameters active in them, in the space's condition order."""
        out: Config = {}
        for p in self.space.parameters:
            if p.condition is None or self.space.is_active(p, out):
                out[p.name] = values[p.name]
        return out
