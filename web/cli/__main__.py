"""`python -m web.cli` runs the fleetmedic command."""

from web.cli import main

main()
