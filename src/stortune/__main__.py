"""`python -m stortune` is the `stortune` command."""

from stortune.cli import main

main()
