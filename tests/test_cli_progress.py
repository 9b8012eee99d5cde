"""What the command line tells while and after it measures: a campaign stopped by a busy machine
ends with the commands that continue it (and `stortune resume` takes their flags), and output
that is no terminal gets a plain progress line at most every 30 s. The busy machine is played
by the disturbance probes' verdicts, so nothing here depends on the real machine's load."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from stortune.cli import run as run_cli
from stortune.cli.progress import PLAIN_EVERY, ConsoleReporter
from stortune.measure import runner as measure_runner
from stortune.measure.runner import Event, EventKind
from stortune.store import Store
from stortune.system import disturbance
from stortune.workloads.base import Measurement

SPACE = "name: s\nparameters:\n  x: {type: int, low: 1, high: 4, default: 1}\n"
BUSY = "another benchmark was running: 42 fio"


@pytest.fixture(autouse=True)
def quiet_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    """No `fio --version` or /sys reads for the machine fingerprint."""
    monkeypatch.setattr(measure_runner.environment, "fingerprint", lambda: {"hostname": "t"})


@pytest.fixture
def busy_after(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`busy_after(n)`: the first n runs are quiet, every later one is disturbed by another
    benchmark that never ends; no pause is really slept."""

    def play(quiet_runs: int) -> None:
        judged = []

        def judge(*_args: object) -> str | None:
            judged.append(1)
            return None if len(judged) <= quiet_runs else BUSY

        monkeypatch.setattr(disturbance, "judge", judge)
        monkeypatch.setattr(disturbance, "busy_now", lambda _limits: BUSY)
        monkeypatch.setattr(measure_runner.Runner, "_sleep", lambda self, seconds: None)

    return play


def app() -> typer.Typer:
    cli = typer.Typer()
    cli.callback()(lambda: None)  # a group, as in `stortune`: the command is named
    run_cli.register(cli)
    return cli


def run_args(tmp_path: Path, db: Path) -> list[str]:
    (tmp_path / "s.yaml").write_text(SPACE)
    script = tmp_path / "q.py"
    script.write_text("import json, sys\nprint(json.dumps({'score': float(sys.argv[1])}))\n")
    return [
        "run", "--space", str(tmp_path / "s.yaml"),
        "--command", f"{sys.executable} {script} {{x}}", "-o", "score:max",
        "--budget", "3", "-r", "1", "--reference-every", "0",
        "--check-disturbance", "--busy-wait", "0", "--store", str(db), "--name", "busy",
    ]  # fmt: skip


def test_a_busy_stop_ends_with_how_to_continue(tmp_path: Path, busy_after: Any) -> None:
    db = tmp_path / "b.db"
    busy_after(1)  # the first evaluation is measured, then the machine stays busy
    result = CliRunner().invoke(app(), run_args(tmp_path, db))
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    said = " ".join(result.output.split())
    # the run the busy machine disturbed is stored as disturbed, not held until the wait ends
    assert "1 runs ok, 0 failed, 1 disturbed (stopped by busy)" in said
    last = lines[-1]
    assert last.startswith(f"stopped: the machine stayed busy ({BUSY}) for 0 s")
    resume = f"stortune resume busy --store {db}"
    assert f"`{resume}` once the machine is quiet" in last
    assert f"`{resume} --busy-wait 1800` to wait longer" in last
    assert f"`{resume} --no-check-disturbance` to measure anyway" in last
    assert sum(line.startswith("stopped:") for line in lines) == 1  # told once, last
    with Store(str(db)) as store:
        assert store.campaign("busy").status == "interrupted"

    # as it says: measure anyway, without disturbance checks, and it finishes
    result = CliRunner().invoke(
        app(), ["resume", "busy", "--store", str(db), "--no-check-disturbance", "--json"]
    )
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.output)
    assert outcome["stopped_by"] == "budget" and outcome["evaluations"] == 3
    with Store(str(db)) as store:
        assert store.campaign("busy").status == "finished"


def test_nothing_measured_before_the_busy_stop_says_how_to_continue_last(
    tmp_path: Path, busy_after: Any
) -> None:
    db = tmp_path / "b.db"
    busy_after(0)
    result = CliRunner().invoke(app(), run_args(tmp_path, db))
    error = str(result.exception)
    assert "none of its 1 evaluations succeeded" in error and f"busy ({BUSY})" in error
    assert error.endswith(
        f"`stortune resume busy --store {db} --no-check-disturbance` to measure anyway"
    )


def test_resume_takes_the_busy_wait_into_its_rules(
    tmp_path: Path, busy_after: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "b.db"
    busy_after(1)
    CliRunner().invoke(app(), run_args(tmp_path, db))
    seen = []
    execute = measure_runner.Runner.execute

    def spy(self: measure_runner.Runner, plan: Any) -> Any:
        seen.append(self.rules)
        return execute(self, plan)

    monkeypatch.setattr(measure_runner.Runner, "execute", spy)
    result = CliRunner().invoke(app(), ["resume", "busy", "--store", str(db), "--busy-wait", "7"])
    assert seen and seen[0].busy_wait == 7 and seen[0].check_disturbance
    # still busy: it waited its 7 s of (unslept) countdown and says how to go on again
    assert result.output.strip().splitlines()[-1].startswith("stopped: the machine stayed busy")
    assert "for 7 s" in result.output


def measuring(planned: int | None = 10, done: int = 0) -> Any:
    """What the reporter reads of a campaign being measured."""
    plan = SimpleNamespace(planned_runs=lambda: planned, done_runs=lambda: done)
    log = SimpleNamespace(objective=SimpleNamespace(direction="max"))
    return SimpleNamespace(plan=plan, log=log)


def ran(value: float | None = None, seq: int = 0) -> list[Event]:
    """A run's events: the run, then its trial's value when given."""
    events = [Event(EventKind.RUN, measurement=Measurement({"score": 1.0}))]
    if value is not None:
        events.append(Event(EventKind.TRIAL, trial=SimpleNamespace(seq=seq), value=value))
    return events


def test_output_that_is_no_terminal_gets_a_plain_line_every_30_s() -> None:
    now = [100.0]
    text = io.StringIO()
    out = Console(file=text, force_terminal=False, width=200)
    reporter = ConsoleReporter(clock=lambda: now[0], out=out)
    with reporter.measuring("tune fs1", measuring(planned=10, done=2)) as on_event:
        for event in ran(130.81234):
            on_event(event)
        assert "runs" not in text.getvalue()  # under 30 s: nothing yet
        now[0] += PLAIN_EVERY + 1
        for event in ran(61.6543, seq=1):
            on_event(event)
        lines = [line for line in text.getvalue().splitlines() if line.strip()]
        assert lines == ["tune fs1: 4/10 runs, best 131, 0:00:31 elapsed"]
        now[0] += 10  # 10 s later: no new line
        for event in ran(200.4, seq=2):
            on_event(event)
        assert len(text.getvalue().strip().splitlines()) == 1
        now[0] += PLAIN_EVERY  # a busy wait is told too
        on_event(Event(EventKind.WAIT, message=f"machine busy: {BUSY}", seconds_left=540))
        on_event(Event(EventKind.STOP, message="stopped: the machine stayed busy"))
    lines = [line for line in text.getvalue().splitlines() if line.strip()]
    assert lines[1] == (
        f"tune fs1: 5/10 runs, best 200, 0:01:11 elapsed, machine busy: {BUSY}, 540 s left"
    )
    assert lines[-1] == "stopped: the machine stayed busy"  # after the phase, last
    assert reporter.told == ["stopped: the machine stayed busy"]  # the outcome need not repeat it


def test_tune_tells_a_stop_once_when_the_progress_told_it(capsys) -> None:
    from stortune.cli.tune import print_result
    from stortune.measure.runner import Outcome

    stop = "stopped: no node could measure for 60 s; finished runs are kept"
    outcome = Outcome("c", "tune", 2, 2, 0, 0, {"x": 1}, 5.0, "no_nodes", notes=["a note", stop])
    result = SimpleNamespace(
        outcome=outcome, widened={}, objective=None, risks=[], in_loop=None, verification=None,
        pareto=None,
    )  # fmt: skip
    print_result(result, json_out=False, told=frozenset([stop]))  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "a note" in out and "no node could measure" not in out
    print_result(result, json_out=False)  # type: ignore[arg-type]
    assert capsys.readouterr().out.count("no node could measure") == 1


def test_a_terminal_gets_the_bar_and_no_plain_lines() -> None:
    now = [0.0]
    text = io.StringIO()
    out = Console(file=text, force_terminal=True, width=200)
    reporter = ConsoleReporter(clock=lambda: now[0], out=out, stops=False)
    with reporter.measuring("tune fs1", measuring(planned=None)) as on_event:
        for seq in range(3):
            now[0] += PLAIN_EVERY + 1
            for event in ran(1.23456, seq=seq):
                on_event(event)
        on_event(Event(EventKind.STOP, message="stopped: the machine stayed busy"))
    assert "runs, best" not in text.getvalue()
    assert "best 1.23" in text.getvalue()  # the bar's status, 3 significant digits
    assert "stopped:" not in text.getvalue()  # `stops=False`: its caller tells it
