"""Settings: environment over TOML file, comma-separated tokens, secrets never printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from timeline.settings import Settings


def test_default_database_is_an_sqlite_file_in_the_user_data_dir(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FLEETMEDIC_DATABASE_URL", raising=False)
    s = Settings()
    assert s.database_url.startswith("sqlite:///") and s.database_url.endswith("fleetmedic.db")
    assert str(s.data_dir) in s.database_url


def test_tokens_come_comma_separated_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETMEDIC_AGENT_TOKENS", " tok-a, tok-b ,,")
    assert Settings().agent_token_values() == {"tok-a", "tok-b"}


def test_environment_wins_over_the_toml_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "fleetmedic.toml"
    cfg.write_text('port = 9000\nhost = "0.0.0.0"\nslurm_enabled = true\n')
    monkeypatch.setenv("FLEETMEDIC_CONFIG", str(cfg))
    monkeypatch.setenv("FLEETMEDIC_PORT", "9100")
    s = Settings()
    assert (s.port, s.host, s.slurm_enabled) == (9100, "0.0.0.0", True)


def test_secrets_never_appear_in_repr_or_the_printed_database_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEETMEDIC_AGENT_TOKENS", "super-secret-token")
    monkeypatch.setenv("FLEETMEDIC_DATABASE_URL", "postgresql+psycopg://fm:hunter2@db:5432/fleet")
    s = Settings()
    text = repr(s) + str(s) + s.safe_database_url()
    assert "super-secret-token" not in text and "hunter2" not in text
    assert s.safe_database_url() == "postgresql+psycopg://fm:***@db:5432/fleet"


@pytest.mark.parametrize("value", ["/data/a,/data/b", '["/data/a", "/data/b"]'])
def test_list_settings_take_commas_or_a_json_array(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEETMEDIC_WANDB_DIRS", value)
    assert Settings().wandb_dirs == [Path("/data/a"), Path("/data/b")]
