"""How a hide-and-seek league measures its generations: phase rates, the ramp stage, TrueSkill.

Each generation plays (:func:`agents.trainers.hide_and_seek.evaluation.evaluate_generation`)
against itself and the previous generation on the training layouts, and against itself
on the env's standard layouts (v1: the 9x9 quadrant), where the phase rates
(:data:`envs.hide_and_seek.rules.PHASES`) are measured: the headline. While the ramp stage
trains, the generation also plays the stage's own episodes at the current reach (the
input of the reach's rule). Generations are rated by TrueSkill per role
(:func:`rate_generations`, agents ``hider-gen<g>`` and ``seeker-gen<g>``) from all
evaluation matches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.trainers.hide_and_seek.evaluation import evaluate_generation, evaluation_actions, play_episodes
from agents.trainers.hide_and_seek.ppo import HideAndSeekPPO, HideAndSeekPPOConfig, make_core
from envs.hide_and_seek.curriculum import CurriculumState
from envs.hide_and_seek.rules import ROLES
from league.ratings.book import RatingBook
from league.ratings.rating import Rating, RatingEnv


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


def rate(summaries: list[GenerationSummary], matches: Sequence[tuple[int, int, int]]) -> None:
    """Write every generation's TrueSkill per role (from all evaluation matches) into its summary."""
    hiders, seekers = rate_generations(matches, len(summaries))
    for s, h, k in zip(summaries, hiders, seekers, strict=True):
        s.hider_mu, s.hider_sigma, s.seeker_mu, s.seeker_sigma = h.mu, h.sigma, k.mu, k.sigma


class GenerationEvaluator:
    """The evaluation cores of a league: training layouts, standard layouts, the ramp stage.

    Args:
        ppo: The trainer's settings (env, layouts, seed).
        episodes: Episodes per evaluation pairing.
    """

    def __init__(self, ppo: HideAndSeekPPOConfig, episodes: int) -> None:
        self.ppo, self.episodes = ppo, episodes
        self.train_core: Any = make_core(ppo, episodes)
        """the training layouts (the curriculum applies here as in training)"""
        self.standard_core: Any = make_core(ppo, episodes, standard=True)
        """the env's registered layouts: the headline's phase rates"""
        self._stage_core: Any = None

    def evaluate(self, trainer: HideAndSeekPPO, g: int) -> tuple[dict[str, Any], list[tuple[int, int, int]]]:
        """Generation ``g``'s stats (``phase_rates``, ``door_block_rate``, ``hider_win_rate``, ...)
        and its matches ``(hider generation, seeker generation, winner)``."""
        return evaluate_generation(trainer, g, (self.train_core, self.standard_core), self.ppo.seed)

    def ramp_stage_defense(self, trainer: HideAndSeekPPO, g: int, curriculum: CurriculumState) -> float | None:
        """Generation ``g``'s ramp-defense rate in the ramp stage's episodes at the current
        reach, against itself (``None`` when it trained without the stage)."""
        if not curriculum.ramps or self.ppo.env_id != "hide_and_seek-v1":
            return None
        if self._stage_core is None:
            self._stage_core = make_core(self.ppo, self.episodes)
        core = self._stage_core
        core.ramp_by_door, core.ramp_reach = 1.0, curriculum.reach
        seeds = np.random.default_rng([self.ppo.seed, 5]).integers(0, 2**31, size=core.n_envs)
        res = play_episodes(core, trainer.frozen_actor(g, "hider"), trainer.frozen_actor(g, "seeker"), seeds,
                            evaluation_actions(self.ppo.seed, g))
        return float(res.phases["ramp_defense"].mean())
