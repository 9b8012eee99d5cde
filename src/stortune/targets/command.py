"""The `command` target: any program that measures something and prints its metrics.

The argv template holds placeholders ``{param}`` (and ``{workdir}``, a scratch folder of the
target). Each argv item is substituted on its own and the program is started without a shell,
so a parameter value can never be interpreted as shell syntax. The config also goes to the
program as JSON in the environment variable ``STORTUNE_CONFIG``.

Output: ``json`` (default): the last JSON object the program prints on stdout, nested mappings
flattened to dotted names, numbers kept; ``fio``: fio's ``--output-format=json`` report.

State: metrics printed under ``state`` (``{"iops": 812, "state": {"queue": 3, "cpu": 0.4}}``
gives ``state.queue`` and ``state.cpu``) are the system's state after the run, which a tuner
that reads state (DDPG, as Magpie reads server and client metrics) learns from. A program that
prints none has no state.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from stortune.errors import TargetError
from stortune.space import Config, Space
from stortune.system.scratch import ScratchKind, make_scratch_folder
from stortune.system.syscmd import kill_group
from stortune.targets.base import Target, TargetSettings, setting
from stortune.workloads.base import Measurement, numeric_metrics

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")
OUTPUTS = ("json", "fio")
STATE_PREFIX = "state."


@dataclass(frozen=True)
class CommandSettings(TargetSettings):
    command: str | list[str] = setting(
        "",
        flag="--command",
        implies=True,
        help="command target: program and arguments with {param} placeholders, run without a "
        "shell; it prints JSON metrics (or fio JSON with --output fio).",
    )
    output: str = setting("json", flag="--output", help="command target: json or fio.")
    cwd: str | None = setting(None)
    env: dict[str, str] = setting({})


def split_command(text: str) -> list[str]:
    """The argv of a command line as a shell would split it (quotes kept together), or one
    TargetError line saying what is wrong with its quoting."""
    try:
        return shlex.split(text)
    except ValueError as exc:  # No closing quotation, No escaped character
        raise TargetError(f"--command {text[:80]!r}: {exc}") from None


def check_output_format(output: str) -> str:
    if output not in OUTPUTS:
        choices = ", ".join(OUTPUTS)
        raise TargetError(f"unknown output format {output!r} (choose from {choices})")
    return output


class CommandTarget(Target):
    kind = "command"
    Settings = CommandSettings
    summary = "any program printing JSON metrics"
    settings: CommandSettings

    def __init__(
        self,
        space: Space | str | None = None,
        settings: CommandSettings | None = None,
        **values: Any,
    ) -> None:
        super().__init__(space, settings, **values)
        argv = self.settings.command
        if isinstance(argv, str):
            argv = split_command(argv)
        if not argv:
            raise TargetError("--target command needs --command 'PROGRAM ARGS {param} ...'")
        check_output_format(self.settings.output)
        self.argv = [str(a) for a in argv]
        self.settings = replace(self.settings, command=self.argv)
        self.output = self.settings.output
        self.cwd = self.settings.cwd
        self.env = dict(self.settings.env or {})
        self._config: Config = {}
        self._workdir: Path | None = None

    def placeholders(self) -> set[str]:
        return {m for item in self.argv for m in _PLACEHOLDER.findall(item)} - {"workdir"}

    def setup(self) -> None:
        if shutil.which(self.argv[0]) is None and not Path(self.argv[0]).exists():
            raise TargetError(f"command not found: {self.argv[0]}")
        if self._workdir is None:
            self._workdir = make_scratch_folder(ScratchKind.COMMAND)

    def teardown(self) -> None:
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def apply(self, config: Config) -> None:
        missing = sorted(self.placeholders() - set(config))
        if missing:
            raise TargetError(
                f"the command names {', '.join('{' + m + '}' for m in missing)}, "
                "which the config does not have"
            )
        self._config = dict(config)

    def command_line(self) -> list[str]:
        """The argv for the current config, each item substituted on its own."""
        values = {k: _text(v) for k, v in self._config.items()}
        values["workdir"] = str(self._workdir or "")
        return [_PLACEHOLDER.sub(lambda m: values[m.group(1)], item) for item in self.argv]

    def measure(self, timeout: float | None = None, repetition: int = 0) -> Measurement:
        if self._workdir is None:
            self.setup()
        argv = self.command_line()
        env = {**os.environ, **self.env, "STORTUNE_CONFIG": json.dumps(self._config)}
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=self.cwd,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            return Measurement.failed(f"cannot start {argv[0]}: {exc.strerror}")
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)  # the program and everything it started
            proc.communicate()  # reaped
            return Measurement.failed(f"killed after the {timeout:g} s time limit", "timeout")
        seconds = time.monotonic() - started
        if proc.returncode != 0:
            last = _last_line(stderr) or _last_line(stdout)
            return Measurement.failed(f"exit status {proc.returncode}: {last}".rstrip(": "))
        try:
            metrics = self._parse(stdout)
        except ValueError as exc:
            return Measurement.failed(str(exc))
        return Measurement(metrics, info={"seconds": seconds})

    def metric_names(self) -> frozenset[str] | None:
        """fio's names when the program prints fio's report (any job's, as patterns); a
        program's own JSON is unknown ahead."""
        if self.output != "fio":
            return None
        from stortune.workloads.fio import report_metric_names

        return report_metric_names()

    def state_after(self, metrics: Mapping[str, float]) -> dict[str, float]:
        """The run's ``state.*`` metrics (module doc)."""
        return {k: v for k, v in metrics.items() if k.startswith(STATE_PREFIX)}

    def _parse(self, stdout: str) -> dict[str, float]:
        if self.output == "fio":
            from stortune.workloads.fio import parse_fio_output

            return parse_fio_output(stdout)
        data = _last_json_object(stdout)
        metrics = numeric_metrics(data)
        if not metrics:
            raise ValueError("the command printed JSON without any numeric metric")
        return metrics


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _last_json_object(text: str) -> dict[str, Any]:
    """The last JSON object in the output: the whole text, or the last line that is one."""
    stripped = text.strip()
    candidates = [stripped] + [line.strip() for line in reversed(stripped.splitlines())]
    for candidate in candidates:
        if candidate.startswith("{"):
            try:
                data = json.loads(candidate)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict):
                return data
    raise ValueError(f"no JSON object in the output: {_last_line(text) or '(nothing printed)'}")
