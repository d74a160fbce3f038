"""`fleetmedic explain [FILE|-] [--json]`: explain a failure from raw text, no store needed.

Exit codes: 0 a failure was recognised and explained; 1 the text was read but shows no failure
fleetmedic recognises (the JSON still prints, with null fields); 2 the input could not be read
(missing file, binary data).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

EXIT_EXPLAINED = 0
EXIT_NOTHING_FOUND = 1
EXIT_BAD_INPUT = 2


def _read(source: str) -> bytes:
    if source == "-":
        return sys.stdin.buffer.read()
    return Path(source).read_bytes()


def register(app: typer.Typer) -> None:
    """Add the `explain` command."""

    @app.command("explain")
    def explain(
        source: str = typer.Argument(
            "-", help="A kernel log, job output, sacct/kubectl/nvidia-smi/DCGM text; - is stdin."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    ) -> None:
        """Explain why a GPU job failed, from raw text (exit 0 explained, 1 nothing, 2 bad "
        "input)."""
        from correlator.explain import ExplainInputError, explain_bytes, human

        try:
            result = explain_bytes(_read(source))
        except (OSError, ExplainInputError) as exc:
            if as_json:
                typer.echo(json.dumps({"error": str(exc)}))
            typer.echo(f"fleetmedic explain: {exc}", err=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None
        typer.echo(json.dumps(result.to_dict()) if as_json else human(result))
        raise typer.Exit(EXIT_EXPLAINED if result.category else EXIT_NOTHING_FOUND)
