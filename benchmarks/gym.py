"""Gym env throughput: Arena's vector env against Gymnasium's SyncVectorEnv of single envs, in one run.

(a) baseline: ``gymnasium.vector.SyncVectorEnv`` over ``num_envs`` plain single envs
    (``arena.gym.make``: the registered PettingZoo env, one opponent ``act`` per move),
    which is what ``gymnasium.make_vec``-style code gives a user without our core;
(b) ours: ``arena.gym.make_vec`` on the env's vectorized core (every board as numpy
    arrays, one batched opponent ``act`` per step).

Both play the same episodes (same seeds, same opponents, both auto-reset in
``NEXT_STEP`` mode) with uniformly random legal learner actions drawn from the masks
the env returns, by the same vectorized sampler. steps/s counts learner steps (env
transitions) summed over the envs.

    python benchmarks/gym.py [--env connect_four-v3] [--num-envs 256] [--seconds 10] [--smoke]

Prints a table, then one JSON line with ``vec_steps_per_s``, ``sync_steps_per_s``,
``ratio``, ``env``, ``num_envs``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
if sys.path and Path(sys.path[0]).resolve() == _ROOT / "benchmarks":
    sys.path[0] = str(_ROOT)  # benchmarks/league.py (and gym.py) would shadow the packages of those names

import numpy as np
from rich.console import Console
from rich.table import Table

import arena.gym
from benchmarks.support.smoke import parse_with_smoke


def random_legal(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniformly random legal action per row of ``mask``."""
    scores = rng.random(mask.shape) * mask
    return scores.argmax(axis=1)


def steps_per_s(envs, seconds: float, seed: int) -> tuple[float, int]:
    """Learner steps/s of ``envs`` (summed over its envs) for about ``seconds``, and the episodes ended."""
    rng = np.random.default_rng(seed)
    envs.reset(seed=seed)
    mask = envs.action_masks()
    steps, episodes = 0, 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds or steps == 0:
        _, _, terminated, truncated, info = envs.step(random_legal(mask, rng))
        mask = info["action_mask"]
        episodes += int(terminated.sum() + truncated.sum())
        steps += envs.num_envs
    return steps / elapsed, episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="connect_four-v3")
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--opponent", default="random")
    parser.add_argument("--seconds", type=float, default=10.0, help="Measuring time of each side.")
    parser.add_argument("--seed", type=int, default=0)
    args = parse_with_smoke(parser, "A few seconds, 8 envs (the suite runs it).", num_envs=8, seconds=0.5)

    vec = arena.gym.make_vec(args.env, args.num_envs, opponents=[args.opponent])
    sync = arena.gym.make_vec(args.env, args.num_envs, opponents=[args.opponent], vectorized=False)
    steps_per_s(vec, min(args.seconds, 1.0), args.seed)  # warm-up: first calls allocate
    vec_rate, vec_episodes = steps_per_s(vec, args.seconds, args.seed)
    sync_rate, sync_episodes = steps_per_s(sync, args.seconds, args.seed)
    vec.close()
    sync.close()

    table = Table(title=f"{args.env}: {args.num_envs} envs vs {args.opponent}, random legal learner")
    for col in ("env", "steps/s", "episodes ended"):
        table.add_column(col, justify="left" if col == "env" else "right")
    table.add_row("SyncVectorEnv(arena.gym.make)", f"{sync_rate:,.0f}", f"{sync_episodes:,}")
    table.add_row("arena.gym.make_vec (vector core)", f"{vec_rate:,.0f}", f"{vec_episodes:,}")
    Console().print(table)
    print(json.dumps({"env": args.env, "num_envs": args.num_envs, "opponent": args.opponent,
                      "vec_steps_per_s": round(vec_rate, 1), "sync_steps_per_s": round(sync_rate, 1),
                      "ratio": round(vec_rate / sync_rate, 2), "smoke": args.smoke}))


if __name__ == "__main__":
    main()
