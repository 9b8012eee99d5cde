"""`stortune space`: list, show and check parameter spaces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from stortune.cli import checks
from stortune.cli.common import console, parse_assignments, print_json
from stortune.outputs import writing
from stortune.sampling import count_text
from stortune.space import bundled_spaces, load_space
from stortune.space.parameter import MAX_LEVELS, check_levels

# Counting the valid configs walks the whole grid (about 300,000 configs a second): bigger grids
# (ceph's has 10**200) are only counted before conditions and constraints.
COUNT_LIMIT = 250_000
WIDE = 120  # terminal columns from which `space show` shows every column
WIDE_COLUMNS = ("parameter", "type", "domain", "default", "unit", "layer", "apply", "active when")
NARROW_COLUMNS = ("parameter", "domain", "default", "active when")


def register(app: typer.Typer) -> None:
    space_app = typer.Typer(
        help="List, show and check parameter spaces.\n\nExample: stortune space show ext4",
        no_args_is_help=True,
    )
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
        columns = WIDE_COLUMNS if console.width >= WIDE else NARROW_COLUMNS
        for column in columns:
            # names stay whole: a user copies them into -c NAME=VALUE
            table.add_column(column, no_wrap=column in ("parameter", "default"))
        for p in s.parameters:
            cells = {
                "parameter": p.name,
                "type": p.kind.value,
                "domain": p.domain_text(),
                "default": str(p.default),
                "unit": p.unit,
                "layer": p.layer,
                "apply": p.cost.value,
                "active when": p.condition.text if p.condition else "",
            }
            table.add_row(*(cells[c] for c in columns))
        console.print(table)
        if columns is NARROW_COLUMNS:
            console.print(
                f"(type, unit, layer and apply show at {WIDE} columns or more, and in --json)",
                highlight=False,
            )
        for c in s.constraints:
            console.print(f"constraint: {c.describe()}", highlight=False)

    @space_app.command("check")
    def check(
        space: str = typer.Argument(..., help="A space file (YAML) or a bundled space's name."),
        config: list[str] = typer.Option(
            [], "--config", "-c", help="Also check a config: NAME=VALUE, repeatable."
        ),
        levels: int = typer.Option(
            3,
            help=f"Grid levels for numeric parameters when counting (1 to {MAX_LEVELS}).",
            callback=checks.LEVELS,
        ),
        json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Check a space file (and optionally a config against it); exit 2 with one line on error.

        Example: stortune space check my-space.yaml -c block_size=4096 -c inode_size=256
        """
        check_levels(levels)
        s = load_space(space)
        raw = s.raw_grid_size(levels)
        result: dict = {
            "space": s.name,
            "parameters": len(s),
            "constraints": len(s.constraints),
            "grid_levels": levels,
            "grid_raw": raw if raw < 10**300 else None,  # JSON numbers beyond are no numbers
            "grid_valid": s.grid_size(levels) if raw <= COUNT_LIMIT else None,
        }
        if config:
            result["config"] = s.validate(parse_assignments(config))
        if json_out:
            print_json(result)
            return
        if result["grid_valid"] is None:
            grid = (
                f"{count_text(raw)} configs before conditions and constraints (too many to count)"
            )
        else:
            grid = f"{result['grid_valid']} valid of {raw}"
        console.print(
            f"ok: space {s.name!r}: {len(s)} parameters, {len(s.constraints)} constraints; "
            f"full factorial ({levels} levels for numeric): {grid}",
            highlight=False,
        )
        if config:
            console.print(f"config ok: {result['config']}", highlight=False)

    @space_app.command("clean")
    def clean_cmd(
        space: str = typer.Argument(..., help="Space file or bundled name (localfs layers)."),
        out: Path = typer.Option(
            None,
            "--out",
            help="Write the cleaned space (washed values out, reasons kept) here.",
            callback=checks.OUTPUT_FILE,
        ),
        image_size: str = typer.Option(
            "2g", "--image-size", help="Size of the loop image.", callback=checks.SIZE
        ),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Apply every value of a space at least once on this machine (mkfs, mount, sysfs,
        sysctl on a loop image stortune makes); values the kernel or the tools refuse are
        washed out, with the reason, in the space written to --out. Needs root.

        Example: stortune space clean stack --out stack-clean.yaml
        """
        import yaml

        from stortune.targets.localfs import LocalFsTarget
        from stortune.workflows.clean import clean_space, cleaned_space

        s = load_space(space)
        target = LocalFsTarget(s, image_size=image_size)
        target.preflight()

        def show(attempt: Any) -> None:
            if json_out:
                return
            verdict = "ok" if attempt.error is None else f"refused: {attempt.error}"
            console.print(
                f"{attempt.parameter}={attempt.value} ({attempt.seconds:.1f} s): {verdict}",
                highlight=False,
                soft_wrap=True,
            )

        result = clean_space(s, target, show)
        if out is not None:
            with writing(out):
                out.write_text(yaml.safe_dump(cleaned_space(s, result), sort_keys=False))
        summary = result.to_dict()
        if json_out:
            print_json(summary)
            return
        console.print(
            f"{s.name}: {summary['applied']} of {summary['values']} values apply on kernel "
            f"{result.kernel}; washed {len(result.washed)}, unreachable "
            f"{len(result.unreachable)}" + (f"; wrote {out}" if out else ""),
            highlight=False,
        )
        for item in [*result.washed, *result.unreachable]:
            console.print(
                f"  {item['parameter']}={item['value']}: {item['reason']}",
                highlight=False,
                soft_wrap=True,
            )
