"""The dashboard's pages; ROUTERS lists every page router the app includes."""

from __future__ import annotations

from fastapi import APIRouter

from web.pages import entities, failing, fleet, idle, incidents, lists, remediation

ROUTERS: list[APIRouter] = [
    fleet.router,
    idle.router,
    failing.router,
    incidents.router,
    lists.router,  # before entities: /jobs/ is the list, not a job with an empty id
    entities.router,
    remediation.router,
]
