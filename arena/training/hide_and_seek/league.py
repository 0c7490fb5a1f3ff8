"""A hide-and-seek league: hider and seeker populations, PFSP per role, TrueSkill per role.

:class:`HideAndSeekLeague` drives :class:`agents.trainers.hide_and_seek.ppo.HideAndSeekPPO`
(one learning hider network and one learning seeker network) in generations, from four
parts of this package:

* every ``updates_per_generation`` updates both actors are frozen as the next generation
  and put into the per-role snapshot pools, whose PFSP draws pick the past generations a
  share of the training envs meets (:mod:`.pools`);
* every ``eval_every``-th generation is evaluated, its phase rates measured on the env's
  standard layouts (the headline); the others read the same detectors from their own
  training episodes; every generation is rated by TrueSkill per role (:mod:`.evaluation`);
* a start-state curriculum (``curriculum``) sets after every generation, from its
  standard-layout phase rates, which share of the training episodes starts with boxes by
  the doors and which with the ramp near a door, at a reach set the way automatic domain
  randomization sets its bounds (:class:`envs.hide_and_seek.curriculum.CurriculumRule`);
  it changes where episodes start, never what they pay;
* with exploiters (``ppo.exploiters`` per role), agents trained only against the current
  mains play beside them; the winning ones are frozen into the pools, the ones that stop
  winning start again from the main (:mod:`.exploiters`);
* the league is resumable: after every generation its versioned state is written
  atomically under ``<data_dir>/leagues/<name>/`` (:mod:`.state`); a league built on the
  same directory continues after the last saved generation (after a kill, the updates
  since then are lost and redone).

Rewards are the game's team reward alone by default (:func:`.config.default_v1_ppo`); the
shaped configuration (``default_v1_ppo(shaped=True)``, :data:`.config.SHAPING`) also pays
the hiders for a fort and a defended ramp.

Training uses CUDA when present (``device="auto"``): v1's episodes then step in its torch
core on the GPU (:class:`envs.hide_and_seek.device.core_v1.TorchHideAndSeekV1Core`);
evaluation plays on the host.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from agents.trainers.hide_and_seek.ppo import HideAndSeekPPO, HideAndSeekPPOConfig
from arena.snapshots.pool import RedisSnapshotPool
from arena.training.hide_and_seek.config import HideAndSeekLeagueConfig
from arena.training.hide_and_seek.evaluation import (
    GenerationEvaluator,
    GenerationRatings,
    GenerationSummary,
    TrainingRates,
)
from arena.training.hide_and_seek.exploiters import ExploiterBook
from arena.training.hide_and_seek.pools import RolePools
from arena.training.hide_and_seek.state import read_state, read_tensors, write_state
from arena.training.state import LeagueDir
from envs.hide_and_seek.curriculum import CurriculumState
from envs.hide_and_seek.rules import PHASES, ROLES
from league.scheduling.matchmaking import WinRateTable

log = logging.getLogger(__name__)


class HideAndSeekLeague:
    """Hider and seeker populations trained by PPO with PFSP per role (module docstring).

    Args:
        pool: The snapshot pool the populations live in.
        data_dir: Where ``leagues/<name>/`` (state, trainer tensors, checkpoints) goes.
        config: League settings; a league found on disk is resumed (its saved config wins
            for everything but ``name``).
    """

    def __init__(self, pool: RedisSnapshotPool, data_dir: str | Path, config: HideAndSeekLeagueConfig) -> None:
        self.pool = pool
        self.dir = LeagueDir(data_dir, config.name)
        saved = read_state(self.dir.root)
        self.resumed = saved is not None
        if saved is not None:
            ppo = HideAndSeekPPOConfig.from_dict(saved["config"]["ppo"])
            config = HideAndSeekLeagueConfig(**{**saved["config"], "ppo": ppo, "name": config.name})
        self.cfg = config
        self.rule = config.curriculum_rule()
        """how the start-state curriculum follows the phase rates"""
        self.role_pools = RolePools(pool, config.name, config.ppo.env_id, config.pfsp, config.win_rate_decay,
                                    config.ppo.seed)
        self.trainer = HideAndSeekPPO(config.ppo)
        self.exploiters = ExploiterBook(config.ppo.exploiters, config.exploiter_margin, config.exploiter_patience)
        """the exploiters' account and rule (:mod:`.exploiters`)"""
        self.exploiter_shas: dict[str, list[str]] = {role: [] for role in ROLES}
        """per role, the pool's sha256 of every frozen exploiter, in the order frozen"""
        self.trainer.pick_opponent = lambda role: self.role_pools.pick(
            role, len(self.trainer.generations), self.exploiters.snapshot_keys(role))
        self.evaluator = GenerationEvaluator(config.ppo, config.eval_episodes)
        self.generations: list[GenerationSummary] = []
        self.matches: list[tuple[int, int, int]] = []
        self.ratings = GenerationRatings()
        """TrueSkill of every generation from ``matches``, each applied once, in order"""
        self.train_seconds = 0.0
        self.curriculum = CurriculumState(*self.rule.shares({}))
        if saved is not None:
            self._restore(saved)
        self.set_curriculum(self.curriculum)
        if saved is None:
            self._close_generation(0)

    # -- the parts, as earlier versions named them ----------------------------------------
    @property
    def pools(self) -> dict[str, str]:
        """The pool name of each role."""
        return self.role_pools.names

    @property
    def tables(self) -> dict[str, WinRateTable]:
        """Each learner's win rates against the other role's generations."""
        return self.role_pools.tables

    @property
    def curriculum_shares(self) -> tuple[float, float]:
        """``(boxes by the doors, ramp by a door)`` shares of the training episodes now."""
        return self.curriculum.boxes, self.curriculum.ramps

    @property
    def ramp_reach(self) -> float:
        """The ramp stage's reach now."""
        return self.curriculum.reach

    def set_curriculum(self, curriculum: CurriculumState) -> None:
        """Start the training episodes (and the training-layout evaluation) this way from now on
        (all with boxes by the doors if the trainer's config asks)."""
        self.curriculum = curriculum
        for core in (self.trainer.core, self.evaluator.train_core):
            curriculum.apply(core, boxes_always=self.cfg.ppo.box_by_door)

    # -- generations -------------------------------------------------------------------
    def _close_generation(self, g: int, training: TrainingRates | None = None) -> GenerationSummary:
        """Snapshot generation ``g`` into the pools, evaluate it (every ``eval_every``-th; else read
        its ``training`` episodes), rate, save the league."""
        trainer = self.trainer
        shas = self.role_pools.put(g, trainer.generations[g], self.cfg.ppo.hidden)
        events = self.exploiters.after_generation(training.exploiter_scores(), trainer) if training else []
        for event in events:
            if event.snapshot is not None:
                weights = trainer.exploiter_snapshots[event.role][int(event.snapshot[1:])]
                self.exploiter_shas[event.role].append(
                    self.role_pools.put_exploiter(event.role, event.snapshot, weights, self.cfg.ppo.hidden))
        train = training.stats() if training is not None else None
        evaluated = train is None or g % max(1, self.cfg.eval_every) == 0
        if evaluated:
            stats, matches = self.evaluator.evaluate(trainer, g)
            stage = self.evaluator.ramp_stage_defense(trainer, g, self.curriculum)
        else:
            stats, matches = train, training.matches(g)
            stage = train["ramp_stage_defense"] if self.curriculum.ramps else None
        self.matches.extend(matches)
        summary = GenerationSummary(
            generation=g, updates=trainer.updates, env_steps=trainer.total_steps,
            train_seconds=self.train_seconds, phase_rates=stats["phase_rates"],
            door_block_rate=stats["door_block_rate"], hider_win_rate=stats["hider_win_rate"],
            hider_sha256=shas["hider"], seeker_sha256=shas["seeker"], curriculum=self.curriculum.boxes,
            ramp_curriculum=self.curriculum.ramps, ramp_reach=self.curriculum.reach, ramp_stage_defense=stage,
            evaluated=evaluated, phase_episodes=stats.get("phase_episodes", self.cfg.eval_episodes),
            training_phase_rates=train["phase_rates"] if train else {},
            exploiters=[asdict(e) for e in events],
        )
        self.generations.append(summary)
        self.set_curriculum(self.rule.after(self.curriculum, summary.phase_rates, summary.ramp_stage_defense))
        self.rate()
        self.save()
        return summary

    def rate(self) -> None:
        """TrueSkill per role of every generation from all evaluation matches so far (the ones
        since the last call applied to the ratings kept: the same as replaying them all)."""
        self.ratings.update(self.matches)
        self.ratings.write(self.generations)

    def run(
        self,
        minutes: float,
        *,
        max_generations: int | None = None,
        on_generation: Callable[[GenerationSummary], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> list[GenerationSummary]:
        """Train for ``minutes`` of ``clock`` (wall clock by default; ``time.process_time``
        budgets this process's CPU time, which other work on the machine does not eat) or until
        ``max_generations`` exist.

        A generation is started only if it is expected to finish (training and
        evaluation) within the budget.
        """
        deadline = clock() + 60.0 * minutes
        per_generation = 0.0
        while max_generations is None or len(self.generations) < max_generations:
            if per_generation and clock() + per_generation > deadline:
                break
            start = clock()
            training = TrainingRates()
            for _ in range(self.cfg.updates_per_generation):
                stats = self.trainer.update()
                self.train_seconds += stats.seconds
                self.role_pools.record(self.trainer.last_plan, self.trainer.last_returns)
                training.add(self.trainer.last_episodes)
            summary = self._close_generation(self.trainer.freeze(), training)
            per_generation = clock() - start
            log.info("generation %d: %s", summary.generation, summary.phase_rates)
            if on_generation is not None:
                on_generation(summary)
            if clock() > deadline:
                break
        return self.generations

    # -- reading ----------------------------------------------------------------------
    def phase_table(self) -> list[dict[str, Any]]:
        """One row per generation: phase rates and both ratings."""
        return [{"generation": s.generation, **{p: s.phase_rates.get(p, 0.0) for p in PHASES},
                 "hider_mu": s.hider_mu, "seeker_mu": s.seeker_mu} for s in self.generations]

    def first_generations(self, thresholds: dict[str, float]) -> dict[str, int | None]:
        """First generation whose rate of each phase reached its threshold (``None``: never)."""
        return {p: next((s.generation for s in self.generations if s.phase_rates.get(p, 0.0) >= t), None)
                for p, t in thresholds.items()}

    # -- persistence ------------------------------------------------------------------
    def save(self) -> None:
        """Write the trainer tensors, then the state that refers to them (:mod:`.state`)."""
        t, pools = self.trainer, self.role_pools.to_json()
        counters = t.counters()
        state = {
            "config": asdict(self.cfg),
            "updates": counters["updates"],
            "total_steps": counters["total_steps"],
            "train_seconds": self.train_seconds,
            "trainer_rng": counters["rng"],
            "league_rng": pools["rng"],
            "tables": pools["tables"],
            "generations": [asdict(s) for s in self.generations],
            "matches": self.matches,
            "curriculum_shares": list(self.curriculum_shares),
            "ramp_reach": self.curriculum.reach,
            "exploiters": self.exploiters.to_json(),
            "exploiter_snapshots": self.exploiter_shas,
        }
        write_state(self.dir.root, state, t.state_tensors())

    def _restore(self, saved: dict[str, Any]) -> None:
        t = self.trainer
        self.generations = [GenerationSummary(**s) for s in saved["generations"]]
        self.exploiter_shas = {role: list(saved["exploiter_snapshots"].get(role, [])) for role in ROLES}
        generations, exploiters = self.role_pools.load(
            [{role: getattr(s, f"{role}_sha256") for role in ROLES} for s in self.generations], self.exploiter_shas)
        t.load_generations(generations)
        t.exploiter_snapshots = exploiters
        self.exploiters.load_json(saved["exploiters"])
        t.load_state_tensors(read_tensors(self.dir.root))
        t.load_counters({"updates": saved["updates"], "total_steps": saved["total_steps"], "rng": saved["trainer_rng"]})
        self.train_seconds = saved["train_seconds"]
        self.role_pools.load_json({"tables": saved["tables"], "rng": saved["league_rng"]})
        self.matches = [tuple(m) for m in saved["matches"]]  # the fresh ratings apply them at the next rate()
        self.curriculum = CurriculumState(*saved["curriculum_shares"], float(saved["ramp_reach"]))
