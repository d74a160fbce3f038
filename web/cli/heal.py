"""`fleetmedic heal status|plan|approve ID|reject ID|reset-breaker|backtest`: the healer from
the command line, straight on the database (an operator with database access is an admin)."""

from __future__ import annotations

import getpass
import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import typer
from sqlalchemy.orm import Session

from timeline.settings import Settings

T = TypeVar("T")
_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_span(text: str) -> float:
    """'7d', '12h', '90m', '3600' -> seconds."""
    m = _SPAN.match(text)
    if m is None:
        raise typer.BadParameter(f"{text!r} is not a span like 7d, 12h, 90m or 3600")
    return float(m.group(1)) * _UNIT[m.group(2)]


@contextmanager
def _session(database_url: str | None, *, write: bool = False) -> Iterator[Session]:
    from timeline import db

    settings = Settings() if database_url is None else Settings(database_url=database_url)
    engine = db.make_engine(settings.database_url)
    factory = db.make_sessionmaker(engine)
    try:
        if write:
            with db.unit_of_work(factory) as s:
                yield s
        else:
            with factory() as s:
                yield s
    finally:
        engine.dispose()


def _run(database_url: str | None, fn: Callable[[Session], T], *, write: bool = False) -> T:
    from timeline.errors import TimelineError

    try:
        with _session(database_url, write=write) as s:
            return fn(s)
    except TimelineError as exc:  # not found, or not in a state that allows it
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def _line(a: Any) -> str:
    target = a.job_id or a.node or ""
    return (
        f"{a.id:>6} {a.state.value:<9} {a.mode.value:<8} {a.kind.value:<9} "
        f"{a.cluster}:{target:<20} incident {a.incident_id}  {a.reason}"
    )


def _status(s: Session) -> dict[str, Any]:
    from healer import service

    return {
        "breaker": service.get_breaker(s).model_dump(),
        "nodes_kept_out": [h.model_dump() for h in service.held_nodes(s)],
        "actions": [c.model_dump() for c in service.action_counts(s)],
        "unsent_notices": len(service.list_notices(s, unsent=True, limit=10_000)),
        "recent": [_line(a) for a in service.list_actions(s, limit=15)],
    }


DB_OPT = typer.Option(None, "--database-url", help="Overrides FLEETMEDIC_DATABASE_URL.")


def status(database_url: str = DB_OPT, as_json: bool = typer.Option(False, "--json")) -> None:
    """Breaker, nodes kept out, action counts and the newest actions."""
    out = _run(database_url, _status)
    if as_json:
        typer.echo(json.dumps(out, default=str))
        return
    b = out["breaker"]
    typer.echo("breaker: " + (f"TRIPPED ({b['reason']})" if b["tripped"] else "closed"))
    for h in out["nodes_kept_out"]:
        support = f" SUPPORT: {h['support']}" if h["support"] else ""
        typer.echo(f"kept out: {h['cluster']}:{h['node']} ({h['reason']}){support}")
    for c in out["actions"]:
        typer.echo(f"{c['action']:<9} {c['result']:<9} {c['count']}")
    typer.echo(f"unsent notices: {out['unsent_notices']}")
    for line in out["recent"]:
        typer.echo(line)


def plan(database_url: str = DB_OPT) -> None:
    """Actions waiting: in observe mode, proposed, or waiting for an admin's approval."""
    from healer import service

    actions = _run(database_url, lambda s: service.list_actions(s, state="planned", limit=500))
    if not actions:
        typer.echo("nothing planned")
    for a in reversed(actions):
        typer.echo(_line(a))


def _decide(verb: str) -> Callable[..., None]:
    def command(
        action_id: int = typer.Argument(..., help="The action's id (heal plan lists them)."),
        by: str = typer.Option(None, help="Who decides (default: cli:<login>)."),
        database_url: str = DB_OPT,
    ) -> None:
        from healer import service

        who = by or f"cli:{getpass.getuser()}"
        fn = service.approve if verb == "approve" else service.reject
        a = _run(
            database_url, lambda s: fn(s, action_id=action_id, by=who, now=time.time()), write=True
        )
        done = "approved" if verb == "approve" else "rejected"
        typer.echo(f"{done} by {who}: {_line(a)}")

    command.__doc__ = f"{verb.capitalize()} a planned action (admin)."
    return command


def reset_breaker(by: str = typer.Option(None), database_url: str = DB_OPT) -> None:
    """Close the blast-radius breaker (admin); older evidence is not replayed."""
    from healer import safety

    who = by or f"cli:{getpass.getuser()}"
    b = _run(database_url, lambda s: safety.reset_breaker(s, by=who, now=time.time()), write=True)
    typer.echo(f"breaker closed by {who} (epoch {b.epoch})")


def backtest(
    since: str = typer.Option("7d", help="How far back: 7d, 12h, 90m."),
    policy: Path = typer.Option(None, help="A policy file (TOML/YAML) to try."),
    human_hours: float = typer.Option(2.0, help="How long a person takes to act (hours)."),
    database_url: str = DB_OPT,
) -> None:
    """Replay stored incidents through a policy: what would have happened (JSON)."""
    from healer.backtest import backtest as replay
    from healer.policy import PolicyError, load_policy

    try:
        pol = load_policy(policy)
    except PolicyError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    start = time.time() - parse_span(since)
    out = _run(
        database_url,
        lambda s: replay(s, policy=pol, since=start, human_response_s=human_hours * 3600),
    )
    typer.echo(json.dumps(out))


def register(app: typer.Typer) -> None:
    """Add the `heal` group."""
    group = typer.Typer(
        help="The healer: what it did, what it would do, approvals, backtests.",
        no_args_is_help=True,
    )
    group.command("status")(status)
    group.command("plan")(plan)
    group.command("approve")(_decide("approve"))
    group.command("reject")(_decide("reject"))
    group.command("reset-breaker")(reset_breaker)
    group.command("backtest")(backtest)
    app.add_typer(group, name="heal")
