"""Roles, token binding, page login with a session cookie and CSRF, fail-closed token settings."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from timeline.settings import Settings
from web.app import create_app
from web.auth import Role, TokenTable

VIEWER, ADMIN, AGENT = "viewer-token-123456", "admin-token-abcdef", "agent-token-node07"


def _batch(node: str) -> dict[str, object]:
    return {"agent": "a", "node": node, "batch_id": f"batch-{node}-0001"}


@pytest.fixture()
def closed(settings: Settings) -> Iterator[TestClient]:
    """An app whose reads need a token: one viewer, one named admin, one node-bound agent."""
    settings = settings.model_copy(
        update={
            "api_tokens": Settings(api_tokens=f"{VIEWER},admin:alice:{ADMIN}").api_tokens,
            "agent_tokens": Settings(agent_tokens=f"{AGENT}@gpu-node-0*").agent_tokens,
        }
    )
    with TestClient(create_app(settings)) as c:
        yield c


def test_blank_token_lists_fail_closed_at_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETMEDIC_API_TOKENS", " , ")
    with pytest.raises(ValidationError, match="holds no token"):
        Settings()
    monkeypatch.setenv("FLEETMEDIC_API_TOKENS", "admin:")
    with pytest.raises(ValueError, match="empty"):
        TokenTable.from_settings(Settings())


def test_api_tokens_carry_roles_and_names() -> None:
    table = TokenTable.from_settings(
        Settings(api_tokens=f"{VIEWER},admin:alice:{ADMIN}", agent_tokens=f"{AGENT}@n*")
    )
    viewer, admin, agent = table.lookup(VIEWER), table.lookup(ADMIN), table.lookup(AGENT)
    assert viewer is not None and viewer.role is Role.VIEWER and VIEWER not in viewer.name
    assert admin is not None and admin.role is Role.ADMIN and admin.name == "alice"
    assert agent is not None and agent.role is Role.AGENT and agent.may_write_node("n7")
    assert not agent.may_write_node("other") and table.lookup("nope") is None
    assert admin.has(Role.VIEWER) and not viewer.has(Role.ADMIN) and not agent.has(Role.VIEWER)


def test_agent_token_bound_to_nodes_cannot_write_another_node(closed: TestClient) -> None:
    auth = {"Authorization": f"Bearer {AGENT}"}
    ok = closed.post("/api/v1/ingest", json=_batch("gpu-node-07"), headers=auth)
    assert ok.status_code == 200, ok.text
    other = closed.post("/api/v1/ingest", json=_batch("login-01"), headers=auth)
    assert other.status_code == 403 and "login-01" in other.text


def test_agent_tokens_do_not_read_and_viewer_tokens_do_not_write(closed: TestClient) -> None:
    agent = {"Authorization": f"Bearer {AGENT}"}
    assert closed.get("/api/v1/nodes", headers=agent).status_code == 403
    viewer = {"Authorization": f"Bearer {VIEWER}"}
    assert closed.get("/api/v1/nodes", headers=viewer).status_code == 200
    refused = closed.post("/api/v1/ingest", json=_batch("gpu-node-01"), headers=viewer)
    assert refused.status_code == 403


def test_browser_logs_in_with_a_token_and_the_page_then_works_by_cookie(
    closed: TestClient,
) -> None:
    first = closed.get("/", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"].startswith("/login")
    wrong = closed.post("/login", data={"token": "guess", "next": "/"}, follow_redirects=False)
    assert wrong.status_code == 403 and "not a viewer or admin token" in wrong.text
    agent = closed.post("/login", data={"token": AGENT, "next": "/"}, follow_redirects=False)
    assert agent.status_code == 403  # agent tokens never open pages
    done = closed.post("/login", data={"token": ADMIN, "next": "/"}, follow_redirects=False)
    assert done.status_code == 303 and "fleetmedic_session" in done.headers["set-cookie"]
    assert ADMIN not in done.headers["set-cookie"]
    page = closed.get("/")
    assert page.status_code == 200 and "alice (admin)" in page.text
    assert closed.get("/api/v1/nodes").status_code == 200  # the session reads the API too


def test_login_never_redirects_to_another_site(closed: TestClient) -> None:
    for target in ("https://evil.example/", "//evil.example/x", "javascript:alert(1)"):
        r = closed.post("/login", data={"token": VIEWER, "next": target}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/"


def test_cross_site_login_post_is_refused(closed: TestClient) -> None:
    r = closed.post("/login", data={"token": VIEWER}, headers={"Origin": "https://evil.example"})
    assert r.status_code == 403


def test_page_posts_need_the_session_csrf_token(closed: TestClient) -> None:
    closed.post("/login", data={"token": VIEWER, "next": "/"})
    page = closed.get("/").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert token is not None
    refused = closed.post("/logout", data={}, follow_redirects=False)
    assert refused.status_code == 403 and "CSRF" in refused.text
    assert closed.get("/").status_code == 200  # still logged in
    out = closed.post("/logout", data={"csrf_token": token.group(1)}, follow_redirects=False)
    assert out.status_code == 303
    assert closed.get("/", follow_redirects=False).status_code == 303  # logged out


def test_a_revoked_token_ends_its_sessions(settings: Settings) -> None:
    secret = Settings(session_secret="fixed-secret-for-test").session_secret
    with_tokens = settings.model_copy(
        update={"api_tokens": Settings(api_tokens=VIEWER).api_tokens, "session_secret": secret}
    )
    with TestClient(create_app(with_tokens)) as c:
        c.post("/login", data={"token": VIEWER})
        cookie = c.cookies.get("fleetmedic_session")
    assert cookie
    with TestClient(create_app(with_tokens)) as c:  # same secret, same token: still logged in
        c.cookies.set("fleetmedic_session", cookie)
        assert c.get("/", follow_redirects=False).status_code == 200
    rotated = with_tokens.model_copy(
        update={"api_tokens": Settings(api_tokens="another-viewer-token").api_tokens}
    )
    with TestClient(create_app(rotated)) as c:  # same secret, token removed: logged out
        c.cookies.set("fleetmedic_session", cookie)
        assert c.get("/", follow_redirects=False).status_code == 303
