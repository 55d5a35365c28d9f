"""`python -m symphony`."""

from symphony.cli import main

main()
