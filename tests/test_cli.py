"""The command line as a user meets it: one-line errors with exit code 2, --help with examples,
--json that parses. Errors are checked through a real subprocess, as a user would see them."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import STORTUNE
from typer.testing import CliRunner

from stortune.cli import app
from stortune.store import Store

runner = CliRunner()


def stortune(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*STORTUNE, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def assert_one_line_error(result: subprocess.CompletedProcess, *parts: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    text = " ".join(lines)
    assert "Traceback" not in result.stderr
    assert text.startswith("error: ")
    for part in parts:
        assert part in text, text


def test_bad_input_gives_one_clear_line_and_exit_2(tmp_path: Path, toy_space_file: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: s\nparameters:\n  a: {type: int, low: 1, high: 3, default: 2\n")
    assert_one_line_error(
        stortune("space", "check", str(bad), cwd=tmp_path), "bad.yaml:4", "malformed YAML"
    )
    toy = str(toy_space_file)
    assert_one_line_error(
        stortune("space", "check", toy, "-c", "blocksize=1", cwd=tmp_path),
        "unknown parameter 'blocksize'",
    )
    assert_one_line_error(
        stortune("space", "check", toy, "-c", "commit=900", cwd=tmp_path),
        "parameter 'commit': '900' is out of range [1, 300]",
    )
    assert_one_line_error(
        stortune(
            "space", "check", toy, "-c", "block_size=1024", "-c", "inode_size=2048", cwd=tmp_path
        ),
        "violates constraint require inode_size <= block_size",
    )
    assert_one_line_error(stortune("show", "nope", "--store", "x.db", cwd=tmp_path), "no store at")
    assert_one_line_error(
        stortune("import", "missing.csv", "--store", "x.db", cwd=tmp_path),
        "missing.csv: no such file",
    )


def all_commands() -> list[list[str]]:
    commands = []
    import typer.main

    group = typer.main.get_command(app)
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            commands += [[name], *([name, sub] for sub in command.commands)]
        else:
            commands.append([name])
    return commands


@pytest.mark.parametrize("command", all_commands(), ids=" ".join)
def test_every_command_has_help_with_an_example(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "Example" in result.output


def test_space_commands(toy_space_file: Path) -> None:
    result = runner.invoke(app, ["space", "check", str(toy_space_file), "--json"])
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["parameters"] == 7 and data["grid_valid"] > 0
    shown = json.loads(runner.invoke(app, ["space", "show", str(toy_space_file), "--json"]).output)
    assert shown["name"] == "toy" and "inode_size" in shown["parameters"]
    human = runner.invoke(app, ["space", "show", str(toy_space_file)], terminal_width=200)
    assert "inode_size <= block_size" in human.output


def test_sample_writes_csv_and_json(tmp_path: Path, toy_space_file: Path) -> None:
    out = tmp_path / "d.csv"
    result = runner.invoke(
        app, ["sample", str(toy_space_file), "-n", "6", "--csv", str(out), "--json"]
    )
    assert result.exit_code == 0
    assert len(json.loads(result.output)["configs"]) == 6
    assert len(out.read_text().splitlines()) == 7


def test_sample_shows_a_parameter_a_config_does_not_use_as_a_dash() -> None:
    # localfs: journal_mode applies to ext4 only, so the xfs and btrfs rows do not use it
    result = runner.invoke(app, ["sample", "localfs", "-n", "12", "--seed", "1"])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines()[1:] if line.strip()]
    assert "NaN" not in result.output
    assert any(r[0] != "ext4" and r[1] == "-" for r in rows)
    assert all(r[1] != "-" for r in rows if r[0] == "ext4")


def test_run_export_import_round_trip(tmp_path: Path, toy_space_file: Path) -> None:
    db = str(tmp_path / "s.db")
    script = tmp_path / "b.py"
    script.write_text("import json, sys\nprint(json.dumps({'mbs': float(sys.argv[1]) / 100}))\n")
    result = runner.invoke(
        app,
        [
            "run",
            "--space",
            str(toy_space_file),
            "--command",
            f"{sys.executable} {script} {{block_size}}",
            "-o",
            "mbs:max",
            "--budget",
            "3",
            "-r",
            "2",
            "--store",
            db,
            "--name",
            "c",
            "--json",
            "--no-check-disturbance",
            "--reference-every",
            "0",
        ],
    )
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.output)
    assert outcome["evaluations"] == 3 and outcome["runs_ok"] == 6
    listed = json.loads(runner.invoke(app, ["campaigns", "--store", db, "--json"]).output)
    assert listed[0]["name"] == "c" and listed[0]["runs"] == 6
    out = tmp_path / "c.csv"
    assert runner.invoke(app, ["export", "c", "-o", str(out), "--store", db]).exit_code == 0
    result = runner.invoke(app, ["import", str(out), "--name", "back", "--store", db, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["runs"] == 6
    with Store(db) as s:
        assert len(s.trials(s.campaign("back").id)) == 3


def test_python_dash_m_entry_point(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stortune", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 0 and "stortune" in result.stdout


def test_space_show_keeps_parameter_names_whole_on_a_narrow_terminal() -> None:
    import os
    import subprocess

    from conftest import STORTUNE

    from stortune.space import load_space

    narrow = subprocess.run(
        [*STORTUNE, "space", "show", "stack"],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"},
    )  # fmt: skip
    assert narrow.returncode == 0
    assert all(len(line) <= 80 for line in narrow.stdout.splitlines())
    cells = {line.split("│")[1].strip() for line in narrow.stdout.splitlines() if "│" in line}
    assert {p.name for p in load_space("stack").parameters} <= cells
    assert "parameter" in narrow.stdout and "--json" in narrow.stdout


def test_version_prints_the_installed_version() -> None:
    import subprocess
    from importlib import metadata

    from conftest import STORTUNE

    done = subprocess.run([*STORTUNE, "--version"], capture_output=True, text=True)
    assert done.returncode == 0
    assert done.stdout.strip() == f"stortune {metadata.version('stortune')}"


def test_every_command_is_mapped_to_the_module_that_registers_it() -> None:
    import typer.main

    from stortune.cli import COMMAND_MODULES, COMMANDS, build_app

    registered = {}
    for module in COMMAND_MODULES:
        for name in typer.main.get_command(build_app([module])).commands:
            registered[name] = module
    assert registered == COMMANDS


def test_a_command_line_loads_only_its_command_module() -> None:
    """`stortune space list` does not wait for scikit-learn, pandas and SQLAlchemy; a help
    that lists every command loads every command module, and scikit-learn and scipy.stats
    (a second or more each) still only when a model is fitted or a test computed."""
    import subprocess

    from conftest import STORTUNE

    probe = (
        "import sys, runpy; sys.argv = ['stortune', *sys.argv[1:]]\n"
        "try: runpy.run_module('stortune', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "heavy = sorted(m for m in ('sklearn', 'pandas', 'sqlalchemy', 'scipy.stats')"
        " if m in sys.modules)\n"
        "print('loaded:', ','.join(heavy) or 'none', file=sys.stderr)\n"
    )
    python = STORTUNE[0]
    light = subprocess.run([python, "-c", probe, "space", "list"], capture_output=True, text=True)
    assert light.returncode == 0 and "ext4" in light.stdout, light.stderr
    assert "loaded: none" in light.stderr
    full = subprocess.run([python, "-c", probe, "--help"], capture_output=True, text=True)
    assert "tune" in full.stdout and "loaded: pandas,sqlalchemy" in full.stderr
