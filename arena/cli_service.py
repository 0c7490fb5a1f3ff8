"""CLI commands that use the persistent services: ladder, leaderboard, ratings, db."""

from __future__ import annotations

import signal
import sys
import time

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from envs.errors import ArenaError
from league.ladder import DEFAULT_TARGET_SIGMA

ladder_app = typer.Typer(help="Rated ladders persisted in the database.", no_args_is_help=True)
ratings_app = typer.Typer(help="Ratings derived from the match log.", no_args_is_help=True)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)

DEFAULT_LADDER = ("heuristic,heuristic:epsilon=0.1,heuristic:epsilon=0.25,heuristic:epsilon=0.5,"
                  "heuristic:epsilon=0.75,random")


def _console():
    from arena.cli import console

    return console


def _fail(message: str) -> None:
    from arena.cli import _fail as fail

    fail(message)


def agent_sources(names: list[str], env_id: str, services) -> tuple[list, dict[str, str]]:
    """AgentSources for builtin names and ``file:`` checkpoints (stored in the pool)."""
    from agents.catalog import make_policy
    from agents.checkpoint import load_checkpoint, serialize_weights
    from arena.runners import AgentSource

    sources, kinds = [], {}
    for name in names:
        if name.startswith("file:"):
            ck = load_checkpoint(name[len("file:"):])
            if ck.spec.env != env_id:
                raise ArenaError(f"{name} is a checkpoint for {ck.spec.env}, not {env_id}")
            sha = services.pool.put(serialize_weights(ck.state_dict), ck.spec, pool=f"ladder.{env_id}")
            key = f"{ck.spec.arch}-{sha[:16]}"
            sources.append(AgentSource(key=key, snapshot=sha))
            kinds[key] = "neural"
        else:
            key = make_policy(name, env_id).agent_id
            sources.append(AgentSource(key=key, builtin=key))
            kinds[key] = "builtin"
    return sources, kinds


def leaderboard_table(sessions, env_id: str, role: str, limit: int,
                      target_sigma: float = DEFAULT_TARGET_SIGMA) -> Table:
    """mu, sigma, mu-3sigma, W/D/L, and the expected matches until sigma reaches the target."""
    from arena.db import repositories as repo
    from league.matchmaking import expected_matches_to_sigma
    from league.ratings import Rating, RatingEnv

    env = RatingEnv()
    with sessions() as session:
        board = repo.leaderboard(session, env_id, role, limit=limit)
    table = Table(title=f"{env_id} leaderboard ({role})")
    for col in ("#", "agent", "mu", "sigma", "mu-3sigma", "games", "W", "D", "L", "to settle"):
        table.add_column(col, justify="left" if col == "agent" else "right", no_wrap=col == "agent")
    for e in board:
        left = expected_matches_to_sigma(Rating(e.mu, e.sigma), target_sigma, env=env)
        table.add_row(str(e.rank), e.key, f"{e.mu:.2f}", f"{e.sigma:.2f}", f"{e.conservative:.2f}",
                      str(e.games), str(e.wins), str(e.draws), str(e.losses),
                      "settled" if left == 0 else f"~{left:.0f}")
    return table


@ladder_app.command("run")
def ladder_run(
    env: str = typer.Option("connect_four-v3", help="Registered env id (symmetric games)."),
    agents: str = typer.Option(DEFAULT_LADDER, help="Comma-separated builtin names or file:checkpoints."),
    matches: int = typer.Option(20000, min=1, help="Rated matches to play."),
    workers: int = typer.Option(2, min=0, help="Ray MatchWorker actors (0: play in this process)."),
    batch_size: int = typer.Option(2048, min=1, help="Matches per dispatched batch."),
    seed: int = typer.Option(0, help="Master seed of pairings and match seeds."),
) -> None:
    """Play a rated ladder: schedule, play on Ray workers, record exactly once."""
    from arena.ladder import Ladder, LadderConfig
    from arena.runners import InProcessRunner
    from arena.services import open_services

    console = _console()
    try:
        with open_services() as services:
            ladder = Ladder(services.sessions, LadderConfig(env, batch_size=batch_size, seed=seed))
            sources, kinds = agent_sources([a.strip() for a in agents.split(",") if a.strip()], env, services)
            for kind in sorted(set(kinds.values())):
                ladder.add_agents([s for s in sources if kinds[s.key] == kind], kind=kind)
            runner = _runner(workers, services) if workers > 0 else InProcessRunner(services.snapshot_cache_factory()())
            progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[rate]:>8} matches/s  in flight {task.fields[queue]:>6}"),
                                TimeRemainingColumn(), console=console)
            start = time.perf_counter()
            with progress:
                task = progress.add_task(f"ladder {env}", total=matches, rate="-", queue=0)

                def report(p) -> None:
                    rate = p.recorded / max(time.perf_counter() - start, 1e-9)
                    progress.update(task, completed=p.recorded, rate=f"{rate:,.0f}", queue=p.in_flight)

                result = ladder.run(runner, matches, on_progress=report)
            runner.close()
            elapsed = time.perf_counter() - start
            console.print(leaderboard_table(services.sessions, env, ladder.spec.roles[0], 50))
            console.print(f"scheduled {result.scheduled}, recorded {result.recorded}, duplicates ignored "
                          f"{result.duplicates}, {result.recorded / elapsed:,.0f} matches/s")
    except (ArenaError, ValueError) as exc:
        _fail(str(exc))


def _runner(workers: int, services):
    from arena.ray_runner import RayMatchRunner, init_ray

    init_ray(services.settings.ray_address)
    return RayMatchRunner(workers, snapshots_factory=services.snapshot_cache_factory())


def leaderboard(
    env: str = typer.Option("connect_four-v3", help="Registered env id."),
    role: str = typer.Option("", help="Role (default: the env's first role)."),
    limit: int = typer.Option(50, min=1, help="Rows to show."),
    server: str | None = typer.Option(None, "--server", envvar="ARENA_SERVER",
                                      help="Read it from this Arena server (env ARENA_SERVER) "
                                           "instead of the local database."),
) -> None:
    """Print the leaderboard: mu, sigma, mu-3sigma, games, W/D/L."""
    from arena.services import open_database
    from arena.settings import get_settings
    from envs.registry import get_spec

    if server:
        from arena.cli_client import remote_leaderboard

        remote_leaderboard(server, env, role, limit)
        return
    try:
        spec = get_spec(env)
        sessions = open_database(get_settings())
        _console().print(leaderboard_table(sessions, env, role or spec.roles[0], limit))
    except ArenaError as exc:
        _fail(str(exc))


@ratings_app.command("rebuild")
def ratings_rebuild(
    env: str = typer.Option("connect_four-v3", help="Registered env id."),
    write: bool = typer.Option(False, "--write", help="Replace the live ratings with the rebuilt ones."),
) -> None:
    """Recompute every rating from the match log; exit 1 if it differs from the live ratings."""
    from arena.recorder import rebuild_ratings
    from arena.services import open_database
    from arena.settings import get_settings
    from envs.registry import get_spec
    from league.ratings import RatingEnv

    try:
        spec = get_spec(env)
        report = rebuild_ratings(open_database(get_settings()), spec, RatingEnv(), write=write)
    except ArenaError as exc:
        _fail(str(exc))
    console = _console()
    console.print(f"rebuilt {report.standings} ratings from {report.matches} matches")
    if report.equal:
        console.print("[green]rebuilt ratings equal the live ratings exactly[/]")
        return
    console.print(f"[red]{len(report.mismatches)} ratings differ[/]" + (" (live table replaced)" if write else ""))
    for line in report.mismatches[:20]:
        console.print(f"  {line}")
    if not write:
        raise typer.Exit(1)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Migrate the configured database (ARENA_DATABASE_URL) to the latest schema."""
    from arena.db import current_revision
    from arena.services import open_database
    from arena.settings import get_settings, resolved_database_url

    settings = get_settings()
    open_database(settings)
    _console().print(f"database at revision {current_revision(resolved_database_url(settings))}")


def serve(
    host: str = typer.Option(None, help="Bind address (default ARENA_HOST, 127.0.0.1)."),
    port: int = typer.Option(None, help="Port (default ARENA_PORT, 8000)."),
    workers: int = typer.Option(1, min=0, help="Ray MatchWorker actors (0: play in the server process)."),
    demo: bool = typer.Option(True, "--demo/--no-demo", help="Seed demo agents into an empty database."),
    max_rate: float = typer.Option(2000.0, help="Upper bound on rated matches/s per env."),
) -> None:
    """Start the API, the web UI, the scheduler and local Ray workers on the configured services."""
    import uvicorn

    from arena.api.app import create_app
    from arena.logs import configure_logging
    from arena.runners import InProcessRunner
    from arena.service import ArenaService, ServiceConfig, seed_demo
    from arena.services import open_services
    from arena.settings import get_settings

    settings = get_settings()
    configure_logging(settings.log_format, settings.log_level)
    console = _console()
    try:
        with open_services(settings) as services:
            config = ServiceConfig(max_rate=max_rate)
            if demo:
                n = seed_demo(services, config.envs)
                if n:
                    console.print(f"seeded {n} demo agents on {', '.join(config.envs)}")
            runner = _runner(workers, services) if workers > 0 else InProcessRunner(
                services.snapshot_cache_factory()())
            service = ArenaService(services, runner, config).start()
            url = f"http://{host or settings.host}:{port or settings.port}"
            console.print(f"Arena is up: [bold]{url}[/] (API docs at {url}/docs); Ctrl-C stops it")
            # uvicorn re-raises SIGTERM after its own shutdown, which would kill the process
            # before the embedded Redis and the workers are stopped: exit normally instead.
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            try:
                uvicorn.run(create_app(services), host=host or settings.host, port=port or settings.port,
                            log_level="warning", log_config=None)  # our handler and format
            finally:
                service.stop()
                runner.close()
    except ArenaError as exc:
        _fail(str(exc))


def register(app: typer.Typer) -> None:
    """Attach the service commands to the main ``arena`` app."""
    app.add_typer(ladder_app, name="ladder")
    app.add_typer(ratings_app, name="ratings")
    app.add_typer(db_app, name="db")
    app.command("leaderboard")(leaderboard)
    app.command("serve")(serve)
