"""After training: validate and rate a league's snapshots on the ladder, and plot them.

Ratings come from the normal service path: queued snapshot agents are validated by
:meth:`arena.ladder.background.BackgroundService.validate` (the checks every submission gets), then a
:class:`~arena.ladder.dispatch.Ladder` plays rated matches among them and the scripted
baselines on an :class:`~arena.runners.InProcessRunner`, recording every match and
rating in the database. The plot shows TrueSkill mu (with +-sigma bars) per
generation, one line per learner, and the baselines as horizontal lines.
"""

from __future__ import annotations

import logging
from pathlib import Path

from arena.core.agent_status import AgentStatus
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.dispatch import LadderConfig, open_ladder
from arena.runners import AgentSource, InProcessRunner
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from arena.training.state import LeagueState
from envs.registry import get_spec

log = logging.getLogger(__name__)


def validate_snapshots(services: Services, state: LeagueState, runner: InProcessRunner) -> dict[str, str]:
    """Validate the league's queued agents; returns ``{name: status}`` of every snapshot."""
    service = BackgroundService(services, runner, ServiceConfig(envs=(state.env_id,)))
    keys = {s.key: s.name for s in state.snapshots}
    statuses: dict[str, str] = {}
    try:
        with services.sessions() as session:
            agents = [repo.get_agent_by_key(session, state.env_id, k) for k in keys]
        for agent in agents:
            if agent is not None and agent.status == AgentStatus.QUEUED:
                service.validate(agent)
        with services.sessions() as session:
            for key, name in keys.items():
                agent = repo.get_agent_by_key(session, state.env_id, key)
                statuses[name] = agent.status if agent else "missing"
    finally:
        service.engine.close()
    return statuses


def rate_league(services: Services, state: LeagueState, baselines: tuple[str, ...],
                matches_per_agent: int = 60, seed: int = 0) -> dict[str, list[float]]:
    """Validate, then play ``matches_per_agent`` rated ladder matches per agent.

    Returns:
        ``{name: [mu, sigma]}`` for every accepted snapshot and every baseline.
    """
    runner = InProcessRunner(services.snapshot_cache_factory()())
    try:
        statuses = validate_snapshots(services, state, runner)
        accepted = [s for s in state.snapshots if statuses.get(s.name) not in (AgentStatus.REJECTED, "missing")]
        for s in state.snapshots:
            if s not in accepted:
                log.warning("snapshot %s was %s; it is left off the ladder", s.name, statuses.get(s.name))
        ladder = open_ladder(services.sessions, LadderConfig(state.env_id, batch_size=256, seed=seed))
        ladder.add_agents([AgentSource(key=b, builtin=b) for b in baselines]
                          + [AgentSource(key=s.key, snapshot=s.sha256) for s in accepted])
        agents = len(baselines) + len(accepted)
        ladder.run(runner, max(1, matches_per_agent * agents // 2))
    finally:
        runner.close()
    role = get_spec(state.env_id).roles[0]
    names = {s.key: s.name for s in accepted}
    ratings = {}
    for key in [*baselines, *names]:
        r = ladder.book.rating((key, role))
        ratings[names.get(key, key)] = [float(r.mu), float(r.sigma)]
    return ratings


def plot_ratings(state: LeagueState, ratings: dict[str, list[float]], path: Path) -> Path:
    """PNG of mu +- sigma per generation per learner; baselines as dashed lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    for learner in state.learners:
        points = [(s.generation, *ratings[s.name]) for s in state.snapshots
                  if s.learner == learner.name and s.name in ratings]
        if points:
            gen, mu, sigma = zip(*points)
            ax.errorbar(gen, mu, yerr=sigma, marker="o", capsize=3, label=f"{learner.name} ({learner.role})")
    snapshot_names = {s.name for s in state.snapshots}
    for i, (name, (mu, _)) in enumerate(sorted((k, v) for k, v in ratings.items() if k not in snapshot_names)):
        ax.axhline(mu, linestyle="--", linewidth=1, color=f"C{(i + 3) % 10}", label=name)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("generation (snapshot number)")
    ax.set_ylabel("TrueSkill mu (bars: sigma)")
    ax.set_title(f"league {state.name} on {state.env_id}")
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
