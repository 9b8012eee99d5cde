"""Option callbacks that check a value as the command line is read, before any work starts: a
number against its range (`stortune.bounds`), a size, an output path (`stortune.outputs`).

A refusal is a usage error (exit 2) naming the option: ``error: Invalid value for '--seed':
must be a whole number from 0 to 4,294,967,295, not -1``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from stortune import bounds, outputs
from stortune.errors import StortuneError

Callback = Callable[[Any, Any, Any], Any]

FIGURE_SUFFIXES = (".png", ".svg")
MODEL_SUFFIXES = (".joblib", ".pkl")


def checked(check: Callable[[Any], Any]) -> Callback:
    """A typer callback applying `check` to the option's value (each value of a repeated
    option; None, an option not given, passes), its refusal a usage error."""

    def callback(_ctx: Any, _param: Any, value: Any) -> Any:
        if value is None:
            return value
        try:
            if isinstance(value, list | tuple):
                return type(value)(check(v) for v in value)
            return check(value)
        except StortuneError as exc:
            raise typer.BadParameter(str(exc)) from None

    return callback


def within(limits: bounds.Range) -> Callback:
    return checked(limits.check)


SEED = within(bounds.SEED)
COUNT = within(bounds.COUNT)
REPETITIONS = within(bounds.REPETITIONS)
ROUNDS = within(bounds.ROUNDS)
EVERY = within(bounds.EVERY)
SECONDS = within(bounds.SECONDS)
TIMEOUT = within(bounds.TIMEOUT)
RUNTIME = within(bounds.RUNTIME)
WAIT = within(bounds.WAIT)
FRACTION = within(bounds.FRACTION)
SAMPLES = within(bounds.SAMPLES)
LEVELS = within(bounds.LEVELS)
SIZE = checked(bounds.size)


def _file(path: Path) -> Path:
    outputs.check_file(path)
    return path


def _file_in_new_folders(path: Path) -> Path:
    outputs.check_file(path, made=True)
    return path


def _model(path: Path) -> Path:
    """A model file (``*.joblib``), or a folder that gets one per technique."""
    if path.suffix in MODEL_SUFFIXES:
        return _file_in_new_folders(path)
    return _folder(path)


def _folder(path: Path) -> Path:
    outputs.check_folder(path)
    return path


def _figure(path: Path) -> Path:
    outputs.check_prefix(path, FIGURE_SUFFIXES, "plot")
    return path


OUTPUT_FILE = checked(_file)  # a file written (made or replaced)
OUTPUT_FILE_MADE = checked(_file_in_new_folders)  # ... its missing folders made first
OUTPUT_MODEL = checked(_model)  # a model file or a folder of them
OUTPUT_FOLDER = checked(_folder)  # a folder files are written in (made with its parents)
OUTPUT_FIGURE = checked(_figure)  # PATH.png and PATH.svg
