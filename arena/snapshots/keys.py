"""Every Redis key Arena uses is built here, and nowhere else.

Layout (``prefix`` is ``"arena"`` in the service; tests use a unique prefix each)::

    {prefix}:snap:{sha256}       STRING  snapshot bytes: safetensors weights or an ONNX
                                         model (content-addressed)
    {prefix}:snapmeta:{sha256}   HASH    spec (JSON), meta (JSON), created (unix seconds)
    {prefix}:pool:{pool}         ZSET    member: sha256; score: microseconds since the
                                         epoch, strictly increasing within the pool
    {prefix}:limit:{name}:{subject}:{window}
                                 STRING  requests counted against a rate limit in one
                                         fixed window (expires after it)
    {prefix}:busy:{name}:{subject}
                                 STRING  requests of a subject in flight now
    {prefix}:conn:req:{agent}    LIST    decision batches waiting for connected agent
                                         ``agent`` (msgpack; the API process holding
                                         its socket pops them)
    {prefix}:conn:reply:{id}     LIST    the answer to request ``id`` (expires)
    {prefix}:conn:online:{agent} STRING  the live connection of ``agent`` (JSON; expires
                                         unless its API process refreshes it)
    {prefix}:conn:seen:{agent}   STRING  unix seconds it was last connected
    {prefix}:conn:events:{agent} LIST    finished-match results for its connection
    {prefix}:conn:proc:{agent}:{conn}
                                 LIST    requests connection ``conn`` took and has not
                                         answered (given back to conn:req when it ends
                                         or a newer connection takes over)
    {prefix}:conn:fence:{agent}  HASH    fence (the fencing token of the newest claim,
                                         incremented by each) and conn (its connection)
    {prefix}:conn:ctl:{conn}     LIST    "a newer connection took over" for connection
                                         ``conn`` (expires)
    {prefix}:conn:slots:{kind}:{subject}
                                 ZSET    open sockets of a user or an address, across API
                                         processes: member a socket's id, score when it
                                         stops counting unless its process renews it
    {prefix}:people:game:{id}    HASH    one person's game (a durable queue's record, as a
                                         challenge's: request, status, heartbeat, owner,
                                         attempts, error, finished, queued)
    {prefix}:people:matches      LIST    ids of people's games waiting for the background
                                         service to start them
    {prefix}:people:open         SET     ids of people's games queued or being played
    {prefix}:people:token:{sha256}
                                 STRING  the human agent id a play token may connect
                                         as (expires; keyed by the token's sha256)
    {prefix}:challenge:{id}      HASH    one challenge: request (JSON), status, heartbeat,
                                         attempts, recorded, error, finished (expires
                                         once it is done or failed)
    {prefix}:challenges:queue    LIST    ids of queued challenges, popped by the service
    {prefix}:challenges:open     SET     ids of challenges queued or being played
    {prefix}:tgame:{id}          HASH    one tournament game (a durable queue's record, as a
                                         challenge's; its id is the game's match id)
    {prefix}:tgames:queue        LIST    ids of queued tournament games
    {prefix}:tgames:open         SET     ids of tournament games queued or being played
    {prefix}:fp:{positions}:{sha256}
                                 STRING  a snapshot's clone fingerprint (float32 action
                                         probabilities) on position set ``positions``
                                         (expires; recomputed from the snapshot)
    {prefix}:fperr:{positions}:{sha256}
                                 STRING  why the snapshot has no fingerprint (expires)
    {prefix}:fppos:{env}:{role}  STRING  the position set the fingerprint worker uses
                                         (JSON: digest, count, num_actions or error)
    {prefix}:fpjob:{env}:{role}:{sha256}
                                 STRING  a fingerprint queued or being computed (single
                                         flight; expires if its worker died)
    {prefix}:fpqueue             LIST    fingerprint jobs (JSON) for the background service

A pool is a league or an env id (``connect_four-v3``, ``league.<name>.<env>``: :func:`league_pool`). Keys hold no
state that cannot be rebuilt from the durable snapshot store (the limit counters
are allowed to be lost: losing them only forgives some requests; so are people's
play requests and tokens: losing them only ends games that had not finished; a
challenge lost with its Redis was not played, or its recorded matches stay in the log).
A limit's subject is a user id, a client address or ``{user id}:{env id}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["DEFAULT_PREFIX", "WORK_QUEUES", "RedisKeys", "WorkQueueKeys", "WorkQueueKind", "check_pool_name",
           "check_sha256", "league_pool"]

DEFAULT_PREFIX = "arena"

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_POOL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,127}$")
_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
_LIMIT_PART = re.compile(r"^[A-Za-z0-9_.:+-]{1,160}$")
_DIGEST = re.compile(r"^[0-9a-f]{16}$")


def check_sha256(sha256: str) -> str:
    """Return ``sha256`` if it is 64 lowercase hex digits.

    Raises:
        ValueError: Anything else (a key must never be built from arbitrary text).
    """
    if not isinstance(sha256, str) or not _SHA256.match(sha256):
        raise ValueError(f"expected a sha256 as 64 lowercase hex digits, got {sha256!r}")
    return sha256


def check_pool_name(pool: str) -> str:
    """Return ``pool`` if it is a valid pool name (a league or env id).

    Raises:
        ValueError: Empty, too long (> 128) or characters outside ``A-Za-z0-9_.:+-``.
    """
    if not isinstance(pool, str) or not _POOL.match(pool):
        raise ValueError(
            f"pool name {pool!r} must be 1-128 characters of A-Z a-z 0-9 _ . : + - "
            "starting with a letter or digit (e.g. 'connect_four-v3' or 'league:7')"
        )
    return pool


def league_pool(league: str, env_id: str, role: str | None = None) -> str:
    """The snapshot pool of training league ``league`` on ``env_id``: ``league.{league}.{env_id}``.

    It also names the league's ``leagues`` row. A league that keeps a pool per role
    (hide and seek) appends the role: ``league.{league}.{env_id}.{role}``.

    Raises:
        ValueError: The name is not a valid pool name (:func:`check_pool_name`).
    """
    return check_pool_name(f"league.{league}.{env_id}" + (f".{role}" if role is not None else ""))


WorkQueueKind = Literal["people", "challenges", "tournament_games"]
WORK_QUEUES: dict[WorkQueueKind, tuple[str, str, str]] = {
    "people": ("people:game", "people:matches", "people:open"),
    "challenges": ("challenge", "challenges:queue", "challenges:open"),
    "tournament_games": ("tgame", "tgames:queue", "tgames:open"),
}
"""Each durable work queue (:mod:`arena.ladder.work_queue`): its records' key (before
``:{id}``), its queue and its open set, after the prefix. The names are the stored ones."""


@dataclass(frozen=True)
class WorkQueueKeys:
    """The keys of one durable work queue: records (HASH per item), queue (LIST of queued
    ids), open set (SET of the ids queued or being played)."""

    records: str
    queue: str
    open_set: str

    def record(self, item_id: str) -> str:
        """HASH of one item (:mod:`arena.ladder.work_queue`)."""
        return f"{self.records}:{_limit_part(item_id)}"


@dataclass(frozen=True)
class RedisKeys:
    """Key builder for one namespace.

    Args:
        prefix: Namespace of every key; ``"arena"`` in the service.
    """

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if not _PREFIX.match(self.prefix):
            raise ValueError(
                f"key prefix {self.prefix!r} must be 1-64 characters of A-Z a-z 0-9 _ . : -"
            )

    def snapshot(self, sha256: str) -> str:
        """STRING key of a snapshot's weights bytes."""
        return f"{self.prefix}:snap:{check_sha256(sha256)}"

    def snapshot_meta(self, sha256: str) -> str:
        """HASH key of a snapshot's spec, metadata and creation time."""
        return f"{self.prefix}:snapmeta:{check_sha256(sha256)}"

    def pool(self, pool: str) -> str:
        """ZSET key of a pool's members, scored by creation time in microseconds."""
        return f"{self.prefix}:pool:{check_pool_name(pool)}"

    def limit(self, name: str, subject: str, window: int) -> str:
        """STRING key counting ``subject``'s requests against limit ``name`` in ``window``."""
        return f"{self.prefix}:limit:{_limit_part(name)}:{_limit_part(subject)}:{int(window)}"

    def busy(self, name: str, subject: str) -> str:
        """STRING key counting ``subject``'s requests of kind ``name`` in flight."""
        return f"{self.prefix}:busy:{_limit_part(name)}:{_limit_part(subject)}"

    def connected_requests(self, agent_id: int) -> str:
        """LIST of decision batches for connected agent ``agent_id``."""
        return f"{self.prefix}:conn:req:{int(agent_id)}"

    def connected_reply(self, request_id: str) -> str:
        """LIST the answer to one decision batch is pushed to."""
        return f"{self.prefix}:conn:reply:{_limit_part(request_id)}"

    def connected_online(self, agent_id: int) -> str:
        """STRING describing the live connection of ``agent_id`` (absent: offline)."""
        return f"{self.prefix}:conn:online:{int(agent_id)}"

    def connected_seen(self, agent_id: int) -> str:
        """STRING: unix seconds ``agent_id`` was last connected."""
        return f"{self.prefix}:conn:seen:{int(agent_id)}"

    def connected_events(self, agent_id: int) -> str:
        """LIST of finished-match results for ``agent_id``'s connection."""
        return f"{self.prefix}:conn:events:{int(agent_id)}"

    def connected_processing(self, agent_id: int, conn_id: str) -> str:
        """LIST of the requests connection ``conn_id`` of ``agent_id`` took and has not answered."""
        return f"{self.prefix}:conn:proc:{int(agent_id)}:{_limit_part(conn_id)}"

    def connected_fence(self, agent_id: int) -> str:
        """HASH of ``agent_id``'s newest claim: ``fence`` (its fencing token) and ``conn``."""
        return f"{self.prefix}:conn:fence:{int(agent_id)}"

    def connected_control(self, conn_id: str) -> str:
        """LIST telling connection ``conn_id`` that a newer connection took its agent over."""
        return f"{self.prefix}:conn:ctl:{_limit_part(conn_id)}"

    def connection_slots(self, kind: str, subject: str) -> str:
        """ZSET of the open sockets of a user or an address (``kind``), in every API process."""
        return f"{self.prefix}:conn:slots:{_limit_part(kind)}:{_limit_part(subject)}"

    def pattern(self) -> str:
        """``SCAN MATCH`` pattern of every key in this namespace (prefix is glob-safe)."""
        return f"{self.prefix}:*"

    def play_token(self, token_sha256: str) -> str:
        """STRING: the human agent a play token (given by its sha256) may connect as."""
        return f"{self.prefix}:people:token:{check_sha256(token_sha256)}"

    def work_queue(self, kind: WorkQueueKind) -> WorkQueueKeys:
        """The keys of the durable work queue ``kind`` (one of :data:`WORK_QUEUES`)."""
        try:
            record, queue, open_set = WORK_QUEUES[kind]
        except KeyError:
            raise ValueError(f"no work queue {kind!r}; one of {', '.join(WORK_QUEUES)}") from None
        return WorkQueueKeys(f"{self.prefix}:{record}", f"{self.prefix}:{queue}", f"{self.prefix}:{open_set}")

    def fingerprint(self, positions: str, sha256: str) -> str:
        """STRING: a snapshot's fingerprint on the position set ``positions`` (its digest)."""
        if not isinstance(positions, str) or not _DIGEST.match(positions):
            raise ValueError(f"expected a position set digest of 16 lowercase hex digits, got {positions!r}")
        return f"{self.prefix}:fp:{positions}:{check_sha256(sha256)}"

    def fingerprint_error(self, positions: str, sha256: str) -> str:
        """STRING: why snapshot ``sha256`` has no fingerprint on the position set ``positions``."""
        return f"{self.prefix}:fperr:{self.fingerprint(positions, sha256).rsplit(':', 2)[1]}:{sha256}"

    def fingerprint_positions(self, env_id: str, role: str) -> str:
        """STRING: the position set of ``env_id`` and ``role`` the fingerprint worker uses."""
        return f"{self.prefix}:fppos:{_limit_part(env_id)}:{_limit_part(role)}"

    def fingerprint_job(self, env_id: str, role: str, sha256: str) -> str:
        """STRING: a fingerprint of ``sha256`` queued or being computed (the single-flight mark)."""
        return f"{self.prefix}:fpjob:{_limit_part(env_id)}:{_limit_part(role)}:{check_sha256(sha256)}"

    def fingerprint_queue(self) -> str:
        """LIST of fingerprint jobs for the background service."""
        return f"{self.prefix}:fpqueue"


def _limit_part(text: str) -> str:
    if not isinstance(text, str) or not _LIMIT_PART.match(text):
        raise ValueError(f"a limit name or subject must be 1-160 characters of A-Z a-z 0-9 _ . : + -, got {text!r}")
    return text
