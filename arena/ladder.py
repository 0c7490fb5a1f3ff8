"""The ladder service: schedule rated matches, play them on a runner, record them.

One loop: pairings are drawn from the current ratings (placement first, then by
match quality), turned into jobs whose ids exist before dispatch, played by a
:class:`~arena.runners.MatchRunner` (in-process or Ray) with bounded in-flight work,
and recorded exactly once with ratings updated in the same transaction.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from agents.policy import derive_seed
from arena.db import repositories as repo
from arena.engine import MatchJob
from arena.metrics import set_in_flight
from arena.recorder import MatchRecorder, load_book
from arena.runners import AgentSource, MatchBatch, MatchRunner
from envs.registry import get_spec
from league.ladder import DEFAULT_TARGET_SIGMA, RatingBook, sample_ladder_pairs
from league.ratings import RatingEnv


@dataclass
class LadderConfig:
    """Knobs of a ladder run.

    Attributes:
        env_id: The env the ladder plays.
        batch_size: Matches per dispatched batch (enough that Ray overhead is noise).
        target_sigma: An agent is "placed" once its sigma falls below this.
        seed: Master seed of pairings and match seeds.
    """

    env_id: str
    batch_size: int = 4096
    target_sigma: float = DEFAULT_TARGET_SIGMA
    seed: int = 0


@dataclass
class LadderProgress:
    """Counters reported after every recorded batch."""

    scheduled: int = 0
    recorded: int = 0
    duplicates: int = 0
    in_flight: int = 0
    batches: int = 0
    terminations: dict[str, int] = field(default_factory=dict)


class Ladder:
    """A rated ladder of agents on one env, persisted in SQL."""

    def __init__(self, sessions: sessionmaker[Session], config: LadderConfig,
                 env: RatingEnv | None = None) -> None:
        self.sessions = sessions
        self.config = config
        self.spec = get_spec(config.env_id)
        if not self.spec.symmetric:
            raise ValueError(f"{config.env_id} has roles {self.spec.roles}; ladders need a symmetric env")
        self.env = env or RatingEnv()
        self.recorder = MatchRecorder(sessions, self.spec, self.env)
        self.sources: dict[str, AgentSource] = {}
        self.agent_ids: dict[str, int] = {}
        self.book = RatingBook(self.env)

    def add_agents(self, sources: list[AgentSource], kind: str = "builtin") -> None:
        """Register agents (idempotent) and load their current standings."""
        with self.sessions.begin() as session:
            repo.ensure_env(session, self.spec.env_id, {"seats": list(self.spec.seats),
                                                        "roles": list(self.spec.roles)})
            ids = repo.get_or_create_agents(session, self.spec.env_id, [s.key for s in sources], kind,
                                            status="placement")
            self.agent_ids.update(ids)
            self.sources.update({s.key: s for s in sources})
            self.book = load_book(session, self.env, self.agent_ids)

    def sync_agents(self, sources: list[AgentSource]) -> None:
        """Make ``sources`` (agents already in the database) the ladder's exact roster."""
        if {s.key: s for s in sources} == self.sources:
            return
        with self.sessions() as session:
            ids = repo.get_or_create_agents(session, self.spec.env_id, [s.key for s in sources], "builtin")
            self.agent_ids = ids
            self.sources = {s.key: s for s in sources}
            self.book = load_book(session, self.env, ids)

    def _batches(self, total: int, progress: LadderProgress) -> Iterator[MatchBatch]:
        rng = np.random.default_rng(self.config.seed)
        keys = sorted(self.sources)
        role = self.spec.roles[0]
        start = self._matches_so_far()
        for b, lo in enumerate(range(0, total, self.config.batch_size)):
            n = min(self.config.batch_size, total - lo)
            ratings = [self.book.rating((k, role)) for k in keys]
            pairs = sample_ladder_pairs(ratings, n, rng, env=self.env, target_sigma=self.config.target_sigma)
            seeds = derive_seed(self.config.seed, np.arange(start + lo, start + lo + n)).tolist()
            jobs = [MatchJob(seed=s, agents=(keys[i], keys[j]), match_id=str(uuid.uuid4()))
                    for s, (i, j) in zip(seeds, pairs)]
            progress.scheduled += n
            yield MatchBatch(self.spec.env_id, jobs, self.sources, batch_id=b)

    def _matches_so_far(self) -> int:
        with self.sessions() as session:
            return repo.count_matches(session, self.spec.env_id)

    def run(self, runner: MatchRunner, matches: int,
            on_progress: Callable[[LadderProgress], None] | None = None) -> LadderProgress:
        """Play and record ``matches`` rated matches."""
        if len(self.sources) < 2:
            raise ValueError("add at least two agents before running the ladder")
        progress = LadderProgress()
        for batch, records in runner.run(self._batches(matches, progress)):
            outcome = self.recorder.record(records, self.agent_ids)
            self.book.standings.update(outcome.book.standings)
            progress.recorded += outcome.inserted
            progress.duplicates += outcome.duplicates
            progress.batches += 1
            progress.in_flight = progress.scheduled - progress.recorded
            set_in_flight(self.spec.env_id, progress.in_flight)
            for r in records:
                progress.terminations[r.termination] = progress.terminations.get(r.termination, 0) + 1
            if on_progress:
                on_progress(progress)
        set_in_flight(self.spec.env_id, 0)
        self._update_statuses()
        return progress

    def _update_statuses(self) -> None:
        role = self.spec.roles[0]
        with self.sessions.begin() as session:
            for key, agent_id in self.agent_ids.items():
                placed = self.book.rating((key, role)).sigma <= self.config.target_sigma
                repo.set_agent_status(session, agent_id, "rated" if placed else "placement")
