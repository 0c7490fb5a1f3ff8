"""A league on an Arena server, trained on your machine: MaskablePPO against the league's opponents.

Every round, top to bottom:

1. ask the league for opponents (``LeagueClient.sample_opponents``: PFSP in the learner's
   AlphaStar role over the league's snapshots and the server's board);
2. train MaskablePPO (sb3-contrib) on ``arena.gym`` against them: scripted agents by name,
   neural ones downloaded as ``arena:<id>@<url>``, self-play against the policy's own
   latest export;
3. report the results per opponent (``LeagueClient.report``: they move the PFSP win rates);
4. export the policy to ONNX (``arena.client.onnx_export.export_submission``) and push it as the
   learner's next snapshot (``LeagueClient.push_snapshot``): the server validates it like
   a submission, rates it on the ladder, and it joins the league's pool.

The league lives on the server, the network in ``--run-dir`` (safetensors of the policy's
tensors, no pickles): run the same command again and it goes on from the last round::

    arena serve &                           # or any Arena server
    arena user create me                    # saves your token
    python examples/league_sb3.py --league my-league --rounds 20
    curl http://127.0.0.1:8000/api/v1/leagues/<id>       # learners, win rates, snapshots

Every ``--flag`` is a field of :class:`Args`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium
import torch
from safetensors.torch import load_file, save_file
from sb3_contrib import MaskablePPO
from stable_baselines3.common.vec_env import DummyVecEnv
from training_cli import parse_args

import arena.gym
from arena.client import LeagueClient, tally
from arena.client.onnx_export import export_submission
from arena.gym.opponents import Opponents


@dataclass
class Args:
    server: str = ""
    """the Arena server (default: $ARENA_SERVER, else http://127.0.0.1:8000)"""
    token: str = ""
    """your API token (default: $ARENA_TOKEN, else the token `arena user create` saved)"""
    league: str = "sb3"
    """the league's name (yours alone on the env; created on first use, resumed after)"""
    env_id: str = "connect_four-v3"
    """a symmetric Arena env (connect_four-v3, tictactoe-v3, rps-v2)"""
    learner: str = "main"
    """this trainer's learner; its name sets its role when it is one (main, main_exploiter, league_exploiter)"""
    rounds: int = 10
    """rounds to train in this run (draw opponents, train, report, push)"""
    steps_per_round: int = 16_384
    """learner steps per round, over all envs"""
    num_envs: int = 8
    """envs stepped together (SB3's DummyVecEnv)"""
    opponents_per_round: int = 8
    """opponents drawn per round (with repeats: PFSP's proportions); one is drawn per episode"""
    n_steps: int = 256
    """MaskablePPO rollout length per env"""
    batch_size: int = 256
    """MaskablePPO minibatch size"""
    n_epochs: int = 10
    """MaskablePPO passes over each rollout (SB3's default, 10)"""
    seed: int = 0
    """seed of the network, the envs and the draws"""
    run_dir: str = "league-sb3"
    """where the network (model.safetensors) and the latest export (me.onnx) are kept"""


class RecordOutcomes(gymnasium.Wrapper):
    """Appends ``(opponent name, reward)`` to ``outcomes`` at the end of every episode."""

    def __init__(self, env: gymnasium.Env, outcomes: list[tuple[str, float]]) -> None:
        super().__init__(env)
        self.outcomes = outcomes

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            self.outcomes.append((next(iter(info["opponents"].values())), float(reward)))
        return obs, reward, terminated, truncated, info

    def action_masks(self):
        return self.env.action_masks()


def make_envs(args: Args, names: list[str], outcomes: list[tuple[str, float]], round_: int) -> DummyVecEnv:
    """``num_envs`` single envs sharing one opponent list (each policy loaded once)."""
    shared = Opponents(args.env_id, names)
    seed = args.seed * 1_000_003 + round_ * args.num_envs
    return DummyVecEnv([(lambda i=i: RecordOutcomes(arena.gym.make(args.env_id, shared, seed=seed + i), outcomes))
                        for i in range(args.num_envs)])


def load_model(args: Args, envs: DummyVecEnv, weights: Path) -> MaskablePPO:
    """A fresh MaskablePPO, with the saved policy tensors if there are any (resuming)."""
    model = MaskablePPO("MlpPolicy", envs, n_steps=args.n_steps, batch_size=args.batch_size, n_epochs=args.n_epochs,
                        seed=args.seed, verbose=0)
    if weights.exists():
        model.policy.load_state_dict(load_file(str(weights)))
    return model


if __name__ == "__main__":
    args = parse_args(Args, __doc__.splitlines()[0])
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # a small MLP: extra threads only contend for the cores the envs use
    run_dir = Path(args.run_dir) / args.league
    run_dir.mkdir(parents=True, exist_ok=True)
    weights, me = run_dir / "model.safetensors", run_dir / "me.onnx"
    self_name = f"file:{me}"
    with LeagueClient(args.server or None, args.token or None, args.league, args.env_id,
                      learner=args.learner) as league:
        print(f"league {league.name} (id {league.id}) on {args.env_id}: "
              f"{'resumed' if league.resumed else 'new'}, learner {args.learner}")
        outcomes: list[tuple[str, float]] = []
        model = load_model(args, make_envs(args, ["random"], outcomes, 0), weights)
        for round_ in range(args.rounds):
            export_submission(model, args.env_id, me, name=f"{args.league}-{args.learner}")  # self-play's opponent
            drawn = league.sample_opponents(args.opponents_per_round, seed=args.seed * 7919 + round_)
            names = league.gym_opponents(drawn, self_name)
            outcomes.clear()
            model.set_env(make_envs(args, names, outcomes, round_ + 1))
            model.learn(args.steps_per_round, reset_num_timesteps=False)
            results = {("self" if name == self_name else name): counts for name, counts in tally(outcomes).items()}
            learner = league.report(results)["learner"]
            export_submission(model, args.env_id, me, name=f"{args.league}-{args.learner}")
            pushed = league.push_snapshot(me)
            save_file(model.policy.state_dict(), str(weights))
            games = sum(sum(c) for c in results.values())
            wins = sum(c[0] for c in results.values())
            print(f"round {round_}: opponents {sorted(set(names))}, {games} games, win rate "
                  f"{wins / max(games, 1):.3f}; league games {learner['games']}; snapshot g"
                  f"{pushed['snapshot']['generation']} = agent {pushed['agent']['id']} ({pushed['agent']['status']})")
