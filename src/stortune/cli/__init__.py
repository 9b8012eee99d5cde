"""The `stortune` command line. Each command group lives in its own module of this package and
adds itself through `register(app)`; `COMMAND_MODULES` lists them. `build_app` makes the app
anew, so a target registered after import (a plugin, a test's) gets its options too.

A command line loads only the module of its command (`COMMANDS`): the modules together import
pandas, SQLAlchemy and the tuners, seconds of start-up that `stortune space list` or a refused
option should not wait for. The top-level help, and a command that is not known, load them all
(scikit-learn and scipy.stats, a second or more each, are imported where a model is fitted or a
test computed)."""

from __future__ import annotations

import importlib
import logging
import sys
from importlib import metadata
from typing import Any

import typer

from stortune.cli.common import err_console, fail, widen_piped_help
from stortune.errors import StortuneError

COMMAND_MODULES = [
    "space",
    "workload",
    "sample",
    "run",
    "sweep",
    "noise",
    "data",
    "rank",
    "model",
    "profile",
    "ceph",
    "tune",
    "report",
    "demo",
    "cluster",
]

# Each command and command group, and the module that registers it (a test checks this
# against what the modules register).
COMMANDS = {
    "space": "space",
    "workload": "workload",
    "sample": "sample",
    "run": "run",
    "resume": "run",
    "sweep": "sweep",
    "noise": "noise",
    "campaigns": "data",
    "show": "data",
    "export": "data",
    "import": "data",
    "rank": "rank",
    "effects": "rank",
    "rank-study": "rank",
    "model": "model",
    "profile": "profile",
    "profile-compare": "profile",
    "ceph": "ceph",
    "tune": "tune",
    "recommend": "tune",
    "report": "report",
    "demo": "demo",
    "worker": "cluster",
    "cluster": "cluster",
}
HELP_OPTIONS = ("--help", "-h")


def version() -> str:
    try:
        return metadata.version("stortune")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_app(modules: list[str] | None = None) -> typer.Typer:
    """The app with the commands of `modules` (default: every module)."""
    app = typer.Typer(
        name="stortune",
        help=(
            "Find out how a storage system's parameters shape its performance, and set them "
            "well.\n\nStart with `stortune demo`, or `stortune space show ext4` to see a bundled "
            "space."
        ),
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def main_options(
        verbose: int = typer.Option(
            0,
            "--verbose",
            "-v",
            count=True,
            help="Say what is done to the system (mkfs, mount, sysfs/sysctl writes, daemon "
            "restarts) on stderr; -vv for debugging detail.",
        ),
        show_version: bool = typer.Option(
            False,
            "--version",
            help="Print stortune's version and exit.",
            is_eager=True,
            callback=_print_version,
        ),
    ) -> None:
        if verbose:
            configure_logging(logging.DEBUG if verbose > 1 else logging.INFO)

    for name in COMMAND_MODULES if modules is None else modules:
        importlib.import_module(f"stortune.cli.{name}").register(app)
    return app


def modules_for(argv: list[str]) -> list[str] | None:
    """The command module a command line needs, or None for all of them: the top-level help
    lists every command, and an unknown command gets typer's list of the known ones. No global
    option takes a value, so the first word that is not an option is the command."""
    for arg in argv:
        if arg in HELP_OPTIONS:
            return None
        if arg == "--version":
            return []
        if not arg.startswith("-"):
            module = COMMANDS.get(arg)
            return None if module is None else [module]
    return None


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"stortune {version()}")
        raise typer.Exit()


def configure_logging(level: int) -> None:
    from rich.logging import RichHandler

    handler = RichHandler(console=err_console, show_path=False, markup=False)
    root = logging.getLogger("stortune")
    root.handlers[:] = [handler]
    root.setLevel(level)


def __getattr__(name: str) -> Any:
    """`stortune.cli.app`, the whole app, built on first use (tests drive it in-process)."""
    if name == "app":
        globals()["app"] = built = build_app()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors, the command line's own among them, become one line on stderr
    and exit code 2; an interrupted campaign says how to resume it."""
    # typer's bundled click: its usage errors are formatted here, as one line
    from typer._click.exceptions import ClickException, NoArgsIsHelpError

    from stortune.errors import Interrupted

    _matplotlib_cache_without_home()
    widen_piped_help()
    args = sys.argv[1:] if argv is None else argv
    try:
        code = build_app(modules_for(args))(args=args, prog_name="stortune", standalone_mode=False)
        if isinstance(code, int) and code:
            raise SystemExit(code)
    except NoArgsIsHelpError:
        raise SystemExit(2) from None  # the help was printed
    except ClickException as exc:
        fail(f"{exc.format_message()} (see --help)", exc.exit_code)
    except typer.Abort:
        fail("interrupted", 130)  # Ctrl-C outside a measuring loop
    except Interrupted as exc:
        fail(f"{exc}; continue with: {resume_hint(exc.campaign, argv)}", exc.exit_code)
    except StortuneError as exc:
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        fail("interrupted", 130)


def _matplotlib_cache_without_home() -> None:
    """Without a writable home matplotlib warns on import, twice; give it a cache folder of
    this user's in the temporary folder instead."""
    import os
    import tempfile
    from pathlib import Path

    if os.environ.get("MPLCONFIGDIR"):
        return
    try:
        home = Path.home()
    except (RuntimeError, KeyError):
        home = None
    if home is not None and os.access(home, os.W_OK):
        return
    folder = Path(tempfile.gettempdir()) / f"stortune-matplotlib-{os.geteuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return
    os.environ["MPLCONFIGDIR"] = str(folder)


def resume_hint(campaign: str, argv: list[str] | None) -> str:
    """The command that continues a campaign, with the store it lives in."""
    args = list(sys.argv[1:] if argv is None else argv)
    store = ""
    for i, arg in enumerate(args):
        if arg == "--store" and i + 1 < len(args):
            store = f" --store {args[i + 1]}"
        elif arg.startswith("--store="):
            store = f" --store {arg.split('=', 1)[1]}"
    return f"stortune resume {campaign}{store}"
