"""The dashboard's pages; ROUTERS lists every page router the app includes."""

from __future__ import annotations

from fastapi import APIRouter

from web.pages import entities, failing, fleet, idle, incidents, remediation

ROUTERS: list[APIRouter] = [
    fleet.router,
    idle.router,
    failing.router,
    incidents.router,
    entities.router,
    remediation.router,
]
