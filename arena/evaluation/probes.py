"""Exploitability probes in the background: queued, run on bounded workers, recorded.

A probe (``agents.trainers.exploit_probe``) trains a PPO best response against a
frozen agent for a fixed budget of env steps and reports the exploiter's win rate with
its 95% interval. Here it becomes a service:

* **Queue.** ``probes`` rows (``queued -> running -> done | failed``). The API queues a
  probe on request (:func:`queue_probe`: owner or admin, at most the configured budget
  unless admin, at most ``ARENA_PROBE_QUEUE_SIZE`` open probes); with
  ``ARENA_PROBE_AUTO`` the :class:`ProbeService` queues one for every submitted agent
  once it is ``rated``.
* **Fair shares.** At one budget an agent has one probe, whatever the seed: asking again
  returns the queued, running or finished one (only a failed probe is tried again; a
  partial unique index holds it). A
  user may have ``ARENA_PROBES_QUEUED_PER_USER`` probes queued or running and ask for
  ``ARENA_PROBES_PER_USER_PER_DAY`` a UTC day (429 beyond; admins and the service's own
  ``auto`` probes are not limited), and the workers serve requesters in turn
  (:func:`in_turn`: the one served least recently first), not the queue in order, so
  one user's flood waits behind everyone else's next probe. The counts are checked and
  the probe written in one transaction that holds the probe queue's lock
  (:func:`~arena.storage.db.repositories.lock_probe_queue`), so racing requests never
  pass a quota.
* **Workers.** At most ``ARENA_PROBE_CONCURRENCY`` probes run at once, each on one
  CPU with one torch thread at lower priority (``ARENA_PROBE_NICENESS``; see
  :mod:`arena.evaluation.probe_worker`): a Ray task (``num_cpus=1``, scheduled only on
  a free CPU, so the ladder's workers keep theirs) when the service runs on Ray, else
  a spawned process of its own (the in-process runner's fallback; a process can be
  terminated, and torch's global seeding stays out of the server).
* **Restart.** Probes left ``running`` by a stopped service go back to the queue.

Probes need a two-player env with a vectorized core (connect four, tic-tac-toe).
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache

from sqlalchemy.orm import Session

from arena.core.agent_status import AgentStatus
from arena.core.errors import InvalidParameter, TooManyRequests
from arena.core.loop import ServiceLoop
from arena.core.settings import Settings
from arena.evaluation.probe_backends import ProbeBackend, ProbeEvent, make_backend
from arena.evaluation.probe_worker import ProbeJob
from arena.storage.db import repositories as repo
from arena.storage.db.base import utcnow
from arena.storage.wiring import Services
from envs.errors import ServiceUnavailable
from envs.registry import get_spec, list_envs, make_vector_core

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 1.0
"""Shortest interval between two progress writes of one probe."""

QUEUED_RETRY_S = 60
"""``Retry-After`` of a request over the queued-probes quota: a polling hint (a probe takes minutes)."""


@cache
def probe_supported(env_id: str) -> bool:
    """Whether agents of ``env_id`` can be probed (two players, a vectorized core)."""
    return get_spec(env_id).num_seats == 2 and make_vector_core(env_id) is not None


def probe_envs() -> list[str]:
    """Every registered env whose agents can be probed."""
    return [spec.env_id for spec in list_envs() if probe_supported(spec.env_id)]


def _check_quota(session: Session, settings: Settings, requested_by: str) -> None:
    """Refuse a new probe of ``requested_by`` over the per-user quotas (429)."""
    queued_quota, daily_quota = settings.probes_queued_per_user, settings.probes_per_user_per_day
    if queued_quota and repo.count_requested_probes(session, requested_by, open_only=True) >= queued_quota:
        raise TooManyRequests(f"too many requests: at most {queued_quota} probes per user queued or running at "
                              "once (ARENA_PROBES_QUEUED_PER_USER); wait for one to finish", QUEUED_RETRY_S)
    if daily_quota:
        now = utcnow()
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        if repo.count_requested_probes(session, requested_by, since=midnight) >= daily_quota:
            retry_after = math.ceil((midnight + timedelta(days=1) - now).total_seconds())
            raise TooManyRequests(f"too many requests: at most {daily_quota} probes per user per UTC day "
                                  f"(ARENA_PROBES_PER_USER_PER_DAY); try again in {retry_after} s", retry_after)


def queue_probe(services: Services, agent_id: int, requested_by: str, *, budget_env_steps: int | None = None,
                seed: int = 0, may_exceed_budget: bool = False, quota: bool = False) -> tuple[repo.ProbeInfo, bool]:
    """Queue a probe of an agent; returns ``(probe, created)``.

    At one budget an agent has one probe: a queued, running or finished probe of the
    agent at the same budget, whatever its seed, is returned instead of queueing another
    (``created`` false); only after a failed one is a new probe queued.

    Args:
        quota: Apply the per-user quotas to ``requested_by`` (a user's request; not the
            admin's, not the service's own).

    Raises:
        InvalidParameter: The agent's env cannot be probed, or the budget is over the
            configured one for a caller who may not exceed it.
        TooManyRequests: ``quota`` and the requester is over a per-user quota.
        ServiceUnavailable: ``probe_queue_size`` probes are open already.
    """
    settings = services.settings
    budget = settings.probe_budget_steps if budget_env_steps is None else budget_env_steps
    if budget > settings.probe_budget_steps and not may_exceed_budget:
        raise InvalidParameter(f"budget_env_steps is at most {settings.probe_budget_steps} "
                               f"(ARENA_PROBE_BUDGET_STEPS) unless an admin asks")
    def store(session: Session) -> tuple[repo.ProbeInfo, bool]:
        # Every count below gates the insert: one writer of new probes at a time (and the
        # partial unique index keeps one probe of an agent at a budget whatever writes it).
        repo.lock_probe_queue(session)
        agent = repo.get_agent(session, agent_id)
        assert agent is not None, "the caller checked the agent exists"
        if not probe_supported(agent.env_id):
            raise InvalidParameter(f"exploitability probes need a two-player env with a vectorized core; "
                                   f"{agent.env_id} has none")
        existing = repo.probe_at_budget(session, agent_id, budget)
        if existing is not None:
            return existing, False
        if quota:
            _check_quota(session, settings, requested_by)
        if repo.count_open_probes(session) >= settings.probe_queue_size:
            raise ServiceUnavailable(f"the probe queue is full ({settings.probe_queue_size} probes); "
                                     "try again later")
        probe_id = repo.add_probe(session, agent_id, agent.env_id, budget, settings.probe_eval_games, seed,
                                  requested_by)
        return repo.get_probe(session, probe_id), True

    return services.sessions.write_transaction(store, what=f"queueing a probe of agent {agent_id}")


def in_turn(queued: list[repo.ProbeInfo], last_started: Mapping[str, datetime | None]) -> list[repo.ProbeInfo]:
    """``queued`` (oldest first) in the order the workers serve them: requesters in turn.

    Round robin by requester: each requester's oldest probe first, requesters ordered by
    when a probe of theirs last started (never first, then longest ago; ties: whose
    probe has waited longest), then everyone's second probe, and so on.
    """
    by_requester: dict[str, list[repo.ProbeInfo]] = {}
    for probe in queued:
        by_requester.setdefault(probe.requested_by, []).append(probe)
    never = datetime.min.replace(tzinfo=UTC)

    def turn(requester: str) -> tuple[datetime, int]:
        started = last_started.get(requester)
        return (never if started is None else started, by_requester[requester][0].id)

    order = sorted(by_requester, key=turn)
    rounds = max((len(p) for p in by_requester.values()), default=0)
    return [by_requester[r][k] for k in range(rounds) for r in order if k < len(by_requester[r])]


@dataclass
class ProbeService(ServiceLoop):
    """Runs queued probes in the background, at most ``settings.probe_concurrency`` at once.

    Attributes:
        services: Database and snapshot pool.
        backend: Where probes run (default from the settings).
        poll_s: Pause between rounds.
    """

    services: Services
    backend: ProbeBackend | None = None
    poll_s: float = 0.5
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _progress_at: dict[int, float] = field(default_factory=dict, repr=False)

    thread_name = "arena-probes"

    def __post_init__(self) -> None:
        if self.backend is None:
            self.backend = make_backend(self.services.settings)
        requeued = self.services.sessions.write_transaction(
            repo.requeue_running_probes, what="queueing interrupted probes again", idempotent=True)
        if requeued:
            log.info("%d interrupted probes queued again", requeued)

    def auto_queue(self) -> int:
        """Queue a probe for every rated submission that never had one; returns how many."""
        settings = self.services.settings
        with self.services.sessions() as session:
            room = settings.probe_queue_size - repo.count_open_probes(session)
            if room <= 0:
                return 0
            # Submissions only: the demo ladder's and the leagues' own snapshots have no
            # owner, and probing them all would keep a service left alone busy for hours.
            agents = repo.unprobed_agents(session, probe_envs(), (AgentStatus.RATED,), ("neural",), room,
                                          owned=True)
        for agent_id, _ in agents:
            queue_probe(self.services, agent_id, "auto")
        return len(agents)

    def _job(self, probe: repo.ProbeInfo) -> ProbeJob:
        settings = self.services.settings
        job: ProbeJob = {"probe_id": probe.id, "env_id": probe.env_id, "budget_env_steps": probe.budget_env_steps,
                         "eval_games": probe.eval_games, "seed": probe.seed, "max_bytes": settings.max_upload_bytes,
                         "niceness": settings.probe_niceness}
        with self.services.sessions() as session:
            agent = repo.get_agent(session, probe.agent_id)
            if agent.kind == "connected":  # its owner asked: the probe plays its client
                return {**job, "connected": agent.id, "key": agent.key, "redis_url": self.services.redis_url,
                        "prefix": self.services.pool.keys.prefix}
            sha = agent.snapshot_sha256
            if sha is None:
                return {**job, "builtin": agent.key}
            spec = repo.snapshot_specs(session, [sha])[sha]
        weights, _ = self.services.pool.get(sha)
        return {**job, "weights": weights, "spec": spec}

    def start_queued(self) -> int:
        """Start queued probes while fewer than the concurrency run; returns how many started."""
        started = 0
        free = self.services.settings.probe_concurrency - self.backend.running()
        if free <= 0:
            return 0
        with self.services.sessions() as session:
            queued = repo.probes_by_status(session, "queued")
            waiting = in_turn(queued, repo.last_started(session, {p.requested_by for p in queued}))[:free]
        for probe in waiting:
            if not self.services.sessions.write_transaction(
                    functools.partial(repo.claim_probe, probe_id=probe.id), what=f"claiming probe {probe.id}"):
                continue
            try:
                self.backend.start(self._job(probe))
            except Exception as exc:  # noqa: BLE001 - a probe that cannot start fails with the reason
                self._record([ProbeEvent("failed", probe.id, f"could not start: {exc}")])
                continue
            log.info("probe %d of agent %d started (%d env steps)", probe.id, probe.agent_id,
                     probe.budget_env_steps, extra={"agent_id": probe.agent_id})
            started += 1
        return started

    def _record(self, events: Iterable[ProbeEvent]) -> None:
        now = time.monotonic()
        events = list(events)

        def store(session: Session) -> None:
            for e in events:
                if e.kind == "progress":
                    if now - self._progress_at.get(e.probe_id, -1e9) >= PROGRESS_EVERY_S:
                        self._progress_at[e.probe_id] = now
                        repo.set_probe_progress(session, e.probe_id, int(e.value))
                elif e.kind == "done":
                    self._progress_at.pop(e.probe_id, None)
                    repo.finish_probe(session, e.probe_id, e.value)
                    log.info("probe %d done: exploiter win rate %.3f [%.3f, %.3f]", e.probe_id,
                             e.value["win_rate"], e.value["ci_low"], e.value["ci_high"])
                else:
                    self._progress_at.pop(e.probe_id, None)
                    repo.fail_probe(session, e.probe_id, str(e.value))
                    log.warning("probe %d failed: %s", e.probe_id, e.value)

        self.services.sessions.write_transaction(store, what="recording probe progress")

    def step(self) -> None:
        """One round: collect finished probes, queue new agents (if auto), start queued ones."""
        self._record(self.backend.poll())
        if self.services.settings.probe_auto:
            self.auto_queue()
        self.start_queued()

    def cycle(self) -> float:
        self.step()
        return self.poll_s

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the loop and the running probes (they are queued again for the next start)."""
        self.stop_loop(timeout)
        self.backend.stop()
        self.services.sessions.write_transaction(
            repo.requeue_running_probes, what="queueing interrupted probes again", idempotent=True)
