"""``arena export``: an env's recorded matches as a dataset (Parquet or Minari), from the database."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from arena.cli.console import console, fail, progress_bar
from envs.errors import ArenaError


def export(
    env: str = typer.Option(..., "--env", help="Registered env id whose board to export."),
    role: str = typer.Option("", "--role", help="Only this role's seats (default: every seat)."),
    fmt: str = typer.Option("parquet", "--format", help="parquet (steps, matches, agents tables) or minari."),
    out: Path = typer.Option(..., "--out", help="Output folder (created)."),
    database_url: str | None = typer.Option(None, "--database-url",
                                            help="SQLAlchemy URL of the Arena database "
                                                 "(default: ARENA_DATABASE_URL, else the local SQLite file)."),
    chunk: int = typer.Option(8192, min=1, help="Matches re-simulated at a time."),
) -> None:
    """Export the match log of ENV: observations re-simulated from the records, actions, rewards,
    ends, per seat and agent, with agent keys and ratings (docs/datasets.md)."""
    from arena.core.settings import Settings, get_settings
    from arena.datasets import export_board
    from arena.storage.db import repositories as repo
    from arena.storage.wiring import open_database
    from envs.registry import get_spec

    try:
        get_spec(env)
        settings = Settings(database_url=database_url) if database_url else get_settings()
        sessions = open_database(settings)
        with sessions() as session:
            total = repo.count_matches(session, env)
        with progress_bar() as progress:
            task = progress.add_task(f"export {env}", total=total, rate="-")

            def report(r) -> None:
                progress.update(task, completed=r.matches, rate=f"{r.matches_per_s:,.0f}")

            result = export_board(sessions, env, out, fmt, role=role or None, chunk=chunk, on_progress=report)
    except (ArenaError, ValueError) as exc:
        fail(str(exc))
    table = Table(title=f"{env} exported to {out} ({fmt})")
    for col in ("matches", "exported", "steps", "episodes", "skipped", "matches/s"):
        table.add_column(col, justify="right")
    skipped = ", ".join(f"{reason}: {n}" for reason, n in result.skipped.items()) or "-"
    table.add_row(f"{result.matches:,}", f"{result.exported:,}", f"{result.steps:,}",
                  f"{result.episodes:,}" if fmt == "minari" else "-", skipped, f"{result.matches_per_s:,.0f}")
    console.print(table)
    for path in result.files:
        console.print(f"  {path}")


def register(app: typer.Typer) -> None:
    """Attach ``arena export`` to the main ``arena`` app."""
    app.command("export")(export)
