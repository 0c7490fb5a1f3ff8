"""A hide-and-seek league: hider and seeker populations, PFSP per role, TrueSkill per role.

:class:`HideAndSeekLeague` drives :class:`agents.trainers.hide_and_seek.ppo.HideAndSeekPPO`
(one learning hider network and one learning seeker network) in generations:

* every ``updates_per_generation`` updates both actors are frozen as the next generation
  and put into the Redis snapshot pool (:class:`arena.snapshots.pool.RedisSnapshotPool`),
  one pool per role: ``league.<name>.<env>.hider`` / ``.seeker``; the hider and seeker
  *populations* are these pools;
* in every update a share of the envs pits each learning team against a past generation
  of the other role, drawn by PFSP (:func:`league.matchmaking.pfsp_weights`) over that
  learner's decayed win rates against each generation (:class:`league.matchmaking.WinRateTable`,
  one per role, fed by those training games); past actors are the pool's snapshots (kept
  in memory while training, read back from the pool on resume);
* each generation is evaluated (:func:`agents.trainers.hide_and_seek.generations.evaluate_generation`):
  against itself and the previous generation on the training layouts, and against itself
  on the env's standard layouts (v1: the 9x9 quadrant), where the phase rates
  (:data:`envs.hide_and_seek.core_v1.PHASES`) are measured - the headline;
* automatic curriculum (``curriculum``), two stages set after every generation from its
  phase rates on the standard layout (``fort``, ``ramp_defense``; ``S`` is
  ``curriculum_share``, ``T`` ``curriculum_target``):

  - *forts*: ``S * (1 - fort / T)`` of the training episodes start with the boxes next
    to the doors inside (one push from a fort): the easy episodes fade out as the skill
    carries over to the standard layout;
  - *ramps* (``curriculum_ramp``): once forts are common, ``S * clip(2 fort / T - 1, 0, 1)
    * (1 - ramp_defense / T)`` of them start with the ramp near a door and a hider on
    its way there, where hiders can reach it and lock it in preparation and seekers find
    it quickly. Started only then, so ramp use follows forts, as in the original. How far
    (the *reach*, :func:`envs.hide_and_seek.layouts_v1.place_ramp_stage`: 0 the ramp two
    cells outside a door and the hider next to it, 1 the standard draw) is set the way
    automatic domain randomization sets its bounds: after every generation trained with
    the stage, that generation plays ``eval_episodes`` of the stage's episodes at the
    current reach; the reach grows by ``ramp_reach_step`` when it defended the ramp in
    at least ``ramp_reach_up`` of them and shrinks by it below ``ramp_reach_down``.

  The rest train on the standard layouts; the headline rates are always measured there;
* generations are rated by TrueSkill per role (:func:`rate_generations`, agents
  ``hider-gen<g>`` and ``seeker-gen<g>``) from all evaluation matches.

Rewards are the game's team reward alone by default (:func:`default_v1_ppo`); the shaped
configuration (``default_v1_ppo(shaped=True)``, :data:`SHAPING`) also pays the hiders for a
fort and a defended ramp. The curriculum only changes where episodes start.

Training uses CUDA when present (``device="auto"``): v1's episodes then step in its torch
core on the GPU (:class:`envs.hide_and_seek.device.core_v1.TorchHideAndSeekV1Core`); evaluation
plays on the host.
The league is resumable: after every generation its state (trainer tensors, optimizer
moments, random streams, win-rate tables, reports, the pool's sha256 of every
generation) is written atomically under ``<data_dir>/leagues/<name>/``; a league built
on the same directory continues after the last saved generation (after a kill, the
updates since then are lost and redone).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch

from agents.checkpoint import atomic_write, make_spec, serialize_weights
from agents.trainers.hide_and_seek.evaluation import evaluate_generation, evaluation_actions, play_episodes
from agents.trainers.hide_and_seek.ppo import HideAndSeekPPO, HideAndSeekPPOConfig, make_core
from arena.snapshots.pool import RedisSnapshotPool
from arena.training.state import LeagueDir
from envs.hide_and_seek.core import HideAndSeekCore
from envs.hide_and_seek.rules import PHASES, ROLES
from league.matchmaking import PFSPWeighting, WinRateTable, pfsp_weights
from league.rating_book import RatingBook
from league.ratings import Rating, RatingEnv

log = logging.getLogger(__name__)

OTHER = {"hider": "seeker", "seeker": "hider"}


def generation_key(role: str, generation: int) -> str:
    """Rating-book agent key of one role of one generation, e.g. ``hider-gen3``."""
    return f"{role}-gen{generation}"


def rate_generations(
    matches: Sequence[tuple[int, int, int]], generations: int, env: RatingEnv | None = None
) -> tuple[list[Rating], list[Rating]]:
    """TrueSkill of every generation's hiders and seekers from cross-generation matches.

    Args:
        matches: ``(hider generation, seeker generation, winner)`` in play order;
            winner 0 hiders, 1 seekers, -1 draw.
        generations: Number of generations (ratings are returned for ``0 .. n-1``).
        env: TrueSkill constants (default :class:`RatingEnv`'s).

    Returns:
        ``(hider ratings, seeker ratings)``, one per generation; a generation that
        played no match keeps the prior.
    """
    book = RatingBook(env or RatingEnv())
    for hider_gen, seeker_gen, winner in matches:
        agents = [generation_key("hider", hider_gen), generation_key("seeker", seeker_gen)]
        book.apply(agents, list(ROLES), None if winner < 0 else int(winner))
    return (
        [book.rating((generation_key("hider", g), "hider")) for g in range(generations)],
        [book.rating((generation_key("seeker", g), "seeker")) for g in range(generations)],
    )


SHAPING = {"fort_bonus": 40.0, "fort_potential_bonus": 10.0, "ramp_defense_bonus": 30.0, "ramp_use_bonus": 0.0}
"""The shaped configuration's bonuses (``default_v1_ppo(shaped=True)``): the hiders are paid
for the fort and the defended ramp, exactly what the phase detectors count."""


def default_v1_ppo(seed: int = 0, shaped: bool = False) -> HideAndSeekPPOConfig:
    """PPO settings of the v1 league on the standard quadrant layout.

    Args:
        seed: The run's seed.
        shaped: Add :data:`SHAPING`'s bonuses; by default the teams learn from the game's
            own team reward alone.
    """
    return HideAndSeekPPOConfig(
        env_id="hide_and_seek-v1", size=9, n_doors=None, layout="quadrant", seekers_by_door=False,
        seed=seed, device="auto", **(SHAPING if shaped else {}),
    )


@dataclass
class HideAndSeekLeagueConfig:
    """Settings of a hide-and-seek league."""

    name: str = "hide_and_seek"
    """league name: its folder under ``<data_dir>/leagues`` and its pools"""
    ppo: HideAndSeekPPOConfig = field(default_factory=default_v1_ppo)
    """trainer settings (env, layouts, shaping, device)"""
    updates_per_generation: int = 10
    """updates between two generations"""
    eval_episodes: int = 256
    """episodes per evaluation pairing"""
    pfsp: PFSPWeighting = "variance"
    """PFSP weighting of past opponents (``variance``: those near the learner's level)"""
    win_rate_decay: float = 0.9
    """decay of the per-role win-rate tables per recorded update"""
    curriculum: bool = True
    """mix boxes-by-the-doors episodes into training while forts are rare (module docstring)"""
    curriculum_share: float = 0.5
    """share of training episodes with boxes by the doors while the standard fort rate is 0"""
    curriculum_target: float = 0.8
    """standard-layout fort rate at which that share has shrunk (linearly) to 0"""
    curriculum_ramp: bool = True
    """second stage: once forts are common, episodes with the ramp near a door, a hider on its way"""
    ramp_reach_step: float = 0.1
    """how much the ramp stage's reach (0: the ramp next to a hider by the door, 1: as drawn)
    moves per generation (0: stays at 0)"""
    ramp_reach_up: float = 0.4
    """ramp-defense rate in the stage's own episodes at which the reach grows"""
    ramp_reach_down: float = 0.1
    """... and below which it shrinks"""


@dataclass
class GenerationSummary:
    """What the league keeps of one generation (JSON-able; ratings filled in by :meth:`rate`)."""

    generation: int
    updates: int
    env_steps: int
    train_seconds: float
    phase_rates: dict[str, float]
    door_block_rate: float
    hider_win_rate: float
    hider_sha256: str
    seeker_sha256: str
    curriculum: float = 0.0
    """share of training episodes with boxes by the doors (the curriculum) when frozen"""
    ramp_curriculum: float = 0.0
    """share of training episodes with the ramp by a door when frozen"""
    ramp_reach: float = 0.0
    """reach of those episodes when frozen"""
    ramp_stage_defense: float | None = None
    """ramp-defense rate in the stage's episodes at that reach (``None``: stage not active)"""
    hider_mu: float = 0.0
    hider_sigma: float = 0.0
    seeker_mu: float = 0.0
    seeker_sigma: float = 0.0


class HideAndSeekLeague:
    """Hider and seeker populations trained by PPO with PFSP per role (module docstring).

    Args:
        pool: The snapshot pool the populations live in.
        data_dir: Where ``leagues/<name>/`` (state, trainer tensors, checkpoints) goes.
        config: League settings; a league found on disk is resumed (its saved config wins
            for everything but ``name``).
    """

    def __init__(self, pool: RedisSnapshotPool, data_dir: str | Path, config: HideAndSeekLeagueConfig) -> None:
        self.pool, self.cfg = pool, config
        self.dir = LeagueDir(data_dir, config.name)
        self.state_path = self.dir.root / "hide_and_seek.json"
        self.tensor_path = self.dir.root / "hide_and_seek_trainer.safetensors"
        self.resumed = self.state_path.is_file()
        saved = json.loads(self.state_path.read_text()) if self.resumed else None
        if saved is not None:
            ppo = HideAndSeekPPOConfig.from_dict(saved["config"]["ppo"])
            self.cfg = config = HideAndSeekLeagueConfig(**{**saved["config"], "ppo": ppo, "name": config.name})
        self.pools = {role: f"league.{config.name}.{config.ppo.env_id}.{role}" for role in ROLES}
        self.trainer = HideAndSeekPPO(config.ppo)
        self.trainer.pick_opponent = self._pick_opponent
        self.rng = np.random.default_rng([config.ppo.seed, 7])
        self.tables = {role: WinRateTable(decay=config.win_rate_decay) for role in ROLES}
        self.generations: list[GenerationSummary] = []
        self.matches: list[tuple[int, int, int]] = []
        self.train_seconds = 0.0
        self._cores = (make_core(config.ppo, config.eval_episodes),
                       make_core(config.ppo, config.eval_episodes, standard=True))
        self.curriculum_shares = self._curriculum_for({})
        self.ramp_reach = 0.0
        self._stage_core: HideAndSeekCore | None = None
        if saved is not None:
            self._restore(saved)
        self._set_curriculum(*self.curriculum_shares, self.ramp_reach)
        if saved is None:
            self._close_generation(0)

    def _curriculum_for(self, rates: dict[str, float]) -> tuple[float, float]:
        """``(boxes by the doors, ramp by a door)`` shares after a generation with these
        standard-layout phase rates (module docstring)."""
        cfg = self.cfg
        if not cfg.curriculum:
            return 0.0, 0.0
        fort = min(1.0, rates.get("fort", 0.0) / cfg.curriculum_target)
        defended = min(1.0, rates.get("ramp_defense", 0.0) / cfg.curriculum_target)
        ramps = cfg.curriculum_share * min(1.0, max(0.0, 2.0 * fort - 1.0)) * (1.0 - defended)
        return cfg.curriculum_share * (1.0 - fort), ramps if cfg.curriculum_ramp else 0.0

    def _set_curriculum(self, boxes: float, ramps: float, reach: float) -> None:
        """Training (and training-layout evaluation) cores start these shares of their
        episodes with boxes by the doors (all if the trainer's config asks) and the ramp by
        a door (at this reach)."""
        self.curriculum_shares, self.ramp_reach = (boxes, ramps), reach
        for core in (self.trainer.core, self._cores[0]):
            core.box_by_door = 1.0 if self.cfg.ppo.box_by_door else boxes
            core.ramp_by_door, core.ramp_reach = ramps, reach

    def _next_reach(self, defended: float | None) -> float:
        """The ramp stage's reach after a generation that defended the ramp in ``defended``
        of the stage's episodes (``None``: the stage was off): ADR's rule (module docstring)."""
        cfg, reach = self.cfg, self.ramp_reach
        if defended is None or not cfg.ramp_reach_step:
            return reach
        if defended >= cfg.ramp_reach_up:
            return round(min(1.0, reach + cfg.ramp_reach_step), 6)
        if defended < cfg.ramp_reach_down:
            return round(max(0.0, reach - cfg.ramp_reach_step), 6)
        return reach

    def _ramp_stage_defense(self, g: int) -> float | None:
        """Generation ``g``'s ramp-defense rate in the ramp stage's episodes at the current
        reach, against itself (``None`` when it trained without the stage)."""
        if not self.curriculum_shares[1] or self.cfg.ppo.env_id != "hide_and_seek-v1":
            return None
        if self._stage_core is None:
            self._stage_core = make_core(self.cfg.ppo, self.cfg.eval_episodes)
        core = self._stage_core
        core.ramp_by_door, core.ramp_reach = 1.0, self.ramp_reach
        t = self.trainer
        seeds = np.random.default_rng([self.cfg.ppo.seed, 5]).integers(0, 2**31, size=core.n_envs)
        res = play_episodes(core, t.frozen_actor(g, "hider"), t.frozen_actor(g, "seeker"), seeds,
                            evaluation_actions(self.cfg.ppo.seed, g))
        return float(res.phases["ramp_defense"].mean())

    # -- generations -------------------------------------------------------------------
    def _pick_opponent(self, role: str) -> int:
        """PFSP: the generation of ``role`` that the other role's learner meets."""
        learner = OTHER[role]
        gens = list(range(len(self.trainer.generations)))
        probs = pfsp_weights(self.tables[learner].win_rates([str(g) for g in gens]), self.cfg.pfsp)
        return int(self.rng.choice(len(gens), p=probs))

    def _record_training_games(self) -> None:
        """Feed the win-rate tables with the last update's games against past generations."""
        returns = self.trainer.last_returns
        for opponent_role, plan in self.trainer.last_plan.items():
            if plan is None:
                continue
            rows, g = plan
            hider_score = float(np.mean((np.sign(returns[rows]) + 1.0) / 2.0))
            learner = OTHER[opponent_role]
            self.tables[learner].record(str(g), hider_score if learner == "hider" else 1.0 - hider_score)

    def _close_generation(self, g: int) -> GenerationSummary:
        """Snapshot generation ``g`` into the pools, evaluate it, rate, save the league."""
        trainer, shas = self.trainer, {}
        for role in ROLES:
            spec = make_spec(self.cfg.ppo.env_id, "mlp", {"hidden": self.cfg.ppo.hidden}, role=role,
                             name=f"{self.cfg.name}-{role}-gen{g}")
            shas[role] = self.pool.put(serialize_weights(trainer.generations[g][role]), spec, self.pools[role],
                                       meta={"league": self.cfg.name, "generation": g, "role": role})
        stats, matches = evaluate_generation(trainer, g, self._cores, self.cfg.ppo.seed)
        self.matches.extend(matches)
        summary = GenerationSummary(
            generation=g, updates=trainer.updates, env_steps=trainer.total_steps,
            train_seconds=self.train_seconds, phase_rates=stats["phase_rates"],
            door_block_rate=stats["door_block_rate"], hider_win_rate=stats["hider_win_rate"],
            hider_sha256=shas["hider"], seeker_sha256=shas["seeker"], curriculum=self.curriculum_shares[0],
            ramp_curriculum=self.curriculum_shares[1], ramp_reach=self.ramp_reach,
            ramp_stage_defense=self._ramp_stage_defense(g),
        )
        self.generations.append(summary)
        self._set_curriculum(*self._curriculum_for(summary.phase_rates), self._next_reach(summary.ramp_stage_defense))
        self.rate()
        self.save()
        return summary

    def rate(self) -> None:
        """TrueSkill per role of every generation from all evaluation matches so far."""
        hiders, seekers = rate_generations(self.matches, len(self.generations))
        for s, h, k in zip(self.generations, hiders, seekers, strict=True):
            s.hider_mu, s.hider_sigma, s.seeker_mu, s.seeker_sigma = h.mu, h.sigma, k.mu, k.sigma

    def run(
        self,
        minutes: float,
        *,
        max_generations: int | None = None,
        on_generation: Callable[[GenerationSummary], None] | None = None,
    ) -> list[GenerationSummary]:
        """Train for ``minutes`` of wall clock (or until ``max_generations`` exist).

        A generation is started only if it is expected to finish (training and
        evaluation) within the budget.
        """
        deadline = time.perf_counter() + 60.0 * minutes
        per_generation = 0.0
        while max_generations is None or len(self.generations) < max_generations:
            if per_generation and time.perf_counter() + per_generation > deadline:
                break
            start = time.perf_counter()
            for _ in range(self.cfg.updates_per_generation):
                stats = self.trainer.update()
                self.train_seconds += stats.seconds
                self._record_training_games()
            summary = self._close_generation(self.trainer.freeze())
            per_generation = time.perf_counter() - start
            log.info("generation %d: %s", summary.generation, summary.phase_rates)
            if on_generation is not None:
                on_generation(summary)
            if time.perf_counter() > deadline:
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
        """Write the trainer tensors, then the state that refers to them (both atomically)."""
        t = self.trainer
        atomic_write(self.tensor_path, safetensors.torch.save(t.state_tensors()))
        cfg = asdict(self.cfg)
        state = {
            "config": cfg,
            "updates": t.updates,
            "total_steps": t.total_steps,
            "train_seconds": self.train_seconds,
            "trainer_rng": t.counters()["rng"],
            "league_rng": self.rng.bit_generator.state,
            "tables": {r: tab.to_json() for r, tab in self.tables.items()},
            "generations": [asdict(s) for s in self.generations],
            "matches": self.matches,
            "curriculum_shares": list(self.curriculum_shares),
            "ramp_reach": self.ramp_reach,
        }
        atomic_write(self.state_path, json.dumps(state).encode())

    def _restore(self, saved: dict[str, Any]) -> None:
        t = self.trainer
        self.generations = [GenerationSummary(**s) for s in saved["generations"]]
        t.load_generations([
            {role: safetensors.torch.load(self.pool.get(getattr(s, f"{role}_sha256"))[0]) for role in ROLES}
            for s in self.generations
        ])
        for role in ROLES:  # a kill between a snapshot and the save left it unreferenced
            kept = {getattr(s, f"{role}_sha256") for s in self.generations}
            for sha in set(self.pool.list(self.pools[role])) - kept:
                self.pool.remove(self.pools[role], sha)
        t.load_state_tensors(safetensors.torch.load(self.tensor_path.read_bytes()))  # tensors only, never code
        t.load_counters({"updates": saved["updates"], "total_steps": saved["total_steps"], "rng": saved["trainer_rng"]})
        self.train_seconds = saved["train_seconds"]
        self.rng.bit_generator.state = saved["league_rng"]
        self.tables = {r: WinRateTable.from_json(d) for r, d in saved["tables"].items()}
        self.matches = [tuple(m) for m in saved["matches"]]
        self.curriculum_shares = tuple(saved["curriculum_shares"])
        self.ramp_reach = float(saved.get("ramp_reach", 0.0))

