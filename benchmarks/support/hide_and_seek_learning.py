"""Hide-and-seek section of the learning benchmark: generations, TrueSkill, door blocking.

:func:`hide_and_seek_section` trains hider and seeker teams by PPO self-play
(:mod:`agents.trainers.hide_and_seek.ppo`) within a time budget, freezing a
generation every few updates, and reports how the generations compare:

* TrueSkill per role across generations: every evaluation episode (generation ``g``'s
  hiders against generation ``g`` and ``g - 1``'s seekers, and ``g - 1``'s hiders
  against ``g``'s seekers) is one rated match of a ``hide_and_seek-v0`` ladder, applied
  in order through :meth:`league.ratings.book.RatingBook.apply` with agents
  ``hider-gen<g>`` / ``seeker-gen<g>`` in roles ``hider`` / ``seeker``.
* The door-block rate: the share of evaluation episodes in which a generation's hiders
  ended the preparation phase with a box in every door of their room (locked or not;
  ``door_block_status(locked=False)``), OpenAI's first emergent hider skill.

This lives in ``arena`` because it joins a trainer (``agents``) with ratings
(``league``); dependencies still point one way.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path

from agents.trainers.hide_and_seek.generations import train_generations
from agents.trainers.hide_and_seek.ppo import HideAndSeekPPOConfig
from arena.training.hide_and_seek.evaluation import rate_generations

log = logging.getLogger(__name__)

ROLES = ("hider", "seeker")
__all__ = ["ROLES", "hide_and_seek_section"]


def hide_and_seek_section(
    minutes: float = 10.0,
    seed: int = 0,
    out_dir: str | Path | None = None,
    config: HideAndSeekPPOConfig | None = None,
    target_generations: int = 8,
    eval_episodes: int = 256,
    max_updates: int | None = None,
) -> dict:
    """Train hide-and-seek teams for ``minutes`` and summarise the generations.

    Args:
        minutes: Wall-clock budget, evaluation included.
        seed: Training and evaluation seed.
        out_dir: Where checkpoints go (default: a temporary directory, removed after).
        config: PPO settings (default: the trainer's defaults with ``seed``).
        target_generations: About how many generations to freeze after generation 0.
        eval_episodes: Episodes per evaluation pairing.
        max_updates: Stop training after this many updates even if time is left.

    Returns:
        ``hs_generations`` (frozen generations, the untrained generation 0 included),
        ``hs_door_block_rate_first`` / ``_last`` (generation 0 and the last one),
        ``hs_door_block_rates`` (every generation), ``hs_door_lock_rates``,
        ``hs_door_block_rates_v0`` (on the registered 15x15 layouts),
        ``hs_hider_ratings`` / ``hs_seeker_ratings`` (TrueSkill mu per generation),
        ``hs_hider_sigmas`` / ``hs_seeker_sigmas``, ``hs_hider_win_rates`` (against the
        same generation's seekers), ``hs_env_steps`` and ``hs_env_steps_per_s``
        (training env steps - one step of one episode, four agent actions - per
        second of training, evaluation excluded), and ``hs_config``.
    """
    cfg = config or HideAndSeekPPOConfig(seed=seed)
    with tempfile.TemporaryDirectory(prefix="hs-gens-") as tmp:
        trainer, reports = train_generations(
            cfg, minutes, out_dir or tmp, eval_episodes=eval_episodes,
            target_generations=target_generations, max_updates=max_updates,
        )
    matches = [m for r in reports for m in r.matches]
    hiders, seekers = rate_generations(matches, len(reports))
    train_seconds = reports[-1].train_seconds
    return {
        "hs_generations": len(reports),
        "hs_door_block_rate_first": reports[0].door_block_rate,
        "hs_door_block_rate_last": reports[-1].door_block_rate,
        "hs_door_block_rates": [r.door_block_rate for r in reports],
        "hs_door_lock_rates": [r.door_lock_rate for r in reports],
        "hs_door_block_rates_v0": [r.door_block_rate_v0 for r in reports],
        "hs_hider_ratings": [round(r.mu, 3) for r in hiders],
        "hs_seeker_ratings": [round(r.mu, 3) for r in seekers],
        "hs_hider_sigmas": [round(r.sigma, 3) for r in hiders],
        "hs_seeker_sigmas": [round(r.sigma, 3) for r in seekers],
        "hs_hider_win_rates": [r.hider_win_rate for r in reports],
        "hs_env_steps": trainer.total_steps,
        "hs_env_steps_per_s": trainer.total_steps / train_seconds if train_seconds else 0.0,
        "hs_config": {k: v for k, v in vars(cfg).items()},
    }


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="hide-and-seek learning section")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="keep checkpoints here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from rich.console import Console

    Console().print_json(json.dumps(hide_and_seek_section(args.minutes, args.seed, args.out)))
