"""Output of every ``arena`` command: one rich console, errors, progress bars."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

console = Console()
err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and end the command with exit ``code``.

    Exit 2 is for what the user can fix (bad options, a 4xx answer, a missing file);
    1 for a server that fails or cannot be reached.
    """
    err_console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def progress_bar() -> Progress:
    """A progress bar with a matches/s column (fill ``rate`` when updating a task)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]:>8} matches/s"),
        TimeRemainingColumn(),
        console=console,
    )


def plain_table(title: str, columns: Iterable[str], rows: Iterable[Iterable[str]]) -> Table:
    """A table titled ``title``: a left-aligned column per name in ``columns``, a row per cell list in ``rows``."""
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    return table


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _settle(left: int | None) -> str:
    return "-" if left is None else ("settled" if left == 0 else f"~{left}")


def leaderboard_table(board: dict[str, Any]) -> Table:
    """A leaderboard (``LeaderboardPublic`` as JSON): rank range, TrueSkill with its interval,
    W/D/L and the matches left until each agent's rating settles."""
    table = Table(title=f"{board.get('env')} leaderboard ({board.get('role')}), "
                        f"{board.get('count', len(board['data']))} agents")
    probed = any(row.get("probe_win_rate") is not None for row in board["data"])
    for col in ("#", "rank range", "id", "agent", "mu", "sigma", "mu-3sigma", "interval",
                "games", "W", "D", "L", "win rate", "to settle", *(["exploitability @ budget"] if probed else [])):
        table.add_column(col, justify="left" if col == "agent" else "right", no_wrap=col == "agent")
    for row in board["data"]:
        lo, hi = row.get("rank_lo"), row.get("rank_hi")
        probe = [] if not probed else [_probe(row)]
        table.add_row(
            str(row["rank"]), "-" if lo is None else (str(lo) if lo == hi else f"{lo}-{hi}"),
            str(row["agent_id"]), row.get("name") or row.get("key", ""), _fmt(row.get("mu")),
            _fmt(row.get("sigma")), _fmt(row.get("conservative")),
            f"{_fmt(row.get('ci_low'))}..{_fmt(row.get('ci_high'))}",
            _fmt(row.get("games")), _fmt(row.get("wins")), _fmt(row.get("draws")),
            _fmt(row.get("losses")), _fmt(row.get("win_rate"), 3), _settle(row.get("expected_matches_to_settle")),
            *probe,
        )
    return table


def _probe(row: dict[str, Any]) -> str:
    """The latest probe's exploiter win rate, its 95% interval and budget (``-``: not probed)."""
    if row.get("probe_win_rate") is None:
        return "-"
    return (f"{row['probe_win_rate']:.2f} [{row['probe_ci_low']:.2f}, {row['probe_ci_high']:.2f}] "
            f"@{row['probe_budget_env_steps']:,}")
