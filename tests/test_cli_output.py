"""What a person reads in the first hour: output piped to a file or a pager is not cut to 80
columns (tables, --help, hints), objective values read to 3 significant digits in text and
whole in --json, and a campaign where nothing succeeded says so in words and exits non-zero.
Each runs the real command in a subprocess with stdout a pipe, as `stortune ... | cat` does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import STORTUNE

SPACE = "name: one\nparameters:\n  x: {type: int, low: 0, high: 9, default: 1}\n"
SEVENTHS = 'import json, sys; print(json.dumps({"v": float(sys.argv[1]) / 7}))'


def piped(*args: str) -> subprocess.CompletedProcess[str]:
    """The command with stdout and stderr pipes and no terminal width given (no COLUMNS)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH")}
    return subprocess.run(
        [*STORTUNE, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def command_campaign(tmp_path: Path, command: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`args[0]` (run, tune, sweep) on the command target with a one-parameter space."""
    (tmp_path / "s.yaml").write_text(SPACE)
    (tmp_path / "b.py").write_text(SEVENTHS)
    return piped(
        args[0], "-t", "command", "--command", command, "-s", str(tmp_path / "s.yaml"),
        "-o", "v:max", "-r", "1", "--store", str(tmp_path / "r.db"), "-q", *args[1:],
    )  # fmt: skip


def bench(tmp_path: Path) -> str:
    return f"{sys.executable} {tmp_path / 'b.py'} {{x}}"


def test_piped_campaigns_shows_a_40_character_name_whole(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_text("x,v\n1,1.5\n2,2.5\n")
    name = "applog2-ext4-fileserver-tpe-budget40-run"
    assert len(name) == 40
    db = str(tmp_path / "r.db")
    for campaign in (name, f"{name}-verify"):  # alike to 80 columns' cut, `applo…` twice
        done = piped("import", str(table), "--name", campaign, "--store", db)
        assert done.returncode == 0, done.stderr
    listed = piped("campaigns", "--store", db)
    assert listed.returncode == 0, listed.stderr
    names = [line.split("│")[1].strip() for line in listed.stdout.splitlines() if "│" in line]
    assert names == [name, f"{name}-verify"]
    assert "…" not in listed.stdout


def test_piped_help_has_room_for_its_descriptions() -> None:
    shown = piped("run", "--help")
    assert shown.returncode == 0, shown.stderr
    # at 80 columns the description column of `run --help` is 20 characters wide
    assert "Kill a run after this many seconds." in shown.stdout
    assert (
        "Run a campaign: ask the tuner, apply each config, measure it with repetitions, store "
        "every run." in shown.stdout
    )


def test_objective_values_read_to_3_significant_digits_in_text_and_whole_in_json(
    tmp_path: Path,
) -> None:
    said = command_campaign(tmp_path, bench(tmp_path), "run", "--budget", "3", "--name", "r")
    assert said.returncode == 0, said.stderr
    [best] = [line for line in said.stdout.splitlines() if line.startswith("best v = ")]
    assert digits(best.removeprefix("best v = ").split(" at ")[0]) <= 3, best  # not 1.1428...
    resumed = piped("resume", "r", "--store", str(tmp_path / "r.db"), "--json")
    exact = json.loads(resumed.stdout)["best_value"]
    assert exact * 7 == int(round(exact * 7)) and len(repr(exact)) > 6  # x/7, every digit
    assert best == f"best v = {float(f'{exact:.3g}'):.3g} at {{'x': {round(exact * 7)}}}"
    tuned = command_campaign(
        tmp_path, bench(tmp_path), "tune", "--budget", "3", "--verify", "0", "--name", "t"
    )
    assert tuned.returncode == 0, tuned.stderr
    first = tuned.stdout.splitlines()[0]
    assert first.startswith("campaign 't': 3 evaluations; best v = ")
    assert digits(first.split("best v = ")[1].split(" at ")[0]) <= 3, first
    shown = piped("show", "t", "--store", str(tmp_path / "r.db"))
    values = [line.split("│")[3].strip() for line in shown.stdout.splitlines() if "│" in line]
    assert len(values) == 4 and all(digits(v) <= 3 for v in values), values  # the table too


def digits(number: str) -> int:
    """Significant digits of a number as printed: 0.857 and 1.14 have 3."""
    return len(number.lstrip("-").replace(".", "").lstrip("0"))


def test_nothing_succeeded_says_so_in_words_and_exits_1(tmp_path: Path) -> None:
    failing = f"{sys.executable} -c 'import sys; sys.exit(3)'"
    tuned = command_campaign(tmp_path, failing, "tune", "--budget", "2", "--verify", "0",
                             "--name", "never")  # fmt: skip
    assert tuned.returncode == 1
    assert "None" not in tuned.stdout
    assert "no run succeeded: nothing to recommend; see `stortune show never`" in tuned.stdout
    assert "none of its 2 evaluations succeeded" in tuned.stderr
    ran = command_campaign(tmp_path, failing, "run", "--budget", "2", "--name", "never-run")
    assert ran.returncode == 1 and "no run succeeded" in ran.stdout
    swept = command_campaign(tmp_path, failing, "sweep", "--limit", "2", "--name", "never-swept")
    assert swept.returncode == 1, swept.stdout  # a sweep with no run ok achieved nothing
    assert "0 runs ok" in swept.stdout and "export with" not in swept.stdout
    assert "none of its" in swept.stderr
