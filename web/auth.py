"""Who is asking: bearer tokens with roles, page logins by session cookie, CSRF on page POSTs.

Roles (design.md, "Roles"): `agent` writes its own node's data; `viewer` reads; `admin` reads and
approves, rejects and resets. Tokens come from settings:

- `agent_tokens`: `TOKEN` or `TOKEN@NODE_GLOB` (the agent may only write nodes matching the glob);
- `api_tokens`: `[ROLE:[NAME:]]TOKEN` with ROLE `viewer` (the default) or `admin`; NAME shows in
  audits ("approved by alice"); without one a token is named by a short hash of itself.

When no api token is set, reads are open (anyone is a viewer); admin work always needs an admin
token. Pages log in with a token once and then carry a signed session cookie; every page POST
carries the session's CSRF token. Tokens are compared in constant time and never logged.
"""

from __future__ import annotations

import enum
import fnmatch
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Any

from fastapi import HTTPException, Request, status

from timeline.settings import Settings

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
_SESSION_KEY = "fm"


class Role(enum.StrEnum):
    """What a principal may do."""

    AGENT = "agent"
    VIEWER = "viewer"
    ADMIN = "admin"


# Which roles satisfy a required role: an admin may do what a viewer may; agents only write.
_SATISFIES: dict[Role, frozenset[Role]] = {
    Role.AGENT: frozenset({Role.AGENT}),
    Role.VIEWER: frozenset({Role.VIEWER, Role.ADMIN}),
    Role.ADMIN: frozenset({Role.ADMIN}),
}


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: its name (for audits), role and, for agents, the nodes it owns."""

    name: str
    role: Role
    node_glob: str | None = None  # agents bound to nodes; None: any node
    via: str = "bearer"  # bearer | session | open (reads open to anyone)
    token_id: str | None = None  # short hash of the token, never the token

    def has(self, role: Role) -> bool:
        """True when this principal may act in `role`."""
        return self.role in _SATISFIES[role]

    def may_write_node(self, node: str) -> bool:
        """True when this agent may write data of `node`."""
        return self.node_glob is None or fnmatch.fnmatchcase(node, self.node_glob)


def token_id(token: str) -> str:
    """A short, stable, non-reversible name of a token for logs and audits."""
    return hashlib.sha256(token.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class _Entry:
    token: bytes
    principal: Principal


def _api_entry(raw: str) -> _Entry:
    parts = raw.split(":", 2)
    role, name, token = Role.VIEWER, None, raw
    if len(parts) >= 2 and parts[0] in (Role.VIEWER.value, Role.ADMIN.value):
        role = Role(parts[0])
        name, token = (parts[1], parts[2]) if len(parts) == 3 else (None, parts[1])
    if not token.strip():
        raise ValueError(f"an api token for role {role.value} is empty")
    tid = token_id(token)
    return _Entry(token.encode(), Principal(name or f"token:{tid}", role, token_id=tid))


def _agent_entry(raw: str) -> _Entry:
    token, _, glob = raw.partition("@")
    if not token.strip():
        raise ValueError("an agent token is empty")
    tid = token_id(token)
    name = f"agent@{glob}" if glob else f"agent:{tid}"
    return _Entry(token.encode(), Principal(name, Role.AGENT, node_glob=glob or None, token_id=tid))


@dataclass
class TokenTable:
    """Every configured token with its principal; built once per app from settings."""

    entries: list[_Entry] = field(default_factory=list)
    reads_open: bool = True

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenTable:
        """Parse the token settings; a malformed entry is a ValueError at start-up (fail closed)."""
        api = [_api_entry(t.get_secret_value()) for t in settings.api_tokens]
        agents = [_agent_entry(t.get_secret_value()) for t in settings.agent_tokens]
        return cls(entries=api + agents, reads_open=not api)

    def lookup(self, token: str) -> Principal | None:
        """The principal of `token`, comparing against every entry in constant time."""
        given, found = token.encode(), None
        for entry in self.entries:
            if hmac.compare_digest(given, entry.token) and found is None:
                found = entry.principal
        return found

    def by_id(self, tid: str) -> Principal | None:
        """The principal whose token has this id (a session names its token by id)."""
        for entry in self.entries:
            if entry.principal.token_id == tid:
                return entry.principal
        return None

    def session_secret(self, settings: Settings) -> str:
        """The key that signs session cookies: the setting, else derived from every token.

        Derived, it is the same on every replica with the same tokens and changes (logging
        everyone out) when the tokens change; a holder of one token cannot compute it.
        """
        if settings.session_secret is not None:
            return settings.session_secret.get_secret_value()
        material = b"\0".join(sorted(e.token for e in self.entries)) or secrets.token_bytes(32)
        return hashlib.sha256(b"fleetmedic-session\0" + material).hexdigest()


def _tokens(request: Request) -> TokenTable:
    table: TokenTable = request.app.state.tokens
    return table


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="malformed Authorization header; expected 'Bearer <token>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return token.strip()


def _session(request: Request) -> dict[str, Any]:
    if "session" not in request.scope:
        return {}
    data = request.session.get(_SESSION_KEY)
    return data if isinstance(data, dict) else {}


def authenticate(request: Request) -> Principal | None:
    """The caller by bearer token, else by page session, else anonymous when reads are open.

    An unknown bearer token is a 403 (never silently anonymous); no credential is None.
    """
    table = _tokens(request)
    token = _bearer(request)
    if token is not None:
        principal = table.lookup(token)
        if principal is None:
            raise HTTPException(status.HTTP_403_FORBIDDEN, detail="unknown token")
        return principal
    sess = _session(request)
    tid = sess.get("tid")
    if isinstance(tid, str):
        known = table.by_id(tid)  # a revoked token ends its sessions at once
        if known is not None and known.role is not Role.AGENT:
            return Principal(known.name, known.role, via="session", token_id=known.token_id)
    if table.reads_open:
        return Principal("anonymous", Role.VIEWER, via="open")
    return None


def check_csrf(request: Request, given: str | None) -> None:
    """Raise 403 unless `given` is the session's CSRF token (constant-time compare)."""
    expected = _session(request).get("csrf")
    if not (isinstance(expected, str) and given and hmac.compare_digest(expected, given)):
        raise HTTPException(status.HTTP_403_FORBIDDEN, detail="missing or wrong CSRF token")


async def _csrf_from_request(request: Request) -> str | None:
    header = request.headers.get(CSRF_HEADER)
    if header:
        return header
    if request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        form = await request.form()  # Starlette caches it: the handler reads it again for free
        value = form.get(CSRF_FIELD)
        return value if isinstance(value, str) else None
    return None


def require_role(role: Role) -> Any:
    """A FastAPI dependency: the caller's Principal when it holds `role`, else 401/403.

    A cookie-authenticated (page) request that changes state must carry the session's CSRF
    token, as the `X-CSRF-Token` header or a `csrf_token` form field; bearer calls need none
    (a browser never attaches a bearer token on its own).
    """

    async def dependency(request: Request) -> Principal:
        principal = authenticate(request)
        if principal is None or (principal.via == "open" and role is not Role.VIEWER):
            raise HTTPException(
                status_code=status.HTTP_401_UNAUTHORIZED,
                detail=f"{role.value} token required",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not principal.has(role):
            raise HTTPException(status.HTTP_403_FORBIDDEN, detail=f"needs the {role.value} role")
        if principal.via == "session" and request.method not in SAFE_METHODS:
            check_csrf(request, await _csrf_from_request(request))
        return principal

    dependency.__name__ = f"require_{role.value}"
    return dependency


require_agent = require_role(Role.AGENT)
require_viewer = require_role(Role.VIEWER)
require_admin = require_role(Role.ADMIN)
# The read API's and pages' dependency (kept under its old name for the routers).
require_reader = require_viewer


def login(request: Request, token: str) -> Principal | None:
    """Start a page session for a viewer or admin token; None when the token is not one."""
    principal = _tokens(request).lookup(token)
    if principal is None or principal.role is Role.AGENT:
        return None
    request.session[_SESSION_KEY] = {"tid": principal.token_id, "csrf": secrets.token_urlsafe(24)}
    return principal


def logout(request: Request) -> None:
    """End the page session."""
    request.session.pop(_SESSION_KEY, None)


def csrf_token(request: Request) -> str | None:
    """The session's CSRF token, for forms and the pages' fetch calls (None without a session)."""
    value = _session(request).get("csrf")
    return value if isinstance(value, str) else None
