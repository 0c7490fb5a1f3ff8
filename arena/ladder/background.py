"""The background half of ``arena serve``: submissions in, rated matches out.

One loop, on its own thread:

1. **Submissions.** A queued agent is validated as Kaggle does: a few episodes
   against itself and against ``random``. Any forfeit by the agent (an illegal move,
   a non-finite output, an error) rejects it with the reason; otherwise it enters
   placement. The validation matches are stored (unrated) so they can be replayed.
   In a role env the agent plays its role against ``random`` in the other roles.
2. **Ladders.** For every served env (``ARENA_ENVS``: every built-in env by default)
   whose every role has an active agent (two in a symmetric env), the
   :class:`~arena.ladder.pacing.LadderPacer` says what to play this round: new and
   unsettled agents first, line-ups chosen for expected information (each agent only
   in the role it plays), and once the board has settled only a maintenance trickle
   (``ARENA_TRICKLE_MATCHES_PER_S``). The matches are played on the runner (Ray
   workers or in-process) and recorded exactly once. Placed agents become ``rated``.
   Where a role has nobody yet, every active agent's status reason says what it waits
   for ("waiting for a seeker opponent"). Batches are capped at ``max_rate`` and at
   about ``round_s`` of play (a hide-and-seek match costs ~100x a tic-tac-toe one),
   so one slow env never holds up submissions or the other ladders.

3. **People.** Play requests from the browser (``POST /agents/{id}/play``) are claimed
   by a small thread of their own (:class:`~arena.ladder.people.HumanMatchQueue`, on the
   durable queue of :mod:`arena.ladder.work_queue`) and played, unrated, in the connected
   lane, whatever the loop is doing; those a dead service left unfinished are queued again.
4. **Competitions.** Each round also plays one batch of every open competition's own
   board (:mod:`arena.competitions.season`: the same pacer, dispatch and recorder, board
   ``competition:<id>``) and of every final evaluation (:mod:`arena.competitions.final`),
   and moves a competition past its deadline into its final evaluation.
5. **Challenges.** ``POST /challenges`` only queues them; a small thread of their own
   (:class:`~arena.ladder.challenge_queue.ChallengeQueue`, the same durable queue) claims
   them and plays them in the connected lane too, and queues again those a dead service
   left unfinished.

6. **Fingerprints.** Every agent that passes validation, and every snapshot a read found
   without one, is queued for its clone fingerprint; a thread of its own
   (:class:`~arena.evaluation.fingerprint_worker.FingerprintWorker`) computes them, so the
   API's reads (``/agents/{id}/family``, the integrity report) compute nothing.
7. **Tournaments.** Their games are items of the same durable queue, played by a thread
   of their own (:class:`~arena.competitions.tournament_games.TournamentGames`), which
   pairs each next round from the games recorded.

(:mod:`arena.ladder.demo` fills an empty database with agents to watch.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from agents.catalog import make_policy
from arena.competitions.season import CompetitionBoards
from arena.competitions.tournament_games import TournamentGames
from arena.core.agent_status import ACTIVE, AgentStatus
from arena.core.loop import ServiceLoop
from arena.core.metrics import observe_worker_stats, set_matches_queued, set_queue_depth
from arena.core.settings import Settings
from arena.engine import MatchEngine
from arena.engine.plan import plan_matches
from arena.engine.records import Termination
from arena.evaluation.fingerprint_worker import FingerprintWorker
from arena.evaluation.fingerprints import FingerprintStore
from arena.ladder.challenge_queue import ChallengeQueue
from arena.ladder.dispatch import CONNECTED_KINDS, Ladder, LadderConfig, agent_source, open_ladder, waiting_reason
from arena.ladder.lane import ConnectedLane
from arena.ladder.pacing import LadderPacer, PacingConfig, pacing_from_settings
from arena.ladder.people import HumanMatchQueue
from arena.ladder.recorder import record_unrated
from arena.ladder.registration import ladder_envs, register_builtin_agents
from arena.ladder.retention import ReplayRetention
from arena.ladder.work_queue import QueueWorker, queue_timings
from arena.runners import MatchRunner
from arena.snapshots.cache import load_snapshot_policy
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from envs.registry import builtin_env_ids, get_entry, get_spec
from league.ratings.book import DEFAULT_TARGET_SIGMA

log = logging.getLogger(__name__)


def offline_reason(seen: float | None) -> str:
    """Why an offline connected agent is not scheduled."""
    if seen is None:
        return "offline: waiting for its client to connect (arena connect)"
    when = datetime.fromtimestamp(seen, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"offline since {when}"

VALIDATION_TIME_BUDGET_S = 5.0
"""Budget of one batched call in validation episodes (an ONNX run is terminated there)."""


@dataclass
class ServiceConfig:
    """Knobs of the background service.

    Attributes:
        envs: Envs whose ladders the service runs (default: every built-in env;
            ``arena serve`` passes ``ARENA_ENVS``).
        batch_size: Most matches per ladder batch.
        round_s: A batch is sized to take about this long (from the env's measured
            seconds per match), between ``min_batch`` and ``batch_size`` matches.
        min_batch: Fewest matches per ladder batch.
        target_sigma: An agent is ``rated`` once its sigma is at most this in every role
            it plays.
        max_rate: Upper bound on rated matches per second per env (pacing).
        validation_matches: Episodes per validation opponent (itself, random).
        idle_sleep_s: Pause when there is nothing to do.
        metrics_every_s: How often queue depths and worker liveness are sampled.
        pacing: How fast a board plays once settled (its ``batch_size`` is this one's).
        replay_retention_days: Action lists of never-opened matches older than this are
            dropped (:mod:`arena.ladder.retention`); 0 keeps every replay.
        seed: Seeds the ladders' matches and line-up choices; ``None``: the start time,
            so every run plays new games (a test fixes it to replay the same ones).
    """

    envs: tuple[str, ...] = field(default_factory=builtin_env_ids)
    batch_size: int = 1024
    round_s: float = 2.0
    min_batch: int = 8
    target_sigma: float = DEFAULT_TARGET_SIGMA
    max_rate: float = 2000.0
    validation_matches: int = 2
    idle_sleep_s: float = 0.5
    metrics_every_s: float = 5.0
    pacing: PacingConfig = field(default_factory=PacingConfig)
    replay_retention_days: float = 0.0
    seed: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> ServiceConfig:
        """The service the ``ARENA_*`` settings ask for (envs, pacing, retention), with ``overrides``."""
        return cls(**{"envs": ladder_envs(settings.envs), "pacing": pacing_from_settings(settings),
                      "replay_retention_days": settings.replay_retention_days, **overrides})


class BackgroundService(ServiceLoop):
    """Validates submissions and runs the ladders until stopped."""

    thread_name = "arena-service"

    def __init__(self, services: Services, runner: MatchRunner, config: ServiceConfig | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.services = services
        self.clock = clock
        self.runner = runner
        self.config = config or ServiceConfig()
        self.ladders: dict[str, Ladder] = {}
        self.retention = ReplayRetention(services.sessions, self.config.replay_retention_days)
        self.seed = int(time.time()) if self.config.seed is None else self.config.seed
        self.pacer = LadderPacer(replace(self.config.pacing, batch_size=self.config.batch_size), seed=self.seed)
        self.engine = MatchEngine(time_budget_s=VALIDATION_TIME_BUDGET_S)
        self.lane = ConnectedLane(services)
        timings = queue_timings(services.settings.work_stale_s)
        self.people = HumanMatchQueue(services, self.lane, **timings)
        self.challenges = ChallengeQueue(services, self.lane, **timings)
        self.tournament_games = TournamentGames(services, **timings)
        self.broker = services.connected_policies().broker
        self.fingerprints = FingerprintWorker(FingerprintStore(services.pool, services.redis, services.pool.keys,
                                                               max_bytes=services.settings.max_upload_bytes))
        super().__init__()
        self.competitions = CompetitionBoards(services, runner, self.pacer, batch_size=self.config.batch_size,
                                              stop=self._stop.is_set, clock=clock, lane=self.lane,
                                              online=self._online)
        self._resumed = False  # the validations a dead service left are taken up once
        self.rounds = 0
        self._sampled_at = float("-inf")
        self._match_s: dict[str, float] = {}  # measured seconds per match, per env
        self.pace: dict[str, tuple[int, float]] = {}
        """Per env: matches this loop played and recorded, and the seconds it spent on them."""

    # -- submissions --------------------------------------------------------------
    def process_submissions(self) -> int:
        """Validate every queued agent of the served envs; returns how many were handled.

        The first call also validates the agents left ``validating``: a deployment runs one
        background service, so those were being validated by a service that died (SIGKILL,
        a lost host); without this they would wait for ever."""
        statuses = (AgentStatus.QUEUED,) if self._resumed else (AgentStatus.QUEUED, AgentStatus.VALIDATING)
        handled = 0
        for env_id in self.config.envs:
            with self.services.sessions() as session:
                queued = repo.list_agents(session, env_id, statuses=statuses)
            for agent in queued:
                if self._stop.is_set():  # stopping: the rest stay queued for the next service
                    return handled
                self.validate(agent)
                handled += 1
        self._resumed = True
        return handled

    def _set_status(self, agent_id: int, status: AgentStatus, reason: str = "") -> bool:
        """Move the agent (if allowed from its status now); ``False`` if it was not."""
        moved = self.services.sessions.write_transaction(
            lambda session: repo.set_agent_status(session, agent_id, status, reason),
            what=f"moving agent {agent_id} to {status}")
        if moved:
            log.info("agent %d is %s", agent_id, status, extra={
                "agent_id": agent_id, "status": str(status), **({"reason": reason} if reason else {})})
        return moved

    def validate(self, agent: repo.AgentInfo) -> None:
        """Validate one queued agent: it ends in ``placement`` or ``rejected`` (with the reason)."""
        if not self._set_status(agent.id, AgentStatus.VALIDATING, "playing its validation episodes"):
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
        if spec.symmetric:
            jobs = plan_matches([agent.key], spec, n, seed=agent.id)
            jobs += plan_matches([agent.key, random.agent_id], spec, n, seed=agent.id + 1)
        else:  # its role against random in the others
            lineup = [agent.key if agent.plays(role) else random.agent_id for role in spec.roles]
            jobs = plan_matches(lineup, spec, 2 * n, seed=agent.id)
        records = self.engine.play(agent.env_id, jobs, policies)
        ids = {agent.key: agent.id, **self.services.sessions.write_transaction(
            lambda session: register_builtin_agents(session, agent.env_id, [random.agent_id]),
            what=f"registering {random.agent_id}", idempotent=True)}
        record_unrated(self.services.sessions, spec, records, ids)
        for r in records:
            if Termination(r.termination).is_forfeit and r.seats[r.forfeit_seat] == agent.key:
                self._set_status(agent.id, AgentStatus.REJECTED,
                                 f"validation match {r.match_id} ended in {r.termination}: {r.detail}")
                return
        if self._set_status(agent.id, AgentStatus.PLACEMENT):
            role = getattr(policy.spec, "role", None) or agent.role
            if role:  # its clone fingerprint, computed beside the loop (arena.evaluation.fingerprint_worker)
                self.fingerprints.store.ask(agent.env_id, role, [agent.snapshot_sha256])

    # -- ladders ------------------------------------------------------------------
    def ladder_round(self, env_id: str) -> int:
        """One batch of rated matches on ``env_id``'s ladder; returns matches recorded.

        Line-ups with a connected agent go to the :class:`~arena.ladder.lane.ConnectedLane`
        (played beside this loop); the others are played here.
        """
        with self.services.sessions() as session:
            agents = repo.list_agents(session, env_id, statuses=ACTIVE)
        agents = self._online(agents)
        if not agents:
            return 0
        ladder = self.ladders.get(env_id)
        if ladder is None:
            ladder = open_ladder(self.services.sessions, self._ladder_config(env_id))
            self.ladders[env_id] = ladder
            self.lane.play_ladder(ladder.config, [agent_source(a) for a in agents], [], self._stop.is_set)
        if self.lane.take_recorded(env_id):
            ladder.reload_ratings()
        ladder.sync_agents([agent_source(a) for a in agents])
        missing = ladder.missing_roles()
        if missing:
            self._say_waiting(agents, waiting_reason(missing))
            return 0
        plan = self.pacer.plan(env_id, ladder.spec.roles, sorted(ladder.sources), ladder.book, ladder.env,
                               self.clock(), plays=ladder.plays)
        lineups = plan.lineups[:self._batch_size(env_id)]
        connected = {a.key for a in agents if a.kind in CONNECTED_KINDS}
        if connected:
            lane = [lu for lu in lineups if connected.intersection(lu)]
            lineups = [lu for lu in lineups if not connected.intersection(lu)]
            if lane:
                self.lane.play_ladder(ladder.config, list(ladder.sources.values()), lane, self._stop.is_set)
        if not lineups:
            return 0
        start = time.perf_counter()
        recorded = ladder.run(self.runner, len(lineups), stop=self._stop.is_set, lineups=lineups).recorded
        self.pace[env_id] = (self.pace.get(env_id, (0, 0.0))[0] + recorded,
                             self.pace.get(env_id, (0, 0.0))[1] + time.perf_counter() - start)
        if recorded:
            per_match = (time.perf_counter() - start) / recorded
            self._match_s[env_id] = 0.5 * (self._match_s.get(env_id, per_match) + per_match)
        return recorded

    def _ladder_config(self, env_id: str) -> LadderConfig:
        return LadderConfig(env_id, batch_size=self.config.batch_size, seed=self.seed,
                            target_sigma=self.config.target_sigma)

    def _online(self, agents: list[repo.AgentInfo]) -> list[repo.AgentInfo]:
        """``agents`` less the connected ones whose client is offline (their status reason
        says since when) and people (they play when they ask, never by the ladder)."""
        connected = [a for a in agents if a.kind == "connected"]
        if not connected:
            return [a for a in agents if a.kind != "human"]
        ids = [a.id for a in connected]
        presence, seen = self.broker.presences(ids), self.broker.last_seen(ids)
        for a in connected:
            reason = "" if presence[a.id] is not None else offline_reason(seen[a.id])
            if a.status_reason != reason and (reason or a.status_reason.startswith("offline")):
                self._set_status(a.id, AgentStatus(a.status), reason)
        return [a for a in agents if a.kind not in CONNECTED_KINDS or presence.get(a.id) is not None]

    def _batch_size(self, env_id: str) -> int:
        """Most matches for the next batch: about ``round_s`` of play at the measured pace."""
        cfg = self.config
        per_match = self._match_s.get(env_id)
        if per_match is None:  # first batch: full on a vectorized core, else small to measure the pace
            return cfg.batch_size if get_entry(env_id).vector_core else min(cfg.batch_size, 2 * cfg.min_batch)
        return int(min(cfg.batch_size, max(cfg.min_batch, cfg.round_s / max(per_match, 1e-9))))

    def _say_waiting(self, agents: list[repo.AgentInfo], reason: str) -> None:
        """Put why they are not scheduled into the active agents' status reasons."""
        for agent in agents:
            if agent.status_reason != reason:
                self._set_status(agent.id, AgentStatus(agent.status), reason)

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
        played += self.competitions.round()  # the competitions' own boards, and their final evaluations
        self.rounds += 1
        return played

    def cycle(self) -> float:
        return self.config.idle_sleep_s if self.step() == 0 else 0.0

    def _workers(self) -> tuple[QueueWorker | FingerprintWorker, ...]:
        """The loops beside the service's own, started and stopped with it."""
        return self.people, self.challenges, self.tournament_games, self.fingerprints

    def start(self) -> BackgroundService:
        super().start()
        for worker in self._workers():
            worker.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        for loop in (self, *self._workers()):
            loop.ask_to_stop()  # every loop's last round (a blocking pop of up to 1 s) ends at once, not in turn
        self.stop_loop(timeout)
        for worker in self._workers():
            worker.stop()
        self.lane.close()
        self.engine.close()
