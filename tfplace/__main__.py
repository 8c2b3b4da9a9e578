"""`python -m tfplace VERB ...` runs the tfplace command."""

from tfplace.cli.main import run_main

run_main()
