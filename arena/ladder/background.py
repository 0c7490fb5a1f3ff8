"""The background half of ``arena serve``: submissions in, rated matches out.

One loop, on its own thread:

1. **Submissions.** A queued agent is validated as Kaggle does: a few episodes
   against itself and against ``random``. Any forfeit by the agent (an illegal move,
   a non-finite output, an error) rejects it with the reason; otherwise it enters
   placement. The validation matches are stored (unrated) so they can be replayed.
2. **Ladders.** For every symmetric env with at least two active agents, the
   :class:`~arena.ladder.pacing.LadderPacer` says what to play this round: new and
   unsettled agents first, pairs chosen for expected information, and once the board
   has settled only a maintenance trickle (``ARENA_TRICKLE_MATCHES_PER_S``). The
   matches are played on the runner (Ray workers or in-process) and recorded exactly
   once. Placed agents become ``rated``. Batches are also capped at ``max_rate``.

(:mod:`arena.ladder.demo` fills an empty database with agents to watch.)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from agents.catalog import make_policy
from arena.agent_status import ACTIVE, AgentStatus
from arena.engine import MatchEngine
from arena.engine.plan import plan_matches
from arena.engine.records import Termination
from arena.ladder.dispatch import Ladder, LadderConfig, agent_source, open_ladder
from arena.ladder.pacing import LadderPacer, PacingConfig, pacing_from_settings
from arena.ladder.recorder import record_unrated
from arena.ladder.registration import register_builtin_agents
from arena.ladder.retention import ReplayRetention
from arena.metrics import observe_worker_stats, set_matches_queued, set_queue_depth
from arena.runners import MatchRunner
from arena.settings import Settings
from arena.snapshots.cache import load_snapshot_policy
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from envs.registry import get_spec

log = logging.getLogger(__name__)

VALIDATION_TIME_BUDGET_S = 5.0
"""Budget of one batched call in validation episodes (an ONNX run is terminated there)."""


@dataclass
class ServiceConfig:
    """Knobs of the background service.

    Attributes:
        envs: Envs whose ladders the service runs.
        batch_size: Matches per ladder batch.
        max_rate: Upper bound on rated matches per second per env (pacing).
        validation_matches: Episodes per validation opponent (itself, random).
        idle_sleep_s: Pause when there is nothing to do.
        metrics_every_s: How often queue depths and worker liveness are sampled.
        pacing: How fast a board plays once settled (its ``batch_size`` is this one's).
        replay_retention_days: Action lists of never-opened matches older than this are
            dropped (:mod:`arena.ladder.retention`); 0 keeps every replay.
    """

    envs: tuple[str, ...] = ("connect_four-v3", "tictactoe-v3")
    batch_size: int = 1024
    max_rate: float = 2000.0
    validation_matches: int = 2
    idle_sleep_s: float = 0.5
    metrics_every_s: float = 5.0
    pacing: PacingConfig = field(default_factory=PacingConfig)
    replay_retention_days: float = 0.0

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> ServiceConfig:
        """The service the ``ARENA_*`` settings ask for (pacing, retention), with ``overrides``."""
        return cls(**{"pacing": pacing_from_settings(settings),
                      "replay_retention_days": settings.replay_retention_days, **overrides})


class BackgroundService:
    """Validates submissions and runs the ladders until stopped."""

    def __init__(self, services: Services, runner: MatchRunner, config: ServiceConfig | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.services = services
        self.clock = clock
        self.runner = runner
        self.config = config or ServiceConfig()
        self.ladders: dict[str, Ladder] = {}
        self.retention = ReplayRetention(services.sessions, self.config.replay_retention_days)
        self.pacer = LadderPacer(replace(self.config.pacing, batch_size=self.config.batch_size),
                                 seed=int(time.time()))
        self.engine = MatchEngine(time_budget_s=VALIDATION_TIME_BUDGET_S)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0
        self._sampled_at = float("-inf")

    # -- submissions --------------------------------------------------------------
    def process_submissions(self) -> int:
        """Validate every queued agent of the served envs; returns how many were handled."""
        handled = 0
        for env_id in self.config.envs:
            with self.services.sessions() as session:
                queued = repo.list_agents(session, env_id, statuses=(AgentStatus.QUEUED,))
            for agent in queued:
                self.validate(agent)
                handled += 1
        return handled

    def _set_status(self, agent_id: int, status: AgentStatus, reason: str = "") -> bool:
        """Move the agent (if allowed from its status now); ``False`` if it was not."""
        with self.services.sessions.begin() as session:
            moved = repo.set_agent_status(session, agent_id, status, reason)
        if moved:
            log.info("agent %d is %s", agent_id, status, extra={
                "agent_id": agent_id, "status": str(status), **({"reason": reason} if reason else {})})
        return moved

    def validate(self, agent: repo.AgentInfo) -> None:
        """Validate one queued agent: it ends in ``placement`` or ``rejected`` (with the reason)."""
        if not self._set_status(agent.id, AgentStatus.VALIDATING):
            return  # retired meanwhile
        spec = get_spec(agent.env_id)
        try:
            policy = load_snapshot_policy(self.services.pool, agent.snapshot_sha256, "cpu", 1.0,
                                          max_bytes=self.services.settings.max_upload_bytes,
                                          time_limit_s=VALIDATION_TIME_BUDGET_S)
        except Exception as exc:  # noqa: BLE001 - any load failure is a rejection reason
            self._set_status(agent.id, AgentStatus.REJECTED, f"could not load the submitted weights: {exc}")
            return
        random = make_policy("random", agent.env_id)
        policies = {agent.key: policy, random.agent_id: random}
        n = self.config.validation_matches
        jobs = plan_matches([agent.key], spec, n, seed=agent.id)
        if spec.symmetric:
            jobs += plan_matches([agent.key, random.agent_id], spec, n, seed=agent.id + 1)
        records = self.engine.play(agent.env_id, jobs, policies)
        with self.services.sessions.begin() as session:
            ids = {agent.key: agent.id, **register_builtin_agents(session, agent.env_id, [random.agent_id])}
        record_unrated(self.services.sessions, spec, records, ids)
        for r in records:
            if Termination(r.termination).is_forfeit and r.seats[r.forfeit_seat] == agent.key:
                self._set_status(agent.id, AgentStatus.REJECTED,
                                 f"validation match {r.match_id} ended in {r.termination}: {r.detail}")
                return
        if spec.symmetric:
            self._set_status(agent.id, AgentStatus.PLACEMENT)
        else:
            self._set_status(agent.id, AgentStatus.PLACEMENT,
                             "validated; ladders for role-based envs are not scheduled yet")

    # -- ladders ------------------------------------------------------------------
    def ladder_round(self, env_id: str) -> int:
        """One batch of rated matches on ``env_id``'s ladder; returns matches recorded."""
        spec = get_spec(env_id)
        if not spec.symmetric:
            return 0
        with self.services.sessions() as session:
            agents = repo.list_agents(session, env_id, statuses=ACTIVE)
        if len(agents) < 2:
            return 0
        ladder = self.ladders.get(env_id)
        if ladder is None:
            ladder = open_ladder(self.services.sessions,
                                 LadderConfig(env_id, batch_size=self.config.batch_size, seed=int(time.time())))
            self.ladders[env_id] = ladder
        ladder.sync_agents([agent_source(a) for a in agents])
        plan = self.pacer.plan(env_id, spec.roles, sorted(ladder.sources), ladder.book, ladder.env,
                               self.clock())
        if not plan.lineups:
            return 0
        return ladder.run(self.runner, len(plan.lineups), stop=self._stop.is_set, lineups=plan.lineups).recorded

    def sample_metrics(self) -> None:
        """Queue depths (submissions, matches per env) and live workers, for ``/metrics``."""
        with self.services.sessions() as session:
            set_queue_depth(sum(len(repo.list_agents(session, env_id, statuses=(AgentStatus.QUEUED,)))
                                for env_id in self.config.envs))
            for env_id in self.config.envs:
                set_matches_queued(env_id, repo.queue_depth(session, env_id))
        stats = getattr(self.runner, "stats", None)
        if stats is not None:
            observe_worker_stats(stats())

    def step(self) -> int:
        """Submissions, then one ladder batch per env; returns matches recorded."""
        if time.monotonic() - self._sampled_at >= self.config.metrics_every_s:
            self._sampled_at = time.monotonic()
            self.sample_metrics()
        self.process_submissions()
        if self.retention.due(self.clock()):
            self.retention.run(self.clock())
        played = 0
        for env_id in self.config.envs:
            start = time.perf_counter()
            n = self.ladder_round(env_id)
            played += n
            pause = n / self.config.max_rate - (time.perf_counter() - start)
            if pause > 0 and self._stop.wait(pause):
                break
        self.rounds += 1
        return played

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.step() == 0:
                    self._stop.wait(self.config.idle_sleep_s)
            except Exception:
                log.exception("service round failed; retrying")
                self._stop.wait(2.0)

    def start(self) -> BackgroundService:
        self._thread = threading.Thread(target=self.run, name="arena-service", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.engine.close()
