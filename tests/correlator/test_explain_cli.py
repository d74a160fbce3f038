"""`fleetmedic explain [FILE|-] [--json]` and its exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from web.cli import explain as explain_cli

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"


def _app() -> typer.Typer:
    app = typer.Typer()
    explain_cli.register(app)

    @app.callback()
    def _root() -> None:
        """Test root so that `explain` stays a subcommand."""

    return app


def test_json_output_for_a_file_follows_the_contract() -> None:
    path = CORPUS / "010_xid79-rtx5080-journal.txt"
    result = CliRunner().invoke(_app(), ["explain", str(path), "--json"])
    assert result.exit_code == explain_cli.EXIT_EXPLAINED
    out = json.loads(result.stdout)
    assert (out["category"], out["blame"], out["xid"], out["gpu"]) == (
        "gpu_hardware",
        "node",
        79,
        "0000:2b:00.0",
    )


def test_stdin_is_read_with_a_dash_and_text_output_is_readable() -> None:
    text = (CORPUS / "038_cuda-oom-capacity-new-format.txt").read_text("utf-8")
    result = CliRunner().invoke(_app(), ["explain", "-"], input=text)
    assert result.exit_code == 0
    assert "oom_gpu" in result.stdout and "Evidence:" in result.stdout


def test_nothing_recognised_exits_1_with_null_fields() -> None:
    result = CliRunner().invoke(_app(), ["explain", "-", "--json"], input="all good\n")
    assert result.exit_code == explain_cli.EXIT_NOTHING_FOUND
    assert json.loads(result.stdout)["category"] is None


def test_binary_or_missing_input_exits_2_without_a_traceback(tmp_path: Path) -> None:
    blob = tmp_path / "core.bin"
    blob.write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    for args in (["explain", str(blob)], ["explain", str(tmp_path / "missing.log")]):
        result = CliRunner().invoke(_app(), args)
        assert result.exit_code == explain_cli.EXIT_BAD_INPUT
        assert "Traceback" not in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
