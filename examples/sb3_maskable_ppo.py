"""Stable-Baselines3 MaskablePPO on ``arena.gym``, one file top to bottom, ending in a rated agent.

Trains sb3-contrib's ``MaskablePPO`` on connect four against Arena's ``random`` agent (SB3
drives its own ``DummyVecEnv`` of ``arena.gym.make`` envs and finds each env's
``action_masks()``), prints the win rate against the training opponents before and after,
exports the policy with ``arena.client.onnx_export.export_submission`` (the actor's logits as ONNX,
validated as the server will validate it; no pickle leaves your machine) and, with
``--submit``, uploads it to an Arena server and waits until the ladder has rated it::

    pip install -e ".[train]"                 # stable-baselines3, sb3-contrib
    arena user create me                      # saves your token
    python examples/sb3_maskable_ppo.py --total-timesteps 200000 --submit http://127.0.0.1:8000

Every ``--flag`` is a field of :class:`Args` (those it shares with ``examples/ppo_arena_gym.py``:
``examples/training_cli.py``).
Without ``--submit`` it stops at the export (``arena submit maskable-ppo-connect_four-v3.onnx
--wait`` does the rest). The win rates are measured on ``arena.gym.make_vec`` (all boards in
one numpy batch), sampling from the masked policy as Arena samples from the exported logits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.vec_env import DummyVecEnv
from training_cli import GymTrainArgs, export_and_submit, parse_args

import arena.gym
from arena.gym.opponents import Opponents


@dataclass
class Args(GymTrainArgs):
    # and GymTrainArgs' --env-id, --opponents, --ent-coef, --eval-episodes, SubmitArgs' --out, --submit,
    # --token, --submit-timeout
    seed: int = 0
    """seed of the envs, the network and the sampling"""
    total_timesteps: int = 100_000
    """learner steps to train for (summed over the envs)"""
    num_envs: int = 8
    """envs in SB3's DummyVecEnv"""
    n_steps: int = 256
    """rollout length per env"""
    batch_size: int = 256
    """minibatch size"""
    n_epochs: int = 4
    """epochs per rollout"""
    learning_rate: float = 3e-4
    """Adam learning rate"""


def win_rate(model: MaskablePPO, args: Args, seed: int) -> float:
    """Share of ``eval_episodes`` won (draws count half), actions sampled from the masked policy."""
    return args.win_rate(lambda obs, mask: model.predict(obs, action_masks=mask, deterministic=False)[0], seed)


def make_model(args: Args) -> MaskablePPO:
    """MaskablePPO over ``num_envs`` single ``arena.gym`` envs (env ``i`` seeded ``seed + i``) that share
    one opponent list, so a file or PFSP opponent is loaded once."""
    shared = Opponents(args.env_id, args.opponents.split(","))
    envs = DummyVecEnv([(lambda i=i: arena.gym.make(args.env_id, shared, seed=args.seed + i))
                        for i in range(args.num_envs)])
    return MaskablePPO("MlpPolicy", envs, n_steps=args.n_steps, batch_size=args.batch_size, n_epochs=args.n_epochs,
                       learning_rate=args.learning_rate, ent_coef=args.ent_coef, seed=args.seed, verbose=0)


if __name__ == "__main__":
    args = parse_args(Args, __doc__.splitlines()[0])
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # a small MLP: extra threads only contend for the cores the envs use
    model = make_model(args)
    before = win_rate(model, args, seed=10_000)
    model.learn(args.total_timesteps)
    after = win_rate(model, args, seed=10_000)
    print(f"win rate against {args.opponents}: untrained {before:.3f}, trained {after:.3f}")
    export_and_submit(model, args.env_id, f"maskable-ppo-{args.env_id}", args)
