"""The README's five-minute tour, run as a new user would: every command of its code block, in
order, in a folder holding only what a clone has (`data/`), with the venv's `stortune` on PATH.

The one long command, `tune`, runs a marked short variant (fewer evaluations, shorter runs,
fewer verification rounds; see SHORTER); a line whose comment names an exit code must exit so,
every other line must exit 0.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOUR_HEADING = "## A five-minute tour"
# the short variant of the tour's tune: same flags, smaller numbers
SHORTER = {"--budget": "3", "--runtime": "1", "--verify": "2 --verify-max 2"}
EXPECTED_EXIT = re.compile(r"#.*exit code (\d+)")

pytestmark = [pytest.mark.root, pytest.mark.slow]


def tour_commands(readme: str) -> list[tuple[str, int]]:
    """The shell commands of the tour's first code block, continuation lines joined, comments
    and the venv activation dropped, each with the exit code its comment promises (else 0)."""
    section = readme.split(TOUR_HEADING, 1)[1]
    block = section.split("```sh\n", 1)[1].split("\n```", 1)[0]
    commands: list[tuple[str, int]] = []
    pending = ""
    for line in block.splitlines():
        expected = EXPECTED_EXIT.search(line)
        code = line.split(" #", 1)[0].rstrip() if not line.lstrip().startswith("#") else ""
        if not code.strip() and not pending:
            continue
        if code.endswith("\\"):
            pending += code[:-1] + " "
            continue
        command = (pending + code).strip()
        pending = ""
        if command.startswith(". .venv/bin/activate"):
            continue
        commands.append((command, int(expected.group(1)) if expected else 0))
    return commands


def shortened(command: str) -> str:
    if not command.startswith("stortune tune "):
        return command
    for flag, value in SHORTER.items():
        command = re.sub(rf"{flag} \d+\b", f"{flag} {value}", command)
    return command


def test_the_tour_parses_into_the_commands_it_shows() -> None:
    commands = tour_commands((REPO / "README.md").read_text())
    assert commands[0] == ("stortune space list", 0)
    assert any(code == 2 for _, code in commands)  # the refused constraint
    tune = next(c for c, _ in commands if c.startswith("stortune tune --space localfs"))
    assert "\\" not in tune and "--name fs1" in tune
    assert "--budget 3" in shortened(tune) and "--verify-max 2" in shortened(tune)


def test_every_command_of_the_readme_tour_works_on_a_fresh_checkout(tmp_path: Path) -> None:
    shutil.copytree(REPO / "data", tmp_path / "data")
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["STORTUNE_STORE"] = str(tmp_path / "stortune.db")
    for command, expected in tour_commands((REPO / "README.md").read_text()):
        run = shortened(command)
        result = subprocess.run(
            ["bash", "-c", run], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=900,
        )  # fmt: skip
        assert result.returncode == expected, (
            f"{run!r} exited {result.returncode}, not {expected}:\n"
            f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
        )
    assert (tmp_path / "my.fio").read_text().startswith("#")
    assert any((tmp_path / "reports").iterdir())
