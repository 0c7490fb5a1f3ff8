"""``arena tournament ...``: tournaments on an Arena server (through :class:`arena.client.ArenaClient`).

``create`` (admins and organizers; a competition's by its organizer: chosen agents, or its
top N), ``list``, and ``show``: the standings, then the crosstable (round robin, Swiss) or
every round's tables (single elimination). The server's background service plays it; its
page is ``/tournaments/{id}``. Exit codes as :mod:`arena.cli.remote`.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from arena.cli.console import console, fail, plain_table
from arena.cli.remote import _server_option, _token_option, remote
from arena.client.tournaments import points

tournament_app = typer.Typer(help="Tournaments: round robin, Swiss, single elimination among chosen agents.",
                             no_args_is_help=True)
KINDS = ("round_robin", "double_round_robin", "swiss", "single_elimination")


def _entrants(text: str) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        fail(f"--entrants takes agent ids separated by commas, best seed first (1,7,3); got {text!r}")


@tournament_app.command("create")
def create(
    title: str = typer.Option(..., help="Title."),
    kind: str = typer.Option("swiss", help=f"One of {', '.join(KINDS)}."),
    games: int = typer.Option(3, help="M: games per pairing (a best-of-M mini-match, seats alternated)."),
    rounds: int | None = typer.Option(None, help="Swiss: its rounds (default ceil(log2 n))."),
    entrants: str = typer.Option("", help="Agent ids, best seed first: 12,7,31."),
    competition: int | None = typer.Option(None, help="The competition it belongs to (you organize it)."),
    top: int | None = typer.Option(None, help="With --competition and no --entrants: its best N entries."),
    env: str | None = typer.Option(None, help="The env of a tournament of no competition."),
    seed_from_board: bool = typer.Option(False, "--seed-from-board",
                                         help="Seed --entrants by the board (the competition's, else the env's)."),
    server: str = _server_option(), token: str | None = _token_option(),
) -> None:
    """Create a tournament; the server's background service plays it at once (unrated on the ladder)."""
    if kind not in KINDS:
        fail(f"--kind must be one of {', '.join(KINDS)}; got {kind!r}")
    body = {"title": title, "kind": kind, "games": games, "rounds": rounds, "entrants": _entrants(entrants),
            "competition_id": competition, "top": top, "env": env,
            "seed_from_board": seed_from_board or None}
    with remote(server, token) as client:
        t = client.create_tournament({k: v for k, v in body.items() if v is not None})
    console.print(f"tournament {t['id']} ({t['title']}): {t['kind']}, {len(t['entrants'])} entrants, "
                  f"best of {t['games']}, {t['rounds_total']} rounds; it is being played. "
                  f"See `arena tournament show {t['id']}` or /tournaments/{t['id']}")


@tournament_app.command("list")
def list_(competition: int | None = typer.Option(None, help="Only this competition's."),
          server: str = _server_option(), token: str | None = _token_option()) -> None:
    """The tournaments you may see."""
    with remote(server, token) as client:
        page = client.tournaments(competition)
    console.print(plain_table(
        f"{page['count']} tournaments", ("id", "title", "env", "kind", "entrants", "best of", "state", "competition"),
        ((str(t["id"]), t["title"], t["env"], t["kind"], str(t["entrants"]), str(t["games"]), t["state"],
          str(t["competition_id"] or "")) for t in page["data"])))


def standings_table(t: dict[str, Any]) -> Table:
    return plain_table(
        f"tournament {t['id']}: {t['title']} ({t['kind']}, best of {t['games']}) - {t['state']}, "
        f"round {len(t['rounds'])} of {t['rounds_total']}, {t['games_played']} games",
        ("rank", "agent", "points", "tiebreak", "game points", "W / D / L", "byes"),
        ((str(s["rank"]), f"{s['name']} ({s['agent_id']})", points(s["points"]), points(s["tiebreak"]),
          points(s["game_points"]), f"{s['wins']} / {s['draws']} / {s['losses']}", str(s["byes"]))
         for s in t["standings"]))


def crosstable(t: dict[str, Any]) -> Table:
    cells = {row["agent_id"]: {m["agent_id"]: " ".join(points(p) for p in m["points"]) for m in row["against"]}
             for row in t["crosstable"]}
    table = Table(title="crosstable (mini-match points of the row against the column)")
    table.add_column("seed")
    table.add_column("agent")
    for e in t["entrants"]:
        table.add_column(str(e["seed"]), justify="center")
    for e in t["entrants"]:
        table.add_row(str(e["seed"]), e["name"], *("-" if o["agent_id"] == e["agent_id"] else
                                                   cells[e["agent_id"]].get(o["agent_id"], "")
                                                   for o in t["entrants"]))
    return table


def _table_result(tb: dict[str, Any]) -> str:
    """A table's mini-match: a bye, its points, or still playing."""
    if tb["b"] is None:
        return "bye"
    return f"{points(tb['points_a'])} - {points(tb['points_b'])}" if tb["complete"] else "playing"


def rounds_table(t: dict[str, Any]) -> Table:
    names = {e["agent_id"]: e["name"] for e in t["entrants"]}
    return plain_table("rounds", ("round", "table", "first", "result", "second", "goes on"),
                       ((str(r["round"]), str(tb["table"]), names[tb["a"]], _table_result(tb), names.get(tb["b"], ""),
                         names.get(tb["advances"], "")) for r in t["rounds"] for tb in r["tables"]))


@tournament_app.command("show")
def show(tournament_id: int, server: str = _server_option(), token: str | None = _token_option()) -> None:
    """A tournament now: standings, and its crosstable or bracket."""
    with remote(server, token) as client:
        t = client.tournament(tournament_id)
    console.print(standings_table(t))
    console.print(rounds_table(t) if t["kind"] == "single_elimination" else crosstable(t))
    if t["error"]:
        console.print(f"[red]{t['error']}[/]")


def register(app: typer.Typer) -> None:
    """Add ``arena tournament`` to ``app``."""
    app.add_typer(tournament_app, name="tournament")
