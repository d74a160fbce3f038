"""The `fleetmedic` command line: one Typer app, each subcommand group in its own module."""

from __future__ import annotations

import importlib
import os

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
_COMMAND_MODULES = ("server", "db", "bench", "demo", "agent", "explain")


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
    log_level: str = typer.Option(
        None, "--log-level", help="DEBUG, INFO, WARNING or ERROR (FLEETMEDIC_LOG_LEVEL, INFO)."
    ),
    log_json: bool = typer.Option(
        False, "--log-json", help="One JSON object per log line (FLEETMEDIC_LOG_FORMAT=json)."
    ),
) -> None:
    """GPU fleet observability and self-healing."""
    # Exported so `serve --workers N` processes log the same way.
    if verbose or log_level:
        os.environ["FLEETMEDIC_LOG_LEVEL"] = "DEBUG" if verbose else log_level
    if log_json:
        os.environ["FLEETMEDIC_LOG_FORMAT"] = "json"
    level, fmt = _log_settings()
    try:
        configure_logging(level, fmt)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--log-level") from None


def _log_settings() -> tuple[str, str]:
    """Log level and format from the settings; the defaults when the settings are broken (the
    command itself then reports what is wrong with them)."""
    from pydantic import ValidationError

    from timeline.settings import Settings

    try:
        settings = Settings()
    except ValidationError:
        return os.environ.get("FLEETMEDIC_LOG_LEVEL", "INFO"), "text"
    return settings.log_level, settings.log_format


for _name in _COMMAND_MODULES:
    importlib.import_module(f"web.cli.{_name}").register(app)


def main() -> None:
    """Entry point of the `fleetmedic` console command."""
    app()
