"""Matches of connected agents and people, played beside the ladders so they never hold them up.

A connected agent answers at the pace of its owner's machine, and a person at the pace
of a person: a batch with one of them in it may take seconds or minutes. The service's
loop therefore hands their line-ups to the :class:`ConnectedLane` and goes on with the
other matches. The lane plays on its own threads, each with its own engine:

* **ladder batches** of connected agents (at most one in flight per env): scheduled by
  the service's pacer like every rated match, queued in the env's persisted queue under
  the ``connected`` lane (a restart resumes them there, never in the main ladder),
  recorded exactly once with their ratings;
* **human matches** (the browser's Play button): one match, a person against an agent,
  recorded unrated (:mod:`arena.read.humans` rates people on their own board, against
  the agents' ratings at the time, so nobody can move an agent's rating by choosing
  whom to play);
* **challenges** (``POST /challenges``, queued by the API, :mod:`arena.ladder.challenges`):
  up to 100 matches between given agents, connected ones included, played in chunks,
  each chunk recorded by the caller's function as it ends.

When a batch is recorded the lane marks its env, and the service reloads that ladder's
ratings before it plans again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

from arena.engine import MatchJob, MatchRecord
from arena.ladder.dispatch import Ladder, LadderConfig, open_ladder
from arena.ladder.recorder import record_unrated
from arena.runners import AgentSource, ThreadRunners
from arena.runners.batches import MatchBatch
from arena.storage.wiring import Services
from envs.registry import get_spec
from league.ratings.rating import RatingEnv

log = logging.getLogger(__name__)

LANE = "connected"
LANE_SEED_SALT = 0x5EED_C0_4E
"""Mixed into the lane's master seed so its matches never share seeds with the main ladder's."""
CHALLENGE_CHUNK = 10
"""A challenge's matches are played and recorded this many at a time (its progress; and
a challenge taken over after its service died replays at most one chunk's work)."""


class ConnectedLane:
    """Threads that play connected agents' ladder batches, people's matches and challenges.

    Args:
        services: The service's database, Redis and pool.
        ladder_threads: Envs whose connected batches may play at once.
        human_threads: People's matches that may play at once.
        challenge_threads: Challenges that may play at once.
    """

    def __init__(self, services: Services, ladder_threads: int = 4, human_threads: int = 16,
                 challenge_threads: int = 2) -> None:
        self.services = services
        self.human_threads = human_threads
        self.challenge_threads = challenge_threads
        self._ladders = ThreadPoolExecutor(ladder_threads, thread_name_prefix="connected-lane")
        self._humans = ThreadPoolExecutor(human_threads, thread_name_prefix="human-match")
        self._challenges = ThreadPoolExecutor(challenge_threads, thread_name_prefix="challenge")
        self._busy: dict[str, Future] = {}
        self._recorded: set[str] = set()
        self._lock = threading.Lock()
        self._runners = ThreadRunners(services.snapshot_cache_factory(), services.connected_policies)

    def busy(self, board: str) -> bool:
        """Whether a lane batch of ``board`` (an env id: its ladder; else a board beside it) is in flight."""
        with self._lock:
            future = self._busy.get(board)
            return future is not None and not future.done()

    def take_recorded(self, board: str) -> bool:
        """Whether a lane batch of ``board`` (an env id, or a competition's board) was recorded since the last call."""
        with self._lock:
            if board in self._recorded:
                self._recorded.discard(board)
                return True
            return False

    def play_ladder(self, config: LadderConfig, sources: list[AgentSource], lineups: list[tuple[str, ...]],
                    stop: Callable[[], bool], rating_env: RatingEnv | None = None) -> bool:
        """Play ``lineups`` (each with a connected agent) as rated ladder matches, in the
        background, after whatever a previous run left queued in the lane (no line-ups:
        only that); ``False`` if the board already has a lane batch in flight. A board beside
        the env's (``config.board``, a competition's) has a lane of its own in the queue."""
        key = config.board or config.env_id
        if self.busy(key):
            return False
        lane = LANE if config.board is None else f"{config.lane}+c"  # short: batch keys hold 64 characters
        lane_config = replace(config, lane=lane, seed=config.seed ^ LANE_SEED_SALT)

        def play() -> int:
            ladder = (open_ladder(self.services.sessions, lane_config) if rating_env is None
                      else Ladder(self.services.sessions, lane_config, rating_env))  # a board's own constants
            ladder.sync_agents(sources)
            recorded = ladder.run(self._runners.get(), len(lineups), stop=stop, lineups=lineups or None).recorded
            with self._lock:
                self._recorded.add(key)
            return recorded

        with self._lock:
            self._busy[key] = self._ladders.submit(_logged(play, f"{key} connected batch"))
        return True

    def play_human(self, env_id: str, job: MatchJob, sources: dict[str, AgentSource],
                   agent_ids: dict[str, int]) -> Future:
        """Play one person's match in the background and store it unrated; the future holds its record."""
        spec = get_spec(env_id)

        def play() -> MatchRecord:
            [(_, [record])] = self._runners.get().run([MatchBatch(env_id, [job], sources)])
            record_unrated(self.services.sessions, spec, [record], agent_ids)
            return record

        return self._humans.submit(_logged(play, f"human match {job.match_id}"))

    def play_challenge(self, env_id: str, jobs: Sequence[MatchJob], sources: dict[str, AgentSource],
                       record: Callable[[list[MatchRecord]], object], rated: bool) -> Future:
        """Play ``jobs`` in the background, :data:`CHALLENGE_CHUNK` at a time, handing each
        chunk's records to ``record`` (which stores them) as it ends; the future holds how
        many were played. ``rated``: the records move ratings, so the env's ladder reloads
        them before it plans again."""

        def play() -> int:
            for start in range(0, len(jobs), CHALLENGE_CHUNK):
                batch = MatchBatch(env_id, list(jobs[start:start + CHALLENGE_CHUNK]), sources)
                [(_, records)] = self._runners.get().run([batch])
                record(records)
                if rated:
                    with self._lock:
                        self._recorded.add(env_id)
            return len(jobs)

        return self._challenges.submit(_logged(play, f"{env_id} challenge"))

    def close(self) -> None:
        self._ladders.shutdown(wait=False, cancel_futures=True)
        self._humans.shutdown(wait=False, cancel_futures=True)
        self._challenges.shutdown(wait=False, cancel_futures=True)


def _logged(work: Callable, what: str) -> Callable:
    def run():
        try:
            return work()
        except Exception:
            log.exception("%s failed", what)
            raise
    return run
