"""`python -m cloudwise`."""

from cloudwise.cli import main

main()
