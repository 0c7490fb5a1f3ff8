"""``arena league``: train an AlphaStar-style PPO league on the services, and show its state."""

from __future__ import annotations

import typer
from rich.console import Group
from rich.table import Table

from arena.cli.console import console, fail
from envs.errors import ArenaError
from league.evaluation.phases import PhaseTimeline

league_app = typer.Typer(help="Self-play training leagues (PPO learners in AlphaStar roles).",
                         no_args_is_help=True)


def phase_table(timeline: PhaseTimeline, roles: tuple[str, ...], title: str = "strategy phases") -> Table:
    """Per generation: episodes, the rate of each strategy phase, and mu +- sigma per role.

    Rates of a phase's first recorded occurrence are marked with ``*`` (the match is
    in the timeline's ``firsts`` and on the league's web page).
    """
    table = Table(title=title)
    table.add_column("generation", justify="right")
    table.add_column("episodes", justify="right")
    phases = timeline.phases
    rated = {r for rec in timeline.rows() for r in rec.ratings}
    shown_roles = [r for r in dict.fromkeys(roles) if r in rated] + sorted(rated - set(roles))
    for p in phases:
        table.add_column(p.replace("_", " "), justify="right")
    for r in shown_roles:
        table.add_column(f"{r} mu±sigma", justify="right")
    firsts = {(f.generation, f.phase) for f in timeline.firsts.values()}
    for rec in timeline.rows():
        rates = rec.rates
        cells = [f"{rates[p]:.2f}{'*' if (rec.generation, p) in firsts else ''}" if p in rates else "-"
                 for p in phases]
        ratings = [f"{rec.ratings[r][0]:.2f}±{rec.ratings[r][1]:.2f}" if r in rec.ratings else "-"
                   for r in shown_roles]
        table.add_row(str(rec.generation), f"{rec.episodes:,}", *cells, *ratings)
    return table


def learners_table(progress, title: str) -> Table:
    """Live numbers per learner: updates, steps/s, win rates against its main opponents."""
    table = Table(title=title)
    for col in ("learner", "role", "gen", "updates", "env steps", "steps/s", "win rate", "vs current",
                "top opponents (p, win rate)"):
        table.add_column(col, justify="left" if col in ("learner", "role", "top opponents (p, win rate)")
                         else "right")
    for lp in progress.learners:
        opps = ", ".join(f"{name} ({p:.2f}, {x:.2f})" for name, p, x in lp.opponents)
        table.add_row(lp.name, lp.role, str(lp.generation), str(lp.updates), f"{lp.env_steps:,}",
                      f"{lp.steps_per_s:,.0f}", f"{lp.win_rate:.2f}", f"{lp.expected_win_rate:.2f}", opps)
    return table


def ratings_table(ratings: dict[str, list[float]], title: str) -> Table:
    """Snapshots and baselines by TrueSkill mu."""
    table = Table(title=title)
    for col in ("#", "agent", "mu", "sigma", "mu-3sigma"):
        table.add_column(col, justify="left" if col == "agent" else "right", no_wrap=col == "agent")
    order = sorted(ratings.items(), key=lambda kv: -(kv[1][0] - 3 * kv[1][1]))
    for rank, (name, (mu, sigma)) in enumerate(order, 1):
        table.add_row(str(rank), name, f"{mu:.2f}", f"{sigma:.2f}", f"{mu - 3 * sigma:.2f}")
    return table


@league_app.command("train")
def train(
    env: str = typer.Option("connect_four-v3", help="Two-player board env with a vectorized core."),
    minutes: float = typer.Option(10.0, min=0.0, help="Training time budget of this run."),
    name: str = typer.Option("main", help="League name (resumes a saved league of this name)."),
    roles: str = typer.Option("main,main_exploiter,league_exploiter",
                              help="Comma-separated learner roles: main, main_exploiter, league_exploiter."),
    eval_matches: int = typer.Option(60, min=0, help="Rated matches per agent after training (0: skip)."),
    threads: int = typer.Option(2, min=1, help="torch CPU threads."),
    seed: int = typer.Option(0, help="Master seed."),
) -> None:
    """Train a league for N minutes with a live display, then rate every generation and plot it."""
    import time

    from arena.core.settings import get_settings
    from arena.training.state import LeagueDir
    from league.scheduling.roles import learner_names

    role_list = tuple(r.strip() for r in roles.split(",") if r.strip())
    try:
        if not LeagueDir(get_settings().data_dir, name).exists():
            learner_names(role_list)  # a new league's roster: wrong ones fail before torch loads
    except ValueError as exc:
        fail(str(exc))

    import torch
    from rich.live import Live

    from arena.storage.wiring import open_services
    from arena.training.config import LeagueConfig
    from arena.training.trainer import LeagueTrainer

    torch.set_num_threads(threads)
    config = LeagueConfig(name=name, env_id=env, minutes=minutes, seed=seed, roles=role_list)
    try:
        with open_services() as services:
            trainer = LeagueTrainer(services, config)
            if trainer.resumed:
                console.print(f"resuming league [bold]{name}[/]: {trainer.state.updates} updates, "
                              f"{len(trainer.state.snapshots)} snapshots")
            events: list[str] = []
            with Live(console=console, refresh_per_second=2) as live:
                last = [0.0]

                def show(p) -> None:
                    if p.event:
                        events.append(p.event)
                    if time.perf_counter() - last[0] < 0.5 and not p.event:
                        return
                    last[0] = time.perf_counter()
                    head = (f"[bold]{name}[/] on {env}: {p.elapsed / 60:.1f}/{minutes:g} min, "
                            f"{p.updates} updates, {p.env_steps:,} env steps, {p.steps_per_s:,.0f} steps/s, "
                            f"{p.snapshots} snapshots" + (f" (last: {events[-1]})" if events else ""))
                    parts = [head, learners_table(p, "learners")]
                    if p.ratings:
                        parts.append(ratings_table(p.ratings, "ladder ratings so far"))
                    live.update(Group(*parts))

                result = trainer.run(show)
            console.print()
            console.print(f"trained {result.updates} updates, {result.env_steps:,} env steps "
                          f"({result.steps_per_s:,.0f}/s); {len(trainer.state.snapshots)} snapshots in pool "
                          f"{trainer.pool_name}")
            if eval_matches:
                with console.status("rating every generation on the ladder..."):
                    ratings = trainer.report(eval_matches)
                console.print(ratings_table(ratings, f"league {name}: ladder ratings"))
                console.print(f"plot: [bold]{trainer.state.plot}[/]")
            console.print(f"state: {trainer.dir.root}  (tensorboard --logdir {trainer.dir.tb_dir})")
    except (ArenaError, ValueError) as exc:
        fail(str(exc))


@league_app.command("hide-and-seek")
def hide_and_seek(
    name: str = typer.Option("hide_and_seek", help="League name (resumes a saved league of this name)."),
    minutes: float = typer.Option(10.0, min=0.0, help="Training time budget of this run."),
    generations: int = typer.Option(0, min=0, help="Stop once the league has this many generations (0: no limit)."),
    updates: int = typer.Option(10, min=1, help="PPO updates per generation (a new league)."),
    envs: int = typer.Option(256, min=1, help="Parallel training episodes per update (a new league)."),
    eval_episodes: int = typer.Option(256, min=1, help="Evaluation episodes per pairing (a new league)."),
    record: int = typer.Option(4, min=0, help="Standard-layout matches of each generation recorded for replay."),
    threads: int = typer.Option(2, min=1, help="torch CPU threads."),
    device: str = typer.Option("auto", help="Training device: auto (CUDA when present), cpu, cuda."),
    seed: int = typer.Option(0, help="Master seed (a new league)."),
    shaped: bool = typer.Option(False, "--shaped", help="Pay the hiders for forts and a defended ramp (a new "
                                "league; default: the game's team reward alone)."),
    gamma: float = typer.Option(0.99, min=0.0, max=0.999999, help="Discount per step, e.g. OpenAI's 0.998 (a "
                                "new league)."),
    critic: str = typer.Option("central", help="What each team's critic sees: central (its agent's observation, "
                               "the full state and the agent's index) or local (the observation; a new league)."),
    exploiters: int = typer.Option(0, min=0, help="Exploiters per role: trained only against the current mains, "
                                   "frozen into their pools when they win, reset when they stop (a new league)."),
    exploiter_share: float = typer.Option(0.25, help="Share of the envs all exploiters play in together, "
                                          "between 0 and 1 (a new league)."),
    precision: str = typer.Option("auto", help="The networks' matrix products: fp32, bf16, or auto (bf16 on a CPU "
                                  "that multiplies bfloat16 in hardware; a new league)."),
) -> None:
    """Train the hider/seeker league (hide_and_seek-v1) and publish its strategy timeline after each generation.

    Generations, phase rates, hider and seeker ratings and replays of each phase's first
    match appear on the league's web page (/leagues/{id}) while it trains.
    """
    from dataclasses import replace

    import torch

    from arena.storage.wiring import open_services
    from arena.training.hide_and_seek.config import HideAndSeekLeagueConfig, default_v1_ppo
    from arena.training.hide_and_seek.service import HideAndSeekLeagueRun

    torch.set_num_threads(threads)
    roles = ("hider", "seeker")
    try:
        ppo = replace(default_v1_ppo(seed=seed, shaped=shaped), num_envs=envs, device=device, gamma=gamma,
                      critic=critic, exploiters=exploiters, exploiter_share=exploiter_share, precision=precision)
        config = HideAndSeekLeagueConfig(name=name, ppo=ppo, updates_per_generation=updates,
                                         eval_episodes=eval_episodes)
        with open_services() as services:
            with console.status(f"starting league [bold]{name}[/] (generation 0: snapshot, evaluation)..."):
                run = HideAndSeekLeagueRun(services, config, record_matches=record)
            league = run.league
            if run.resumed:
                console.print(f"resuming league [bold]{name}[/]: {len(league.generations)} generations, "
                              f"{league.trainer.updates} updates")
            console.print(f"league [bold]{name}[/] on {run.env_id}: web page /leagues/{run.league_id}")
            console.print(phase_table(run.timeline, roles, f"league {name}: strategy phases"))

            status = console.status("")

            def show(summary) -> None:
                status.stop()
                console.print(f"generation {summary.generation}: {summary.updates} updates, "
                              f"{summary.env_steps:,} env steps, {summary.train_seconds / 60:.1f} min trained")
                if summary.exploiters:  # apart from the mains: each exploiter's score and edge over its main
                    console.print("exploiters: " + ", ".join(
                        f"{e['role']} {e['index']} {e['score']:.2f} ({e['edge']:+.2f})"
                        + (f" frozen as {e['snapshot']}" if e["snapshot"] else "") + (" reset" if e["reset"] else "")
                        for e in summary.exploiters))
                console.print(phase_table(run.timeline, roles, f"league {name}: strategy phases"))
                status.update(f"training generation {summary.generation + 1}...")
                status.start()

            status.update(f"training generation {len(league.generations)}...")
            status.start()
            try:
                run.run(minutes, max_generations=generations or None, on_generation=show)
            finally:
                status.stop()
            for f in run.timeline.firsts.values():
                console.print(f"first {f.phase}: generation {f.generation}, match /matches/{f.match_id}")
            console.print(f"state: {league.dir.root}")
    except (ArenaError, ValueError) as exc:
        fail(str(exc))


@league_app.command("status")
def status(name: str = typer.Option("main", help="League name.")) -> None:
    """Show a saved league: learners, snapshots, ratings, files."""
    from arena.core.settings import get_settings
    from arena.training.state import LeagueDir

    league_dir = LeagueDir(get_settings().data_dir, name)
    if not league_dir.exists():
        # A hide-and-seek league keeps its state in the same folder (torch and the league's
        # modules load only when there is one to show).
        hs = None
        if league_dir.root.is_dir():
            from arena.training.hide_and_seek.service import load_timeline

            hs = load_timeline(get_settings().data_dir, name)
        if hs is None:
            fail(f"no league {name!r} under {league_dir.root.parent}; start one with "
                 f"`arena league train --name {name}`")
        env_id, timeline = hs
        console.print(f"hide-and-seek league [bold]{name}[/] on {env_id}: {len(timeline.generations)} generations")
        console.print(phase_table(timeline, ("hider", "seeker"), f"league {name}: strategy phases"))
        for f in timeline.firsts.values():
            console.print(f"first {f.phase}: generation {f.generation}, match {f.match_id}")
        console.print(f"state: {league_dir.root}")
        return
    state = league_dir.load_state()
    console.print(f"league [bold]{state.name}[/] on {state.env_id}: {state.runs} runs, "
                  f"{state.seconds / 60:.1f} min trained, {state.updates} updates, {state.env_steps:,} env steps")
    table = Table(title="learners")
    for col in ("learner", "role", "generation", "updates", "env steps", "resets", "win rates (decayed)"):
        table.add_column(col)
    names = state.snapshot_names()
    for lr in state.learners:
        rates = sorted(((names.get(o, o), lr.table.win_rate(o)) for o in lr.table.opponents()),
                       key=lambda t: t[1])[:4]
        table.add_row(lr.name, lr.role, str(lr.generation), str(lr.updates), f"{lr.env_steps:,}",
                      str(lr.resets), ", ".join(f"{o} {x:.2f}" for o, x in rates))
    console.print(table)
    snaps = Table(title="snapshots")
    for col in ("name", "agent key", "updates", "env steps", "reason", "mu", "sigma"):
        snaps.add_column(col)
    for s in state.snapshots:
        mu, sigma = state.ratings.get(s.name, ("-", "-"))
        snaps.add_row(s.name, s.key, str(s.updates), f"{s.env_steps:,}", s.reason,
                      f"{mu:.2f}" if mu != "-" else mu, f"{sigma:.2f}" if sigma != "-" else sigma)
    console.print(snaps)
    if state.phases.generations:
        from envs.registry import get_spec

        console.print(phase_table(state.phases, get_spec(state.env_id).roles))
        for f in state.phases.firsts.values():
            console.print(f"first {f.phase}: generation {f.generation}, match {f.match_id}")
    if state.plot:
        console.print(f"plot: {state.plot}")
    console.print(f"state: {league_dir.root}")


def register(app: typer.Typer) -> None:
    """Attach ``arena league`` to the main app."""
    app.add_typer(league_app, name="league")
