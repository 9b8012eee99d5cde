"""`stortune campaigns | show | export | import`: what the store holds, in and out as tables;
deleting and renaming campaigns."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import sqlalchemy as sa
import typer
import yaml
from rich.table import Table

from stortune.cli import checks
from stortune.cli.common import StoreOption, console, print_json
from stortune.datasets import load_dataset
from stortune.errors import StoreError, StortuneError
from stortune.outputs import writing
from stortune.sources import campaign_frame
from stortune.space import fold_one_hot, load_space, space_from_dataset
from stortune.store import Campaign, Store, Trial
from stortune.units import number

JsonOption = typer.Option(False, "--json", help="Print JSON.")


def _when(timestamp: float) -> str:
    return dt.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")


# What rows that stortune did not write (a broken JSON cell, a text where a time belongs, a table
# of another shape) raise while they are read and shown.
_UNREADABLE = (
    sa.exc.SQLAlchemyError,
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    ArithmeticError,
    OSError,
)


@contextmanager
def reading(db: Store) -> Iterator[None]:
    """Reading a store someone else changed (or a disk corrupted) ends in one line naming the
    store, not a traceback: the rows are the store's fault, not the command's."""
    try:
        yield
    except StortuneError:
        raise
    except _UNREADABLE as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StoreError(f"cannot read the store {db.url}: {reason}") from None


def _trials_table(c: Campaign, trials: list[Trial]) -> tuple[str, Table]:
    """`stortune show`'s heading and table of a campaign's trials."""
    heading = (
        f"campaign {c.name!r} ({c.kind}, {c.status}): space {c.space_name}, target "
        f"{c.target.get('kind')}, tuner {c.tuner or '-'}, objective {c.metric}:{c.direction}"
    )
    table = Table()
    nodes = any((r.info or {}).get("node") for t in trials for r in t.runs)  # a cluster's
    columns = ("#", "status", c.metric, "rsd", "runs", *(("nodes",) if nodes else ()), "config")
    for column in columns:
        table.add_column(column)
    for t in trials:
        rsds = [w.get("rsd") for w in (t.summary or {}).values() if isinstance(w, dict)]
        rsd = f"{max(rsds):.1%}" if rsds and all(r is not None for r in rsds) else ""
        value = number(t.value) if t.value is not None else (t.error or "")[:60]
        row = [str(t.seq), t.status, value, rsd, str(len(t.runs))]
        if nodes:  # where its runs were measured, and where a node was lost under it
            measured = dict.fromkeys(str((r.info or {}).get("node", "")) for r in t.runs)
            lost = [f"lost on {n}" for n in (t.info or {}).get("lost_on", [])]
            row.append(", ".join([*(n for n in measured if n), *lost]))
        table.add_row(*row, str(t.config))
    return heading, table


def register(app: typer.Typer) -> None:
    _register_tables(app)
    campaigns_app = typer.Typer(
        help="List the campaigns in a store; delete or rename one.\n\n"
        "Example: stortune campaigns --store results.db\n\n"
        "Example: stortune campaigns rename demo ext4-mailserver --store results.db",
        invoke_without_command=True,
    )
    app.add_typer(campaigns_app, name="campaigns")

    @campaigns_app.callback()
    def campaigns_command(
        ctx: typer.Context, store: str = StoreOption, json_out: bool = JsonOption
    ) -> None:
        """List the campaigns in a store (`campaigns delete` and `campaigns rename` manage one).

        Example: stortune campaigns --store results.db
        """
        if ctx.invoked_subcommand is None:
            list_campaigns(store, json_out)

    @campaigns_app.command("delete")
    def delete_command(
        names: list[str] = typer.Argument(..., help="Campaigns to delete."),
        yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
        store: str = StoreOption,
    ) -> None:
        """Delete campaigns with all their runs, and the verifications made of them. Asks first
        (on a terminal; elsewhere --yes is needed).

        Example: stortune campaigns delete old-try --store results.db
        """
        with Store(store, existing=True) as db, reading(db):
            chosen = [db.campaign(name) for name in names]  # an unknown name refuses them all
            known = {c.name for c in db.campaigns()}
            doomed = []
            for c in chosen:
                doomed.append(c.name)
                doomed += [v for v in _verifications(c.name, known) if v not in doomed]
            runs = sum(db.run_count(db.campaign(n).id) for n in doomed)
            what = f"{', '.join(doomed)} ({runs} runs)"
            if not yes:
                if not sys.stdin.isatty():
                    raise StortuneError(f"deleting {what}: add --yes to confirm")
                if not typer.confirm(f"delete {what} from {store}?", default=False):
                    raise StortuneError("nothing deleted")
            for name in doomed:
                db.delete_campaign(name)
        console.print(f"deleted {what}", highlight=False)

    @campaigns_app.command("rename")
    def rename_command(
        name: str = typer.Argument(..., help="The campaign's name."),
        new_name: str = typer.Argument(..., help="Its new name."),
        store: str = StoreOption,
    ) -> None:
        """Rename a campaign, and its verifications with it (NAME-verify becomes NEW-verify).

        Example: stortune campaigns rename demo ext4-mailserver --store results.db
        """
        with Store(store, existing=True) as db, reading(db):
            db.campaign(name)
            known = {c.name for c in db.campaigns()}
            moves = [(name, new_name)] + [
                (v, new_name + v[len(name) :]) for v in _verifications(name, known)
            ]
            taken = [new for _old, new in moves if new in known]
            if taken:
                raise StortuneError(f"campaign {taken[0]!r} already exists in {store}")
            for old, new in moves:
                db.rename_campaign(old, new)
        console.print(
            f"renamed {', '.join(f'{old} -> {new}' for old, new in moves)}", highlight=False
        )


def _verifications(name: str, known: set[str]) -> list[str]:
    """The stored verifications of campaign `name` (NAME-verify, NAME-verify-2, ...)."""
    from stortune.measure.verify import verify_names

    found = []
    for candidate in verify_names(name):
        if candidate not in known:
            return found
        found.append(candidate)
    return found


def list_campaigns(store: str, json_out: bool) -> None:
    with Store(store, existing=True) as db, reading(db):
        rows = []
        for c in db.campaigns():
            rows.append(
                {
                    "name": c.name,
                    "kind": c.kind,
                    "space": c.space_name,
                    "target": c.target.get("kind", ""),
                    "tuner": c.tuner,
                    "objective": f"{c.metric}:{c.direction}",
                    "status": c.status,
                    "runs": db.run_count(c.id),
                    "created": _when(c.created_at),
                }
            )
    if json_out:
        print_json(rows)
        return
    if not rows:
        console.print(f"no campaigns in {store}", highlight=False)
        return
    table = Table()
    for column in rows[0]:
        table.add_column(column)
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    console.print(table)


def _register_tables(app: typer.Typer) -> None:
    @app.command("show")
    def show_command(
        campaign: str = typer.Argument(..., help="Campaign name."),
        store: str = StoreOption,
        json_out: bool = JsonOption,
    ) -> None:
        """Show a campaign's trials: config, status, objective mean and RSD.

        Example: stortune show demo --store demo.db
        """
        with Store(store, existing=True) as db, reading(db):
            c = db.campaign(campaign)
            trials = db.trials(c.id)
            payload = {
                "campaign": c.__dict__,
                "trials": [
                    {k: v for k, v in t.__dict__.items() if k != "runs"}
                    | {"runs": [r.__dict__ for r in t.runs]}
                    for t in trials
                ],
            }
            if not json_out:  # formatted here, where a stored value of the wrong type is caught
                heading, table = _trials_table(c, trials)
        if json_out:
            print_json(payload)
            return
        console.print(heading, highlight=False)
        console.print(table)

    @app.command("export")
    def export_command(
        campaigns: list[str] = typer.Argument(
            ..., help="Campaign name; several are exported into one table."
        ),
        out: Path = typer.Option(
            ..., "--out", "-o", help="Output file: .csv or .parquet.", callback=checks.OUTPUT_FILE
        ),
        store: str = StoreOption,
        ok_only: bool = typer.Option(False, "--ok-only", help="Leave out failed runs."),
    ) -> None:
        """Export a campaign as a tidy table: one row per run, parameter columns, `metric.*`
        columns and `run.*` bookkeeping columns (`run.campaign` names the campaign). For a
        campaign with reference runs, the objective also comes relative to the reference
        measured around each run (`_rel`), each campaign against its own reference runs.

        Example: stortune export demo -o demo.csv

        Example: stortune export localfs-lhs200 localfs-random70 -o data/localfs.csv
        """
        if out.suffix.lower() not in (".parquet", ".pq", ".csv"):
            raise StortuneError(f"{out}: write .csv or .parquet")
        frames = []
        with Store(store, existing=True) as db, reading(db):
            for name in campaigns:
                frame = campaign_frame(db, db.campaign(name), include_failed=not ok_only)
                if frame.empty:
                    raise StortuneError(f"campaign {name!r} has no runs to export")
                frame.insert(0, "run.campaign", name)
                frames.append(frame)
        frame = pd.concat(frames, ignore_index=True)
        with writing(out):
            if out.suffix.lower() == ".csv":
                frame.to_csv(out, index=False)
            else:
                frame.to_parquet(out, index=False)
        console.print(
            f"wrote {len(frame)} runs of {', '.join(map(repr, campaigns))} to {out}",
            highlight=False,
        )

    @app.command("import")
    def import_command(
        path: Path = typer.Argument(..., help="A CSV, Parquet or ARFF table."),
        name: str = typer.Option(None, "--name", "-n", help="Campaign name (default: file name)."),
        metric: list[str] = typer.Option(
            [], "--metric", "-m", help="Metric column(s); default: recognised by convention."
        ),
        space: str = typer.Option(
            None,
            "--space",
            "-s",
            help="Space of the table (default: inferred from the columns, one-hot groups folded).",
        ),
        store: str = StoreOption,
        json_out: bool = JsonOption,
    ) -> None:
        """Import a table of measured configs as a dataset campaign, for ranking and models.

        Example: stortune import ../shared/datasets/moot-promisetune/redis.csv --name redis
        """
        dataset = load_dataset(path, metric or None)
        if not space:  # inferred: the table's one-hot groups become categoricals
            dataset = fold_one_hot(dataset)
        s = load_space(space) if space else space_from_dataset(dataset)
        campaign = name or path.stem
        with Store(store) as db:
            count = db.import_dataset(
                campaign, dataset, yaml.safe_dump(s.to_dict(), sort_keys=False), s.name
            )
        result = {
            "campaign": campaign,
            "runs": count,
            "parameters": dataset.params,
            "metrics": dataset.metrics,
        }
        if json_out:
            print_json(result)
            return
        console.print(
            f"imported {count} rows of {path} as campaign {campaign!r}: "
            f"{len(dataset.params)} parameters, metrics {', '.join(dataset.metrics)}",
            highlight=False,
        )
