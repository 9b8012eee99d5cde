"""`stortune sample`: draw a design of valid configs from a space."""

from __future__ import annotations

from pathlib import Path

import typer

from stortune.bounds import MAX_SAMPLES
from stortune.cli import checks
from stortune.cli.common import console, print_json
from stortune.cli.space import COUNT_LIMIT
from stortune.errors import StortuneError
from stortune.sampling import METHODS, count_text, sample
from stortune.space import load_space
from stortune.space.parameter import MAX_LEVELS, check_levels


def register(app: typer.Typer) -> None:
    @app.command("sample")
    def sample_command(
        space: str = typer.Argument(..., help="A space file (YAML) or a bundled space's name."),
        method: str = typer.Option("lhs", "--method", "-m", help=f"One of {', '.join(METHODS)}."),
        n: int = typer.Option(
            10,
            "-n",
            help=f"How many configs, at most {MAX_SAMPLES:,} (factorial: at most this many; "
            "0 = all).",
        ),
        seed: int = typer.Option(0, help="Random seed (0 to 4,294,967,295).", callback=checks.SEED),
        levels: int = typer.Option(
            3,
            help=f"Factorial: grid levels for numeric parameters (1 to {MAX_LEVELS}).",
            callback=checks.LEVELS,
        ),
        csv: Path | None = typer.Option(
            None, "--csv", help="Write the configs to this CSV file.", callback=checks.OUTPUT_FILE
        ),
        json_out: bool = typer.Option(False, "--json", help="Print the configs as JSON."),
    ) -> None:
        """Draw valid configs by Latin hypercube, random, Monte Carlo or full factorial design.

        Example: stortune sample ext4 --method lhs -n 20 --csv design.csv
        """
        check_arguments(method, n, seed, levels)
        s = load_space(space)
        raw = s.raw_grid_size(levels) if method == "factorial" else 0
        if raw > COUNT_LIMIT:
            raise StortuneError(
                f"the full factorial of {s.name!r} has {count_text(raw)} configs, more than "
                f"{COUNT_LIMIT:,}: use fewer --levels or another --method"
            )
        design = sample(s, method, n, seed, levels)
        if csv is not None:
            try:
                s.to_frame(design.configs).to_csv(csv, index=False)
            except OSError as exc:
                raise StortuneError(f"cannot write {csv}: {exc.strerror or exc}") from None
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
        # a parameter a config does not use (its condition is false) is shown as "-", not NaN
        console.print(frame.to_string(index=False, na_rep="-"), highlight=False)
        for note in design.notes:
            console.print(f"note: {note}", highlight=False)
        if csv is not None:
            console.print(f"wrote {len(design.configs)} configs to {csv}", highlight=False)


def check_arguments(method: str, n: int, seed: int, levels: int) -> None:
    """Refuse, in one line, what would fail deep inside sampling or never finish."""
    least = 0 if method == "factorial" else 1
    if not least <= n <= MAX_SAMPLES:
        raise StortuneError(f"-n must be from {least} to {MAX_SAMPLES:,}, not {n}")
    if seed < 0:
        raise StortuneError(f"--seed must be 0 or more, not {seed}")
    check_levels(levels)
