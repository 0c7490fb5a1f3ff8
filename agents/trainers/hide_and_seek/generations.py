"""Generations of hide-and-seek PPO: train, freeze, save, evaluate.

:func:`train_generations` drives :class:`agents.trainers.hide_and_seek.ppo.HideAndSeekPPO`
within a wall-clock budget and, whenever a generation is frozen, saves both actors as
checkpoints and evaluates it (:func:`agents.trainers.hide_and_seek.evaluation.evaluate_generation`).
``python -m agents.trainers.hide_and_seek`` runs it from the command line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agents.trainers.hide_and_seek.evaluation import evaluate_generation
from agents.trainers.hide_and_seek.ppo import HideAndSeekPPO, HideAndSeekPPOConfig, make_core

log = logging.getLogger(__name__)


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
