"""A small real arena database for the web tests: ladders played, one simple_tag match.

Everything goes through the real code paths: :class:`~arena.ladder.dispatch.Ladder` with the
:class:`~arena.runners.InProcessRunner` records rated matches (ratings, rating
events, participants), and an unrated ``simple_tag`` match is played by the engine
and stored through the repositories, as the service stores validation matches.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from agents.catalog import make_policy
from arena.engine import MatchEngine, MatchJob
from arena.ladder.dispatch import Ladder, LadderConfig, open_ladder
from arena.ladder.recorder import record_unrated
from arena.ladder.registration import register_builtin_agents
from arena.runners import AgentSource, InProcessRunner
from arena.storage.db import Sessions, make_engine, session_factory, upgrade
from arena.storage.db import repositories as repo
from arena.training.phases import timeline_rows
from envs.registry import get_spec
from league.evaluation.phases import PhaseTimeline

C4 = "connect_four-v3"
TTT = "tictactoe-v3"
TAG = "simple_tag-v3"
HS = "hide_and_seek-v0"
C4_AGENTS = ("heuristic", "heuristic:epsilon=0.5", "random")
# Joins the connect four ladder late and plays a few placement matches: its wide
# interval gives the leaderboard real rank ranges ("1–3").
NEWCOMER = "heuristic:epsilon=0.2"
NEWCOMER_MATCHES = 6


@dataclass
class SeededArena:
    """Handles on the seeded database."""

    url: str
    sessions: Sessions
    ladders: dict[str, Ladder] = field(default_factory=dict)
    tag_match_id: str = ""

    def play(self, env_id: str, matches: int, lineups: list[tuple[str, ...]] | None = None) -> int:
        """Play and record more rated matches on ``env_id``'s ladder (its own pairs, or ``lineups``)."""
        return self.ladders[env_id].run(InProcessRunner(), matches, lineups=lineups).recorded


def round_robin(agents: tuple[str, ...], n: int) -> list[tuple[str, str]]:
    """``n`` line-ups cycling over every ordered pair: every cell of the payoff page gets data
    (the ladder's own pairs skip the matches whose result is already certain)."""
    pairs = list(itertools.permutations(agents, 2))
    return [pairs[i % len(pairs)] for i in range(n)]


def seed_arena(url: str, c4_matches: int = 300, ttt_matches: int = 60) -> SeededArena:
    """Migrate ``url`` and fill it: connect four and tictactoe ladders, a simple_tag match.

    Connect four gets ``c4_matches`` among :data:`C4_AGENTS`, then
    :data:`NEWCOMER_MATCHES` more after :data:`NEWCOMER` joins.
    """
    upgrade(url)
    sessions = session_factory(make_engine(url))
    arena = SeededArena(url, sessions)
    for env_id, agents, n in ((C4, C4_AGENTS, c4_matches), (TTT, ("heuristic", "random"), ttt_matches)):
        ladder = open_ladder(sessions, LadderConfig(env_id, batch_size=100, seed=11))
        ladder.add_agents([AgentSource(key=a, builtin=a) for a in agents])
        arena.ladders[env_id] = ladder
        arena.play(env_id, n, round_robin(agents, n))
    arena.ladders[C4].add_agents([AgentSource(key=NEWCOMER, builtin=NEWCOMER)])
    # Half of the newcomer's placement: it stays the least certain agent on the board.
    cycle = [(NEWCOMER, "heuristic"), ("heuristic:epsilon=0.5", "random"), ("heuristic", NEWCOMER),
             ("random", "heuristic:epsilon=0.5")]
    arena.play(C4, NEWCOMER_MATCHES, [cycle[i % len(cycle)] for i in range(NEWCOMER_MATCHES)])
    arena.tag_match_id = record_unrated_tag_match(sessions)
    return arena


def record_unrated_tag_match(sessions: Sessions, seed: int = 5) -> str:
    """Play one simple_tag match (random predators vs random prey) and store it unrated."""
    spec = get_spec(TAG)
    engine = MatchEngine()
    try:
        job = MatchJob(seed=seed, agents=("random", "random"))
        [record] = engine.play(TAG, [job], {"random": make_policy("random", TAG)})
    finally:
        engine.close()
    with sessions.begin() as session:
        ids = register_builtin_agents(session, TAG, sorted(set(record.seats)))
    record_unrated(sessions, spec, [record], ids)
    return record.match_id


@dataclass
class HideAndSeekArena:
    """A database with recorded hide-and-seek matches and a league timeline over them."""

    url: str
    sessions: Sessions
    match_ids: list[str]
    league_id: int
    timeline: PhaseTimeline


def play_hide_and_seek(matches: int, seed: int = 3) -> list:
    """``matches`` hide-and-seek matches of random hiders against random seekers."""
    engine = MatchEngine()
    try:
        jobs = [MatchJob(seed=seed + i, agents=("random", "random")) for i in range(matches)]
        return engine.play(HS, jobs, {"random": make_policy("random", HS)})
    finally:
        engine.close()


def seed_hide_and_seek(url: str, matches: int = 4) -> HideAndSeekArena:
    """Migrate ``url``, record ``matches`` hide-and-seek matches and a 4-generation timeline.

    Generation ``g`` (1..4) counts match ``g - 1`` with its replayed phase values, so
    each phase's first occurrence is a real, replayable match; ``fort`` gets rates
    from a trainer's own counts (no match) in generations 3 and 4, and hider and
    seeker ratings move apart generation by generation.
    """
    from arena.read.grid_frames import match_phases

    upgrade(url)
    sessions = session_factory(make_engine(url))
    records = play_hide_and_seek(matches)
    with sessions.begin() as session:
        ids = register_builtin_agents(session, HS, ["random"])
    record_unrated(sessions, get_spec(HS), records, ids)
    timeline = PhaseTimeline()
    for gen, record in enumerate(records, 1):
        timeline.add_episode(gen, match_phases(record), record.match_id)
        timeline.set_rating(gen, "hider", 25.0 + gen, 8.0 - gen)
        timeline.set_rating(gen, "seeker", 25.0 - gen, 8.0 - gen)
        if gen >= 3:
            timeline.add_rates(gen, {"fort": 0.9}, episodes=99)
    with sessions.begin() as session:
        league_id = repo.create_league(session, "hs-demo", HS, {"roles": ["hider", "seeker"]})
        repo.replace_generations(session, league_id, timeline_rows(timeline))
    return HideAndSeekArena(url, sessions, [r.match_id for r in records], league_id, timeline)
