"""``arena play``, ``replay``, ``demo`` and ``envs``: matches in this process, no services."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.table import Table

from arena.cli.console import console, fail, progress_bar
from envs.errors import ArenaError


def standings_table(standings, title: str) -> Table:
    table = Table(title=title)
    for col in ("agent", "games", "W", "D", "L", "score", "forfeits"):
        table.add_column(col, justify="left" if col in ("agent", "forfeits") else "right",
                         no_wrap=col == "agent")
    for agent, t in standings.ranked():
        forfeits = ", ".join(f"{k}={v}" for k, v in sorted(t.forfeits.items())) or "-"
        table.add_row(agent, str(t.games), str(t.wins), str(t.draws), str(t.losses),
                      f"{t.score:.3f}", forfeits)
    return table


def play(
    env: str = typer.Option("connect_four-v3", help="Registered env id."),
    agents: str = typer.Option("heuristic,random", help="Comma-separated agents: random, "
                               "heuristic, heuristic:epsilon=0.3, file:path/agent.safetensors"),
    matches: int = typer.Option(1000, min=1, help="Number of matches."),
    seed: int = typer.Option(0, help="Master seed; every match seed derives from it."),
    out: Path | None = typer.Option(None, help="Write one JSON record per match (JSONL)."),
    batch_size: int = typer.Option(4096, min=1, help="Matches played concurrently."),
    device: str = typer.Option("cpu", help="Device for neural policies: cpu or cuda."),
    time_budget: float = typer.Option(10.0, help="Seconds a policy may take per batched call."),
) -> None:
    """Play matches between agents and print W/D/L per agent."""
    from agents.catalog import make_policy
    from arena.engine import MatchEngine
    from arena.engine.plan import plan_matches
    from arena.engine.standings import Standings
    from envs.registry import get_spec

    names = [a.strip() for a in agents.split(",") if a.strip()]
    try:
        spec = get_spec(env)
        policies = {}
        lineup_names = []
        for name in names:
            policy = make_policy(name, env, device=device)
            policies[policy.agent_id] = policy
            lineup_names.append(policy.agent_id)
        jobs = plan_matches(lineup_names, spec, matches, seed)
    except (ArenaError, ValueError) as exc:
        fail(str(exc))
    standings = Standings(spec)
    sink = out.open("w") if out else None
    start = time.perf_counter()
    with progress_bar() as progress, MatchEngine(time_budget) as engine:
        task = progress.add_task(f"{env}", total=matches, rate="-")
        for lo in range(0, matches, batch_size):
            records = engine.play(env, jobs[lo : lo + batch_size], policies)
            standings.add(records)
            if sink:
                sink.write("".join(r.to_json() + "\n" for r in records))
            done = lo + len(records)
            progress.update(task, completed=done, rate=f"{done / (time.perf_counter() - start):,.0f}")
    if sink:
        sink.close()
    console.print(standings_table(standings, f"{env}: {matches} matches, seed {seed}"))
    term = ", ".join(f"{k}={v}" for k, v in sorted(standings.terminations.items()))
    console.print(f"terminations: {term}")
    if out:
        console.print(f"records written to [bold]{out}[/]")


def replay(path: Path = typer.Argument(..., exists=True, dir_okay=False, help="JSONL of match records.")) -> None:
    """Re-simulate every record; exit 1 if any does not reproduce exactly."""
    from arena.engine.records import MatchRecord
    from arena.engine.replay import replay_record

    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    failures: list[tuple[int, str]] = []
    with progress_bar() as progress:
        task = progress.add_task("replay", total=len(lines), rate="-")
        start = time.perf_counter()
        for i, line in enumerate(lines, 1):
            try:
                record = MatchRecord.from_json(line)
            except ArenaError as exc:
                failures.append((i, str(exc)))
                continue
            result = replay_record(record)
            if not result.ok:
                failures.append((i, result.reason))
            if i % 50 == 0 or i == len(lines):
                progress.update(task, completed=i, rate=f"{i / (time.perf_counter() - start):,.0f}")
    ok = len(lines) - len(failures)
    console.print(f"reproduced {ok}/{len(lines)} matches exactly")
    for line_no, reason in failures[:20]:
        console.print(f"  line {line_no}: {reason}")
    if failures:
        raise typer.Exit(1)


DEMO_AGENTS = ["heuristic", "heuristic:epsilon=0.1", "heuristic:epsilon=0.25",
               "heuristic:epsilon=0.5", "heuristic:epsilon=0.75", "random"]


def ladder_table(standings, ratings, title: str) -> Table:
    """Leaderboard: TrueSkill mu, sigma, conservative score, then W/D/L."""
    table = Table(title=title)
    for col in ("#", "agent", "mu", "sigma", "mu-3sigma", "games", "W", "D", "L"):
        table.add_column(col, justify="left" if col == "agent" else "right", no_wrap=col == "agent")
    order = sorted(ratings.items(), key=lambda kv: -kv[1].conservative)
    for rank, (agent, r) in enumerate(order, 1):
        t = standings.tallies[agent]
        table.add_row(str(rank), agent, f"{r.mu:.2f}", f"{r.sigma:.2f}", f"{r.conservative:.2f}",
                      str(t.games), str(t.wins), str(t.draws), str(t.losses))
    return table


def demo(
    env: str = typer.Option("connect_four-v3", help="Registered env id."),
    matches: int = typer.Option(30000, min=1, help="Number of matches."),
    seed: int = typer.Option(0, help="Master seed."),
    batch_size: int = typer.Option(1000, min=1, help="Matches per engine call (a table refresh)."),
) -> None:
    """A live terminal ladder of the built-in agents, rated with TrueSkill."""
    from rich.console import Group
    from rich.live import Live

    from agents.catalog import make_policy
    from arena.engine import MatchEngine
    from arena.engine.plan import plan_matches
    from arena.engine.standings import Standings
    from envs.registry import get_spec
    from league.ratings.closed_form import Result1v1, apply_results
    from league.ratings.rating import RatingEnv

    spec = get_spec(env)
    policies = {p.agent_id: p for p in (make_policy(n, env) for n in DEMO_AGENTS)}
    jobs = plan_matches(list(policies), spec, matches, seed)
    rating_env = RatingEnv()
    ratings = {a: rating_env.new_rating() for a in policies}
    standings = Standings(spec)
    progress = progress_bar()
    task = progress.add_task(env, total=matches, rate="-")
    start = time.perf_counter()
    with Live(console=console, refresh_per_second=4) as live, MatchEngine() as engine:
        for lo in range(0, matches, batch_size):
            records = engine.play(env, jobs[lo : lo + batch_size], policies)
            standings.add(records)
            results = [
                Result1v1(r.seats[r.winner if r.winner is not None else 0],
                          r.seats[1 - r.winner if r.winner is not None else 1], r.winner is None)
                for r in records
            ]
            ratings = apply_results(ratings, results, env=rating_env)
            done = lo + len(records)
            progress.update(task, completed=done, rate=f"{done / (time.perf_counter() - start):,.0f}")
            live.update(Group(progress, ladder_table(standings, ratings, f"{env} ladder (TrueSkill)")))


def list_envs_cmd() -> None:
    """List registered environments."""
    from envs.registry import list_envs

    table = Table(title="environments")
    for col in ("env", "seats", "roles", "actions", "description"):
        table.add_column(col)
    for spec in list_envs():
        table.add_row(spec.env_id, str(spec.num_seats), ", ".join(spec.roles), str(spec.num_actions),
                      spec.description)
    console.print(table)


def register(app: typer.Typer) -> None:
    """Attach the local match commands to the main ``arena`` app."""
    app.command("play")(play)
    app.command("replay")(replay)
    app.command("demo")(demo)
    app.command("envs")(list_envs_cmd)
