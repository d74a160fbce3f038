"""The one way a dashboard page is served: read its data in a session, then render it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Request
from sqlalchemy.orm import Session
from starlette.responses import Response

from web.api.read import read_session
from web.auth import Principal
from web.pages.templating import render


async def show(
    request: Request,
    template: str,
    build: Callable[[Session], dict[str, Any]],
    *,
    principal: Principal,
    **extra: Any,
) -> Response:
    """Build the page's data off the event loop, add the refresh interval, render."""
    data = await read_session(request, build)
    data["refresh_s"] = request.app.state.settings.page_refresh_s
    data["healer"] = request.app.state.settings.healer_enabled  # off: pages say so
    data.update(extra)
    return render(request, template, data, principal=principal)
