"""Tournament games on the background service: one durable queue item per game.

Every game of a round is an item of the one durable queue design
(:mod:`arena.ladder.work_queue`): its record (the :class:`GameRequest` as JSON, status,
heartbeat, owner, attempts) keyed by the game's match id, which is fixed by the
tournament, round, table and game (:func:`arena.competitions.tournaments.game_match_id`).
:class:`TournamentGames` claims them with an owner and a heartbeat and plays each on a
thread of its own; a dead service's games go stale and are queued again by the next
sweep, and a game played twice is stored once (by match id, with ``rated = false`` on
the board ``tournament:<id>``).

Nothing about a tournament's progress is kept in Redis or memory: :func:`advance` derives
the tournament from the games recorded (:func:`arena.competitions.tournaments.derive`),
queues the current round's games not recorded yet (a game is queued only if it has no
record: :func:`queue_game`, one script, so two services advancing at once queue it once),
and ends the tournament once the last round is complete. It runs when a tournament is
created, after each game ends, and on every sweep (a restarted service picks up where
the last one stopped). A game that fails for good (an entrant's weights gone, or
:data:`~arena.ladder.work_queue.MAX_ATTEMPTS` services died playing it) fails its
tournament with the reason.
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass

import redis

from arena.competitions import tournaments as tours
from arena.core.errors import Conflict
from arena.engine import MatchJob, MatchRecord
from arena.ladder.dispatch import agent_source
from arena.ladder.recorder import participant_rows
from arena.ladder.work_queue import FAILED, HEARTBEAT_S, QUEUED, STALE_S, SWEEP_S, Claim, QueueWorker, WorkQueue
from arena.runners import ThreadRunners
from arena.runners.batches import MatchBatch
from arena.snapshots.keys import RedisKeys
from arena.storage.db import Sessions
from arena.storage.db import repositories as repo
from arena.storage.db.repositories import tournaments as tour_repo
from arena.storage.wiring import Services
from envs.errors import ArenaError, UnknownAgent
from envs.registry import get_spec

log = logging.getLogger(__name__)

# KEYS: record, queue, open set. ARGV: request, now, id. Queue the game unless it has a record (1: queued).
_QUEUE_NEW = f"""
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'request', ARGV[1], 'status', '{QUEUED}', 'heartbeat', ARGV[2], 'queued', ARGV[2],
           'owner', '', 'attempts', 0, 'error', '', 'finished', 0)
redis.call('SADD', KEYS[3], ARGV[3])
redis.call('RPUSH', KEYS[2], ARGV[3])
return 1
"""


@dataclass(frozen=True)
class GameRequest:
    """One tournament game as queued: seat 0 ``agents[0]`` (agent ids), its match id and seed."""

    tournament_id: int
    env_id: str
    round: int
    table: int
    game: int
    match_id: str
    seed: int
    agents: tuple[int, int]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> GameRequest:
        data = json.loads(raw)
        return cls(**{**data, "agents": tuple(data["agents"])})


def tournament_queue(client: redis.Redis, keys: RedisKeys, **options: float) -> WorkQueue:
    """The durable queue of tournament games; ``options``: its ``stale_s`` and ``max_attempts``."""
    return WorkQueue(client, keys.work_queue("tournament_games"), **options)


def queue_game(queue: WorkQueue, request: GameRequest) -> bool:
    """Queue ``request`` unless its game already has a record (queued, playing, done or failed)."""
    script = queue.client.register_script(_QUEUE_NEW)
    return script(keys=[queue.record(request.match_id), queue.queue, queue.open_set],
                  args=[request.to_json(), time.time(), request.match_id]) == 1


def advance(services: Services, tournament_id: int) -> int:
    """Queue the current round's games not recorded yet, or end the finished tournament; returns
    how many games were queued now (module doc)."""
    with services.sessions() as session:
        info, state, stored = tours.load(session, tournament_id)
    if info.state != "running":
        return 0
    if state.finished:
        if services.sessions.write_transaction(
                lambda session: tour_repo.end_tournament(session, info.id, "finished"),
                what=f"finishing tournament {info.id}"):
            log.info("tournament %d finished after %d games", info.id, len(stored))
        return 0
    queue = tournament_queue(services.redis, services.pool.keys)
    queued = sum(queue_game(queue, GameRequest(info.id, info.env_id, g.round, g.table, g.game, match_id, g.seed,
                                               (int(g.first), int(g.second))))
                 for match_id, g in tours.to_play(info, state, stored))
    if queued:
        log.info("tournament %d: %d game(s) of round %d queued", info.id, queued, len(state.rounds))
    return queued


def fail(sessions: Sessions, tournament_id: int, reason: str) -> bool:
    """End a running tournament as ``failed`` with ``reason``."""
    return sessions.write_transaction(lambda session: tour_repo.end_tournament(session, tournament_id, "failed",
                                                                               reason),
                                      what=f"failing tournament {tournament_id}")


def store_game(sessions: Sessions, record: MatchRecord, agent_ids: dict[str, int], board: str) -> bool:
    """Store a played game (unrated, on ``board``) with its participants; ``False`` if it was already."""
    spec = get_spec(record.env)

    def store(session) -> bool:
        new = repo.insert_matches(session, [repo.match_row(record, rated=False, board=board)])
        if record.match_id in new:
            repo.insert_participants(session, participant_rows(spec, record, new[record.match_id], agent_ids))
        return bool(new)

    return sessions.write_transaction(store, what=f"storing tournament game {record.match_id}", idempotent=True)


class TournamentGames(QueueWorker):
    """Claims queued tournament games and plays them on threads of its own (module doc).

    Args:
        services: Database, Redis and the snapshot pool.
        threads: Games played at once.
        poll_s / stale_s / heartbeat_s / sweep_s: The queue's timings (:mod:`arena.ladder.work_queue`).
    """

    def __init__(self, services: Services, threads: int = 2, poll_s: float = 0.5, *, stale_s: float = STALE_S,
                 heartbeat_s: float = HEARTBEAT_S, sweep_s: float = SWEEP_S) -> None:
        super().__init__(tournament_queue(services.redis, services.pool.keys, stale_s=stale_s), threads,
                         "tournament game", poll_s=poll_s, heartbeat_s=heartbeat_s, sweep_s=sweep_s)
        self.services = services
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="tournament-game")
        self._runners = ThreadRunners(services.snapshot_cache_factory(), services.connected_policies)

    def begin(self, claim: Claim) -> Future:
        return self._pool.submit(self.play, GameRequest.from_json(claim.record["request"]))

    def ended(self, claim: Claim, status: str, error: str) -> None:
        request = GameRequest.from_json(claim.record["request"])
        if status == FAILED:
            where = f"round {request.round}, table {request.table}, game {request.game + 1}"
            if fail(self.services.sessions, request.tournament_id, f"{where} could not be played: {error}"):
                log.warning("tournament %d failed: %s: %s", request.tournament_id, where, error)
            return
        advance(self.services, request.tournament_id)

    def sweep(self, now: float | None = None) -> int:
        """Queue again what dead services left, then advance every running tournament."""
        requeued = super().sweep(now)
        self.advance_all()
        return requeued

    def advance_all(self) -> int:
        with self.services.sessions() as session:
            running = tour_repo.tournaments(session, states=("running",))
        queued = 0
        for info in running:
            try:
                queued += advance(self.services, info.id)
            except (ArenaError, ValueError):
                log.exception("tournament %d could not advance", info.id)
        return queued

    def play(self, request: GameRequest) -> bool:
        """Play one game and store it; ``False`` if it was stored already (played by a dead service)."""
        with self.services.sessions() as session:
            if repo.existing_match_ids(session, [request.match_id]):
                return False
            agents = repo.get_agents(session, request.agents)
        for agent_id in request.agents:
            if agent_id not in agents:
                raise UnknownAgent(f"no agent with id {agent_id}")
            if agents[agent_id].kind == "neural" and agents[agent_id].snapshot_sha256 is None:
                raise Conflict(f"agent {agent_id} has no stored weights")
        lineup = [agents[a] for a in request.agents]
        job = MatchJob(seed=request.seed, agents=tuple(a.key for a in lineup), match_id=request.match_id)
        sources = {a.key: agent_source(a) for a in lineup}
        [(_, [record])] = self._runners.get().run([MatchBatch(request.env_id, [job], sources)])
        return store_game(self.services.sessions, record, {a.key: a.id for a in lineup},
                          tours.board_of(request.tournament_id))

    def stop(self, timeout: float = 5.0) -> None:
        super().stop(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)
