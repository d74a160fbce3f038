"""Bearer-token checks: 401 when no usable token is sent, 403 when it is not one we know."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request, status


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="missing or malformed Authorization header; expected 'Bearer <token>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return token.strip()


def _known(token: str, allowed: set[str]) -> bool:
    # Compare against every token in constant time so timing reveals nothing.
    return (
        any(hmac.compare_digest(token.encode(), a.encode()) for a in allowed) if allowed else False
    )


def require_agent(request: Request) -> str:
    """Ingest needs an agent token; returns it (never logged)."""
    token = _bearer(request)
    if not _known(token, request.app.state.settings.agent_token_values()):
        raise HTTPException(status_code=status.HTTP_403_FORBIDDEN, detail="unknown agent token")
    return token


def require_reader(request: Request) -> None:
    """Reads are open unless api_tokens are configured; then a known token is needed."""
    allowed = request.app.state.settings.api_token_values()
    if not allowed:
        return
    token = _bearer(request)
    if not _known(token, allowed | request.app.state.settings.agent_token_values()):
        raise HTTPException(status_code=status.HTTP_403_FORBIDDEN, detail="unknown API token")
