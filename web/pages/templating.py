"""The one Jinja2 environment of the pages: autoescape on for every template, whatever its name.

Anything shown may be a cluster user's text (job names, log lines), so nothing is rendered raw
unless a template says `|safe` on a value we built ourselves.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi import HTTPException, Request
from fastapi.templating import Jinja2Templates
from starlette.responses import Response

from web import auth
from web.pages import filters

templates = Jinja2Templates(directory=str(Path(__file__).resolve().parent.parent / "templates"))
templates.env.autoescape = True
templates.env.filters["clock"] = lambda ts: time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))
filters.register(templates.env)


def render(
    request: Request, name: str, data: dict[str, Any], *, principal: auth.Principal | None = None
) -> Response:
    """Render a page with the caller and the CSRF token every form needs."""
    context = dict(data)
    context["principal"] = principal
    context["csrf_token"] = auth.csrf_token(request)
    return templates.TemplateResponse(request, name, context)


class LoginRequired(Exception):
    """A page was asked for without a usable login; the app redirects to /login."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


def page_role(role: auth.Role) -> Any:
    """Like auth.require_role for pages: a person with no login is sent to the login form."""
    check = auth.require_role(role)

    async def dependency(request: Request) -> auth.Principal:
        try:
            principal: auth.Principal = await check(request)
        except HTTPException as exc:
            if exc.status_code == 401:
                raise LoginRequired(request.url.path) from None
            raise
        return principal

    dependency.__name__ = f"page_{role.value}"
    return dependency


page_viewer = page_role(auth.Role.VIEWER)
page_admin = page_role(auth.Role.ADMIN)
