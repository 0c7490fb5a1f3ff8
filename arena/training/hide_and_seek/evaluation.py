"""How a hide-and-seek league measures its generations: phase rates, the ramp stage, TrueSkill.

Every ``eval_every``-th generation plays (:func:`agents.trainers.hide_and_seek.evaluation.evaluate_generation`)
against itself and the previous generation on the training layouts, and against itself
on the env's standard layouts (v1: the 9x9 quadrant), where the phase rates
(:data:`envs.hide_and_seek.rules.PHASES`) are measured: the headline. While the ramp stage
trains, the generation also plays the stage's own episodes at the current reach (the
input of the reach's rule).

The generations in between are read from their own training episodes
(:class:`TrainingRates`), which run the same detectors: the phase rates from the
self-play episodes that started as the standard layout (no curriculum stage drawn), the
fort and win rates from all self-play episodes, the ramp stage's defense from the
self-play episodes that drew it, and the matches from the training games (the learner
counted as the generation it became). They are the learner's rates during the
generation's updates, not the frozen generation's after them: an evaluated generation
keeps both (``phase_rates``, ``training_phase_rates``), so their agreement is measured.

Generations are rated by TrueSkill per role (:func:`rate_generations`, agents
``hider-gen<g>`` and ``seeker-gen<g>``) from all matches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.trainers.hide_and_seek.episodes import TrainingEpisodes
from agents.trainers.hide_and_seek.evaluation import evaluate_generation, evaluation_actions, play_episodes, winners
from agents.trainers.hide_and_seek.ppo import HideAndSeekPPO, HideAndSeekPPOConfig, make_core
from envs.hide_and_seek.curriculum import CurriculumState
from envs.hide_and_seek.rules import ROLES
from league.ratings.book import RatingBook
from league.ratings.rating import Rating, RatingEnv


def generation_key(role: str, generation: int) -> str:
    """Rating-book agent key of one role of one generation, e.g. ``hider-gen3``."""
    return f"{role}-gen{generation}"


class GenerationRatings:
    """TrueSkill of every generation's hiders and seekers, kept as matches come in.

    :meth:`update` applies only the matches not applied yet, in play order, to the book it
    keeps: the ratings are those of replaying every match from the prior, without replaying
    them at each generation (a league of hundreds of generations holds hundreds of thousands).

    Args:
        env: TrueSkill constants (default :class:`RatingEnv`'s).
    """

    def __init__(self, env: RatingEnv | None = None) -> None:
        self.book = RatingBook(env or RatingEnv())
        self.applied = 0
        """how many of the matches passed to :meth:`update` the book holds"""

    def update(self, matches: Sequence[tuple[int, int, int]]) -> None:
        """Apply ``matches[applied:]``: ``matches`` is every match so far, the same list growing.

        Args:
            matches: ``(hider generation, seeker generation, winner)`` in play order;
                winner 0 hiders, 1 seekers, -1 draw.
        """
        if len(matches) < self.applied:
            raise ValueError(f"{len(matches)} matches, fewer than the {self.applied} already rated")
        for hider_gen, seeker_gen, winner in matches[self.applied:]:
            agents = [generation_key("hider", hider_gen), generation_key("seeker", seeker_gen)]
            self.book.apply(agents, list(ROLES), None if winner < 0 else int(winner))
        self.applied = len(matches)

    def ratings(self, generations: int) -> tuple[list[Rating], list[Rating]]:
        """``(hider ratings, seeker ratings)`` of generations ``0 .. generations-1``; a
        generation that played no match keeps the prior."""
        return (
            [self.book.rating((generation_key("hider", g), "hider")) for g in range(generations)],
            [self.book.rating((generation_key("seeker", g), "seeker")) for g in range(generations)],
        )

    def write(self, summaries: list[GenerationSummary]) -> None:
        """Each generation's ratings per role into its summary."""
        hiders, seekers = self.ratings(len(summaries))
        for s, h, k in zip(summaries, hiders, seekers, strict=True):
            s.hider_mu, s.hider_sigma, s.seeker_mu, s.seeker_sigma = h.mu, h.sigma, k.mu, k.sigma


def rate_generations(
    matches: Sequence[tuple[int, int, int]], generations: int, env: RatingEnv | None = None
) -> tuple[list[Rating], list[Rating]]:
    """TrueSkill of every generation's hiders and seekers from cross-generation matches, from
    the prior (:class:`GenerationRatings` over ``matches`` at once).

    Returns:
        ``(hider ratings, seeker ratings)``, one per generation.
    """
    ratings = GenerationRatings(env)
    ratings.update(matches)
    return ratings.ratings(generations)


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
    evaluated: bool = True
    """the rates come from the standard-layout evaluation (else from the training episodes)"""
    phase_episodes: int = 0
    """episodes behind ``phase_rates`` (0: the league's ``eval_episodes``, as before this field)"""
    training_phase_rates: dict[str, float] = field(default_factory=dict)
    """the same rates read from the generation's training episodes (:class:`TrainingRates`)"""
    exploiters: list[dict[str, Any]] = field(default_factory=list)
    """each exploiter's score against the mains in this generation, and whether it was frozen
    or reset (:class:`league.evaluation.phases.ExploiterEntry`)"""


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


@dataclass
class TrainingRates:
    """One generation's training episodes (:class:`agents.trainers.hide_and_seek.episodes.TrainingEpisodes`
    of each update), read as the evaluation would read them (module docstring)."""

    episodes: list[TrainingEpisodes] = field(default_factory=list)

    def add(self, episodes: TrainingEpisodes | None) -> None:
        """One update's episodes."""
        if episodes is not None:
            self.episodes.append(episodes)

    def stats(self) -> dict[str, Any] | None:
        """``phase_rates`` (and ``phase_episodes``), ``door_block_rate``, ``hider_win_rate``,
        ``ramp_stage_defense``; ``None`` when no self-play episode started as the standard layout
        (or where the starts are unknown)."""
        if not self.episodes or any(e.boxes is None or not e.phases for e in self.episodes):
            return None
        mine = [e.self_play() for e in self.episodes]
        standard = [m & ~e.boxes & ~e.ramps for e, m in zip(self.episodes, mine, strict=True)]
        count = int(sum(s.sum() for s in standard))
        if count == 0:
            return None

        def mean(values: list[np.ndarray], rows: list[np.ndarray]) -> float:
            return float(np.concatenate([v[r] for v, r in zip(values, rows, strict=True)]).mean())

        staged = [m & e.ramps for e, m in zip(self.episodes, mine, strict=True)]
        return {
            "phase_rates": {k: mean([e.phases[k] for e in self.episodes], standard) for k in self.episodes[0].phases},
            "phase_episodes": count,
            "door_block_rate": mean([e.door_blocked for e in self.episodes], mine),
            "hider_win_rate": mean([e.hider_score > 0 for e in self.episodes], mine),
            "ramp_stage_defense": (mean([e.phases["ramp_defense"] for e in self.episodes], staged)
                                   if sum(s.sum() for s in staged) else None),
        }

    def exploiter_scores(self) -> dict[str, list[tuple[float, float]]]:
        """Per role, each exploiter's mean score against the other role's main over the generation's
        updates, and its own main's in self-play (:meth:`TrainingEpisodes.exploiter_scores`)."""
        per_update = [e.exploiter_scores() for e in self.episodes]
        if not per_update:
            return {}
        return {role: [tuple(float(np.mean([u[role][i][j] for u in per_update])) for j in (0, 1))
                       for i in range(len(blocks))] for role, blocks in per_update[0].items()}

    def matches(self, g: int) -> list[tuple[int, int, int]]:
        """The training games as generation ``g``'s matches: the last update's self-play, and every
        game against a past generation (``(hider generation, seeker generation, winner)``; games
        against exploiters, who are no generation, are not rated)."""
        out: list[tuple[int, int, int]] = []
        for i, e in enumerate(self.episodes):
            won = winners(e.hider_score)
            if i == len(self.episodes) - 1:
                out.extend((g, g, int(w)) for w in won[e.self_play()])
            for opponent, entry in e.plan.items():
                if entry is not None and isinstance(entry[1], int):
                    rows, past = entry
                    pair = (g, past) if opponent == "seeker" else (past, g)
                    out.extend((*pair, int(w)) for w in won[rows])
        return out
