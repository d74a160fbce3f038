"""`fleetmedic db ...`: schema management."""

from __future__ import annotations

import typer

from timeline.settings import Settings


def register(app: typer.Typer) -> None:
    """Add the `db` group."""
    group = typer.Typer(help="Database schema management (Alembic).", no_args_is_help=True)

    @group.command("upgrade")
    def upgrade(
        revision: str = typer.Argument("head", help="Target revision."),
        database_url: str = typer.Option(None, help="Overrides FLEETMEDIC_DATABASE_URL."),
        wait: float = typer.Option(
            0.0, help="Seconds to wait for the database to answer first (migration jobs)."
        ),
    ) -> None:
        """Upgrade the schema to a revision (default: head)."""
        from timeline import db

        settings = Settings() if database_url is None else Settings(database_url=database_url)
        if wait > 0:
            typer.echo(f"waiting up to {wait:.0f} s for {settings.safe_database_url()}", err=True)
            db.wait_for_database(settings.database_url, timeout_s=wait)
        db.upgrade(settings.database_url, revision)
        typer.echo(f"database {settings.safe_database_url()} at {revision}")

    @group.command("downgrade")
    def downgrade(
        revision: str = typer.Argument(..., help="Target revision, e.g. -1 or base."),
        database_url: str = typer.Option(None, help="Overrides FLEETMEDIC_DATABASE_URL."),
    ) -> None:
        """Downgrade the schema to a revision."""
        from timeline import db

        settings = Settings() if database_url is None else Settings(database_url=database_url)
        db.downgrade(settings.database_url, revision)
        typer.echo(f"database {settings.safe_database_url()} at {revision}")

    app.add_typer(group, name="db")
