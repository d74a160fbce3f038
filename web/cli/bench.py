"""`fleetmedic bench NAME --json`: run one benchmark module from benchmarks/."""

from __future__ import annotations

import importlib
import json
import pkgutil

import typer


def available() -> list[str]:
    """Names of the benchmarks (modules in benchmarks/ that define run())."""
    import benchmarks

    names = []
    for info in pkgutil.iter_modules(benchmarks.__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"benchmarks.{info.name}")
        if hasattr(mod, "run"):
            names.append(info.name)
    return sorted(names)


def register(app: typer.Typer) -> None:
    """Add the `bench` command."""

    @app.command(
        "bench",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )
    def bench(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="Benchmark name (see --list)."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    ) -> None:
        """Run a benchmark; extra options go to it (e.g. --backend postgres --seconds 10)."""
        names = available()
        if name not in names:
            typer.echo(f"unknown benchmark {name!r}; available: {', '.join(names)}", err=True)
            raise typer.Exit(2)
        from benchmarks._procs import loop_ms

        start_loop_ms = loop_ms()  # the machine's state, beside figures it moves (loop_ms)
        result = importlib.import_module(f"benchmarks.{name}").run(list(ctx.args))
        result["machine_loop_ms_start"], result["machine_loop_ms_end"] = start_loop_ms, loop_ms()
        if as_json:
            typer.echo(json.dumps(result))
        else:
            for key, value in result.items():
                typer.echo(f"{key}: {value}")
