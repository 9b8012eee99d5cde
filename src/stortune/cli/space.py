"""`stortune space`: list, show and check parameter spaces."""

from __future__ import annotations

import typer
from rich.table import Table

from stortune.cli.common import console, parse_assignments, print_json
from stortune.space import bundled_spaces, load_space


def register(app: typer.Typer) -> None:
    space_app = typer.Typer(help="List, show and check parameter spaces.", no_args_is_help=True)
    app.add_typer(space_app, name="space")

    @space_app.command("list")
    def list_spaces(json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """List the bundled spaces.

        Example: stortune space list
        """
        names = bundled_spaces()
        if json_out:
            print_json(names)
            return
        for name in names:
            console.print(name)

    @space_app.command("show")
    def show(
        space: str = typer.Argument(..., help="A space file (YAML) or a bundled space's name."),
        json_out: bool = typer.Option(False, "--json", help="Print the space as JSON."),
    ) -> None:
        """Show a space's parameters, domains, defaults and constraints.

        Example: stortune space show ext4
        """
        s = load_space(space)
        if json_out:
            print_json(s.to_dict())
            return
        table = Table(title=f"space {s.name}: {len(s)} parameters", title_justify="left")
        for column in (
            "parameter",
            "type",
            "domain",
            "default",
            "unit",
            "layer",
            "apply",
            "active when",
        ):
            table.add_column(column)
        for p in s.parameters:
            table.add_row(
                p.name,
                p.kind.value,
                p.domain_text(),
                str(p.default),
                p.unit,
                p.layer,
                p.cost.value,
                p.condition.text if p.condition else "",
            )
        console.print(table)
        for c in s.constraints:
            console.print(f"constraint: {c.describe()}", highlight=False)

    @space_app.command("check")
    def check(
        space: str = typer.Argument(..., help="A space file (YAML) or a bundled space's name."),
        config: list[str] = typer.Option(
            [], "--config", "-c", help="Also check a config: NAME=VALUE, repeatable."
        ),
        levels: int = typer.Option(3, help="Grid levels for numeric parameters when counting."),
        json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Check a space file (and optionally a config against it); exit 2 with one line on error.

        Example: stortune space check my-space.yaml -c block_size=4096 -c inode_size=256
        """
        s = load_space(space)
        result: dict = {
            "space": s.name,
            "parameters": len(s),
            "constraints": len(s.constraints),
            "grid_levels": levels,
            "grid_raw": s.raw_grid_size(levels),
            "grid_valid": s.grid_size(levels),
        }
        if config:
            result["config"] = s.validate(parse_assignments(config))
        if json_out:
            print_json(result)
            return
        console.print(
            f"ok: space {s.name!r}: {len(s)} parameters, {len(s.constraints)} constraints; "
            f"full factorial ({levels} levels for numeric): {result['grid_valid']} valid of "
            f"{result['grid_raw']}",
            highlight=False,
        )
        if config:
            console.print(f"config ok: {result['config']}", highlight=False)
