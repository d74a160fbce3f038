"""The README documents every setting and names the two set-up commands CI relies on."""

from __future__ import annotations

from pathlib import Path

from timeline.settings import Settings

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_every_setting_is_in_the_readme_configuration_table() -> None:
    missing = [name for name in Settings.model_fields if f"`{name}`" not in README]
    assert missing == [], f"document these settings in README.md: {missing}"


def test_readme_gives_the_two_setup_commands_and_ci_runs_the_test_one() -> None:
    assert "make demo" in README and "make test" in README
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert "make test" in ci and "REQUIRE_POSTGRES=1" in ci and "REQUIRE_SLURM=1" in ci
