"""Logging (issue #8, finding 9): third-party loggers at WARNING unless debugging, a
--log-level flag, and JSON lines on request."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from web.cli import app
from web.logs import THIRD_PARTY, configure_logging


@pytest.fixture(autouse=True)
def _restore_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Leave the root logger and the environment as they were for the tests after these."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in THIRD_PARTY}
    for name in ("FLEETMEDIC_LOG_LEVEL", "FLEETMEDIC_LOG_FORMAT"):
        monkeypatch.setenv(name, "x")  # recorded as it was: the CLI's export is undone after
        monkeypatch.delenv(name)
    yield
    root.handlers, root.level = handlers, level
    for name, lvl in levels.items():
        logging.getLogger(name).setLevel(lvl)


def test_third_party_loggers_stay_at_warning_unless_debugging(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("INFO")
    logging.getLogger("apscheduler.executors.default").info("Running job ... executed")
    logging.getLogger("httpx").info("HTTP Request: POST ... 200 OK")
    logging.getLogger("web.api.ingest").info("something notable")
    err = capsys.readouterr().err
    assert "something notable" in err and "Running job" not in err and "HTTP Request" not in err
    configure_logging("DEBUG")
    logging.getLogger("apscheduler.executors.default").debug("Running job, debugging")
    assert "Running job, debugging" in capsys.readouterr().err


def test_json_logs_are_one_object_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO", "json")
    logging.getLogger("web.api.ingest").warning("node %r: rejected %d", "gpu\nnode", 3)
    (line,) = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert record["level"] == "WARNING" and record["name"] == "web.api.ingest"
    assert record["message"] == "node 'gpu\\nnode': rejected 3" and "time" in record


def test_the_log_level_flag_sets_the_level_and_refuses_an_unknown_one() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["--log-level", "WARNING", "db", "--help"])
    assert result.exit_code == 0 and logging.getLogger().level == logging.WARNING
    bad = runner.invoke(app, ["--log-level", "LOUD", "db", "--help"])
    assert bad.exit_code == 2 and "unknown log level" in bad.output
