"""The `fleetmedic` command: --version, --help on every command, db upgrade/downgrade, bench."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect
from typer.testing import CliRunner

from timeline import __version__, db
from web.cli import app

runner = CliRunner()


def test_version_prints_the_package_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"fleetmedic {__version__}"


def _commands() -> list[list[str]]:
    import typer.main

    group = typer.main.get_command(app)
    out: list[list[str]] = []
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        out.append([name])
        for sub in getattr(cmd, "commands", {}):
            out.append([name, sub])
    return out


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_every_command_has_help(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_serve_demo_db_and_bench_are_registered() -> None:
    names = {c[0] for c in _commands()}
    assert {"serve", "demo", "db", "bench"} <= names


def test_db_upgrade_and_downgrade_from_the_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    result = runner.invoke(app, ["db", "upgrade", "--database-url", url])
    assert result.exit_code == 0, result.output
    engine = db.make_engine(url)
    assert "samples" in inspect(engine).get_table_names()
    result = runner.invoke(app, ["db", "downgrade", "base", "--database-url", url])
    assert result.exit_code == 0, result.output
    assert "samples" not in inspect(engine).get_table_names()
    engine.dispose()


def test_unknown_benchmark_names_the_available_ones() -> None:
    result = runner.invoke(app, ["bench", "no-such-bench", "--json"])
    assert result.exit_code == 2
    assert "ingest" in result.output
