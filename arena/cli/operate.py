"""CLI commands that use the persistent services: ladder, leaderboard, ratings, db."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from arena.cli.console import console, fail, leaderboard_table
from envs.errors import ArenaError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from agents.checkpoint_spec import CheckpointSpec

ladder_app = typer.Typer(help="Rated ladders persisted in the database.", no_args_is_help=True)
ratings_app = typer.Typer(help="Ratings derived from the match log.", no_args_is_help=True)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)

WS_MAX_BYTES = 1024 * 1024
"""Largest WebSocket message uvicorn reads (connected agents' frames are checked at 64 KiB)."""
DEFAULT_LADDER = ("heuristic,heuristic:epsilon=0.1,heuristic:epsilon=0.25,heuristic:epsilon=0.5,"
                  "heuristic:epsilon=0.75,random")




def file_snapshot(path: str) -> tuple[bytes, CheckpointSpec]:
    """``(bytes, spec)`` of a ``file:`` agent, validated: an ``.onnx`` model or a checkpoint."""
    if path.endswith(".onnx"):
        from agents.onnx_agents.policy import load_onnx_file

        model = load_onnx_file(path)
        return model.data, model.spec
    from agents.checkpoint import load_checkpoint, serialize_weights

    ck = load_checkpoint(path)
    return serialize_weights(ck.state_dict), ck.spec


def agent_sources(names: list[str], env_id: str, services) -> list:
    """AgentSources for builtin names and ``file:`` checkpoints or ONNX models (registered as agents)."""
    from agents.catalog import make_policy
    from arena.core.agent_status import AgentStatus
    from arena.ladder.registration import register_snapshot_agent
    from arena.runners import AgentSource

    sources = []
    for name in names:
        if name.startswith("file:"):
            weights, spec = file_snapshot(name[len("file:"):])
            if spec.env != env_id:
                raise ArenaError(f"{name} is a checkpoint for {spec.env}, not {env_id}")
            agent = services.sessions.write_transaction(
                lambda session, weights=weights, spec=spec, name=name: register_snapshot_agent(
                    session, services.pool, weights, spec, pool_name=f"ladder.{env_id}",
                    name=spec.name or name, status=AgentStatus.PLACEMENT),
                what=f"registering {name}")
            sources.append(AgentSource(key=agent.key, snapshot=agent.sha256))
        else:
            key = make_policy(name, env_id).agent_id
            sources.append(AgentSource(key=key, builtin=key))
    return sources


def local_leaderboard(sessions, env_id: str, role: str, limit: int) -> dict:
    """The leaderboard of ``env_id``/``role`` from the database, shaped like the API's."""
    from arena.read.boards import board_page, read_board

    with sessions() as session:
        board = read_board(session, env_id, role)
    return {"env": env_id, "role": role, "count": len(board.rows),
            "data": [row.model_dump(mode="json") for row in board_page(board, limit, 0)]}


@ladder_app.command("run")
def ladder_run(
    env: str = typer.Option("connect_four-v3", help="Registered env id (role envs: a board per role)."),
    agents: str = typer.Option(DEFAULT_LADDER, help="Comma-separated builtin names or file:checkpoints."),
    matches: int = typer.Option(20000, min=1, help="Rated matches to play."),
    workers: int = typer.Option(2, min=0, help="Ray MatchWorker actors (0: play in this process)."),
    batch_size: int = typer.Option(2048, min=1, help="Matches per dispatched batch."),
    seed: int = typer.Option(0, help="Master seed of pairings and match seeds."),
) -> None:
    """Play a rated ladder: schedule, play on Ray workers, record exactly once."""
    from arena.ladder.dispatch import LadderConfig, open_ladder
    from arena.runners import InProcessRunner
    from arena.storage.wiring import open_services

    try:
        with open_services() as services:
            ladder = open_ladder(services.sessions, LadderConfig(env, batch_size=batch_size, seed=seed))
            ladder.add_agents(agent_sources([a.strip() for a in agents.split(",") if a.strip()], env, services))
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
            for role in dict.fromkeys(ladder.spec.roles):
                console.print(leaderboard_table(local_leaderboard(services.sessions, env, role, 50)))
            console.print(f"scheduled {result.scheduled}, recorded {result.recorded}, duplicates ignored "
                          f"{result.duplicates}, {result.recorded / elapsed:,.0f} matches/s")
    except (ArenaError, ValueError) as exc:
        fail(str(exc))


def _runner(workers: int, services):
    from arena.runners.on_ray import RayMatchRunner, init_ray

    init_ray(services.settings)
    return RayMatchRunner(workers, snapshots_factory=services.snapshot_cache_factory(),
                          gpus_per_worker=services.settings.ray_gpus_per_worker,
                          connected=services.connected_policies())


def leaderboard(
    env: str = typer.Option("connect_four-v3", help="Registered env id."),
    role: str = typer.Option("", help="Role (default: the env's first role)."),
    limit: int = typer.Option(50, min=1, help="Rows to show."),
    server: str | None = typer.Option(None, "--server", envvar="ARENA_SERVER",
                                      help="Read it from this Arena server (env ARENA_SERVER) "
                                           "instead of the local database."),
) -> None:
    """Print the leaderboard: mu, sigma, mu-3sigma, games, W/D/L."""
    if server:  # HTTP only: the local services (and torch, seconds of imports) stay unloaded
        from arena.cli.remote import remote_leaderboard

        remote_leaderboard(server, env, role, limit)
        return
    from arena.core.settings import get_settings
    from arena.storage.wiring import open_database
    from envs.registry import get_spec

    try:
        spec = get_spec(env)
        sessions = open_database(get_settings())
        console.print(leaderboard_table(local_leaderboard(sessions, env, role or spec.roles[0], limit)))
    except ArenaError as exc:
        fail(str(exc))


@ratings_app.command("rebuild")
def ratings_rebuild(
    env: str = typer.Option("connect_four-v3", help="Registered env id."),
    write: bool = typer.Option(False, "--write", help="Replace the live ratings with the rebuilt ones."),
) -> None:
    """Recompute every rating from the match log; exit 1 if it differs from the live ratings."""
    from arena.core.settings import get_settings
    from arena.ladder.recorder import rebuild_ratings
    from arena.storage.wiring import open_database
    from envs.registry import get_spec

    try:
        spec = get_spec(env)
        report = rebuild_ratings(open_database(get_settings()), spec, write=write)
    except ArenaError as exc:
        fail(str(exc))
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
    from arena.core.settings import get_settings, resolved_database_url
    from arena.storage.db import current_revision
    from arena.storage.wiring import open_database

    settings = get_settings()
    open_database(settings)
    console.print(f"database at revision {current_revision(resolved_database_url(settings))}")


_STOP_ASKED = threading.Event()
"""Set by the first SIGTERM: ``arena serve`` stops even if that SIGTERM's ``SystemExit`` was lost."""


def _exit_on_sigterm(signum: int, frame: object) -> None:
    _STOP_ASKED.set()
    signal.signal(signal.SIGTERM, _already_stopping)
    sys.exit(0)


def _exit_if_asked() -> None:
    """Stop here if a SIGTERM came whose ``SystemExit`` never reached :func:`serve`.

    A handler runs between any two bytecodes of the main thread, finalizers included, and an
    exception raised inside a ``__del__`` is only reported ("Exception ignored in"): a SIGTERM
    that landed in a redis-py ``ConnectionPool.__del__`` while ``arena serve`` started was lost,
    the server went on, and its embedded Redis outlived the SIGKILL that followed (seen in
    benchmarks/idle.py's smoke)."""
    if _STOP_ASKED.is_set():
        sys.exit(0)


def _already_stopping(signum: int, frame: object) -> None:
    """SIGTERM while ``arena serve`` stops: the stop goes on. Raising again would end it
    halfway, with the embedded Redis stopped under loops still running (make forwards a
    SIGTERM it gets to its child, and systemd or an impatient operator may send another)."""
    log.warning("SIGTERM while stopping: the stop goes on (loops first, then the embedded Redis); "
                "SIGKILL ends the process at once")


def serve(
    host: str = typer.Option(None, help="Bind address (default ARENA_HOST, 127.0.0.1)."),
    port: int = typer.Option(None, help="Port (default ARENA_PORT, 8000)."),
    workers: int = typer.Option(1, min=0, help="Ray MatchWorker actors (0: play in the server process)."),
    demo: bool = typer.Option(True, "--demo/--no-demo", help="Seed demo agents into an empty database."),
    max_rate: float = typer.Option(2000.0, help="Upper bound on rated matches/s per env."),
    api: bool = typer.Option(True, "--api/--no-api", envvar="ARENA_SERVE_API",
                             help="Serve the API and web UI (--no-api: the background service alone)."),
    background: bool = typer.Option(True, "--service/--no-service", envvar="ARENA_SERVE_SERVICE",
                                    help="Run the background service: validation, ladders, people's games, "
                                         "challenges, probes (--no-service: an API process alone)."),
) -> None:
    """Start the API, the web UI, the scheduler, the probe service and local Ray workers on the configured services.

    One deployment may run several API processes (``--no-service``) beside one background
    service (``--no-api``) on the same database and Redis: the API only queues work, the
    service plays it."""
    import uvicorn

    from arena.api.app import create_app
    from arena.core.logs import configure_logging
    from arena.core.settings import get_settings
    from arena.storage.wiring import open_services

    settings = get_settings()
    configure_logging(settings.log_format, settings.log_level)
    if not (api or background):
        fail("--no-api and --no-service leave nothing to run")
    # A SIGTERM exits normally whenever it comes: while starting up (the service may already
    # be playing), or after uvicorn's own shutdown, which re-raises it and would otherwise kill
    # the process before the embedded Redis and the workers are stopped. Once stopping, a
    # further SIGTERM is only logged (see _already_stopping).
    _STOP_ASKED.clear()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        with open_services(settings) as services:
            service = probes = runner = None
            try:
                if background:
                    # The service's modules (the engine, torch) only where it runs: an API process
                    # alone (--no-service) never imports them.
                    from arena.evaluation.probes import ProbeService
                    from arena.ladder.background import BackgroundService, ServiceConfig
                    from arena.ladder.demo import seed_demo
                    from arena.runners import InProcessRunner

                    config = ServiceConfig.from_settings(settings, max_rate=max_rate)
                    if demo:
                        n = seed_demo(services, config.envs)
                        if n:
                            console.print(f"seeded {n} demo agents on {', '.join(config.envs)}")
                    runner = _runner(workers, services) if workers > 0 else InProcessRunner(
                        services.snapshot_cache_factory()())
                    service = BackgroundService(services, runner, config)
                    _exit_if_asked()
                    service.start()
                    if settings.probe_concurrency:
                        probes = ProbeService(services)
                        probes.start()
                _exit_if_asked()  # before uvicorn takes SIGTERM over
                if api:
                    url = f"http://{host or settings.host}:{port or settings.port}"
                    console.print(f"Arena is up: [bold]{url}[/] (API docs at {url}/docs); Ctrl-C stops it")
                    uvicorn.run(create_app(services), host=host or settings.host, port=port or settings.port,
                                log_level="warning", log_config=None,  # our handler and format
                                ws_max_size=WS_MAX_BYTES,
                                timeout_graceful_shutdown=settings.shutdown_grace_s)  # connected agents' sockets
                else:
                    console.print("Arena's background service is up (no API in this process); Ctrl-C stops it")
                    with contextlib.suppress(KeyboardInterrupt):
                        _STOP_ASKED.wait()
            finally:
                signal.signal(signal.SIGTERM, _already_stopping)
                log.info("stopping: the background service and workers first, then the embedded Redis")
                if probes is not None:
                    probes.stop()
                if service is not None:
                    service.stop()
                if runner is not None:
                    runner.close()
    except ArenaError as exc:
        fail(str(exc))


def register(app: typer.Typer) -> None:
    """Attach the service commands to the main ``arena`` app."""
    app.add_typer(ladder_app, name="ladder")
    app.add_typer(ratings_app, name="ratings")
    app.add_typer(db_app, name="db")
    app.command("leaderboard")(leaderboard)
    app.command("serve")(serve)
    from arena.cli import datasets  # `arena export` reads the database too

    datasets.register(app)
