"""``arena connect FILE:FUNCTION``: play your own code on an Arena server as a connected agent.

The function is loaded from the Python file (your code, run here on your machine), the
agent is registered on first use (the same ``--name`` reuses it), and the process then
answers the server's decision batches over a WebSocket until Ctrl-C, reconnecting with
backoff when the connection drops. The screen shows the connection, the matches with
W/D/L and forfeits, and the agent's rating and status, fetched every few seconds.

How the function is called:

* ``act(obs, mask) -> int``, one row at a time (the default);
* ``act(obs_batch, mask_batch) -> actions`` with ``--batched`` or the
  :func:`arena.client.connected.batched` decorator;
* ``act(request) -> actions`` (the whole protocol message: seats, plies, text
  renderings) with the :func:`arena.client.connected.whole_request` decorator;
* a Kaggle agent, ``agent(observation, configuration)``, with ``--kaggle connectx``
  (:mod:`arena.client.connected.kaggle`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.live import Live
from rich.table import Table

from arena.cli.console import _fmt, console, err_console, fail
from arena.cli.remote import _server_option, _token_option, remote
from arena.client import ArenaClient, ArenaConnectionError, ArenaHTTPError

TICK_S = 0.2


def load_function(target: str, default: str | None = "act") -> Callable[..., Any]:
    """The function ``FILE:FUNCTION`` names, loaded from the file (ends the command on errors).

    Without ``:FUNCTION``, ``default``; ``None`` takes the last function the file defines
    (Kaggle's rule for a submission file).
    """
    path_text, sep, name = target.rpartition(":")
    if not sep or not name.isidentifier():
        path_text, name = target, default or ""
    path = Path(path_text).expanduser()
    if not path.is_file():
        fail(f"{path} is not a file; give FILE:FUNCTION, e.g. my_agent.py:act")
    module_name = f"arena_connect_{path.stem}" if path.stem.isidentifier() else "arena_connect_agent"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        fail(f"{path} cannot be imported as Python (name it *.py)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, str(path.resolve().parent))  # so it imports the modules beside it
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's code: show its traceback, then say what failed
        err_console.print_exception(max_frames=8)
        err_console.print(f"[bold red]error:[/] loading {path} failed: {type(exc).__name__}: {exc}")
        raise typer.Exit(2) from exc
    functions = [v for v in vars(module).values() if inspect.isfunction(v) and v.__module__ == module_name]
    if not name:
        if not functions:
            fail(f"{path} defines no function; give FILE:FUNCTION")
        return functions[-1]
    fn = getattr(module, name, None)
    if not callable(fn):
        found = ", ".join(f.__name__ for f in functions) or "none"
        fail(f"{path} has no function {name!r} (its functions: {found})")
    return fn


def connect(
    target: str = typer.Argument(..., metavar="FILE:FUNCTION",
                                 help="Python file and the function that decides, e.g. my_agent.py:act "
                                 "(default function: act; with --kaggle, the file's last function)."),
    name: str = typer.Option(..., help="Agent name; the first run registers it, later runs reuse it."),
    env: str = typer.Option("", help="Env id, e.g. connect_four-v3 (with --kaggle: the adapter's env)."),
    role: str = typer.Option("", help="Role it plays in a role env (hider, seeker, predator, prey)."),
    batched: bool = typer.Option(False, "--batched", help="FUNCTION takes whole batches: "
                                 "act(obs_batch, mask_batch) -> actions (or mark it @arena.client.connected.batched)."),
    text: bool = typer.Option(False, "--text", help="Ask for text renderings of the observations "
                              "(request['text'], for language-model agents)."),
    json_frames: bool = typer.Option(False, "--json", help="JSON text frames instead of msgpack."),
    kaggle: str = typer.Option("", "--kaggle", help="FUNCTION is a Kaggle agent(observation, configuration) "
                               "of this game: connectx."),
    max_matches: int | None = typer.Option(None, "--max-matches", min=1,
                                           help="Stop after this many finished matches."),
    refresh: float = typer.Option(5.0, min=0.5, help="Seconds between rating updates."),
    server: str = _server_option(),
    token: str | None = _token_option(),
) -> None:
    """Play your own function on the server as a connected agent, until Ctrl-C."""
    request_act: Callable[[dict], Any] | None = None
    act: Callable[..., Any] | None = None
    if kaggle:
        from arena.client.connected.kaggle import ADAPTERS

        if kaggle not in ADAPTERS:
            fail(f"--kaggle {kaggle!r} is not known; choose one of: {', '.join(ADAPTERS)}")
        kaggle_env, adapter = ADAPTERS[kaggle]
        if env and env != kaggle_env:
            fail(f"--kaggle {kaggle} plays {kaggle_env}, not {env}")
        if batched:
            fail("--kaggle agents answer one observation at a time; drop --batched")
        env = kaggle_env
        fn = load_function(target, default=None)
        request_act = adapter(fn)
    else:
        if not env:
            fail("--env is required, e.g. --env connect_four-v3 (`arena envs` lists them)")
        fn = load_function(target)
        if getattr(fn, "arena_request", False):
            request_act, text = fn, text or bool(getattr(fn, "arena_text", False))
        else:
            act = fn
    with remote(server, token) as client, _ctrl_c() as interrupted:
        session = client.connect(act, env=env, name=name, role=role or None, batched=batched,
                                 request_act=request_act, text=text, encoding="json" if json_frames else "msgpack",
                                 max_matches=max_matches, background=True)
        agent = session.agent
        verb = "registered" if session.created else "reusing"
        console.print(f"{verb} connected agent [bold]{agent['id']}[/] ({agent['name']}, {agent['env']}); "
                      f"playing as `{getattr(fn, '__name__', 'agent')}`, Ctrl-C stops")
        stopped = _follow(client, session, refresh, interrupted)
    progress = session.progress
    summary = (f"{progress.matches} matches: {progress.wins} won, {progress.draws} drawn, {progress.losses} lost"
               f" ({progress.forfeits} forfeited)")
    if session.error is not None:
        fail(f"{session.error}; {summary}")
    console.print(f"{'stopped' if stopped else 'done'}: agent {agent['id']}, {summary}")


@contextlib.contextmanager
def _ctrl_c():
    """Ctrl-C sets the yielded event instead of raising, from the moment the command starts
    connecting: a KeyboardInterrupt raised between starting the session and watching it would
    end the process with 130 and no summary. A second Ctrl-C still raises."""
    interrupted = threading.Event()

    def on_sigint(signum, frame) -> None:
        if interrupted.is_set():
            raise KeyboardInterrupt
        interrupted.set()

    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, previous)


def _follow(client: ArenaClient, session: Any, refresh: float, interrupted: threading.Event) -> bool:
    """Show the live state until the session ends; ``True`` when Ctrl-C ended it."""
    state = _Watch(session)
    next_poll = 0.0
    with Live(state.render(), console=console, refresh_per_second=4, transient=True) as live:
        while session.running and not interrupted.is_set():
            state.events(live.console)
            if time.monotonic() >= next_poll:
                state.poll(client)
                next_poll = time.monotonic() + refresh
            live.update(state.render())
            interrupted.wait(TICK_S)
        state.events(live.console)
    if not interrupted.is_set():
        return False
    console.print("stopping (Ctrl-C)...")
    session.stop(timeout=5)
    state.events(console)
    return True


class _Watch:
    """What ``arena connect`` shows: events as lines, and a live table of the state."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.agent: dict[str, Any] = dict(session.agent)
        self.connections = 0
        self.matches = 0
        self.connected = False
        self.rating_error = ""

    def poll(self, client: ArenaClient) -> None:
        try:
            self.agent = client.agent(self.session.agent_id)
            self.rating_error = ""
        except (ArenaHTTPError, ArenaConnectionError) as exc:  # shown, and tried again later
            self.rating_error = str(exc)

    def events(self, out) -> None:
        p = self.session.progress
        if p.connections > self.connections:
            out.print(f"reconnected (connection {p.connections})" if p.connections > 1
                      else f"connected to {self.session.client.url}")
            self.connections = p.connections
        elif self.connected and not p.connected and p.last_error:
            out.print(f"disconnected: {p.last_error}; reconnecting")
        self.connected = p.connected
        new = p.matches - self.matches
        for result in p.results[-new:] if new > 0 else []:
            out.print(f"match {str(result.get('match'))[:8]}: {_outcome(result, self.session)} "
                      f"({result.get('termination')})")
        self.matches = p.matches

    def render(self) -> Table:
        p = self.session.progress
        a = self.agent
        table = Table(show_header=False, box=None, padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        state = ("[green]connected[/]" if p.connected else
                 f"[yellow]reconnecting[/] ({p.last_error})" if p.last_error else "connecting")
        table.add_row("agent", f"{a.get('id')} {a.get('name')} ({a.get('env')})")
        table.add_row("connection", state)
        table.add_row("matches", f"{p.matches}   W {p.wins}  D {p.draws}  L {p.losses}   forfeits {p.forfeits}")
        table.add_row("requests", f"{p.requests} ({p.rows} rows)")
        for r in a.get("ratings") or []:
            table.add_row(f"rating ({r.get('role')})",
                          f"mu {_fmt(r.get('mu'))} ± {_fmt(r.get('sigma'))}  mu-3sigma {_fmt(r.get('conservative'))}"
                          f"  rated games {_fmt(r.get('games'))}")
        status = f"{a.get('status')}" + (f": {a['status_reason']}" if a.get("status_reason") else "")
        table.add_row("status", status + (f"  [dim](update failed: {self.rating_error})[/]"
                                          if self.rating_error else ""))
        return table


def _outcome(result: dict[str, Any], session: Any) -> str:
    seat_team = session.client.welcome.get("seat_team") or []
    seat = result["seats"][0]
    mine = seat_team[seat] if seat < len(seat_team) else seat
    winner = result.get("winner")
    return "draw" if winner is None else ("won" if winner == mine else "lost")


def register(app: typer.Typer) -> None:
    """Attach ``arena connect`` to the main ``arena`` app."""
    app.command("connect")(connect)
