"""The `fleetmedic` command line: one Typer app, each subcommand group in its own module."""

from __future__ import annotations

import importlib
import logging

import typer

from timeline import __version__
from web.logs import configure_logging

app = typer.Typer(
    name="fleetmedic",
    help="GPU fleet observability and self-healing for Slurm and Kubernetes clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module defines register(app); imports stay lazy inside the commands so that
# `fleetmedic agent` on a GPU node does not load the web server.
_COMMAND_MODULES = ("server", "db", "bench", "demo", "agent", "explain", "heal")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fleetmedic {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging."),
) -> None:
    """GPU fleet observability and self-healing."""
    configure_logging(logging.DEBUG if verbose else logging.INFO)


for _name in _COMMAND_MODULES:
    importlib.import_module(f"web.cli.{_name}").register(app)


def main() -> None:
    """Entry point of the `fleetmedic` console command."""
    app()
