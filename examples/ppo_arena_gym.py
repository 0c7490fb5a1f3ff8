"""CleanRL-style PPO on ``arena.gym``, one file top to bottom, ending in a rated agent.

Trains a masked-logits PPO agent on connect four against Arena's ``random`` agent with
``arena.gym.make_vec`` (all boards on the vectorized core), prints the win rate against
the training opponents before and after, exports the actor with
``arena.client.onnx_export.export_submission`` (validated as the server will validate it) and, with
``--submit``, uploads it to an Arena server and waits until the ladder has rated it::

    python examples/ppo_arena_gym.py --total-timesteps 500000 --submit http://127.0.0.1:8000
    python examples/ppo_arena_gym.py --total-timesteps 500000     # export only; then:
    arena submit ppo-connect_four-v3.onnx --wait

Every ``--flag`` is a field of :class:`Args` (those it shares with ``examples/sb3_maskable_ppo.py``:
``examples/training_cli.py``).
Illegal moves never happen: illegal logits are masked out before sampling, as Arena masks
them when it plays the export. Gymnasium's ``NEXT_STEP`` autoreset: the step after an episode
ended ignores the action and returns the next episode's first observation, so those samples
are left out of the loss (``valid``), and GAE stops at every ``done``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical
from training_cli import GymTrainArgs, export_and_submit, parse_args

import arena.gym


@dataclass
class Args(GymTrainArgs):
    # and GymTrainArgs' --env-id (a board game here: make_vec uses its vectorized core), --opponents,
    # --ent-coef, --eval-episodes, SubmitArgs' --out, --submit, --token, --submit-timeout
    seed: int = 1
    """seed of the envs, the network and the sampling"""
    total_timesteps: int = 300_000
    """learner steps to train for (summed over the envs)"""
    num_envs: int = 64
    """envs stepped together"""
    num_steps: int = 64
    """steps per env per rollout"""
    learning_rate: float = 2.5e-4
    """Adam learning rate"""
    gamma: float = 0.99
    """discount"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    num_minibatches: int = 4
    """minibatches per epoch"""
    update_epochs: int = 4
    """epochs per rollout"""
    clip_coef: float = 0.2
    """PPO clipping"""
    vf_coef: float = 0.5
    """value loss weight"""
    max_grad_norm: float = 0.5
    """gradient clipping"""
    hidden: int = 128
    """width of the two hidden layers"""


class Agent(nn.Module):
    """An MLP actor and critic over the flattened observation."""

    def __init__(self, obs_size: int, num_actions: int, hidden: int) -> None:
        super().__init__()
        self.actor = nn.Sequential(nn.Flatten(), nn.Linear(obs_size, hidden), nn.Tanh(),
                                   nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, num_actions))
        self.critic = nn.Sequential(nn.Flatten(), nn.Linear(obs_size, hidden), nn.Tanh(),
                                    nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def act(self, obs: torch.Tensor, mask: torch.Tensor, action: torch.Tensor | None = None):
        """Action (sampled if not given), its log-probability, the entropy and the value."""
        logits = self.actor(obs).masked_fill(~mask, -1e9)
        dist = Categorical(logits=logits)
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(obs)


def win_rate(agent: Agent, args: Args, seed: int) -> float:
    """Share of ``eval_episodes`` won (draws count half) with actions sampled from the masked logits."""
    def act(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return agent.act(torch.as_tensor(obs, dtype=torch.float32), torch.as_tensor(mask))[0].numpy()

    return args.win_rate(act, seed, num_envs=args.num_envs)


def train(args: Args) -> Agent:
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # tiny networks: extra threads only contend for the cores the envs use
    envs = arena.gym.make_vec(args.env_id, args.num_envs, opponents=args.opponents.split(","), seed=args.seed)
    obs_shape, num_actions = envs.single_observation_space.shape, int(envs.single_action_space.n)
    agent = Agent(int(np.prod(obs_shape)), num_actions, args.hidden)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    n, t_max = args.num_envs, args.num_steps
    obs_buf = torch.zeros((t_max, n, *obs_shape))
    mask_buf = torch.zeros((t_max, n, num_actions), dtype=torch.bool)
    actions, logprobs, values = (torch.zeros((t_max, n), dtype=torch.long), torch.zeros((t_max, n)),
                                 torch.zeros((t_max, n)))
    rewards, dones, valid = torch.zeros((t_max, n)), torch.zeros((t_max, n)), torch.zeros((t_max, n))
    obs, info = envs.reset()
    next_obs = torch.as_tensor(obs, dtype=torch.float32)
    next_mask = torch.as_tensor(info["action_mask"])
    just_ended = torch.zeros(n)  # the next step of these envs is an autoreset step (action ignored)
    updates = max(1, args.total_timesteps // (n * t_max))
    batch_size = n * t_max
    minibatch = batch_size // args.num_minibatches
    start = time.perf_counter()
    for update in range(1, updates + 1):
        for t in range(t_max):
            obs_buf[t], mask_buf[t], valid[t] = next_obs, next_mask, 1.0 - just_ended
            with torch.no_grad():
                action, logprob, _, value = agent.act(next_obs, next_mask)
            actions[t], logprobs[t], values[t] = action, logprob, value
            obs, reward, terminated, truncated, info = envs.step(action.numpy())
            done = terminated | truncated
            rewards[t] = torch.as_tensor(reward, dtype=torch.float32)
            dones[t] = torch.as_tensor(done, dtype=torch.float32)
            just_ended = dones[t].clone()
            next_obs = torch.as_tensor(obs, dtype=torch.float32)
            next_mask = torch.as_tensor(info["action_mask"])
        with torch.no_grad():  # GAE, cut at every done (the autoreset step after it is invalid anyway)
            advantages = torch.zeros_like(rewards)
            last = torch.zeros(n)
            next_value = agent.value(next_obs)
            for t in reversed(range(t_max)):
                following = next_value if t == t_max - 1 else values[t + 1]
                nonterminal = 1.0 - dones[t]
                delta = rewards[t] + args.gamma * following * nonterminal - values[t]
                last = delta + args.gamma * args.gae_lambda * nonterminal * last
                advantages[t] = last
            returns = advantages + values
        b_obs, b_mask = obs_buf.reshape(batch_size, *obs_shape), mask_buf.reshape(batch_size, num_actions)
        b_act, b_logp, b_adv = actions.reshape(-1), logprobs.reshape(-1), advantages.reshape(-1)
        b_ret, b_valid = returns.reshape(-1), valid.reshape(-1)
        for _ in range(args.update_epochs):
            order = torch.randperm(batch_size)
            for lo in range(0, batch_size, minibatch):
                idx = order[lo: lo + minibatch]
                w = b_valid[idx]
                _, logp, entropy, value = agent.act(b_obs[idx], b_mask[idx], b_act[idx])
                ratio = (logp - b_logp[idx]).exp()
                adv = b_adv[idx]
                adv = (adv - adv[w > 0].mean()) / (adv[w > 0].std() + 1e-8)
                pg = torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef))
                v_loss = 0.5 * (value - b_ret[idx]) ** 2
                loss = ((pg - args.ent_coef * entropy + args.vf_coef * v_loss) * w).sum() / w.sum().clamp(min=1)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
        ended = dones.sum().item()
        won = ((rewards > 0) & (dones > 0)).sum().item()
        steps = update * batch_size
        print(f"update {update}/{updates}  steps {steps:,}  {steps / (time.perf_counter() - start):,.0f} steps/s  "
              f"episodes {ended:.0f}  wins {won / max(ended, 1):.2f}", flush=True)
    envs.close()
    return agent


if __name__ == "__main__":
    args = parse_args(Args, __doc__.splitlines()[0])
    torch.manual_seed(args.seed)
    probe = arena.gym.make(args.env_id)
    untrained = Agent(int(np.prod(probe.observation_space.shape)), int(probe.action_space.n), args.hidden)
    before = win_rate(untrained, args, seed=10_000)
    agent = train(args)
    after = win_rate(agent, args, seed=10_000)
    print(f"win rate against {args.opponents}: untrained {before:.3f}, trained {after:.3f}")
    export_and_submit(agent.actor, args.env_id, f"ppo-{args.env_id}", args)
