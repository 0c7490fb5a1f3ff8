"""Train hide-and-seek teams by PPO self-play and print one line per generation.

    python -m agents.trainers.hide_and_seek --minutes 10 --out runs/hide_and_seek

``hide_and_seek-v0``'s curriculum layouts (:class:`~agents.trainers.hide_and_seek.ppo.HideAndSeekPPOConfig`
defaults); checkpoints of every generation under ``--out``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import torch

from agents.trainers.hide_and_seek.generations import GenerationReport, train_generations
from agents.trainers.hide_and_seek.ppo import CRITICS, HideAndSeekPPOConfig


def main(argv: list[str] | None = None) -> None:
    """``python -m agents.trainers.hide_and_seek --minutes 1``: one line per generation."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=1.0)
    p.add_argument("--out", default="runs/hide_and_seek")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-envs", type=int, default=HideAndSeekPPOConfig.num_envs)
    p.add_argument("--size", type=int, default=HideAndSeekPPOConfig.size)
    p.add_argument("--generations", type=int, default=8, help="target generation count")
    p.add_argument("--gamma", type=float, default=HideAndSeekPPOConfig.gamma, help="discount per step (< 1)")
    p.add_argument("--critic", choices=CRITICS, default=HideAndSeekPPOConfig.critic,
                   help="local: each critic sees its agent's observation; central: plus the full state")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = HideAndSeekPPOConfig(num_envs=args.num_envs, size=args.size, seed=args.seed, gamma=args.gamma,
                               critic=args.critic)

    from rich.console import Console

    console = Console()

    def show(r: GenerationReport) -> None:
        console.print(f"gen {r.generation:2d}  updates {r.updates:4d}  env steps {r.env_steps:9,d}  "
              f"door block {r.door_block_rate:.3f} (locked {r.door_lock_rate:.3f}, "
              f"v0 layouts {r.door_block_rate_v0:.3f})  hider win {r.hider_win_rate:.3f}")

    trainer, reports = train_generations(cfg, args.minutes, args.out,
                                         target_generations=args.generations, on_generation=show)
    last = reports[-1]
    console.print(f"{trainer.total_steps / max(last.train_seconds, 1e-9):,.0f} env steps/s; "
          f"checkpoints in {Path(args.out).resolve()}")


if __name__ == "__main__":
    main()
