"""``arena competition ...``: competitions on an Arena server (through :class:`arena.client.ArenaClient`).

``create`` (admins and organizers), ``list``, ``show``, ``join`` (a private one by its invite
code), ``team create|join|merge|show``, ``submit`` (your team's entry: the same upload as
``arena submit``), ``board``, ``standings``, and ``verify``: download the final evaluation's
match log and recompute the standings and the certificate, then say whether they equal the
published ones (exit 1 when they do not). Exit codes as :mod:`arena.cli.remote`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from arena.cli.console import _fmt, console, fail, plain_table
from arena.cli.remote import _server_option, _token_option, remote
from arena.client import ArenaClient
from arena.client.competitions import verify_standings

competition_app = typer.Typer(help="Competitions: seasons with deadlines, teams, certified final standings.",
                              no_args_is_help=True)
team_app = typer.Typer(help="Your team in a competition.", no_args_is_help=True)
competition_app.add_typer(team_app, name="team")


def _when(text: str, what: str) -> str:
    """An ISO time, or ``+2h`` / ``+30m`` / ``+3d`` from now (UTC)."""
    if text.startswith("+") and text[-1] in "mhd" and text[1:-1].isdigit():
        unit = {"m": "minutes", "h": "hours", "d": "days"}[text[-1]]
        return (datetime.now(UTC) + timedelta(**{unit: int(text[1:-1])})).isoformat()
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        fail(f"{what} must be an ISO time with a zone (2026-12-01T00:00:00Z) or +30m / +2h / +3d; got {text!r}")
    if parsed.tzinfo is None:
        fail(f"{what} needs a time zone, e.g. {text}Z")
    return parsed.isoformat()


def competition_table(c: dict[str, Any]) -> Table:
    table = Table(title=f"competition {c['id']}: {c['title']}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    for field in ("env", "role", "state", "is_public", "invite_code", "opens_at", "deadline", "merge_deadline",
                  "final_ends_at", "final_match_budget", "daily_submissions", "active_entries", "team_size",
                  "allowed_paths", "top_k", "confidence", "tie_margin", "final_floor", "reference_agents"):
        if c.get(field) is not None:
            table.add_row(field, str(c[field]))
    return table


@competition_app.command("create")
def create(
    env: str = typer.Option(..., help="Env id (a two-player game)."),
    title: str = typer.Option(..., help="Title."),
    deadline: str = typer.Option(..., help="Submission deadline: ISO time with zone, or +2h / +3d."),
    opens_at: str = typer.Option("+0m", "--opens-at", help="When submissions open (default: now)."),
    rules: Path | None = typer.Option(None, help="A Markdown file with the rules."),
    settings: str = typer.Option("{}", help='More settings as JSON, e.g. \'{"daily_submissions": 5, '
                                 '"active_entries": 2, "top_k": 10, "is_public": false}\'.'),
    open_now: bool = typer.Option(False, "--open", help="Open it at once (its settings freeze)."),
    server: str = _server_option(), token: str | None = _token_option(),
) -> None:
    """Create a competition (admins, and users an admin made organizers)."""
    try:
        extra = json.loads(settings)
    except ValueError as exc:
        fail(f"--settings is not valid JSON ({exc})")
    body = {"env": env, "title": title, "opens_at": _when(opens_at, "--opens-at"),
            "deadline": _when(deadline, "--deadline"), **extra}
    if rules is not None:
        body["rules_md"] = rules.read_text(encoding="utf-8")
    with remote(server, token) as client:
        console.print(competition_table(client.create_competition(body, open_now=open_now)))


@competition_app.command("list")
def list_(state: str = typer.Option("", help="draft, open, final or finished."),
          server: str = _server_option(), token: str | None = _token_option()) -> None:
    """The competitions you may see."""
    with remote(server, token) as client:
        page = client.competitions(state=state or None)
    console.print(plain_table(f"{page['count']} competitions", ("id", "title", "env", "state", "deadline"),
                              ((str(c["id"]), c["title"], c["env"], c["state"], c["deadline"]) for c in page["data"])))


@competition_app.command("show")
def show(competition_id: int, server: str = _server_option(), token: str | None = _token_option()) -> None:
    """A competition's settings, dates and state."""
    with remote(server, token) as client:
        console.print(competition_table(client.competition(competition_id)))


@competition_app.command("join")
def join(competition_id: int, invite_code: str = typer.Option("", "--code", help="A private one's invite code."),
         server: str = _server_option(), token: str | None = _token_option()) -> None:
    """Join a competition."""
    with remote(server, token) as client:
        c = client.join_competition(competition_id, invite_code or None)
    console.print(f"joined competition {c['id']} ({c['title']}); now create or join a team: "
                  f"`arena competition team create {c['id']} NAME`")


def _team_write(server: str, token: str | None, write: Callable[[ArenaClient], dict[str, Any]]) -> None:
    """Runs a team write (create, join, merge) on ``server`` and prints the team it answers."""
    with remote(server, token) as client:
        team = write(client)
    console.print(f"team [bold]{team['name']}[/] (id {team['id']}): {', '.join(team['members'])}"
                  + (f"; join code {team['join_code']}" if team.get("join_code") else ""))


@team_app.command("create")
def team_create(competition_id: int, name: str, server: str = _server_option(),
                token: str | None = _token_option()) -> None:
    """Create a team with you in it (prints its join code)."""
    _team_write(server, token, lambda client: client.create_team(competition_id, name))


@team_app.command("join")
def team_join(competition_id: int, join_code: str, server: str = _server_option(),
              token: str | None = _token_option()) -> None:
    """Join a team by its code."""
    _team_write(server, token, lambda client: client.join_team(competition_id, join_code))


@team_app.command("merge")
def team_merge(competition_id: int, join_code: str, server: str = _server_option(),
               token: str | None = _token_option()) -> None:
    """Merge the team with that join code into yours (before the merge deadline)."""
    _team_write(server, token, lambda client: client.merge_team(competition_id, join_code))


@team_app.command("show")
def team_show(competition_id: int, server: str = _server_option(), token: str | None = _token_option()) -> None:
    """Your team's submissions today and its active entries."""
    with remote(server, token) as client:
        quota = client.quota(competition_id)
    console.print(f"team {quota['team']}: {quota['used_today']} submitted today, {quota['left_today']} left "
                  f"(resets {quota['resets_at']}); active entries: {quota['active_entries']}")


@competition_app.command("submit")
def submit(competition_id: int, path: Path = typer.Argument(..., help="agent.safetensors or agent.onnx."),
           name: str = typer.Option("", help="Display name."), env: str = typer.Option("", help="Env id."),
           server: str = _server_option(), token: str | None = _token_option()) -> None:
    """Submit your team's entry (the upload of `arena submit`)."""
    with remote(server, token) as client:
        made = client.submit_entry(competition_id, path, name=name or None, env=env or None)
    print_entry(made)


def print_entry(made: dict[str, Any]) -> None:
    entry, agent = made["entry"], made["agent"]
    console.print(f"entry {entry['id']} of team {entry['team']}: agent [bold]{agent['id']}[/] "
                  f"({agent['status']}); follow it with `arena agent show {agent['id']}`")


@competition_app.command("board")
def board(competition_id: int, final: bool = typer.Option(False, "--final", help="The final evaluation's board."),
          server: str = _server_option(), token: str | None = _token_option()) -> None:
    """The competition's own board (the season's, or the final evaluation's)."""
    with remote(server, token) as client:
        rows = client.competition_board(competition_id, final=final)["data"]
    console.print(plain_table(
        f"competition {competition_id} {'final' if final else 'season'} board",
        ("rank", "range", "agent", "team", "division", "mu", "sigma", "games", "W/D/L"),
        ((str(r["rank"]), f"{r['rank_lo']}-{r['rank_hi']}", f"{r['name']} ({r['agent_id']})", r["team"] or "reference",
          r.get("division") or "", _fmt(r["mu"]), _fmt(r["sigma"]), str(r["games"]),
          f"{r['wins']}/{r['draws']}/{r['losses']}") for r in rows)))


@competition_app.command("standings")
def standings(competition_id: int, server: str = _server_option(), token: str | None = _token_option()) -> None:
    """The final standings and which adjacent pairs are certified."""
    with remote(server, token) as client:
        body = client.standings(competition_id)
    result = body["result"]
    if result is None:
        console.print(f"competition {competition_id} is {body['state']}: no final standings yet "
                      f"({body['matches']} final matches played)")
        return
    console.print(plain_table(
        f"competition {competition_id}: {'certified' if result['certified'] else 'not certified'} "
        f"after {result['matches']} matches ({result['stopped']})",
        ("rank", "range", "agent", "mu", "sigma", "games", "W/D/L"),
        ((str(s["rank"]), f"{s['rank_lo']}-{s['rank_hi']}", str(s["entry"]), _fmt(s["mu"]), _fmt(s["sigma"]),
          str(s["games"]), f"{s['wins']}/{s['draws']}/{s['losses']}") for s in result["standings"])))
    for p in result["pairs"]:
        console.print(f"{p['upper']} over {p['lower']} ({p['kind']}): {p['status']} at {p['confidence']:.3f}, "
                      f"p in [{p['low']:.3f}, {p['high']:.3f}] over {p['units']} seat-balanced units")


@competition_app.command("verify")
def verify(competition_id: int, server: str = _server_option(), token: str | None = _token_option()) -> None:
    """Download the final evaluation's matches, recompute standings and certificate, compare with the published."""
    with remote(server, token) as client:
        competition = client.competition(competition_id)
        pool = [e["agent_id"] for e in client.entries(competition_id)["data"] if e["frozen"]]
        published = client.standings(competition_id)["result"]
        log = client.competition_matches(competition_id, final=True)
    if published is None:
        fail(f"competition {competition_id} has no published standings yet (state {competition['state']})")
    result = verify_standings(competition, pool, log, published)
    if result.equal:
        console.print(f"[green]equal[/]: {result.matches} matches recomputed give the published standings and "
                      "certificate")
        return
    console.print(f"[red]NOT equal[/]: {result.matches} matches recomputed give "
                  f"{json.dumps(result.recomputed)[:2000]}")
    raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``arena competition`` to ``app``."""
    app.add_typer(competition_app, name="competition")
