"""Settings for every fleetmedic process: environment (FLEETMEDIC_*) and an optional TOML file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import platformdirs
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from sqlalchemy.engine import make_url


def default_data_dir() -> Path:
    """The per-user directory where the embedded database and spools live."""
    return Path(platformdirs.user_data_dir("fleetmedic", appauthor=False))


def default_database_url() -> str:
    """An SQLite file in the per-user data directory."""
    return f"sqlite:///{default_data_dir() / 'fleetmedic.db'}"


def _split_tokens(value: Any) -> Any:
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    return value


class Settings(BaseSettings):
    """Configuration; every field can be set as FLEETMEDIC_<NAME> or in the TOML config file."""

    model_config = SettingsConfigDict(env_prefix="FLEETMEDIC_", extra="ignore")

    database_url: str = Field(default_factory=default_database_url)
    host: str = "127.0.0.1"
    port: int = 8080
    # Agents authenticate ingest with one of these (comma-separated in the environment).
    agent_tokens: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    # When set, the read API and pages require one of these; empty means open reads.
    api_tokens: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    max_body_bytes: int = 16 * 1024 * 1024
    max_batch_items: int = 50_000
    log_level: str = "INFO"
    data_dir: Path = Field(default_factory=default_data_dir)
    page_refresh_s: int = 10
    idle_util_threshold: float = 5.0  # percent; allocated GPUs at or below this count as idle

    # --- agent (node-side sources) ---

    # --- slurm (cluster source in the server) ---

    # --- kubernetes (cluster source in the server) ---

    # --- wandb ---

    # --- correlator ---

    _split = field_validator("agent_tokens", "api_tokens", mode="before")(_split_tokens)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Init args win over the environment, which wins over the config file."""
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get("FLEETMEDIC_CONFIG")
        if config_file:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=config_file))
        return tuple(sources)

    def safe_database_url(self) -> str:
        """The database URL with any password masked, for logs and banners."""
        return make_url(self.database_url).render_as_string(hide_password=True)

    def agent_token_values(self) -> set[str]:
        """The plain agent tokens, for comparison only."""
        return {t.get_secret_value() for t in self.agent_tokens}

    def api_token_values(self) -> set[str]:
        """The plain read-API tokens, for comparison only."""
        return {t.get_secret_value() for t in self.api_tokens}
