"""Page login: a viewer or admin token, once, for a signed session cookie; logout ends it."""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from web import auth
from web.pages.templating import render

router = APIRouter(include_in_schema=False)


def _local_path(target: str | None) -> str:
    """Only same-site paths: `next` must never send a person to another host."""
    if not target:
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target


def _same_origin(request: Request) -> None:
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.url.netloc:
        raise HTTPException(403, detail="cross-site login refused")


@router.get("/login")
async def login_page(request: Request, next: str | None = None) -> Response:
    """The login form."""
    return render(request, "login.html.jinja", {"next": _local_path(next), "error": None})


@router.post("/login")
async def login_submit(
    request: Request, token: str = Form(..., max_length=4096), next: str = Form("/")
) -> Response:
    """Check the token; on success set the session and go back where the person was."""
    _same_origin(request)
    principal = auth.login(request, token.strip())
    if principal is None:
        data = {"next": _local_path(next), "error": "That token is not a viewer or admin token."}
        response = render(request, "login.html.jinja", data)
        response.status_code = 403
        return response
    return RedirectResponse(_local_path(next), status_code=303)


@router.post("/logout")
async def logout_submit(
    request: Request, principal: auth.Principal = Depends(auth.require_viewer)
) -> Response:
    """End the session (CSRF-checked like every page POST)."""
    auth.logout(request)
    return RedirectResponse("/login", status_code=303)
