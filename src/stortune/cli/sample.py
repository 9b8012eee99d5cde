"""`stortune sample`: draw a design of valid configs from a space."""

from __future__ import annotations

from pathlib import Path

import typer

from stortune.cli.common import console, print_json
from stortune.sampling import METHODS, sample
from stortune.space import load_space


def register(app: typer.Typer) -> None:
    @app.command("sample")
    def sample_command(
        space: str = typer.Argument(..., help="A space file (YAML) or a bundled space's name."),
        method: str = typer.Option("lhs", "--method", "-m", help=f"One of {', '.join(METHODS)}."),
        n: int = typer.Option(
            10, "-n", help="How many configs (factorial: at most this many; 0 = all)."
        ),
        seed: int = typer.Option(0, help="Random seed."),
        levels: int = typer.Option(3, help="Factorial: grid levels for numeric parameters."),
        csv: Path | None = typer.Option(None, "--csv", help="Write the configs to this CSV file."),
        json_out: bool = typer.Option(False, "--json", help="Print the configs as JSON."),
    ) -> None:
        """Draw valid configs by Latin hypercube, random, Monte Carlo or full factorial design.

        Example: stortune sample ext4 --method lhs -n 20 --csv design.csv
        """
        s = load_space(space)
        design = sample(s, method, n, seed, levels)
        if csv is not None:
            s.to_frame(design.configs).to_csv(csv, index=False)
        if json_out:
            print_json(
                {
                    "method": design.method,
                    "configs": design.configs,
                    "repaired": design.repaired,
                    "resampled": design.resampled,
                    "notes": design.notes,
                }
            )
            return
        frame = s.to_frame(design.configs)
        console.print(frame.to_string(index=False), highlight=False)
        for note in design.notes:
            console.print(f"note: {note}", highlight=False)
        if csv is not None:
            console.print(f"wrote {len(design.configs)} configs to {csv}", highlight=False)
