"""The background service's consumer of challenges: one small thread, the lane plays them.

The thread claims queued challenges (:mod:`arena.ladder.challenges`) while the
:class:`~arena.ladder.lane.ConnectedLane` has a challenge thread free, and plays each
there, recording chunk by chunk. Challenges are items of the one durable queue
(:mod:`arena.ladder.work_queue`), so nothing is lost when a service dies:

* Taking a challenge marks it ``playing`` under a random owner token, and the thread
  refreshes a heartbeat on the challenges it plays every :data:`HEARTBEAT_S`. A
  challenge whose heartbeat is older than :data:`STALE_S` (its service died; a service
  that stops marks its own stale at once) is queued again by the next sweep, which
  runs when a service starts and every :data:`SWEEP_S`; so is a queued one that is on
  no queue (its service died between popping and marking it). Played again, it skips
  the matches already recorded (by id) and plays the others with their ids and seeds.
* Only the owner finishes a challenge (``done`` or ``failed``): the user's in-flight
  hold is given back exactly once, when the challenge ends, not when its request
  returned.
* A challenge started :data:`MAX_ATTEMPTS` times without finishing fails with the
  reason, so one that takes its service down cannot do so forever. A failure that a
  retry cannot fix (an agent retired meanwhile, weights gone) fails it at once; any
  other error (the database or Redis away) queues it again.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future

from arena.engine import MatchJob, MatchRecord
from arena.ladder.challenges import ChallengeRequest, challenge_queue, check_agents
from arena.ladder.dispatch import agent_source
from arena.ladder.lane import ConnectedLane
from arena.ladder.recorder import MatchRecorder, record_unrated
from arena.ladder.registration import ladder_rating_env
from arena.ladder.work_queue import HEARTBEAT_S, STALE_S, SWEEP_S, Claim, QueueWorker
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from envs.registry import get_spec

__all__ = ["ChallengeQueue"]

log = logging.getLogger(__name__)


class ChallengeQueue(QueueWorker):
    """Claims queued challenges and plays them in the lane.

    Args:
        services: Database and Redis.
        lane: Where the matches are played (its challenge threads).
        poll_s: Longest wait for a queued challenge (or a free thread).
        stale_s / heartbeat_s / sweep_s: The queue's timings (:mod:`arena.ladder.work_queue`).
    """

    def __init__(self, services: Services, lane: ConnectedLane, poll_s: float = 0.5, *, stale_s: float = STALE_S,
                 heartbeat_s: float = HEARTBEAT_S, sweep_s: float = SWEEP_S) -> None:
        super().__init__(challenge_queue(services.redis, services.pool.keys, stale_s=stale_s),
                         lane.challenge_threads, "challenge", poll_s=poll_s, heartbeat_s=heartbeat_s, sweep_s=sweep_s)
        self.services = services
        self.lane = lane

    def begin(self, claim: Claim) -> Future:
        return self.play(ChallengeRequest.from_json(claim.record["request"]))

    def releases(self, claim: Claim) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The user's in-flight hold is given back with the challenge's finish."""
        return tuple(ChallengeRequest.from_json(claim.record["request"]).holds), ()

    def play(self, request: ChallengeRequest) -> Future:
        """Play the challenge's matches not yet recorded, in the lane; the future holds how many."""
        spec = get_spec(request.env_id)
        with self.services.sessions() as session:
            agents = repo.get_agents(session, request.agent_ids)
            stored = repo.existing_match_ids(session, request.match_ids)
        check_agents(spec, agents, request.agent_ids, request.rated)
        jobs = [MatchJob(seed=seed, agents=tuple(agents[a].key for a in lineup), match_id=match_id)
                for match_id, seed, lineup in request.jobs if match_id not in stored]
        sources = {a.key: agent_source(a) for a in agents.values()}
        agent_ids = {a.key: a.id for a in agents.values()}
        recorder = None
        if request.rated:
            with self.services.sessions() as session:
                recorder = MatchRecorder(self.services.sessions, spec, ladder_rating_env(session, spec.env_id))
        progress = [len(stored)]

        def record(records: list[MatchRecord]) -> None:
            if recorder is not None:
                recorder.record(records, agent_ids)
            else:
                record_unrated(self.services.sessions, spec, records, agent_ids)
            progress[0] += len(records)
            self.services.redis.hset(self.queue.record(request.id), "recorded", progress[0])

        self.services.redis.hset(self.queue.record(request.id), "recorded", len(stored))
        log.info("playing challenge %s of %s: %d of %d %s match(es) left", request.id, request.user, len(jobs),
                 len(request.jobs), request.env_id, extra={"challenge_id": request.id})
        return self.lane.play_challenge(request.env_id, jobs, sources, record, request.rated)
