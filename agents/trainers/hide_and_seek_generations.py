"""Generations of hide-and-seek PPO: train, freeze, save, evaluate.

:func:`train_generations` drives :class:`agents.trainers.ppo_hide_and_seek.HideAndSeekPPO`
within a wall-clock budget and, whenever a generation is frozen, saves both actors as
``hide_and_seek-v0`` checkpoints and evaluates it.

Evaluation episodes run on a :class:`envs.hide_and_seek.core.HideAndSeekCore` of their
own, all at once, both teams' actors sampling legal actions (temperature 1, like the
arena's :class:`agents.neural.NeuralPolicy`). The outcome rule is ``hide_and_seek-v0``'s
``higher_score``: the hiders win when their summed team reward is positive (hidden on
more than half of the post-preparation steps), the seekers when it is negative, a draw
at zero. Door blocking depends on the hiders alone (seekers are frozen during
preparation), so it is a property of the hider generation. The per-episode results
are plain tuples, ready for TrueSkill (:mod:`benchmarks.support.hide_and_seek_learning`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from agents.trainers.ppo_core import masked_sample
from agents.trainers.ppo_hide_and_seek import HideAndSeekPPO, HideAndSeekPPOConfig, make_core
from envs.hide_and_seek.core import HideAndSeekCore
from envs.hide_and_seek.rules import HIDERS, NUM_ACTIONS, SEEKERS

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class EpisodeResults:
    """Per-episode outcomes of one batch of evaluation episodes.

    Attributes:
        hider_score: ``(n,)`` summed hider team reward per episode.
        winner: ``(n,)`` winning team (0 hiders, 1 seekers) or ``-1`` for a draw.
        door_blocked: ``(n,)`` every door held a box when preparation ended.
        door_locked: ``(n,)`` ... and every such box was locked by the hiders.
        phases: ``hide_and_seek-v1``'s phase detectors, name -> ``(n,)`` per episode
            (:meth:`envs.hide_and_seek.core_v1.HideAndSeekV1Core.phases`); empty for v0.
    """

    hider_score: np.ndarray
    winner: np.ndarray
    door_blocked: np.ndarray
    door_locked: np.ndarray
    phases: dict[str, np.ndarray] = field(default_factory=dict)


@torch.no_grad()
def play_episodes(
    core: HideAndSeekCore,
    hider: nn.Module,
    seeker: nn.Module,
    seeds: np.ndarray,
    generator: torch.Generator,
) -> EpisodeResults:
    """Play ``core.n_envs`` whole episodes, layouts drawn from ``seeds``.

    Args:
        core: A core with two hiders and two seekers; it is reset here.
        hider, seeker: Actors mapping ``(k, obs_dim)`` observations to ``(k, 7)`` logits.
        seeds: One layout seed per env.
        generator: Torch random stream of the action draws.
    """
    n = core.n_envs
    obs, mask = core.reset(seeds)
    score = np.zeros(n)
    for _ in range(core.max_steps):
        actions = np.zeros((n, core.n_agents), dtype=np.int64)
        for team, actor in ((HIDERS, hider), (SEEKERS, seeker)):
            cols = np.flatnonzero(core.team == team)
            o = torch.from_numpy(obs[:, cols]).reshape(-1, core.obs_dim)
            m = torch.from_numpy(mask[:, cols]).reshape(-1, NUM_ACTIONS)
            act, _ = masked_sample(actor(o), m, generator)
            actions[:, cols] = act.view(n, len(cols)).numpy()
        obs, rewards, _, mask = core.step(actions)
        score += rewards[:, 0]
    winner = np.where(score > 0, HIDERS, np.where(score < 0, SEEKERS, -1))
    return EpisodeResults(
        hider_score=score,
        winner=winner,
        door_blocked=core.door_block_status(locked=False).copy(),
        door_locked=core.door_block_status(locked=True).copy(),
        phases={k: v.copy() for k, v in core.phases().items()} if hasattr(core, "phases") else {},
    )


@dataclass
class GenerationReport:
    """One frozen generation and how it played in evaluation.

    Attributes:
        generation: Index (0 is the untrained start).
        updates, env_steps, train_seconds: Training done when it was frozen.
        door_block_rate: Share of evaluation episodes (training layouts) in which this
            generation's hiders ended preparation with a box in every door.
        door_lock_rate: The same with the door boxes locked by the hiders.
        door_block_rate_v0: ``door_block_rate`` on the registered layouts of the env
            (v0: 15x15, one or two doors; v1: the 9x9 quadrant): how far the skill carries.
        hider_win_rate: Hiders' win rate against the same generation's seekers.
        matches: ``(hider generation, seeker generation, winner)`` of every evaluation
            episode, winner 0 hiders, 1 seekers, -1 draw (the input of TrueSkill).
        paths: Saved checkpoint per role.
        phase_rates: v1 only: phase name -> rate (:data:`envs.hide_and_seek.core_v1.PHASES`)
            of the generation against itself on the registered (standard) layouts.
    """

    generation: int
    updates: int
    env_steps: int
    train_seconds: float
    door_block_rate: float
    door_lock_rate: float
    door_block_rate_v0: float
    hider_win_rate: float
    matches: list[tuple[int, int, int]]
    paths: dict[str, Path]
    phase_rates: dict[str, float] = field(default_factory=dict)


def evaluation_actions(seed: int, g: int) -> torch.Generator:
    """The torch random stream of generation ``g``'s evaluation actions under run ``seed``."""
    return torch.Generator().manual_seed(seed * 1_000_003 + g)


def evaluate_generation(
    trainer: HideAndSeekPPO, g: int, cores: tuple[HideAndSeekCore, HideAndSeekCore], seed: int
) -> tuple[dict[str, float], list[tuple[int, int, int]]]:
    """Play generation ``g`` against itself and (if any) the previous generation.

    Every pairing uses the same layout seeds (common random numbers). ``cores`` are the
    training-layout core and a core of the env's registered layouts, both of the episode count.
    """
    train_core, v0_core = cores
    seeds = np.random.default_rng([seed, 1]).integers(0, 2**31, size=train_core.n_envs)
    gen = evaluation_actions(seed, g)
    pairs = [(g, g)] + ([(g, g - 1), (g - 1, g)] if g > 0 else [])
    matches: list[tuple[int, int, int]] = []
    stats: dict[str, float] = {}
    for h, s in pairs:
        res = play_episodes(train_core, trainer.frozen_actor(h, "hider"),
                            trainer.frozen_actor(s, "seeker"), seeds, gen)
        matches.extend((h, s, int(w)) for w in res.winner)
        if (h, s) == (g, g):
            stats["door_block_rate"] = float(res.door_blocked.mean())
            stats["door_lock_rate"] = float(res.door_locked.mean())
            stats["hider_win_rate"] = float((res.winner == 0).mean())
    v0 = play_episodes(v0_core, trainer.frozen_actor(g, "hider"),
                       trainer.frozen_actor(g, "seeker"), seeds[: v0_core.n_envs], gen)
    stats["door_block_rate_v0"] = float(v0.door_blocked.mean())
    stats["phase_rates"] = {k: float(v.mean()) for k, v in v0.phases.items()}
    return stats, matches


def train_generations(
    config: HideAndSeekPPOConfig,
    minutes: float,
    out_dir: str | Path,
    *,
    eval_episodes: int = 256,
    target_generations: int | None = None,
    max_updates: int | None = None,
    on_generation: Callable[[GenerationReport], None] | None = None,
) -> tuple[HideAndSeekPPO, list[GenerationReport]]:
    """Train within ``minutes`` (evaluation included), freezing generations as it goes.

    Args:
        config: PPO settings.
        minutes: Wall-clock budget; training stops early enough to evaluate the last
            generation within it.
        out_dir: Checkpoints go to ``out_dir/gen_XXX/{hider,seeker}.safetensors``.
        eval_episodes: Episodes per evaluation pairing.
        target_generations: If set, ``updates_per_generation`` is chosen after the first
            update so that about this many generations fit the budget.
        max_updates: Stop after this many updates even if time is left.
        on_generation: Called with each report as soon as it exists.

    Returns:
        The trainer and one report per generation, generation 0 first.
    """
    start = time.perf_counter()
    deadline = start + 60.0 * minutes
    trainer = HideAndSeekPPO(config)
    cores = (make_core(config, eval_episodes), make_core(config, eval_episodes, standard=True))
    reports: list[GenerationReport] = []
    train_seconds, eval_seconds, per_gen = 0.0, 0.0, config.updates_per_generation

    def close_generation(g: int) -> None:
        nonlocal eval_seconds
        t0 = time.perf_counter()
        paths = trainer.save_generation(g, out_dir)
        stats, matches = evaluate_generation(trainer, g, cores, config.seed)
        eval_seconds = time.perf_counter() - t0
        report = GenerationReport(g, trainer.updates, trainer.total_steps, train_seconds,
                                  matches=matches, paths=paths, **stats)
        log.info("generation %d: %d updates, door block %.3f (v0 layouts %.3f), hider win %.3f",
                 g, report.updates, report.door_block_rate, report.door_block_rate_v0,
                 report.hider_win_rate)
        reports.append(report)
        if on_generation is not None:
            on_generation(report)

    close_generation(0)
    last_update = 0.0
    while max_updates is None or trainer.updates < max_updates:
        if time.perf_counter() + last_update + 1.5 * eval_seconds > deadline:
            break
        stats = trainer.update()
        last_update = stats.seconds
        train_seconds += stats.seconds
        if trainer.updates == 1 and target_generations:
            budget = deadline - start
            per_gen = max(1, int((budget / target_generations - eval_seconds) / last_update))
            log.info("%.2f s per update: a generation every %d updates", last_update, per_gen)
        log.debug("update %d: hider return %.2f, door block %.3f, losses %s", trainer.updates,
                  stats.hider_return, stats.door_block_rate, stats.losses)
        if trainer.updates % per_gen == 0:
            close_generation(trainer.freeze())
    if trainer.updates % per_gen != 0:  # keep what was learnt since the last generation
        close_generation(trainer.freeze())
    return trainer, reports
