"""PPO self-play on a vectorized two-player board game, in one readable file.

CleanRL style: a ``@dataclass`` config with a docstring under each field, then the
loop top to bottom. Thousands of boards advance together in a numpy core
(:mod:`envs.board_core`) - or, with ``device="cuda"``, in a torch core on the GPU, where
rollouts, GAE and updates then run without a host round trip per move
(:mod:`agents.trainers.selfplay_device`) - the learner plays one seat of every board,
opponents the other. Opponents are any :class:`agents.policy.Policy` - frozen snapshots of the
learner and scripted baselines - sampled per board by the caller's ``pick_opponent``
(the league plugs PFSP in there). The actor is a registry architecture
(:mod:`agents.nets`), so a checkpoint is a plain Arena agent (safetensors + spec).

Rewards are the game result (+1 win, -1 loss, 0 draw) given on the learner's last
move of each game; illegal moves are masked out of the policy. Every finished game is
also reported per opponent (:attr:`UpdateStats.result_opponents` / ``result_scores``)
so a league can keep PFSP win-rate tables.

State for resuming (:meth:`SelfPlayPPO.state_tensors`) is tensors only - the model
and Adam's moments - so it is saved as safetensors, never pickled.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from agents.checkpoint import load_optimizer_tensors, optimizer_tensors
from agents.nets import build_net
from agents.neural import resolve_device
from agents.policy import MatchRng, Policy
from agents.trainers.ppo_core import PPOSettings, Rollout, Samples, masked_logits, ppo_update
from agents.trainers.selfplay_device import DeviceSelfPlayBoards
from envs.board_core import BoardCore


@dataclass
class PPOConfig(PPOSettings):
    """Hyper-parameters of PPO self-play (the update's: :class:`~agents.trainers.ppo_core.PPOSettings`)."""

    num_envs: int = 512
    """boards played in parallel"""
    rollout_steps: int = 16
    """learner decisions per board per update"""
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    """actor and critic hidden layers (the actor is the registry's ``mlp``)"""
    arch: str = "mlp"
    """registry architecture of the actor (``mlp`` or ``cnn``)"""
    arch_hparams: dict[str, Any] | None = None
    """actor hyper-parameters; None means ``{"hidden": hidden}`` for mlp, defaults for cnn"""
    critic_hidden: list[int] | None = None
    """critic (an mlp, never exported) hidden layers; None means ``hidden``"""
    shared_trunk: bool = False
    """critic = a linear head on the actor's last hidden layer (half the compute) instead of its own mlp"""
    seed: int = 0
    """seeds torch (init, sampling) and the opponents' random streams"""
    device: str = "cpu"
    """where the model, the rollouts and the updates run: ``cpu``, ``cuda`` or ``auto``; on
    a GPU the boards and opponents run there too (:mod:`agents.trainers.selfplay_device`)"""
    torch_core: bool = False
    """on ``cpu``, step the boards with the torch core as on a GPU (slower there than the
    numpy core; for checking the device path without one)"""


def actor_hparams(config: PPOConfig) -> dict[str, Any]:
    """The actor's registry hyper-parameters (what goes into the exported spec)."""
    if config.arch_hparams is not None:
        return dict(config.arch_hparams)
    return {"hidden": list(config.hidden)} if config.arch == "mlp" else {}


class ActorCritic(nn.Module):
    """Registry actor (exported as the agent) plus a critic: its own mlp, or a head on the actor's trunk."""

    def __init__(self, obs_shape: tuple[int, ...], num_actions: int, hidden: list[int],
                 arch: str = "mlp", hparams: dict[str, Any] | None = None,
                 critic_hidden: list[int] | None = None, shared_trunk: bool = False) -> None:
        super().__init__()
        self.actor = build_net(arch, {"hidden": hidden} if hparams is None else hparams, obs_shape, num_actions)
        self.shared_trunk = shared_trunk
        if shared_trunk:
            self.critic = nn.Linear(self.actor.head.in_features, 1)
        else:
            self.critic = build_net("mlp", {"hidden": critic_hidden or hidden}, obs_shape, 1)

    def forward(self, obs: torch.Tensor, mask: torch.Tensor):
        if self.shared_trunk:
            features = self.actor.features(obs)
            logits, value = self.actor.head(features), self.critic(features)
        else:
            logits, value = self.actor(obs), self.critic(obs)
        return torch.distributions.Categorical(logits=masked_logits(logits, mask), validate_args=False), \
            value.squeeze(-1)


@dataclass
class UpdateStats:
    """What one update did (for progress displays and logs)."""

    env_steps: int
    games: int
    wins: int
    draws: int
    losses: int
    policy_loss: float
    value_loss: float
    entropy: float
    seconds: float
    result_opponents: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """opponent index of every game finished in this update"""
    result_scores: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """the learner's score in each of those games: 1 win, 0.5 draw, 0 loss"""


class SelfPlayPPO:
    """Trains ``model.actor`` by PPO against per-board opponents on ``core``.

    Args:
        core: A two-player vectorized board core.
        config: PPO settings.
        pick_opponent: ``(rng) -> index`` into the opponents list given to
            :meth:`update`, called whenever a board starts a new game.
        pick_opponents: Vectorized alternative, ``(rng, k) -> k indices``; used
            instead of ``pick_opponent`` when given (a league samples thousands).
    """

    def __init__(self, core: BoardCore, config: PPOConfig,
                 pick_opponent: Callable[[np.random.Generator], int] | None = None,
                 pick_opponents: Callable[[np.random.Generator, int], np.ndarray] | None = None) -> None:
        self.core, self.cfg = core, config
        self.device = resolve_device(config.device)
        torch.manual_seed(config.seed)
        self.model = ActorCritic(core.obs_shape, core.num_actions, config.hidden, config.arch,
                                 actor_hparams(config), config.critic_hidden, config.shared_trunk)
        self.model.to(self.device)
        self.optim = self._new_optimizer()
        self.rng = np.random.default_rng(config.seed)
        self.pick_opponent = pick_opponent or (lambda rng: 0)
        self.pick_opponents = pick_opponents
        n = config.num_envs
        self.total_steps = 0
        self.device_boards: DeviceSelfPlayBoards | None = None
        if self.device.type != "cpu" or config.torch_core:
            self.device_boards = DeviceSelfPlayBoards(core.env_id, n, self.device, config.seed,
                                                      self._pick)
            return
        self.batch = core.new_batch(n)
        self.learner_seat = self.rng.integers(0, 2, size=n).astype(np.int8)
        self.game_seed = self.rng.integers(0, 2**62, size=n)
        self.opponent = self._pick(n)

    def _new_optimizer(self) -> torch.optim.Adam:
        return torch.optim.Adam(self.model.parameters(), lr=self.cfg.lr, eps=1e-5, foreach=True)

    def _pick(self, k: int) -> np.ndarray:
        if self.pick_opponents is not None:
            return np.asarray(self.pick_opponents(self.rng, k), dtype=np.int64).reshape(k)
        return np.array([self.pick_opponent(self.rng) for _ in range(k)], dtype=np.int64)

    # -- schedule, resets and resumable state -------------------------------------------
    def set_lr(self, lr: float) -> None:
        """Set Adam's learning rate (for schedules driven by the caller)."""
        for group in self.optim.param_groups:
            group["lr"] = lr

    def load_weights(self, state_dict: dict[str, torch.Tensor], reset_optimizer: bool = True) -> None:
        """Load actor+critic weights (``model.state_dict()`` keys); fresh Adam moments by default."""
        self.model.load_state_dict(state_dict, strict=True)
        if reset_optimizer:
            lr = self.optim.param_groups[0]["lr"]
            self.optim = self._new_optimizer()
            self.set_lr(lr)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Model weights (``model.*``) and Adam state (``optim.<i>.<name>``), as plain tensors."""
        out = {f"model.{k}": v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
        return {**out, **optimizer_tensors(self.optim)}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Inverse of :meth:`state_tensors` (the learning rate stays as it is)."""
        self.load_weights({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
        load_optimizer_tensors(self.optim, tensors)

    # -- environment ---------------------------------------------------------------
    def _reset_finished(self, rows: np.ndarray) -> None:
        if rows.size == 0:
            return
        fresh = self.core.new_batch(rows.size)
        for name in ("cells", "to_move", "done", "winner", "plies"):
            getattr(self.batch, name)[rows] = getattr(fresh, name)
        self.learner_seat[rows] = self.rng.integers(0, 2, size=rows.size)
        self.game_seed[rows] = self.rng.integers(0, 2**62, size=rows.size)
        self.opponent[rows] = self._pick(rows.size)

    def _opponents_move(self, opponents: list[Policy]) -> np.ndarray:
        """Let opponents move until it is the learner's turn everywhere; returns finished rows."""
        finished = []
        while True:
            rows = np.flatnonzero((self.batch.to_move != self.learner_seat) & ~self.batch.done)
            if rows.size == 0:
                break
            obs, mask = self.core.observe(self.batch, rows)
            actions = np.empty(rows.size, dtype=np.int64)
            for o in np.unique(self.opponent[rows]):
                sel = np.flatnonzero(self.opponent[rows] == o)
                rng = MatchRng(self.game_seed[rows[sel]], self.batch.to_move[rows[sel]], self.batch.plies[rows[sel]])
                actions[sel] = np.asarray(opponents[o].act(obs[sel], mask[sel], rng), dtype=np.int64)
            done = self.core.play(self.batch, rows, actions)
            finished.append(rows[done])
        return np.concatenate(finished) if finished else np.zeros(0, dtype=np.int64)

    # -- one update ----------------------------------------------------------------
    def update(self, opponents: list[Policy]) -> UpdateStats:
        """Collect ``rollout_steps`` learner moves on every board, then optimise."""
        cfg, n = self.cfg, self.cfg.num_envs
        start = time.perf_counter()
        if self.device_boards is not None:
            roll, opponent_ids, scores = self.device_boards.collect(self.model, opponents, cfg.rollout_steps)
        else:
            roll, opponent_ids, scores = self._collect(opponents)
        losses = self.optimise(roll.samples(cfg.gamma, cfg.gae_lambda))
        env_steps = n * cfg.rollout_steps
        self.total_steps += env_steps
        games, wins, draws = len(scores), int((scores == 1.0).sum()), int((scores == 0.5).sum())
        return UpdateStats(env_steps, games, wins, draws, games - wins - draws, *losses,
                           time.perf_counter() - start, opponent_ids, scores)

    def _collect(self, opponents: list[Policy]) -> tuple[Rollout, np.ndarray, np.ndarray]:
        """The numpy-core rollout (the CPU default: faster there than the torch core), as
        :meth:`agents.trainers.selfplay_device.DeviceSelfPlayBoards.collect` returns it."""
        n, steps = self.cfg.num_envs, self.cfg.rollout_steps
        obs_buf = torch.zeros((steps, n, *self.core.obs_shape))
        mask_buf = torch.zeros((steps, n, self.core.num_actions), dtype=torch.bool)
        act_buf = torch.zeros((steps, n), dtype=torch.long)
        logp_buf, val_buf = torch.zeros((steps, n)), torch.zeros((steps, n))
        rew_buf, done_buf = torch.zeros((steps, n)), torch.zeros((steps, n))
        result_opps, result_scores = [], []
        for t in range(steps):
            ended = self._opponents_move(opponents)
            self._reset_finished(ended)  # boards the opponent just finished restart
            ended2 = self._opponents_move(opponents)  # new games where the opponent starts
            self._reset_finished(ended2)
            rows = np.arange(n)
            obs, mask = self.core.observe(self.batch, rows)
            o, m = torch.as_tensor(obs, dtype=torch.float32), torch.as_tensor(mask)
            with torch.no_grad():
                dist, value = self.model(o, m)
                action = dist.sample()
            obs_buf[t], mask_buf[t], act_buf[t] = o, m, action
            logp_buf[t], val_buf[t] = dist.log_prob(action), value
            self.core.play(self.batch, rows, action.numpy())
            # The opponent replies now so the learner's reward for this move is known.
            self._opponents_move(opponents)
            finished = np.flatnonzero(self.batch.done)
            result = np.zeros(n, dtype=np.float32)
            win = self.batch.winner[finished]
            result[finished] = np.where(win < 0, 0.0, np.where(win == self.learner_seat[finished], 1.0, -1.0))
            rew_buf[t] = torch.as_tensor(result)
            done_buf[t] = torch.as_tensor(self.batch.done.astype(np.float32))
            result_opps.append(self.opponent[finished].copy())
            result_scores.append((result[finished] + 1.0) / 2.0)
            self._reset_finished(finished)
        with torch.no_grad():
            rows = np.arange(n)
            obs, mask = self.core.observe(self.batch, rows)
            _, next_value = self.model(torch.as_tensor(obs, dtype=torch.float32), torch.as_tensor(mask))
        return (Rollout(obs_buf, mask_buf, act_buf, logp_buf, val_buf, rew_buf, done_buf, next_value),
                np.concatenate(result_opps), np.concatenate(result_scores).astype(np.float64))

    def optimise(self, samples: Samples) -> tuple[float, float, float]:
        """PPO-clip epochs over one flattened rollout (:func:`agents.trainers.ppo_core.ppo_update`);
        returns the last (policy, value, entropy) losses."""
        return ppo_update(self.model, self.optim, samples, self.cfg)
