"""Training leagues on the real services: PPO learners in AlphaStar roles.

Each learner (:mod:`league.scheduling.roles`: main agent, main exploiter, league exploiter) is a
:class:`~agents.trainers.ppo_selfplay.SelfPlayPPO` on the env's vectorized core. The
learners take turns, one update each. Before an update, a learner's opponent
distribution is computed from its role and its win-rate table (PFSP over decayed
results of its recent training games); every board that starts a game draws its
opponent from it. Opponents are scripted baselines, the live main agents, and past
snapshots from the Redis snapshot pool, loaded on demand through a bounded
:class:`~arena.snapshots.cache.SnapshotCache` (memory does not grow with the league).

A snapshot (win rate >= threshold, or every ``max_updates``) is a copy of the actor's
weights: it goes into the pool ``league.<name>.<env>`` and is registered as a neural
agent in the database with status ``queued``, so the service validates and rates it
like any submission (``arena serve``), or :func:`arena.training.report.rate_league` does.

The run is resumable: after every snapshot and at the end, learner tensors and the
league's counters are saved under ``<data_dir>/leagues/<name>/`` (:mod:`arena.training.state`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from sqlalchemy.orm import Session

from agents.catalog import make_policy
from agents.checkpoint import serialize_weights
from agents.checkpoint_spec import make_spec
from agents.neural import NeuralPolicy
from agents.policy import Policy
from agents.trainers.ppo_selfplay import SelfPlayPPO, UpdateStats, actor_hparams
from arena.ladder.registration import register_env, register_snapshot_agent
from arena.snapshots.cache import SnapshotCache, SnapshotPolicy
from arena.snapshots.keys import league_pool
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from arena.training.config import LeagueConfig, LeagueProgress, LearnerProgress, default_baselines
from arena.training.state import LeagueDir, LeagueState, LearnerState, SnapshotEntry
from envs.registry import get_spec, make_vector_core
from league.scheduling.matchmaking import WinRateTable
from league.scheduling.roles import (
    SELF,
    Role,
    check_role,
    current_main_id,
    expected_win_rate,
    learner_names,
    opponent_distribution,
    reset_after_snapshot,
    snapshot_name,
)

log = logging.getLogger(__name__)

__all__ = ["LeagueTrainer"]


class LeagueTrainer:
    """Trains a league on ``services`` (pool + database); resumes a saved league of the same name."""

    def __init__(self, services: Services, config: LeagueConfig) -> None:
        self.services, self.cfg = services, config
        self.core = make_vector_core(config.env_id)
        if self.core is None or get_spec(config.env_id).num_seats != 2:
            raise ValueError(f"league training needs a two-player board env with a vectorized core; "
                             f"{config.env_id} has none (use connect_four-v3 or tictactoe-v3)")
        self.dir = LeagueDir(services.settings.data_dir, config.name)
        self.pool_name = league_pool(config.name, config.env_id)
        self.spec = make_spec(config.env_id, config.ppo.arch, actor_hparams(config.ppo))
        self.baselines = tuple(config.baselines or default_baselines(config.env_id))
        self.cache = SnapshotCache(services.pool, capacity=config.cache_size)
        self._policies: dict[str, Policy] = {b: make_policy(b, config.env_id) for b in self.baselines}
        self.trainers: dict[str, SelfPlayPPO] = {}
        self._probs: dict[str, np.ndarray] = {}
        self.resumed = self.dir.exists()
        self.state = self._resume() if self.resumed else self._create()
        self.rng = np.random.default_rng(config.seed)
        if self.state.rng_state:
            self.rng.bit_generator.state = self.state.rng_state

    # -- setup -----------------------------------------------------------------------
    def _new_trainer(self, learner: LearnerState) -> SelfPlayPPO:
        probs_of = self._probs

        def pick(rng: np.random.Generator, k: int) -> np.ndarray:
            p = probs_of[learner.name]
            return rng.choice(len(p), size=k, p=p)

        self._probs[learner.name] = self._initial_probs()
        return SelfPlayPPO(self.core, replace(self.cfg.ppo, seed=learner.seed), pick_opponents=pick)

    def _initial_probs(self) -> np.ndarray:
        p = np.array([1.0 if r in self.baselines else 0.0 for r in self.state.roster])
        if not p.any():  # no baselines: self-play until the first distribution is computed
            p[self.state.roster.index(SELF)] = 1.0
        return p / p.sum()

    def _base_roster(self) -> list[str]:
        mains = [current_main_id(n) for n, r in self._learner_names() if r == "main"]
        return [*self.baselines, SELF, *mains]

    def _learner_names(self) -> list[tuple[str, str]]:
        return learner_names(self.cfg.roles)

    def _create(self) -> LeagueState:
        def create(session: Session) -> int:
            rating_env = register_env(session, self.cfg.env_id)
            found = repo.get_league_by_name(session, self.pool_name)
            return found.id if found else repo.create_league(
                session, self.pool_name, self.cfg.env_id,
                {"roles": list(self.cfg.roles), "rating": rating_env.to_json()})

        league_id = self.services.sessions.write_transaction(create, what=f"creating league {self.pool_name}")
        learners = [LearnerState(name, role, seed=self.cfg.seed + 1000 * i, table=WinRateTable(self.cfg.decay))
                    for i, (name, role) in enumerate(self._learner_names())]
        state = LeagueState(self.cfg.name, self.cfg.env_id, self.spec.to_json(), learners,
                            self._base_roster(), league_id=league_id)
        self.state = state
        for learner in learners:
            trainer = self.trainers[learner.name] = self._new_trainer(learner)
            self.dir.save_tensors(learner.name, trainer.model.state_dict(), initial=True)
        return state

    def _resume(self) -> LeagueState:
        state = self.dir.load_state()
        if state.env_id != self.cfg.env_id or state.spec != self.spec.to_json():
            raise ValueError(f"league {self.cfg.name!r} was started on {state.env_id} with spec {state.spec}; "
                             "use another --name for a different env or network")
        self.state = state
        saved_roles = tuple(lr.role for lr in state.learners)
        if saved_roles != tuple(self.cfg.roles):
            log.warning("league %s keeps its saved roles %s (asked for %s)", state.name, saved_roles, self.cfg.roles)
        for learner in state.learners:
            trainer = self.trainers[learner.name] = self._new_trainer(learner)
            trainer.load_state_tensors(self.dir.load_tensors(learner.name))
            if learner.rng_state:
                trainer.rng.bit_generator.state = learner.rng_state
        log.info("resumed league %s: %d updates, %d snapshots", state.name, state.updates, len(state.snapshots))
        return state

    # -- opponents -------------------------------------------------------------------
    def _distribution(self, learner: LearnerState) -> tuple[list[str], np.ndarray]:
        snaps = self.state.snapshots
        mains = [current_main_id(lr.name) for lr in self.state.learners if lr.role == "main"]
        rates = {r: learner.table.win_rate(r) for r in self.state.roster}
        return opponent_distribution(
            learner.role, past=[s.sha256 for s in snaps], baselines=self.baselines,  # type: ignore[arg-type]
            main_agents=[m for m in mains if m != current_main_id(learner.name)],
            past_main=[s.sha256 for s in snaps if s.role == "main"], win_rates=rates,
            config=self.cfg.role_config)

    def _bounded(self, ids: list[str], probs: np.ndarray) -> tuple[list[str], np.ndarray]:
        """At most ``cache_size // 2`` snapshots per update, drawn by their PFSP weight.

        Boards draw opponents every game and each distinct snapshot in play must be in the
        bounded cache at every ply; with more snapshots in play than it holds, LRU misses
        on every access (a 20-snapshot league ran 6x slower). Half the capacity leaves room
        for the games still running against the previous update's draw.
        """
        snaps = self.state.snapshot_names()
        rows = np.array([i for i, o in enumerate(ids) if o in snaps and probs[i] > 0], dtype=np.int64)
        limit = max(1, self.cfg.cache_size // 2)
        if rows.size <= limit:
            return ids, probs
        keep = self.rng.choice(rows, size=limit, replace=False, p=probs[rows] / probs[rows].sum())
        out = probs.copy()
        out[np.setdiff1d(rows, keep)] = 0.0
        return ids, out / out.sum()

    def _opponents(self, learner: LearnerState, frozen: dict[str, NeuralPolicy]) -> list[Policy]:
        out: list[Policy] = []
        for opp in self.state.roster:
            if opp == SELF:
                out.append(frozen[learner.name])
            elif opp.startswith("main:"):
                out.append(frozen[opp[len("main:"):]])
            else:
                if opp not in self._policies:
                    self._policies[opp] = SnapshotPolicy(self.cache, opp)
                out.append(self._policies[opp])
        return out

    def opponent_probs(self, learner: str) -> dict[str, float]:
        """The opponents ``learner`` drew from in its latest update (display names), with probabilities."""
        probs = self._probs[learner]
        return {self.display_name(o): float(p) for o, p in zip(self.state.roster, probs) if p > 0}

    def display_name(self, opponent: str) -> str:
        """Snapshot names for shas; other opponent ids as they are."""
        return self.state.snapshot_names().get(opponent, opponent)

    # -- one update of one learner -----------------------------------------------------
    def _update(self, learner: LearnerState, frozen: dict[str, NeuralPolicy], progress: float,
                writer) -> tuple[UpdateStats, LearnerProgress]:
        trainer = self.trainers[learner.name]
        ids, probs = self._bounded(*self._distribution(learner))
        full = np.zeros(len(self.state.roster))
        index = {r: i for i, r in enumerate(self.state.roster)}
        for i, p in zip(ids, probs):
            full[index[i]] += p
        self._probs[learner.name] = full / full.sum()
        if self.cfg.lr_end is not None:
            trainer.set_lr(self.cfg.ppo.lr + (self.cfg.lr_end - self.cfg.ppo.lr) * min(progress, 1.0))
        stats = trainer.update(self._opponents(learner, frozen))
        for o, score in zip(stats.result_opponents, stats.result_scores):
            if self.state.roster[o] != SELF:
                learner.table.record(self.state.roster[o], float(score))
        learner.updates += 1
        learner.updates_since += 1
        learner.env_steps += stats.env_steps
        learner.seconds += stats.seconds
        rates = {r: learner.table.win_rate(r) for r in ids}
        expected = expected_win_rate(ids, probs, rates)
        top = sorted(zip(ids, probs), key=lambda t: -t[1])[:4]
        info = LearnerProgress(learner.name, learner.role, learner.generation, learner.updates, learner.env_steps,
                               stats.env_steps / max(stats.seconds, 1e-9),
                               (stats.wins + 0.5 * stats.draws) / max(stats.games, 1), expected,
                               [(self.display_name(i), float(p), rates[i]) for i, p in top])
        step = learner.updates
        writer.add_scalar(f"{learner.name}/win_rate", info.win_rate, step)
        writer.add_scalar(f"{learner.name}/expected_win_rate", expected, step)
        writer.add_scalar(f"{learner.name}/steps_per_s", info.steps_per_s, step)
        writer.add_scalar(f"{learner.name}/policy_loss", stats.policy_loss, step)
        writer.add_scalar(f"{learner.name}/value_loss", stats.value_loss, step)
        writer.add_scalar(f"{learner.name}/entropy", stats.entropy, step)
        for b in self.baselines:
            writer.add_scalar(f"{learner.name}/vs/{b}", learner.table.win_rate(b), step)
        reason = self.cfg.snapshot.due(expected, learner.updates_since)
        if reason:
            self.snapshot(learner, reason)
        return stats, info

    # -- snapshots -------------------------------------------------------------------
    def snapshot(self, learner: LearnerState, reason: str) -> SnapshotEntry:
        """Freeze ``learner`` into the pool, register it as an agent, maybe reset it, save the league."""
        trainer = self.trainers[learner.name]
        weights = serialize_weights(trainer.model.actor.state_dict())  # a copy, made now
        learner.generation += 1
        role: Role = check_role(learner.role)
        name = snapshot_name(self.cfg.name, role, learner.generation)
        if learner.name != role:
            name = f"{self.cfg.name}-{learner.name}-g{learner.generation}"
        parent = next((s.sha256 for s in reversed(self.state.snapshots) if s.learner == learner.name), None)
        meta = {"league": self.cfg.name, "role": role, "learner": learner.name, "generation": learner.generation,
                "updates": learner.updates, "env_steps": learner.env_steps, "reason": reason, "name": name}
        agent = self.services.sessions.write_transaction(
            lambda session: register_snapshot_agent(session, self.services.pool, weights, self.spec,
                                                    pool_name=self.pool_name, name=name,
                                                    league_id=self.state.league_id, parent_sha256=parent, meta=meta),
            what=f"registering snapshot {name}")
        sha, key = agent.sha256, agent.key
        entry = SnapshotEntry(sha, key, name, role, learner.name, learner.generation, learner.updates,
                              learner.env_steps, reason)
        self.state.snapshots.append(entry)
        if sha not in self.state.roster:
            self.state.roster.append(sha)
        learner.updates_since = 0
        if reset_after_snapshot(role, reason, self.rng, self.cfg.role_config):
            trainer.load_weights(self.dir.load_tensors(learner.name, initial=True))
            learner.table = WinRateTable(self.cfg.decay)
            learner.resets += 1
        log.info("snapshot %s (%s, %s) in %s", name, key, reason, self.pool_name)
        self.save()
        return entry

    def save(self) -> None:
        """Write every learner's tensors, then the league's state."""
        for learner in self.state.learners:
            trainer = self.trainers[learner.name]
            learner.rng_state = trainer.rng.bit_generator.state
            self.dir.save_tensors(learner.name, trainer.state_tensors())
        self.state.rng_state = self.rng.bit_generator.state
        self.dir.save_state(self.state)

    def known_ratings(self) -> dict[str, list[float]]:
        """``{snapshot name: [mu, sigma]}`` of the league's agents the ladder has rated so far."""
        keys = {s.key: s.name for s in self.state.snapshots}
        if not keys:
            return {}
        role = get_spec(self.cfg.env_id).roles[0]
        with self.services.sessions() as session:
            ids = repo.agent_ids_for_keys(session, self.cfg.env_id, keys)
            stored = repo.load_ratings(session, ids.values(), role)
        by_id = {v: k for k, v in ids.items()}
        return {keys[by_id[aid]]: [r.mu, r.sigma] for (aid, _), r in stored.items()}

    # -- the loop --------------------------------------------------------------------
    def _progress(self, trained: float, updates: int) -> float:
        """Spent share of this run's budget (time, or ``max_updates`` when that ends it first)."""
        spent = trained / (self.cfg.minutes * 60.0) if self.cfg.minutes > 0 else 1.0
        if self.cfg.max_updates:
            spent = max(spent, updates / self.cfg.max_updates)
        return min(spent, 1.0)

    def run(self, on_progress: Callable[[LeagueProgress], None] | None = None) -> LeagueProgress:
        """Train until the time budget (or ``max_updates``) is spent, snapshot the learners, save."""
        from torch.utils.tensorboard import SummaryWriter

        budget, start = self.cfg.minutes * 60.0, time.perf_counter()
        trained = 0.0
        updates = steps = 0
        ratings, ratings_at = self.known_ratings(), start
        self.state.runs += 1
        infos: dict[str, LearnerProgress] = {}
        with SummaryWriter(log_dir=str(self.dir.tb_dir)) as writer:
            while trained < budget and (self.cfg.max_updates is None or updates < self.cfg.max_updates):
                frozen = {lr.name: NeuralPolicy.from_module(self.trainers[lr.name].model.actor, self.spec)
                          for lr in self.state.learners}
                for learner in self.state.learners:
                    before = len(self.state.snapshots)
                    stats, infos[learner.name] = self._update(learner, frozen, self._progress(trained, updates),
                                                              writer)
                    trained += stats.seconds
                    updates += 1
                    steps += stats.env_steps
                    if time.perf_counter() - ratings_at > 30:
                        ratings, ratings_at = self.known_ratings(), time.perf_counter()
                    if on_progress:
                        event = (f"snapshot {self.state.snapshots[-1].name}"
                                 if len(self.state.snapshots) > before else "")
                        on_progress(LeagueProgress(time.perf_counter() - start, updates, steps,
                                                   steps / max(trained, 1e-9), len(self.state.snapshots),
                                                   list(infos.values()), ratings, event))
            for learner in self.state.learners:  # the final weights join the pool too
                if learner.updates_since > 0:
                    self.snapshot(learner, "final")
            writer.flush()
        self.state.seconds += trained
        self.save()
        return LeagueProgress(time.perf_counter() - start, updates, steps, steps / max(trained, 1e-9),
                              len(self.state.snapshots), list(infos.values()), ratings, "done")

    def report(self, matches_per_agent: int = 60) -> dict[str, list[float]]:
        """Rate every snapshot against the baselines on the ladder, save the ratings, the plot and the timeline.

        The timeline (:mod:`arena.training.phases`: ratings and strategy phases per
        generation) is published to the database for the league's web page.
        """
        from arena.training.phases import refresh_timeline
        from arena.training.report import plot_ratings, rate_league

        ratings = rate_league(self.services, self.state, self.baselines, matches_per_agent, self.cfg.seed)
        self.state.ratings = ratings
        self.state.plot = str(plot_ratings(self.state, ratings, self.dir.plot_path))
        refresh_timeline(self.services.sessions, self.state)
        self.dir.save_state(self.state)
        return ratings
