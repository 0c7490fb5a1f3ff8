"""The background service's consumer of challenges: one small thread, the lane plays them.

The thread pops queued challenge ids (:mod:`arena.ladder.challenges`) while the
:class:`~arena.ladder.lane.ConnectedLane` has a challenge thread free, and plays each
there, recording chunk by chunk. Nothing is lost when a service dies:

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
import secrets
import threading
import time
from concurrent.futures import Future

import redis

from arena.engine import MatchJob, MatchRecord
from arena.ladder.challenges import DONE, FAILED, KEEP_FINISHED_S, ChallengeState, check_agents, load_challenge
from arena.ladder.dispatch import agent_source
from arena.ladder.lane import ConnectedLane
from arena.ladder.people import give_back
from arena.ladder.recorder import MatchRecorder, record_unrated
from arena.ladder.registration import ladder_rating_env
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from envs.errors import ArenaError, ServiceUnavailable
from envs.registry import get_spec

log = logging.getLogger(__name__)

HEARTBEAT_S = 5.0
"""How often the service says it is still playing its challenges."""
STALE_S = 30.0
"""A challenge ``playing`` without a heartbeat for this long is queued again."""
SWEEP_S = 10.0
"""How often a service looks for stale challenges (and once when it starts)."""
MAX_ATTEMPTS = 3
"""A challenge started this often without finishing fails."""

# KEYS: record. ARGV: now, owner, max attempts. Queued -> playing (1), or over its
# attempts (-1, still marked playing so that its new owner fails it); else 0 (someone
# else took it, or it was finished).
_TAKE = """
if redis.call('HGET', KEYS[1], 'status') ~= 'queued' then return 0 end
local attempts = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('HSET', KEYS[1], 'status', 'playing', 'heartbeat', ARGV[1], 'owner', ARGV[2])
if attempts > tonumber(ARGV[3]) then return -1 end
return 1
"""
# KEYS: record. ARGV: owner, now. The owner's heartbeat (0 on stop: stale at once).
_TOUCH = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'heartbeat', ARGV[2])
return 1
"""
# KEYS: record, open set. ARGV: owner, status, error, now, keep seconds, id. Only the owner finishes.
_FINISH = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] or redis.call('HGET', KEYS[1], 'status') ~= 'playing' then
  return 0
end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'error', ARGV[3], 'finished', ARGV[4], 'owner', '')
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('SREM', KEYS[2], ARGV[6])
return 1
"""
# KEYS: record, queue, open set. ARGV: id, stale before, now, owner ('': any).
# A stale playing challenge (of ``owner``), or a stale queued one on no queue, is queued
# again (1); a record that is gone or finished leaves the open set (-1); else 0.
_REQUEUE = """
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'queued' and status ~= 'playing' then redis.call('SREM', KEYS[3], ARGV[1]) return -1 end
local stale = tonumber(redis.call('HGET', KEYS[1], 'heartbeat') or '0') < tonumber(ARGV[2])
if status == 'playing' and (stale or ARGV[4] ~= '') then
  if ARGV[4] ~= '' and redis.call('HGET', KEYS[1], 'owner') ~= ARGV[4] then return 0 end
elseif not (status == 'queued' and stale and not redis.call('LPOS', KEYS[2], ARGV[1])) then
  return 0
end
redis.call('HSET', KEYS[1], 'status', 'queued', 'heartbeat', ARGV[3], 'owner', '')
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
"""


class ChallengeQueue:
    """Pops queued challenges and plays them in the lane.

    Args:
        services: Database and Redis.
        lane: Where the matches are played (its challenge threads).
        poll_s: Pause when the queue is empty (or every challenge thread is busy).
    """

    def __init__(self, services: Services, lane: ConnectedLane, poll_s: float = 0.5) -> None:
        self.services = services
        self.lane = lane
        self.poll_s = poll_s
        self.keys = services.pool.keys
        client = services.redis
        self._take, self._touch = client.register_script(_TAKE), client.register_script(_TOUCH)
        self._finish, self._requeue = client.register_script(_FINISH), client.register_script(_REQUEUE)
        self._playing: dict[str, str] = {}  # challenge id -> our owner token
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._touched = self._swept = float("-inf")

    def start(self) -> ChallengeQueue:
        self._thread = threading.Thread(target=self._run, name="challenges", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop taking challenges; those still playing are marked stale, so the next
        service to start plays their rest at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._lock:
            playing = dict(self._playing)
        try:
            for challenge_id, owner in playing.items():
                self._touch(keys=[self.keys.challenge(challenge_id)], args=[owner, 0])
        except redis.RedisError as exc:
            log.warning("could not mark the challenges still playing as stale (%s); they go stale", exc)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.step() is None:
                    self._stop.wait(self.poll_s)
            except Exception:
                log.exception("challenge queue round failed; going on")
                self._stop.wait(1.0)

    def step(self) -> Future | None:
        """Heartbeat and sweep when due, then start the next queued challenge if a thread is free."""
        now = time.time()
        if now - self._touched >= HEARTBEAT_S:
            self._touched = now
            self.heartbeat(now)
        if now - self._swept >= SWEEP_S:
            self._swept = now
            self.sweep(now)
        return self.take()

    def heartbeat(self, now: float) -> None:
        with self._lock:
            playing = dict(self._playing)
        for challenge_id, owner in playing.items():
            self._touch(keys=[self.keys.challenge(challenge_id)], args=[owner, now])

    def sweep(self, now: float | None = None) -> int:
        """Queue again every stale challenge (see the module's docstring); returns how many."""
        now = time.time() if now is None else now
        requeued = 0
        for raw in self.services.redis.smembers(self.keys.challenges_open()):
            challenge_id = raw.decode()
            if self._requeue(keys=self._requeue_keys(challenge_id), args=[challenge_id, now - STALE_S, now, ""]) == 1:
                log.warning("challenge %s was left unfinished by its service; queued again", challenge_id)
                requeued += 1
        return requeued

    def _requeue_keys(self, challenge_id: str) -> list[str]:
        return [self.keys.challenge(challenge_id), self.keys.challenge_queue(), self.keys.challenges_open()]

    def take(self) -> Future | None:
        """Start the next queued challenge in the lane, if a challenge thread is free.

        Returns:
            ``None`` if nothing was taken; else a future that ends once the challenge's
            record says how it ended (done, failed, or queued again): how many matches
            were played, or the error.
        """
        with self._lock:
            if len(self._playing) >= self.lane.challenge_threads:
                return None
        while True:
            raw = self.services.redis.lpop(self.keys.challenge_queue())
            if raw is None:
                return None
            challenge_id, owner = raw.decode(), secrets.token_hex(8)
            taken = self._take(keys=[self.keys.challenge(challenge_id)], args=[time.time(), owner, MAX_ATTEMPTS])
            if taken != 0:
                break  # else: taken or finished by someone else meanwhile
        with self._lock:
            self._playing[challenge_id] = owner
        ended: Future = Future()
        state = load_challenge(self.services.redis, self.keys, challenge_id)
        if taken == -1 or state is None:
            self._finished(challenge_id, owner, _failed(
                f"its service stopped while playing it {MAX_ATTEMPTS} times; ask again"), ended)
            return ended
        try:
            future = self.play(state)
        except Exception as exc:
            log.warning("could not start challenge %s", challenge_id, exc_info=True)
            self._finished(challenge_id, owner, _failed(exc), ended)
            return ended
        future.add_done_callback(lambda done: self._finished(challenge_id, owner, done, ended))
        return ended

    def play(self, state: ChallengeState) -> Future:
        """Play the challenge's matches not yet recorded, in the lane; the future holds how many."""
        request = state.request
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
            self.services.redis.hset(self.keys.challenge(request.id), "recorded", progress[0])

        self.services.redis.hset(self.keys.challenge(request.id), "recorded", len(stored))
        log.info("playing challenge %s of %s: %d of %d %s match(es) left", request.id, request.user, len(jobs),
                 len(request.jobs), request.env_id, extra={"challenge_id": request.id})
        return self.lane.play_challenge(request.env_id, jobs, sources, record, request.rated)

    def _finished(self, challenge_id: str, owner: str, done: Future, ended: Future) -> None:
        """The challenge's play ended as ``done`` says: it is done, failed, or queued again;
        then ``ended`` gets ``done``'s outcome."""
        try:
            self._end(challenge_id, owner, done)
        finally:
            if done.cancelled():
                ended.cancel()
            elif done.exception() is not None:
                ended.set_exception(done.exception())
            else:
                ended.set_result(done.result())

    def _end(self, challenge_id: str, owner: str, done: Future) -> None:
        with self._lock:
            self._playing.pop(challenge_id, None)
        if done.cancelled():  # its lane closed: the service is stopping, the next one plays the rest
            self._touch(keys=[self.keys.challenge(challenge_id)], args=[owner, 0])
            return
        exc = done.exception()
        if exc is not None and not (isinstance(exc, ArenaError) and not isinstance(exc, ServiceUnavailable)):
            log.warning("challenge %s failed for now (%s); queued again", challenge_id, exc)
            self._requeue(keys=self._requeue_keys(challenge_id), args=[challenge_id, 0, time.time(), owner])
            return
        status, error = (DONE, "") if exc is None else (FAILED, str(exc)[:1000])
        finished = self._finish(keys=[self.keys.challenge(challenge_id), self.keys.challenges_open()],
                                args=[owner, status, error, time.time(), KEEP_FINISHED_S, challenge_id])
        if finished == 1:
            state = load_challenge(self.services.redis, self.keys, challenge_id)
            if state is not None:
                give_back(self.services.redis, state.request.holds)
            log.info("challenge %s is %s%s", challenge_id, status, f": {error}" if error else "",
                     extra={"challenge_id": challenge_id})


def _failed(reason: Exception | str) -> Future:
    """A future that failed with ``reason`` (a message is an :class:`ArenaError`: no retry)."""
    future: Future = Future()
    future.set_exception(ArenaError(reason) if isinstance(reason, str) else reason)
    return future
