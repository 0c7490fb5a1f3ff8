"""The ladder service: schedule rated matches, play them on a runner, record them.

One loop: line-ups are chosen from the current ratings for expected information
(:func:`arena.ladder.pacing.choose_lineups`: unsettled agents first), or handed in
by the caller (the service's :class:`~arena.ladder.pacing.LadderPacer`), turned into
jobs whose ids exist before dispatch, written to the persisted match queue, played
by a :class:`~arena.runners.MatchRunner` (in-process or Ray) with bounded in-flight
work, and recorded exactly once with ratings updated (and the jobs dequeued) in the
same transaction.

Whatever a previous run left in the queue — it was stopped, killed, or lost its
database for longer than ``db_retry_s`` — is dispatched first, with the same ids and
seeds, so nothing scheduled is lost and nothing is recorded twice.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
from sqlalchemy.orm import Session

from agents.policy import derive_seed
from arena.core.agent_status import AgentStatus
from arena.core.metrics import set_in_flight
from arena.engine import MatchJob
from arena.ladder.pacing import choose_lineups
from arena.ladder.recorder import MatchRecorder, load_book
from arena.ladder.registration import register_builtin_agents, register_env
from arena.runners import AgentSource, MatchBatch, MatchRunner
from arena.storage.db import Sessions
from arena.storage.db import repositories as repo
from arena.storage.retry import retry_transient
from envs.errors import UnknownAgent
from envs.registry import get_spec
from league.ratings.book import DEFAULT_TARGET_SIGMA, RatingBook
from league.ratings.rating import RatingEnv

log = logging.getLogger(__name__)

T = TypeVar("T")


CONNECTED_KINDS = ("connected", "human")
"""Agents played by a client over the connected-agent protocol (a program, or a person)."""


def agent_source(agent: repo.AgentInfo) -> AgentSource:
    """Where a worker gets a stored agent's policy: its snapshot, its client, or its builtin name."""
    if agent.kind == "neural":
        return AgentSource(key=agent.key, snapshot=agent.snapshot_sha256)
    if agent.kind in CONNECTED_KINDS:
        return AgentSource(key=agent.key, connected=agent.id, human=agent.kind == "human")
    return AgentSource(key=agent.key, builtin=agent.key)


@dataclass
class LadderConfig:
    """Knobs of a ladder run.

    Attributes:
        env_id: The env the ladder plays.
        batch_size: Matches per dispatched batch (enough that Ray overhead is noise).
        target_sigma: An agent is "placed" once its sigma falls below this.
        seed: Master seed of pairings and match seeds.
        max_rate: Upper bound on matches dispatched per second (``None``: as fast as
            the runner takes them).
        db_retry_s: How long to ride out an unreachable database before giving up
            (the scheduled matches stay queued for the next run).
        lane: Which part of the env's persisted queue this ladder owns: ``""`` the
            main ladder, ``"connected"`` the matches of connected agents, played beside
            it (:mod:`arena.ladder.lane`). Each resumes only its own queued matches.
        board: The board the matches are rated on: ``None`` the env's ladder, else a board of
            its own beside it (``competition:<id>``, :mod:`arena.competitions.season`), whose
            ratings restart from the prior and never touch the agents' statuses.
    """

    env_id: str
    batch_size: int = 4096
    target_sigma: float = DEFAULT_TARGET_SIGMA
    seed: int = 0
    max_rate: float | None = None
    db_retry_s: float = 120.0
    lane: str = ""
    board: str | None = None


@dataclass
class LadderProgress:
    """Counters reported after every recorded batch."""

    scheduled: int = 0
    resumed: int = 0
    recorded: int = 0
    duplicates: int = 0
    in_flight: int = 0
    batches: int = 0
    terminations: dict[str, int] = field(default_factory=dict)


def open_ladder(sessions: Sessions, config: LadderConfig) -> Ladder:
    """The ladder of ``config.env_id`` with the TrueSkill constants stored with the env
    (the env is registered with the defaults if it is new)."""
    rating_env = sessions.write_transaction(lambda session: register_env(session, config.env_id),
                                            what=f"registering {config.env_id}", idempotent=True)
    return Ladder(sessions, config, rating_env)


def queue_lane(batch_key: str) -> str:
    """The lane a queued batch belongs to (``""``: the main ladder's)."""
    lane, sep, _ = batch_key.partition("|")
    return lane if sep else ""


def waiting_reason(missing: list[str]) -> str:
    """What an agent that cannot be scheduled waits for (shown as its status reason)."""
    if not missing:
        return ""
    return "waiting for " + " and ".join(f"a{'n' if r[0] in 'aeiou' else ''} {r} opponent" for r in missing)


class Ladder:
    """A rated ladder of agents on one env, persisted in SQL.

    Symmetric envs pair agents of the one role; role envs (hiders vs seekers, predators
    vs prey) compose every match of one agent per team, each playing its team's role:
    an agent submitted for one role fills only that role's seats, scripted agents
    without a role fill any (:func:`league.scheduling.scheduler.information_lineups`).

    Args:
        sessions: The database.
        config: What to play and how fast.
        rating_env: The ladder's TrueSkill constants: the ones stored with the env
            (:func:`open_ladder` reads them), so a rebuild uses the same.
    """

    def __init__(self, sessions: Sessions, config: LadderConfig, rating_env: RatingEnv) -> None:
        self.sessions = sessions
        self.config = config
        self.spec = get_spec(config.env_id)
        self.env = rating_env
        self.recorder = MatchRecorder(sessions, self.spec, self.env, db_retry_s=config.db_retry_s,
                                      board=config.board)
        self.sources: dict[str, AgentSource] = {}
        self.agent_ids: dict[str, int] = {}
        self.plays: dict[str, str | None] = {}
        self.book = RatingBook(self.env)

    def add_agents(self, sources: list[AgentSource]) -> None:
        """Put agents on the ladder and load their standings.

        Builtins are registered here; neural agents must have been registered already
        (:func:`~arena.ladder.registration.register_snapshot_agent`).

        Raises:
            UnknownAgent: A neural source that is not a registered agent of the env.
        """
        def register(session: Session) -> tuple[dict[str, int], RatingBook]:
            builtins = [s.key for s in sources if s.builtin is not None]
            ids = register_builtin_agents(session, self.spec.env_id, builtins) if builtins else {}
            neural = [s.key for s in sources if s.builtin is None]
            ids.update(repo.agent_ids_for_keys(session, self.spec.env_id, neural))
            missing = sorted(set(neural) - set(ids))
            if missing:
                raise UnknownAgent(f"{', '.join(missing)} are not registered agents of {self.spec.env_id}; "
                                   "register neural agents with register_snapshot_agent first")
            all_ids = {**self.agent_ids, **ids}
            return all_ids, load_book(session, self.env, all_ids, self.config.board)

        self.agent_ids, self.book = self.sessions.write_transaction(
            register, what=f"adding agents to the {self.spec.env_id} ladder", idempotent=True)
        self.sources.update({s.key: s for s in sources})
        with self.sessions() as session:
            self.plays = self._roles(session)

    def sync_agents(self, sources: list[AgentSource]) -> None:
        """Make ``sources`` (agents already in the database) the ladder's exact roster."""
        if {s.key: s for s in sources} == self.sources:
            return
        with self.sessions() as session:
            ids = repo.agent_ids_for_keys(session, self.spec.env_id, [s.key for s in sources])
            self.agent_ids = ids
            self.sources = {s.key: s for s in sources if s.key in ids}
            self.plays = self._roles(session)
            self.book = load_book(session, self.env, ids, self.config.board)

    def reload_ratings(self) -> None:
        """Read the ladder's standings again (another writer, the connected lane, rated some)."""
        with self.sessions() as session:
            self.book = load_book(session, self.env, self.agent_ids, self.config.board)

    def _roles(self, session: Session) -> dict[str, str | None]:
        """The role each agent on the ladder plays (``None``: every role)."""
        agents = repo.get_agents(session, self.agent_ids.values())
        return {a.key: a.role for a in agents.values() if a.key in self.sources}

    def missing_roles(self) -> list[str]:
        """Roles no agent on the ladder can play yet (a match needs every team filled)."""
        if self.spec.symmetric:
            return [] if len(self.sources) >= 2 else [self.spec.roles[0]]
        return [r for r in dict.fromkeys(self.spec.roles)
                if not any(self.plays.get(k) in (None, r) for k in self.sources)]

    def _db(self, work: Callable[[], T], what: str) -> T:
        return retry_transient(work, timeout_s=self.config.db_retry_s, what=f"{self.spec.env_id} ladder: {what}")

    def _resumed_batches(self, progress: LadderProgress) -> Iterator[MatchBatch]:
        """The queued matches a previous run left, batch by batch, same ids and seeds."""
        def load() -> tuple[list[repo.QueuedJob], dict[str, repo.AgentInfo | None]]:
            with self.sessions() as session:
                queued = repo.queued_matches(session, self.spec.env_id)
                keys = {a for job in queued for a in job.agents} - set(self.sources)
                return queued, {k: repo.get_agent_by_key(session, self.spec.env_id, k) for k in keys}

        queued, extra = self._db(load, "reading the match queue")
        queued = [j for j in queued if queue_lane(j.batch_key) == self.config.lane]
        if not queued:
            return
        sources = dict(self.sources)
        for key, agent in extra.items():
            if agent is not None:
                sources[key] = agent_source(agent)
                self.agent_ids[key] = agent.id
        playable = [j for j in queued if all(a in sources for a in j.agents)]
        if len(playable) < len(queued):
            kept = {j.match_id for j in playable}
            gone = [j.match_id for j in queued if j.match_id not in kept]
            log.warning("dropping %d queued matches of agents that no longer exist", len(gone))
            self._dequeue(gone)
        log.info("resuming %d queued %s matches with their original ids", len(playable), self.spec.env_id)
        for b, (_, group) in enumerate(itertools.groupby(playable, key=lambda j: j.batch_key)):
            jobs = [MatchJob(seed=j.seed, agents=j.agents, match_id=j.match_id) for j in group]
            progress.resumed += len(jobs)
            yield MatchBatch(self.spec.env_id, jobs, sources, batch_id=-1 - b)

    def _dequeue(self, ids: list[str]) -> None:
        self.sessions.write_transaction(lambda session: repo.dequeue_matches(session, ids),
                                        what=f"{self.spec.env_id} ladder: dropping orphaned queue entries",
                                        timeout_s=self.config.db_retry_s, idempotent=True)

    def _enqueue(self, batch_key: str, jobs: list[MatchJob]) -> None:
        queued = [repo.QueuedJob(j.match_id, batch_key, j.seed, j.agents) for j in jobs]
        self.sessions.write_transaction(lambda session: repo.enqueue_matches(session, self.spec.env_id, batch_key,
                                                                             queued),
                                        what=f"{self.spec.env_id} ladder: queueing batch {batch_key}",
                                        timeout_s=self.config.db_retry_s, idempotent=True)

    def _batches(self, total: int, progress: LadderProgress,
                 lineups: Sequence[tuple[str, ...]] | None = None) -> Iterator[MatchBatch]:
        rng = np.random.default_rng(self.config.seed)
        keys = sorted(self.sources)
        start = self._db(self._matches_so_far, "counting matches")
        run_id = f"{self.config.lane}|{uuid.uuid4().hex}" if self.config.lane else uuid.uuid4().hex
        for b, lo in enumerate(range(0, total, self.config.batch_size)):
            n = min(self.config.batch_size, total - lo)
            chosen = (lineups[lo:lo + n] if lineups is not None
                      else choose_lineups(keys, self.spec.roles, self.book, n, rng, env=self.env, plays=self.plays))
            seeds = derive_seed(self.config.seed, np.arange(start + lo, start + lo + n)).tolist()
            jobs = [MatchJob(seed=s, agents=tuple(lineup), match_id=str(uuid.uuid4()))
                    for s, lineup in zip(seeds, chosen)]
            batch_key = f"{run_id}:{b}"
            self._enqueue(batch_key, jobs)
            progress.scheduled += n
            yield MatchBatch(self.spec.env_id, jobs, self.sources, batch_id=b)

    def _paced(self, batches: Iterable[MatchBatch], stop: Callable[[], bool]) -> Iterator[MatchBatch]:
        """``batches``, dispatched no faster than ``max_rate`` matches per second, until ``stop()``."""
        rate, start, sent = self.config.max_rate, time.monotonic(), 0
        for batch in batches:
            if rate:
                time.sleep(max(0.0, start + sent / rate - time.monotonic()))
            if stop():
                return
            sent += len(batch.jobs)
            yield batch

    def _matches_so_far(self) -> int:
        with self.sessions() as session:
            return repo.count_matches(session, self.spec.env_id, board=self.config.board)

    def run(self, runner: MatchRunner, matches: int,
            on_progress: Callable[[LadderProgress], None] | None = None,
            stop: Callable[[], bool] = lambda: False,
            lineups: Sequence[tuple[str, ...]] | None = None) -> LadderProgress:
        """Dispatch what the queue holds, then play and record ``matches`` new rated matches.

        The line-ups are chosen batch by batch for expected information, unless
        ``lineups`` (agent keys per team, in team order) are given: then exactly those
        are played and ``matches`` is ignored.

        Once ``stop()`` is true nothing more is dispatched and the run returns after the
        batch being recorded; matches still in flight stay queued for the next run.

        Raises:
            ServiceUnavailable: The database stayed unreachable for ``db_retry_s``; every
                match not yet recorded stays queued for the next run.
        """
        missing = self.missing_roles()
        if missing:
            raise ValueError(f"{self.spec.env_id}: {waiting_reason(missing)}; "
                             "add agents for every role (at least two in a symmetric env) before running")
        progress = LadderProgress()
        if lineups is not None:
            matches = len(lineups)
        batches = itertools.chain(self._resumed_batches(progress), self._batches(matches, progress, lineups))
        for batch, records in runner.run(self._paced(batches, stop)):
            outcome = self.recorder.record(records, self.agent_ids)
            self.book.standings.update(outcome.book.standings)
            progress.recorded += outcome.inserted
            progress.duplicates += outcome.duplicates
            progress.batches += 1
            progress.in_flight = progress.scheduled + progress.resumed - progress.recorded - progress.duplicates
            set_in_flight(self.spec.env_id, progress.in_flight)
            for r in records:
                progress.terminations[r.termination] = progress.terminations.get(r.termination, 0) + 1
            if on_progress:
                on_progress(progress)
            if stop():
                log.info("%s ladder stopping; %d matches stay queued", self.spec.env_id, progress.in_flight)
                break
        set_in_flight(self.spec.env_id, 0)
        if self.config.board is None:  # another board's ratings say nothing about the agent's status
            self._update_statuses()
        return progress

    def _update_statuses(self) -> None:
        """``rated`` once settled in every role it plays, else ``placement``."""
        roles = list(dict.fromkeys(self.spec.roles))

        def update(session: Session) -> None:
            for key, agent_id in self.agent_ids.items():
                played = [r for r in roles if self.plays.get(key) in (None, r)]
                placed = all(self.book.rating((key, r)).sigma <= self.config.target_sigma for r in played)
                repo.set_agent_status(session, agent_id, AgentStatus.RATED if placed else AgentStatus.PLACEMENT)

        self.sessions.write_transaction(update, what=f"{self.spec.env_id} ladder: updating agent statuses",
                                        timeout_s=self.config.db_retry_s, idempotent=True)
