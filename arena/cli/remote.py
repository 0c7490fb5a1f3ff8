"""CLI commands that talk to an Arena server over HTTP (through :class:`arena.client.ArenaClient`).

``arena user create``, ``arena login``, ``arena submit``, ``arena agent ...``,
``arena challenge``, ``arena matches``, and ``arena leaderboard --server URL``. Every
remote command takes ``--server`` (default ``$ARENA_SERVER``, else
``http://127.0.0.1:8000``). ``arena agent init`` and ``arena agent export-onnx`` are
local: the first writes a fresh, randomly initialized policy the server accepts, the
second converts a checkpoint into an ONNX submission.

Exit codes: 2 for what the user can fix (a 4xx answer, bad options, a missing file),
1 for a server that fails (5xx) or cannot be reached.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from arena.cli.console import _fmt, console, fail, leaderboard_table
from arena.client import (
    DEFAULT_SERVER,
    ArenaClient,
    ArenaConnectionError,
    ArenaHTTPError,
    ArenaTimeout,
    placement_progress,
    save_token,
)
from envs.errors import ArenaError

user_app = typer.Typer(help="Users of an Arena server.", no_args_is_help=True)
agent_app = typer.Typer(help="Create, inspect and retire agents.", no_args_is_help=True)

SERVER_HELP = "Arena server URL (env ARENA_SERVER)."
TOKEN_HELP = "API token (env ARENA_TOKEN; default: the file `arena user create` saved)."


def _server_option() -> Any:
    return typer.Option(DEFAULT_SERVER, "--server", envvar="ARENA_SERVER", help=SERVER_HELP)


def _token_option() -> Any:
    return typer.Option(None, "--token", envvar="ARENA_TOKEN", help=TOKEN_HELP, show_default=False)




@contextmanager
def remote(server: str, token: str | None = None) -> Iterator[ArenaClient]:
    """An :class:`ArenaClient` whose errors end the command with a clear message.

    A 4xx answer or a local :class:`ArenaError` exits 2; a 5xx answer or an
    unreachable server exits 1.
    """
    try:
        with ArenaClient(server, token=token) as client:
            yield client
    except ArenaHTTPError as exc:
        fail(f"{exc.detail} (HTTP {exc.status} from {server})", 1 if exc.status >= 500 else 2)
    except ArenaConnectionError as exc:
        fail(str(exc), 1)
    except (ArenaError, ValueError) as exc:
        fail(str(exc))


def agent_table(agent: dict[str, Any]) -> Table:
    """One agent as a two-column table, ratings included."""
    table = Table(title=f"agent {agent.get('id')}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    for field in ("id", "name", "key", "env", "kind", "format", "arch", "owner", "status",
                  "status_reason", "published",
                  "created_at", "queue_position", "expected_matches_to_settle"):
        if field in agent and agent[field] not in (None, ""):
            table.add_row(field, _fmt(agent[field]))
    for rating in agent.get("ratings") or []:
        table.add_row(
            f"rating ({rating.get('role', '?')})",
            f"mu {_fmt(rating.get('mu'))}  sigma {_fmt(rating.get('sigma'))}  "
            f"mu-3sigma {_fmt(rating.get('conservative'))}  games {_fmt(rating.get('games'))}",
        )
    return table


def remote_leaderboard(server: str, env: str, role: str, limit: int, offset: int = 0) -> None:
    """Prints the leaderboard of ``env`` as served by ``server`` (``arena leaderboard --server``)."""
    with remote(server) as client:
        board = client.leaderboard(env, role or None, limit=limit, offset=offset)
    console.print(leaderboard_table(board))


# -- users ---------------------------------------------------------------------------


@user_app.command("create")
def user_create(
    name: str = typer.Argument(..., help="User name (unique on the server)."),
    server: str = _server_option(),
    save: bool = typer.Option(True, "--save/--no-save", help="Save the token for later commands."),
) -> None:
    """Create a user; prints its API token once and saves it (mode 0600)."""
    with remote(server, token="") as client:
        user = client.create_user(name)
    console.print(f"created user [bold]{user['name']}[/] (id {user['id']})")
    console.print(f"API token (shown once): [bold]{user['token']}[/]")
    if save:
        path = save_token(user["token"])
        console.print(f"token saved to {path}; later commands use it (or set ARENA_TOKEN)")


def login(
    token: str = typer.Option(..., prompt="API token", hide_input=True, envvar="ARENA_TOKEN",
                              help="The token `arena user create` printed."),
    server: str = _server_option(),
    check: bool = typer.Option(True, "--check/--no-check", help="Verify the token with the server first."),
) -> None:
    """Save an existing API token for later commands (mode 0600)."""
    token = token.strip()
    if not token:
        fail("the token is empty")
    if check:
        with remote(server, token) as client:
            user = client.me()
        console.print(f"token of user [bold]{user['name']}[/] on {server}")
    console.print(f"token saved to {save_token(token)}")


@user_app.command("me")
def user_me(server: str = _server_option(), token: str | None = _token_option()) -> None:
    """Show the user the current token belongs to."""
    with remote(server, token) as client:
        user = client.me()
    console.print(f"{user['name']} (id {user['id']}{', admin' if user.get('is_admin') else ''})")


# -- agents --------------------------------------------------------------------------


def submit(
    path: Path = typer.Argument(
        ..., help="agent.safetensors or agent.onnx (its agent.json spec beside it)."
    ),
    env: str = typer.Option("", help="Env id (default: the spec's env)."),
    name: str = typer.Option("", help="Display name (default: the spec's name, else the agent key)."),
    wait: bool = typer.Option(False, "--wait/--no-wait", help="Wait until placement is over."),
    timeout: float = typer.Option(600.0, help="Seconds --wait waits at most."),
    competition: int = typer.Option(0, "--competition", help="Submit it as your team's entry of this "
                                    "competition (see `arena competition`)."),
    server: str = _server_option(),
    token: str | None = _token_option(),
) -> None:
    """Upload a checkpoint or an ONNX model; prints its id, status and place in the queue."""
    with remote(server, token) as client:
        if competition:
            made = client.submit_entry(competition, path, name=name or None, env=env or None)
            agent = made["agent"]
            console.print(f"entry {made['entry']['id']} of team {made['entry']['team']} in competition "
                          f"{competition}")
        else:
            agent = client.submit_agent(path, name=name or None, env=env or None)
        console.print(agent_table(agent))
        console.print(f"submitted as agent [bold]{agent['id']}[/]; follow it with "
                      f"`arena agent show {agent['id']}`")
        if wait:
            with console.status(f"waiting for agent {agent['id']} to be rated") as status:
                agent = client.wait_for_status(agent["id"], {"rated", "rejected", "retired"}, timeout,
                                               on_progress=lambda a: status.update(Text(placement_progress(a))))
            console.print(agent_table(agent))
    if wait and agent.get("status") == "rejected":
        fail(f"agent {agent['id']} was rejected: {agent.get('status_reason') or 'no reason given'}")


@agent_app.command("init")
def agent_init(
    env: str = typer.Option("connect_four-v3", help="Registered env id."),
    arch: str = typer.Option("mlp", help="Architecture from Arena's registry: mlp or cnn."),
    hparams: str = typer.Option("{}", help='Hyper-parameters as JSON, e.g. \'{"hidden": [64, 64]}\'.'),
    seed: int = typer.Option(0, help="Initialization seed (same seed, same weights)."),
    role: str = typer.Option("", help="Role to play (needed when the env has several)."),
    name: str = typer.Option("", help="Display name stored in the spec."),
    out: Path = typer.Option(Path("agent.safetensors"), help="Weights path; the .json spec goes beside it."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing files."),
) -> None:
    """Write a freshly initialized policy (weights + spec) that the server accepts."""
    from envs.registry import get_spec

    try:
        params = json.loads(hparams)
    except ValueError as exc:
        fail(f"--hparams is not valid JSON ({exc}); e.g. '{{\"hidden\": [64, 64]}}'")
    if not isinstance(params, dict):
        fail("--hparams must be a JSON object, e.g. '{\"hidden\": [64, 64]}'")
    try:
        get_spec(env)  # fail fast, before importing torch
    except ArenaError as exc:
        fail(str(exc))
    from agents.archs import count_parameters
    from agents.checkpoint import checkpoint_paths
    from agents.neural import write_checkpoint

    weights_path, spec_path = checkpoint_paths(out)
    existing = [str(p) for p in (weights_path, spec_path) if p.exists()]
    if existing and not force:
        fail(f"{', '.join(existing)} already exist(s); pass --force to overwrite")
    try:
        ck = write_checkpoint(weights_path, env, arch, params, seed=seed, role=role or None,
                              name=name or None)
    except (ArenaError, ValueError) as exc:
        fail(str(exc))
    spec = ck.spec
    n_params = count_parameters(spec.arch, spec.hparams, spec.obs_shape, spec.num_actions)
    console.print(f"wrote [bold]{weights_path}[/] and [bold]{spec_path}[/]")
    console.print(f"{spec.arch} {json.dumps(spec.hparams)} for {spec.env} ({spec.role}): "
                  f"{n_params:,} parameters, sha256 {ck.sha256[:16]}")
    console.print(f"submit it with `arena submit {weights_path}`")


@agent_app.command("export-onnx")
def agent_export_onnx(
    checkpoint: Path = typer.Argument(..., help="agent.safetensors (its agent.json spec beside it), or a "
                                      "Stable-Baselines3 model .zip (with --env)."),
    out: Path = typer.Option(None, help="The .onnx to write (default: <stem>-onnx.onnx beside "
                             "the checkpoint, <stem>.onnx beside a .zip); its .json spec goes beside it."),
    env: str = typer.Option("", help="The Arena env an SB3 .zip was trained on (arena.gym)."),
    role: str = typer.Option("", help="The role an SB3 .zip plays, in role envs."),
    sb3: str = typer.Option("auto", help="The SB3 algorithm of a .zip: auto, maskable_ppo, ppo, a2c or dqn."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing files."),
) -> None:
    """Convert a checkpoint or an SB3 model into an ONNX submission (model + spec), validated as the
    server will. An SB3 .zip is loaded here, on your side (SB3's loader unpickles: export only your own
    models); the server gets ONNX."""
    if checkpoint.suffix == ".zip":
        _export_sb3(checkpoint, out, env, role, sb3, force)
        return
    target = out if out is not None else checkpoint.with_name(f"{checkpoint.stem}-onnx.onnx")
    if target.suffix not in (".onnx", ".json"):
        target = target.with_name(f"{target.name}.onnx")
    model_path, spec_path = target.with_suffix(".onnx"), target.with_suffix(".json")
    if spec_path.resolve() == checkpoint.with_suffix(".json").resolve():
        fail(f"{spec_path} is the checkpoint's own spec; write the model under another name (--out)")
    existing = [str(p) for p in (model_path, spec_path) if p.exists()]
    if existing and not force:
        fail(f"{', '.join(existing)} already exist(s); pass --force to overwrite")
    from agents.onnx_agents.export import export_onnx_file  # torch and onnx only now

    try:
        model = export_onnx_file(checkpoint, model_path)
    except ArenaError as exc:
        fail(str(exc))
    spec = model.spec
    console.print(f"wrote [bold]{model_path}[/] and [bold]{spec_path}[/] "
                  f"({len(model.data):,} bytes, opset {model.opset})")
    console.print(f"onnx (from {spec.hparams.get('source_arch')}) for {spec.env} ({spec.role}): "
                  f"sha256 {model.sha256[:16]}")
    console.print(f"submit it with `arena submit {model_path}`")


def _export_sb3(path: Path, out: Path | None, env: str, role: str, algo: str, force: bool) -> None:
    """``arena agent export-onnx model.zip --env ENV``: :func:`arena.client.onnx_export.export_submission`."""
    if not env:
        fail(f"{path.name} is a Stable-Baselines3 model: say which Arena env it plays with --env "
             "(e.g. --env connect_four-v3)")
    target = out if out is not None else path.with_suffix(".onnx")
    model_path, spec_path = target.with_suffix(".onnx"), target.with_suffix(".json")
    existing = [str(p) for p in (model_path, spec_path) if p.exists()]
    if existing and not force:
        fail(f"{', '.join(existing)} already exist(s); pass --force to overwrite")
    from arena.client.onnx_export import export_submission, load_sb3  # torch, SB3 and onnx only now

    try:
        model = export_submission(load_sb3(path, algo), env, model_path, role=role or None)
    except (ArenaError, TypeError) as exc:
        fail(str(exc))
    console.print(f"wrote [bold]{model_path}[/] and [bold]{spec_path}[/] "
                  f"({len(model.data):,} bytes, opset {model.opset})")
    console.print(f"onnx (from {model.spec.hparams.get('source')}) for {model.spec.env} ({model.spec.role}): "
                  f"sha256 {model.sha256[:16]}")
    console.print(f"submit it with `arena submit {model_path}`")


@agent_app.command("show")
def agent_show(
    agent_id: int = typer.Argument(..., help="Agent id."),
    server: str = _server_option(),
) -> None:
    """Show one agent: status, queue position, ratings."""
    with remote(server) as client:
        agent = client.agent(agent_id)
    console.print(agent_table(agent))


@agent_app.command("list")
def agent_list(
    env: str = typer.Option("", help="Only agents of this env."),
    owner: str = typer.Option("", help="Only agents of this user."),
    status: str = typer.Option("", help="Only agents in this status."),
    limit: int = typer.Option(50, min=1, help="Rows to show."),
    offset: int = typer.Option(0, min=0, help="Rows to skip."),
    server: str = _server_option(),
) -> None:
    """List agents on the server."""
    with remote(server) as client:
        page = client.agents(env or None, owner or None, status or None, limit=limit, offset=offset)
    table = Table(title=f"agents ({page.get('count', len(page['data']))} in all)")
    for col in ("id", "name", "env", "kind", "owner", "status", "created_at"):
        table.add_column(col, justify="right" if col == "id" else "left")
    for a in page["data"]:
        table.add_row(*(_fmt(a.get(c)) for c in ("id", "name", "env", "kind", "owner", "status",
                                                 "created_at")))
    console.print(table)


@agent_app.command("delete")
def agent_delete(
    agent_id: int = typer.Argument(..., help="Agent id."),
    server: str = _server_option(),
    token: str | None = _token_option(),
) -> None:
    """Retire (delete) one of your agents; its matches stay in the log."""
    with remote(server, token) as client:
        client.delete_agent(agent_id)
    console.print(f"agent {agent_id} deleted")


@agent_app.command("publish")
def agent_publish(
    agent_id: int = typer.Argument(..., help="Agent id (one of yours)."),
    private: bool = typer.Option(False, "--private", help="Unpublish: only you (and admins) may download it."),
    server: str = _server_option(),
    token: str | None = _token_option(),
) -> None:
    """Publish one of your agents' weights: anyone may then download it (`arena agent pull`)."""
    with remote(server, token) as client:
        agent = client.publish(agent_id, not private)
    state = "published: anyone may download it" if agent.get("published") else "private"
    console.print(f"agent {agent_id} ({agent.get('name')}) is {state}")


@agent_app.command("pull")
def agent_pull(
    agent_id: int = typer.Argument(..., help="Agent id (a published agent, or one of yours)."),
    out: Path = typer.Option(Path("."), help="Folder for agent-<id>.safetensors (or .onnx) and agent-<id>.json."),
    force: bool = typer.Option(False, "--force", help="Overwrite files with other content."),
    server: str = _server_option(),
    token: str | None = _token_option(),
) -> None:
    """Download an agent's weights and spec side by side, validated; use them as `file:` opponents."""
    with remote(server, token) as client:
        try:
            path = client.pull_agent(agent_id, out, force=force)
        except ArenaHTTPError as exc:
            if exc.status == 403:
                fail(f"agent {agent_id} is private: its owner has not published it, so only they "
                     f"(and admins) may download it (HTTP 403 from {server})")
            raise
        agent = client.agent(agent_id)
    console.print(f"wrote [bold]{path}[/] and [bold]{path.with_suffix('.json')}[/] "
                  f"(agent {agent_id}, {agent.get('name')}, {agent.get('env')})")
    console.print(f"play against it: arena.gym.make({agent.get('env')!r}, opponents=['file:{path}'])")


# -- matches -------------------------------------------------------------------------


def challenge(
    agent_a: int = typer.Argument(..., help="First agent id."),
    agent_b: int = typer.Argument(..., help="Second agent id."),
    env: str = typer.Option("", help="Env id (default: the first agent's env)."),
    matches: int = typer.Option(2, min=1, help="Matches to play (seats alternate)."),
    rated: bool = typer.Option(False, "--rated/--unrated",
                               help="Move ratings: admins only (the server's ARENA_ADMIN_TOKEN); a user's "
                               "challenge is unrated and --rated is refused (403)."),
    timeout: float = typer.Option(600.0, help="Seconds to wait for the server to play it."),
    server: str = _server_option(),
    token: str | None = _token_option(),
) -> None:
    """Play matches between two agents and print the results.

    The server queues the challenge and its background service plays it; this follows
    it with a progress bar. A user's challenge is unrated: it shows in both agents' match
    history and moves no rating (ratings come only from the ladder's own pairings).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with remote(server, token) as client:
        env = env or client.agent(agent_a)["env"]
        queued = client.challenge(env, [agent_a, agent_b], matches=matches, rated=rated, wait=False)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console, transient=True) as bar:
            task = bar.add_task(f"challenge {queued['id'][:8]}: {queued['status']}", total=len(queued["match_ids"]))

            def show(c: dict[str, Any]) -> None:
                bar.update(task, completed=c.get("recorded", 0), description=f"challenge {c['id'][:8]}: {c['status']}")

            try:
                result = client.wait_for_challenge(queued["id"], timeout=timeout, on_progress=show)
            except ArenaTimeout as exc:
                fail(f"{exc}; GET /api/v1/challenges/{queued['id']} shows it later", 1)
    if result["status"] == "failed":
        fail(f"challenge {result['id']} failed: {result.get('error')}", 1)
    console.print(results_table(result.get("results") or [], f"challenge {agent_a} vs {agent_b}"))
    recorded = "(rated)" if result.get("rated", rated) else "(unrated): no rating moved"
    console.print(f"{len(result.get('match_ids') or [])} matches recorded {recorded}")


def probe_table(probe: dict[str, Any]) -> Table:
    """One probe: status, budget, the exploiter's win rate with its interval."""
    table = Table(title=f"probe {probe['id']} of agent {probe['agent_id']} ({probe['env']})", show_header=False)
    rate = probe.get("win_rate")
    rows = [("status", probe["status"] + (f": {probe['error']}" if probe.get("error") else "")),
            ("budget", f"{probe['budget_env_steps']:,} env steps (trained {probe['env_steps']:,})"),
            ("exploiter win rate", "-" if rate is None else
             f"{rate:.3f}  95% [{probe['ci_low']:.3f}, {probe['ci_high']:.3f}]  (high = exploitable)"),
            ("games (W/D/L)", "-" if not probe.get("games") else
             f"{probe['games']} ({probe['wins']}/{probe['draws']}/{probe['losses']})"),
            ("requested by", probe["requested_by"])]
    for key, value in rows:
        table.add_row(key, value)
    return table


def probe(
    agent_id: int = typer.Argument(..., help="Agent id."),
    budget: int | None = typer.Option(None, min=0, help="Env steps (default and most for non-admins: "
                                      "the server's ARENA_PROBE_BUDGET_STEPS)."),
    seed: int = typer.Option(0, min=0, help="Seeds the exploiter and the evaluation games."),
    wait: bool = typer.Option(True, "--wait/--no-wait", help="Follow the probe with a progress bar until it ends."),
    timeout: float = typer.Option(3600.0, help="Seconds --wait waits at most."),
    poll: float = typer.Option(1.0, min=0.05, help="Seconds between progress polls."),
    server: str = _server_option(),
    token: str | None = _token_option(),
) -> None:
    """Probe how exploitable an agent is: a best response trained against it for a budget of env steps."""
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    with remote(server, token) as client:
        queued = client.probe(agent_id, budget, seed)
        console.print(f"probe [bold]{queued['id']}[/] of agent {agent_id}: {queued['status']}, "
                      f"{queued['budget_env_steps']:,} env steps")
        result = queued
        if wait:
            deadline = time.monotonic() + timeout
            columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn())
            with Progress(*columns, console=console, transient=True) as bar:
                task = bar.add_task(f"probe {queued['id']}: {queued['status']}", total=1.0)
                while result["status"] in ("queued", "running") and time.monotonic() < deadline:
                    time.sleep(poll)
                    result = next((p for p in client.probes(agent_id, limit=50)["data"] if p["id"] == queued["id"]),
                                  result)
                    bar.update(task, completed=result["progress"],
                               description=f"probe {queued['id']}: {result['status']}")
        console.print(probe_table(result))
    if wait and result["status"] in ("queued", "running"):
        fail(f"probe {result['id']} is still {result['status']} after {timeout:g} s", 1)
    if result["status"] == "failed":
        fail(f"probe {result['id']} failed: {result.get('error')}", 1)


def results_table(rows: list[dict[str, Any]], title: str) -> Table:
    """Match summaries: id, seats, winner, termination."""
    table = Table(title=title)
    for col in ("match", "seats", "winner", "termination", "scores"):
        table.add_column(col)
    for m in rows:
        seats = m.get("seats") or m.get("agents") or []
        seat_names = [s.get("name") or s.get("key") or str(s.get("agent_id")) if isinstance(s, dict)
                      else str(s) for s in seats]
        winner = m.get("winner")
        table.add_row(str(m.get("id") or m.get("match_id") or "-")[:8], " vs ".join(seat_names),
                      "draw" if winner is None else str(winner), _fmt(m.get("termination")),
                      " ".join(_fmt(s, 1) for s in m.get("scores") or []))
    return table


def list_matches(
    env: str = typer.Option("", help="Only matches of this env."),
    agent: int | None = typer.Option(None, help="Only matches this agent played."),
    limit: int = typer.Option(20, min=1, help="Matches to show (newest first)."),
    server: str = _server_option(),
) -> None:
    """Recent matches, newest first (follows the server's cursors)."""
    with remote(server) as client:
        rows = list(client.iter_matches(env or None, agent, page_size=min(limit, 100), max_items=limit))
    console.print(results_table(rows, "matches, newest first"))


def register(app: typer.Typer) -> None:
    """Attach the client commands to the main ``arena`` app."""
    app.add_typer(user_app, name="user")
    app.add_typer(agent_app, name="agent")
    app.command("login")(login)
    app.command("submit")(submit)
    app.command("challenge")(challenge)
    app.command("probe")(probe)
    app.command("matches")(list_matches)
