"""Schemathesis over every endpoint of the live app, on SQLite and PostgreSQL (issue #8):
valid and invalid requests from the published OpenAPI, each sent with a valid token, an
unknown token and none. Zero 5xx allowed. The example budget keeps the whole run (both
backends) under three minutes on the 2-core CI machine.

The operations are driven with Hypothesis directly (schemathesis' strategies per operation)
rather than through its pytest plugin, whose fixture loader does not run on pytest 9.
"""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from timeline.settings import Settings

pytestmark = [pytest.mark.slow, pytest.mark.integration]

AGENT, VIEWER = "fuzz-agent-token", "fuzz-viewer-token"
EXAMPLES = 20  # per operation, mode and backend; each example is sent with three tokens
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


@pytest.fixture()
def fuzz_settings(settings: Settings) -> Settings:
    """Reads need a token, so the fuzzer meets every auth path too."""
    settings.api_tokens = Settings(api_tokens=VIEWER).api_tokens
    settings.agent_tokens = Settings(agent_tokens=AGENT).agent_tokens
    return settings


def _send_with_every_token(case: schemathesis.Case, base_url: str) -> None:
    good = AGENT if case.path.endswith("/ingest") else VIEWER
    for token in (good, "not-a-known-token", None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            response = case.call(base_url=base_url, headers=headers, timeout=30)
        except httpx.HTTPError as exc:  # the server dropped the connection: as bad as a 500
            raise AssertionError(f"{case.method} {case.formatted_path}: {exc!r}") from exc
        assert response.status_code < 500, (
            f"{case.method} {case.formatted_path} (token {token!r}) -> "
            f"{response.status_code}: {response.text[:500]}\n{case.as_curl_command()}"
        )


def test_no_request_to_any_endpoint_gets_a_server_error(
    fuzz_settings: Settings, live_server: str
) -> None:
    schema = schemathesis.openapi.from_url(f"{live_server}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10, [op.label for op in operations]
    failures: list[str] = []
    for op in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @FUZZ
            @given(case=op.as_strategy(generation_mode=mode))
            def fuzz(case: schemathesis.Case) -> None:
                _send_with_every_token(case, live_server)

            try:
                fuzz()
            except Unsatisfiable:  # nothing to make invalid (an operation without parameters)
                assert mode is GenerationMode.NEGATIVE, op.label
            except AssertionError as exc:
                failures.append(f"{op.label} ({mode.value}): {exc}")
    assert failures == [], "\n\n".join(failures)
