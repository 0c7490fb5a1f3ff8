"""PPO self-play for hide-and-seek teams, in one readable file.

CleanRL style: a ``@dataclass`` config with a docstring under each field, then the
loop top to bottom. Thousands of episodes of :class:`envs.hide_and_seek.core.HideAndSeekCore`
advance together; each update plays one whole episode (60 steps) in every env.

Parameters are shared within a team: one hider network drives both hiders, one seeker
network both seekers (the 493-dim observation already carries the role flags and the
agent's own position). Each team has a registry ``mlp`` actor - the exported agent, on
the agent's own observation - and a separate critic: ``critic="local"`` on the same
observation, ``"central"`` on it plus the episode's full state (the core's
``critic_state()``) and the agent's index. Masked actions get zero probability. Rewards are the env's own
team rewards (no shaping): +1 per post-preparation step for hiders when no seeker sees
a hider, -1 otherwise, the opposite for seekers. Seekers decide nothing during
preparation (only noop is legal), so their samples start when preparation ends.

Generations: every ``updates_per_generation`` updates both actors are frozen (weights
copied, never aliased) as the next generation; generation 0 is the untrained start.
A share of the envs pits each learning team against a uniformly drawn past generation
of the other team, so neither team only ever meets its current rival.

Tractability: OpenAI's hiders learned to block doors after millions of episodes; here
the budget is minutes on two CPUs, so the default training layout is a curriculum
(env options that leave ``hide_and_seek-v0``'s defaults alone): the 9x9 grid (a 3x3
room), always one door (``n_doors=1``), and the seekers starting right outside it
(``seekers_by_door``), so that an open door is punished from the first update (an
untrained seeker sees into an open room on 73% of the post-preparation steps, into a
blocked one on 13%). There is no reward shaping. Without ``seekers_by_door`` (26
settings tried, ~3.5M env steps each) hiders won without blocking (weak seekers rarely
looked in) and the block rate stayed <= 3.5%; ``box_by_door`` (a box starts next to the
door) is off because that box already shields the room: it took the block rate from
6.6% untrained to ~0%. With the defaults, one 10-minute run (seed 0, one CPU core, ~15k env
steps/s) went 0.4% -> 0% -> 3% (update 276) -> 14% -> 20% -> 25% -> 34% blocked, the
seekers having first won 99% of the games. The skill does not carry over to the
15x15 v0 layouts (<= 3%). The observation size is ``hide_and_seek-v0``'s, so every
checkpoint is a ``hide_and_seek-v0`` arena agent; ``size=15, n_doors=None,
seekers_by_door=False`` trains on the registered layouts themselves.

Door blocking is measured with ``core.door_block_status(locked=False)``: every door
held a box when preparation ended, locked or not. Locking is the later refinement
against seekers who learned to pull boxes away; it is reported beside, not required.

``env_id="hide_and_seek-v1"`` trains on v1 (ramps; :class:`envs.hide_and_seek.core_v1.HideAndSeekV1Core`
on the CPU, :class:`envs.hide_and_seek.device.core_v1.TorchHideAndSeekV1Core` on a GPU) with
optional reward shaping (:mod:`agents.trainers.hide_and_seek.shaping`: fort, fort
potential, ramp defense and ramp use bonuses); the defaults (0) are the game's own
rewards. The collected samples go through the shared PPO update
(:mod:`agents.trainers.ppo_core`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from agents.checkpoint import load_optimizer_tensors, optimizer_tensors, save_checkpoint
from agents.checkpoint_spec import make_spec
from agents.nets import build_net
from agents.neural import resolve_device
from agents.trainers.hide_and_seek.episodes import (
    DeviceEpisodes,
    HostEpisodes,
    TrainingEpisodes,
    host_phases,
    stages,
)
from agents.trainers.hide_and_seek.shaping import Shaping
from agents.trainers.ppo_core import (
    ILLEGAL_LOGIT,
    PRECISIONS,
    LogitsCategorical,
    PPOSettings,
    Rollout,
    masked_logits,
    masked_sample,
    matmul_dtype,
    ppo_update,
    resolve_precision,
)
from envs.hide_and_seek.compiled_v1 import v1_core
from envs.hide_and_seek.config import HideAndSeekConfig, HideAndSeekV1Config
from envs.hide_and_seek.core import HideAndSeekCore
from envs.hide_and_seek.device.core import TorchHideAndSeekCore
from envs.hide_and_seek.device.core_v1 import TorchHideAndSeekV1Core
from envs.hide_and_seek.rules import NUM_ACTIONS, ROLES

log = logging.getLogger(__name__)

ENV_IDS = ("hide_and_seek-v0", "hide_and_seek-v1")
CRITICS = ("local", "central")
StateDict = dict[str, torch.Tensor]
Opponent = int | str
"""A past opponent: a main generation (its index), or an exploiter snapshot (``x<j>``)."""


@dataclass
class HideAndSeekPPOConfig(PPOSettings):
    """Hyper-parameters of hide-and-seek PPO self-play (the update's: :class:`agents.trainers.ppo_core.PPOSettings`)."""

    num_envs: int = 256
    """episodes played at once; every update plays one whole episode in each"""
    size: int = 9
    """grid side of the training layouts (hide_and_seek-v0 is 15; 9 is the curriculum)"""
    n_doors: int | None = 1
    """doors of the hiders' room: 1 (curriculum), 2, or None (one or two, as v0)"""
    box_by_door: bool = False
    """curriculum: a box starts in the room next to the door"""
    seekers_by_door: bool = True
    """curriculum: the seekers start outside next to the door, so an open door is punished"""
    hidden: list[int] = field(default_factory=lambda: [64, 64])
    """hidden layers of every actor and critic (the actors are the registry's ``mlp``)"""
    epochs: int = 2
    """passes over each rollout"""
    minibatches: int = 6
    """minibatches per pass over each team's samples (split as evenly as they divide; with
    the defaults about 4,600 hider and 2,800 seeker samples each)"""
    updates_per_generation: int = 10
    """updates between two frozen generations"""
    past_opponent_share: float = 0.2
    """share of envs where a learning team meets a uniformly drawn past generation"""
    seed: int = 0
    """seeds torch (init, sampling) and the layout draws"""
    device: str = "cpu"
    """where models, episodes and updates run: ``cpu``, ``cuda`` or ``auto``; off the CPU the
    episodes step in the torch core (:class:`envs.hide_and_seek.device.core.TorchHideAndSeekCore`)"""
    torch_core: bool = False
    """on ``cpu``, step episodes in the torch core as on a GPU (for checking that path)"""
    layout_bank: int = 0
    """torch core only: 0 draws every episode's layout on the host (as the numpy core does);
    k > 0 draws k layouts once and lets episodes pick among them on the device"""
    env_id: str = "hide_and_seek-v0"
    """``hide_and_seek-v0`` or ``hide_and_seek-v1`` (ramps; off the CPU its torch core)"""
    layout: str = "quadrant"
    """v1 only: ``quadrant`` (v1's standard) or ``random`` (v0's random rooms with a ramp)"""
    fort_bonus: float = 0.0
    """v1 shaping: hider reward at the end of preparation, times the share of doors holding a box"""
    fort_potential_bonus: float = 0.0
    """v1 shaping: in preparation, hiders get this times the step's rise of the core's
    ``fort_potential`` (boxes nearer the doors; 1 when every door holds a box)"""
    ramp_defense_bonus: float = 0.0
    """v1 shaping: hider reward at the end of preparation if every ramp is locked or in the room"""
    ramp_use_bonus: float = 0.0
    """v1 shaping: seeker reward in the step where ``ramp_use`` first happens in an episode"""
    core_backend: str = "compiled"
    """host v1 core (:func:`envs.hide_and_seek.compiled_v1.v1_core`): ``compiled`` (numba), or
    ``numpy``, the reference core the loop ran on before (kept for the benchmark's baseline)"""
    batched_values: bool = True
    """the critic's values of a rollout in one call after it (equal to calling it at every
    step: the weights do not change within a rollout); ``False``: one call per step, as the
    loop did before (the benchmark's baseline)"""
    lean_loop: bool = True
    """the same learning in fewer calls: each minibatch's gradients written by hand
    (:meth:`TeamModel.ppo_grads`, not autograd's graph) into flat buffers, clipped and stepped by
    one fused Adam call (:class:`agents.trainers.ppo_core.FlatAdam`); in the rollout, actions
    drawn as ``torch.multinomial`` draws them on the CPU, without its checks
    (``masked_sample(checked=False)``), the actors' bfloat16 first-layer weights cast once per
    rollout, and the rollout tensors (the critic's agent index written in once) reused from one
    update to the next. ``False``: as the loop did before (the benchmark's baseline)"""
    exploiters: int = 0
    """exploiters per role (AlphaStar's main exploiters): each plays its role in a block of envs
    of its own, always against the current learning team of the other role, and learns only
    there; a league freezes the winning ones into the mains' opponent pools
    (:mod:`arena.training.hide_and_seek.exploiters`)"""
    exploiter_share: float = 0.25
    """share of the envs the exploiters of both roles play in, split evenly among them"""
    critic: str = "local"
    """what each team's critic sees: ``local`` its agent's own observation (as the actor), or
    ``central`` that observation plus the full state of the episode (the core's
    ``critic_state()``: every agent, box, lock, ramp, door, the step and the walls) and the
    agent's index, as OpenAI's value functions did; the actor (the exported agent) sees its
    own observation either way"""
    precision: str = "fp32"
    """the networks' arithmetic in rollouts and updates: ``fp32``; ``bf16``, every network's first
    layer (nearly all of its arithmetic: 575 or 792 inputs) multiplies in bfloat16 and the
    rollout's observations are stored in bfloat16, while later layers, heads, values,
    log-probabilities, losses, weights and Adam stay float32 (:meth:`agents.nets.MLPNet.features`);
    or ``auto``, ``bf16`` on a CPU that multiplies bfloat16 in hardware
    (:func:`agents.trainers.ppo_core.bf16_matmul_units`). The exported actors are float32 either way."""

    def __post_init__(self) -> None:
        if self.critic not in CRITICS:
            raise ValueError(f"critic must be one of {CRITICS}, got {self.critic!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if not 0.0 < self.gamma < 1.0:
            raise ValueError(f"gamma must be in (0, 1), got {self.gamma}")
        if self.exploiters < 0 or not 0.0 < self.exploiter_share < 1.0:
            raise ValueError(f"need exploiters >= 0 and 0 < exploiter_share < 1, got {self.exploiters}, "
                             f"{self.exploiter_share}")
        if self.exploiters and not self.batched_values:
            raise ValueError("exploiters need batched_values (their critics value their own rows after the rollout)")

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> HideAndSeekPPOConfig:
        """A config saved with :func:`dataclasses.asdict`, also by an earlier version.

        A config saved before ``critic`` existed trained a ``local`` critic and keeps it.
        Earlier configs split each pass by ``minibatch_size`` (samples per step, so the count
        varied per team); it becomes the count that gives the hider team about that size.
        """
        saved = dict(saved)
        saved.setdefault("critic", "local")  # saved before there was a choice: its critic is local
        size = saved.pop("minibatch_size", None)
        if size is not None and "minibatches" not in saved:
            n = saved.get("num_envs", cls.num_envs)
            live = n - round(n * saved.get("past_opponent_share", cls.past_opponent_share) / 2)
            steps = 50 if saved.get("env_id", cls.env_id) == "hide_and_seek-v1" else 60
            saved["minibatches"] = max(1, math.ceil(live * steps * 2 / size))
        return cls(**saved)

    @property
    def shaped(self) -> bool:
        """Whether any shaping bonus is on (else the teams learn from the game's reward alone)."""
        return bool(self.fort_bonus or self.fort_potential_bonus or self.ramp_defense_bonus
                    or self.ramp_use_bonus)


def env_config(cfg: HideAndSeekPPOConfig, standard: bool = False) -> HideAndSeekConfig:
    """The env settings of ``cfg``'s training layouts (``standard``: the registered env's, v0's
    15x15 rooms or v1's 9x9 quadrant)."""
    if cfg.env_id not in ENV_IDS:
        raise ValueError(f"env_id must be one of {ENV_IDS}, got {cfg.env_id!r}")
    if cfg.env_id == "hide_and_seek-v1":
        return HideAndSeekV1Config() if standard else HideAndSeekV1Config(
            size=cfg.size, n_doors=cfg.n_doors, layout=cfg.layout, box_by_door=cfg.box_by_door)
    return HideAndSeekConfig() if standard else HideAndSeekConfig(
        size=cfg.size, n_doors=cfg.n_doors, box_by_door=cfg.box_by_door, seekers_by_door=cfg.seekers_by_door)


def make_core(
    cfg: HideAndSeekPPOConfig, n: int, standard: bool = False, device: torch.device | None = None,
) -> HideAndSeekCore | TorchHideAndSeekCore:
    """A core of ``n`` episodes on :func:`env_config`'s settings: numpy, or with a ``device`` the
    torch core there."""
    config = env_config(cfg, standard)
    v1 = isinstance(config, HideAndSeekV1Config)
    if device is not None:
        return (TorchHideAndSeekV1Core if v1 else TorchHideAndSeekCore)(n, config, device=device)
    return v1_core(n, config, backend=cfg.core_backend) if v1 else HideAndSeekCore(n, config)


def exploiter_rows(cfg: HideAndSeekPPOConfig) -> dict[str, list[slice]]:
    """Per role, the envs of each of its ``cfg.exploiters`` exploiters: equal blocks of
    ``exploiter_share`` of the envs together, after the past opponents' ``[0, 2k)``."""
    start = 2 * round(cfg.num_envs * cfg.past_opponent_share / 2)
    if not cfg.exploiters:
        return {role: [] for role in ROLES}
    size = max(1, round(cfg.num_envs * cfg.exploiter_share / (2 * cfg.exploiters)))
    if start + 2 * cfg.exploiters * size >= cfg.num_envs:
        raise ValueError(f"{cfg.num_envs} envs leave no self-play beside {2 * cfg.exploiters} exploiters of "
                         f"{size} envs each")
    blocks = [slice(start + j * size, start + (j + 1) * size) for j in range(2 * cfg.exploiters)]
    return {role: blocks[r * cfg.exploiters:(r + 1) * cfg.exploiters] for r, role in enumerate(ROLES)}


def team_rewards(rewards: np.ndarray) -> np.ndarray:
    """Hider team reward per env ``(n,)`` from per-agent rewards (seekers get minus it)."""
    return rewards[:, 0]


class TeamModel(nn.Module):
    """One team's registry actor (exported as the agent) plus a separate critic.

    The input row is the agent's observation (``obs_dim``), followed for a centralized
    critic by ``critic_dim`` more features (the full state and the agent's index): the
    actor reads the observation only, the critic the whole row.
    """

    def __init__(self, obs_dim: int, hidden: list[int], critic_dim: int = 0,
                 matmul_dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.obs_dim = obs_dim
        self.matmul_dtype = matmul_dtype
        """the first layers' matrix products in this type (``None``: float32; :data:`PRECISIONS`)"""
        self.actor = build_net("mlp", {"hidden": hidden}, (obs_dim,), NUM_ACTIONS)
        self.critic = build_net("mlp", {"hidden": hidden}, (obs_dim + critic_dim,), 1)

    def forward(self, row: torch.Tensor, mask: torch.Tensor):
        logits = masked_logits(self.actor(row[..., :self.obs_dim], self.matmul_dtype), mask)
        return LogitsCategorical(logits), self.critic(row, self.matmul_dtype).squeeze(-1)

    @torch.no_grad()
    def ppo_grads(self, row: torch.Tensor, mask: torch.Tensor, act: torch.Tensor, old_logp: torch.Tensor,
                  adv: torch.Tensor, ret: torch.Tensor, s: PPOSettings) -> tuple[torch.Tensor, ...]:
        """One minibatch of :func:`agents.trainers.ppo_core.ppo_update`'s loss, differentiated by hand:
        writes every parameter's ``.grad`` (as ``loss.backward()`` from zero gradients would, up to
        rounding) and returns ``(policy loss, value loss, entropy)``. ``adv``: already normalised.

        The same forward as :meth:`forward` (the first layers in ``matmul_dtype``, their weight
        gradients rounded to it as autograd's are); the backward of the clipped surrogate is
        ``-adv * ratio`` where it is the larger term (both are equal inside the clip range,
        where autograd splits the gradient between them), the entropy's ``p (log p + 1)``. About
        sixty tensor calls per minibatch instead of autograd's graph of some two hundred."""
        n = row.shape[0]
        # the policy's terms action-major, (actions, n): a softmax over 7 actions along rows of n
        # runs about 4x faster than along the last axis of (n, 7), and so do the sums below
        acts, logits = self._mlp(self.actor, row[:, :self.obs_dim], head_t=True)
        vacts, value = self._mlp(self.critic, row)
        value = value.squeeze(-1)
        illegal = mask.t().contiguous().logical_not_()
        lp = torch.log_softmax(logits.masked_fill_(illegal, ILLEGAL_LOGIT), 0)
        logp = lp.gather(0, act[None, :]).squeeze(0)
        ratio = (logp - old_logp).exp_()
        neg = -adv
        surr1, surr2 = neg * ratio, neg * ratio.clamp(1 - s.clip, 1 + s.clip)
        pg = torch.maximum(surr1, surr2).mean()
        diff = value - ret
        vloss = 0.5 * (diff * diff).mean()
        probs = lp.exp()
        ent = -(probs * lp).sum(0).mean()
        # d loss / d log-probabilities: the entropy bonus's, then the surrogate's at the taken actions
        grad_lp = probs * (lp + 1.0)
        grad_lp *= s.ent_coef / n
        grad_lp.scatter_add_(0, act[None, :], torch.where(surr1 >= surr2, surr1, 0.0)[None, :].div_(n))
        grad_logits = grad_lp - probs * grad_lp.sum(0, keepdim=True)
        grad_logits.masked_fill_(illegal, 0.0)
        self._mlp_backward(self.actor, row[:, :self.obs_dim], acts, grad_logits, head_t=True)
        self._mlp_backward(self.critic, row, vacts, (diff * (s.vf_coef / n))[:, None])
        return pg, vloss, ent

    def _mlp(self, net: nn.Module, x: torch.Tensor, head_t: bool = False) -> tuple[list[torch.Tensor], torch.Tensor]:
        """``net(x, matmul_dtype)`` (:meth:`agents.nets.MLPNet.features` and its head), keeping every
        hidden activation for :meth:`_mlp_backward`; ReLU networks only. ``head_t``: the head's output
        transposed, ``(outputs, n)`` and contiguous."""
        first, *rest = net.trunk
        if self.matmul_dtype is None:
            h = nn.functional.linear(x, first.weight, first.bias)
        else:
            dt = self.matmul_dtype
            h = nn.functional.linear(x.to(dt), first.weight.to(dt), first.bias.to(dt)).float()
        acts = [h.relu_()]
        for layer in rest:
            acts.append(nn.functional.linear(acts[-1], layer.weight, layer.bias).relu_())
        if head_t:
            return acts, torch.addmm(net.head.bias[:, None], net.head.weight, acts[-1].t())
        return acts, nn.functional.linear(acts[-1], net.head.weight, net.head.bias)

    def _mlp_backward(self, net: nn.Module, x: torch.Tensor, acts: list[torch.Tensor], grad: torch.Tensor,
                      head_t: bool = False) -> None:
        """Write the gradients of ``net``'s parameters given ``grad``, the loss's gradient at its output
        (``head_t``: transposed, ``(outputs, n)``, as :meth:`_mlp` gives it)."""
        layers = [*net.trunk, net.head]
        for i in range(len(layers) - 1, 0, -1):
            layer, h = layers[i], acts[i - 1]
            if head_t and i == len(layers) - 1:
                torch.mm(grad, h, out=layer.weight.grad)
                torch.sum(grad, 1, out=layer.bias.grad)
                back = torch.mm(grad.t(), layer.weight)
            else:
                torch.mm(grad.t(), h, out=layer.weight.grad)
                torch.sum(grad, 0, out=layer.bias.grad)
                # an (n, 1) gradient (the critic's head) times the weight is an outer product: no matrix product
                back = grad * layer.weight if grad.shape[1] == 1 else torch.mm(grad, layer.weight)
            grad = torch.ops.aten.threshold_backward(back, h, 0.0)  # ReLU's backward, as autograd's
        first = layers[0]
        if self.matmul_dtype is None:
            torch.mm(grad.t(), x, out=first.weight.grad)
            torch.sum(grad, 0, out=first.bias.grad)
        else:
            grad = grad.to(self.matmul_dtype)
            first.weight.grad.copy_(torch.mm(grad.t(), x.to(self.matmul_dtype)))
            first.bias.grad.copy_(grad.sum(0))


@dataclass
class UpdateStats:
    """What one update did."""

    env_steps: int
    hider_return: float
    door_block_rate: float
    losses: dict[str, tuple[float, float, float]]
    seconds: float


class HideAndSeekPPO:
    """Trains one hider and one seeker network by PPO self-play on ``HideAndSeekCore``.

    Args:
        config: PPO settings.
    """

    def __init__(self, config: HideAndSeekPPOConfig) -> None:
        self.cfg = cfg = config
        torch.manual_seed(cfg.seed)
        self.device = resolve_device(cfg.device)
        self.precision = resolve_precision(cfg.precision, self.device)
        """``fp32`` or ``bf16``: what ``cfg.precision`` means on this device"""
        self.matmul_dtype = matmul_dtype(self.precision)
        """what the networks' first layers multiply in (``None``: float32)"""
        self.rng = np.random.default_rng(cfg.seed)
        if self.device.type != "cpu" or cfg.torch_core:
            core = make_core(cfg, cfg.num_envs, device=self.device)
            self.envs = DeviceEpisodes(cfg.num_envs, self.device, cfg.layout_bank, self.rng, core)
        else:
            self.envs = HostEpisodes(cfg.num_envs, self.rng, make_core(cfg, cfg.num_envs), self.device)
        self.core = self.envs.core
        self.obs_dim = self.core.obs_dim
        self.shaping = Shaping(cfg, self.core)
        """the optional bonuses (:mod:`agents.trainers.hide_and_seek.shaping`)"""
        self.critic_dim = 0
        """features the critic sees beyond the observation (0: ``local``)"""
        if cfg.critic == "central":
            self.critic_dim = self.envs.critic_state().shape[-1] + self.core.n_agents
        self.models = {role: TeamModel(self.obs_dim, cfg.hidden, self.critic_dim, self.matmul_dtype).to(self.device)
                       for role in ROLES}
        self.optims = {
            role: self._adam(m)
            for role, m in self.models.items()
        }
        self.gen = torch.Generator(self.device).manual_seed(cfg.seed)
        self.exploiter_rows = exploiter_rows(cfg)
        """per role, the envs where each of its exploiters plays it"""
        self.exploiters = {role: [self._copy_of_main(role) for _ in rows] for role, rows in self.exploiter_rows.items()}
        """per role, the exploiters' models (each starts as a copy of the main's)"""
        self.exploiter_optims = {role: [self._adam(x) for x in models] for role, models in self.exploiters.items()}
        self.exploiter_snapshots: dict[str, list[StateDict]] = {role: [] for role in ROLES}
        """per role, the frozen exploiter actors the mains may meet (opponent keys ``x<j>``)"""
        self.generations: list[dict[str, StateDict]] = []
        self._frozen: dict[tuple[Opponent, str, str], nn.Module] = {}
        self.total_steps = 0
        self.updates = 0
        self.pick_opponent: Callable[[str], Opponent] | None = None
        """a league's choice of the past generation (or exploiter snapshot, ``x<j>``) whose
        ``role`` actor is the past opponent of the other team (default: uniform over the
        frozen generations)"""
        self.last_plan: dict[str, tuple[slice, Opponent] | None] = {}
        self.last_returns = np.zeros(0)
        self.last_episodes: TrainingEpisodes | None = None
        """what the last update's episodes showed (phase detectors, outcomes, starts)"""
        self._buffers: dict[str, Rollout] = {}
        """``lean_loop``: each team's rollout tensors, written again by the next rollout (a
        :class:`Rollout` that :meth:`_rollout` returned is valid until the next one)"""
        self.freeze()  # generation 0: the untrained start

    # -- resumable state ---------------------------------------------------------------
    def _learners(self):
        """``(tensor prefix, model, optimiser)`` of everything that learns: each team's model
        (``hider``, ``seeker``), then its exploiters (``exploiter.<role>.<i>``)."""
        for role in ROLES:
            yield role, self.models[role], self.optims[role]
            for i, x in enumerate(self.exploiters[role]):
                yield f"exploiter.{role}.{i}", x, self.exploiter_optims[role][i]

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Every learner's model and Adam moments (``<role>.model.*``, ``<role>.optim.*``; an
        exploiter's under ``exploiter.<role>.<i>``) and the torch random streams (``torch_gen``,
        ``torch_rng``), as plain tensors."""
        tensors = {"torch_gen": self.gen.get_state().cpu(), "torch_rng": torch.get_rng_state()}
        for name, model, optim in self._learners():
            tensors |= {f"{name}.model.{k}": v.detach().to("cpu", copy=True).contiguous()
                        for k, v in model.state_dict().items()}
            tensors |= optimizer_tensors(optim, prefix=f"{name}.optim")
        return tensors

    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Inverse of :meth:`state_tensors`."""
        for name, model, optim in self._learners():
            prefix = f"{name}.model."
            model.load_state_dict({k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)})
            load_optimizer_tensors(optim, tensors, prefix=f"{name}.optim")
        self.gen.set_state(tensors["torch_gen"])
        torch.set_rng_state(tensors["torch_rng"])

    def counters(self) -> dict[str, Any]:
        """JSON-able counters and the layout stream: ``updates``, ``total_steps``, ``rng``."""
        return {"updates": self.updates, "total_steps": self.total_steps, "rng": self.rng.bit_generator.state}

    def load_counters(self, counters: dict[str, Any]) -> None:
        """Inverse of :meth:`counters`."""
        self.updates, self.total_steps = counters["updates"], counters["total_steps"]
        self.rng.bit_generator.state = counters["rng"]

    def load_generations(self, generations: list[dict[str, StateDict]]) -> None:
        """Replace the frozen generations (e.g. read back from a snapshot pool)."""
        self.generations = list(generations)
        self._frozen.clear()

    # -- generations -----------------------------------------------------------------
    def freeze(self) -> int:
        """Freeze both actors as the next generation (weights copied); returns its index."""
        snap = {
            role: {k: v.detach().to("cpu", copy=True) for k, v in m.actor.state_dict().items()}
            for role, m in self.models.items()
        }
        self.generations.append(snap)
        return len(self.generations) - 1

    def frozen_actor(self, generation: Opponent, role: str, device: str | torch.device = "cpu") -> nn.Module:
        """The frozen actor of ``role`` in ``generation`` (or exploiter snapshot ``x<j>``) on
        ``device`` (built once, then cached)."""
        key = (generation, role, str(device))
        if key not in self._frozen:
            net = build_net("mlp", {"hidden": self.cfg.hidden}, (self.obs_dim,), NUM_ACTIONS)
            net.load_state_dict(self.generations[generation][role] if isinstance(generation, int)
                                else self.exploiter_snapshots[role][int(generation[1:])])
            self._frozen[key] = net.to(device).eval().requires_grad_(False)
        return self._frozen[key]

    # -- exploiters ------------------------------------------------------------------
    def _adam(self, model: nn.Module) -> torch.optim.Adam:
        """A model's optimiser (every team model's, the exploiters' too): Adam's fused kernel, one
        call per step for all parameters (the per-tensor loop took a fifth of an update on a CPU)."""
        return torch.optim.Adam(model.parameters(), lr=self.cfg.lr, eps=1e-5, fused=True)

    def _copy_of_main(self, role: str) -> TeamModel:
        model = TeamModel(self.obs_dim, self.cfg.hidden, self.critic_dim, self.matmul_dtype).to(self.device)
        model.load_state_dict(self.models[role].state_dict())
        return model

    def reset_exploiter(self, role: str, i: int) -> None:
        """Exploiter ``i`` of ``role`` starts again from the main's weights (actor and critic), with a
        fresh optimiser."""
        self.exploiters[role][i].load_state_dict(self.models[role].state_dict())
        self.exploiter_optims[role][i] = self._adam(self.exploiters[role][i])

    def snapshot_exploiter(self, role: str, i: int) -> str:
        """Freeze exploiter ``i`` of ``role``'s actor (weights copied) as an opponent of the mains;
        its opponent key ``x<j>``."""
        actor = self.exploiters[role][i].actor
        self.exploiter_snapshots[role].append({k: v.detach().to("cpu", copy=True)
                                               for k, v in actor.state_dict().items()})
        return f"x{len(self.exploiter_snapshots[role]) - 1}"

    def save_generation(self, generation: int, out_dir: str | Path) -> dict[str, Path]:
        """Write ``gen_XXX/{hider,seeker}.safetensors`` (+ ``.json`` specs) under ``out_dir``."""
        paths = {}
        for role in ROLES:
            spec = make_spec(self.cfg.env_id, "mlp", {"hidden": self.cfg.hidden}, role=role,
                             name=f"hs-{role}-gen{generation}")
            path = Path(out_dir) / f"gen_{generation:03d}" / role
            paths[role] = save_checkpoint(self.generations[generation][role], spec, path)
        return paths

    # -- one update ------------------------------------------------------------------
    def _opponent_plan(self) -> dict[str, tuple[slice, int] | None]:
        """Envs where each team's *opponent* is a past generation, and which one."""
        n, share = self.cfg.num_envs, self.cfg.past_opponent_share
        k = round(n * share / 2)
        if k == 0:
            return {role: None for role in ROLES}
        if self.pick_opponent is None:
            past = self.rng.integers(len(self.generations), size=2).tolist()
        else:
            past = [self.pick_opponent("seeker"), self.pick_opponent("hider")]
        # Hiders learn against past seekers in envs [0, k); seekers against past hiders in [k, 2k).
        return {"seeker": (slice(0, k), past[0]), "hider": (slice(k, 2 * k), past[1])}

    @torch.no_grad()
    def _rollout(self) -> tuple[dict[str, Rollout], np.ndarray, float]:
        """Play one whole episode in every env; returns samples, hider returns, door rate."""
        core, n, dev = self.core, self.cfg.num_envs, self.device
        steps, prep = core.max_steps, core.prep_steps
        obs, mask = self.envs.reset()
        plan = self._opponent_plan()
        obs_dtype = self.matmul_dtype or torch.float32  # what the first layers read
        first = {"hider": 0, "seeker": prep}  # seekers decide nothing during preparation
        lean = self.cfg.lean_loop
        buf = {}  # each team's samples, (steps, n_envs, 2, ...): whole episodes, nothing to bootstrap
        for role in ROLES:  # every entry is written below (empty: no zeroing of ~40 MB per update)
            t_len = steps - first[role]
            shape = (t_len, n, 2)
            kept = self._buffers.get(role) if lean else None
            if kept is not None and kept.obs.shape[:3] == shape and kept.obs.dtype == obs_dtype:
                # the lean loop reuses the last rollout's tensors: fresh ones cost ~8,000 page faults per update
                buf[role] = Rollout(obs=kept.obs, mask=kept.mask, act=kept.act, logp=kept.logp,
                                    val=torch.empty(shape, device=dev), rew=kept.rew)
                continue
            buf[role] = Rollout(
                obs=torch.empty((*shape, self.obs_dim + self.critic_dim), device=dev, dtype=obs_dtype),
                mask=torch.empty((*shape, NUM_ACTIONS), dtype=torch.bool, device=dev),
                act=torch.empty(shape, dtype=torch.long, device=dev),
                logp=torch.empty(shape, device=dev),
                val=torch.empty(shape, device=dev),
                rew=torch.empty(shape, device=dev),
            )
            if lean and self.critic_dim:  # the agent index, the same at every step: written once
                total = core.n_agents
                team = ROLES.index(role)
                buf[role].obs[..., -total:] = torch.eye(total, dtype=obs_dtype, device=dev)[2 * team:2 * team + 2]
            if lean:
                self._buffers[role] = buf[role]
        weights: dict[nn.Module, tuple[torch.Tensor, torch.Tensor]] | None = {} if lean else None
        returns = torch.zeros(n, device=dev)
        self.shaping.start(dev)
        for t in range(steps):
            actions = torch.zeros((n, 4), dtype=torch.long, device=dev)
            state = self.envs.critic_state() if self.critic_dim else None
            for team, role in enumerate(ROLES):
                cols = slice(2 * team, 2 * team + 2)
                if t < first[role]:
                    continue  # frozen seekers: noop
                b, i = buf[role], t - first[role]
                o = self.critic_rows(obs, state, cols, b.obs[i], index=not lean)[..., :self.obs_dim]  # actors read it
                m = b.mask[i] = mask[:, cols]
                model = self.models[role]
                act, logp = masked_sample(self._logits(model.actor, o.reshape(-1, self.obs_dim), weights),
                                          m.reshape(-1, NUM_ACTIONS), self.gen, checked=not lean)
                act, logp = act.view(n, 2), logp.view(n, 2)
                if plan[role] is not None:
                    rows, g = plan[role]
                    past = self.frozen_actor(g, role, dev)
                    sub, _ = masked_sample(self._logits(past, o[rows].reshape(-1, self.obs_dim), weights),
                                           m[rows].reshape(-1, NUM_ACTIONS), self.gen, checked=not lean)
                    act[rows] = sub.view(-1, 2)
                for x, rows in zip(self.exploiters[role], self.exploiter_rows[role], strict=True):
                    sub, sub_logp = masked_sample(self._logits(x.actor, o[rows].reshape(-1, self.obs_dim), weights),
                                                  m[rows].reshape(-1, NUM_ACTIONS), self.gen, checked=not lean)
                    act[rows], logp[rows] = sub.view(-1, 2), sub_logp.view(-1, 2)
                b.act[i], b.logp[i] = act, logp
                if not self.cfg.batched_values:
                    b.val[i] = model.critic(b.obs[i].reshape(n * 2, -1), self.matmul_dtype).view(n, 2)
                actions[:, cols] = act
            obs, rewards, mask = self.envs.step(actions)
            r = team_rewards(rewards)
            returns += r
            hider_r, seeker_r = self.shaping.rewards(t, r, -r)
            buf["hider"].rew[t] = hider_r[:, None]
            if t >= prep:
                buf["seeker"].rew[t - prep] = seeker_r[:, None]
        if self.cfg.batched_values:  # the weights did not change: one call gives every step's values
            for role in ROLES:
                b = buf[role]
                critic = self.models[role].critic
                b.val = critic(b.obs.reshape(-1, b.obs.shape[-1]), self.matmul_dtype).view(b.val.shape)
                for x, rows in zip(self.exploiters[role], self.exploiter_rows[role], strict=True):
                    seen = b.obs[:, rows]
                    b.val[:, rows] = x.critic(seen.reshape(-1, seen.shape[-1]), self.matmul_dtype).view(seen.shape[:3])
        self.last_plan, self.last_returns = plan, returns.cpu().numpy().astype(np.float64)
        blocked = self.envs.door_blocked()
        self.last_episodes = TrainingEpisodes(host_phases(self.core), self.last_returns, blocked,
                                              *stages(self.core, self.envs.seeds), plan, self.exploiter_rows)
        return buf, self.last_returns, float(blocked.mean())

    def critic_rows(self, obs: torch.Tensor, state: torch.Tensor | None, agents: slice,
                    out: torch.Tensor, index: bool = True) -> torch.Tensor:
        """Write what the critics of ``agents`` see into ``out`` (``(n, len(agents), obs_dim +
        critic_dim)``, in its dtype) and return it: each agent's observation from ``obs`` (``(n,
        all agents, obs_dim)``), then (``central``) the episode's full ``state`` (``(n, d)``,
        :meth:`HostEpisodes.critic_state`) and the agent's one-hot index among all agents
        (``index=False``: already there)."""
        out[..., :self.obs_dim] = obs[:, agents]
        if self.critic_dim:
            total = obs.shape[1]
            out[..., self.obs_dim:-total] = state[:, None]
            if index:
                out[..., -total:] = torch.eye(total, dtype=out.dtype, device=out.device)[agents]
        return out

    def _logits(self, actor: nn.Module, obs: torch.Tensor,
                weights: dict[nn.Module, tuple[torch.Tensor, torch.Tensor]] | None) -> torch.Tensor:
        """``actor(obs, matmul_dtype)``; with a ``weights`` cache (a rollout's: the weights do not
        change within it) the first layer's weight and bias are cast to ``matmul_dtype`` once per
        rollout instead of per call (the same arithmetic as :meth:`agents.nets.MLPNet.features`)."""
        dtype = self.matmul_dtype
        if weights is None or dtype is None:
            return actor(obs, dtype)
        first, *rest = actor.trunk
        if actor not in weights:
            weights[actor] = first.weight.to(dtype), first.bias.to(dtype)
        x = actor._act(nn.functional.linear(obs.to(dtype), *weights[actor]).float())
        for layer in rest:
            x = actor._act(layer(x))
        return actor.head(x)

    @property
    def transitions_per_update(self) -> int:
        """Agent steps each update plays: ``num_envs x max_steps x agents`` (the frozen seekers'
        preparation steps and the past opponents' included)."""
        return self.cfg.num_envs * self.core.max_steps * self.core.n_agents

    def update(self) -> UpdateStats:
        """Play one episode per env, then optimise both teams on their own samples."""
        start = time.perf_counter()
        buf, returns, door = self._rollout()
        losses = {role: self._optimise(role, buf[role]) for role in ROLES}
        for role in ROLES:
            for i, rows in enumerate(self.exploiter_rows[role]):
                live = torch.zeros(self.cfg.num_envs, dtype=torch.bool, device=self.device)
                live[rows] = True
                losses[f"{role}-exploiter-{i}"] = self._learn(self.exploiters[role][i], self.exploiter_optims[role][i],
                                                              buf[role], live)
        env_steps = self.cfg.num_envs * self.core.max_steps
        self.total_steps += env_steps
        self.updates += 1
        return UpdateStats(env_steps, float(returns.mean()), door, losses,
                           time.perf_counter() - start)

    def _optimise(self, role: str, b: Rollout) -> tuple[float, float, float]:
        """PPO epochs (:func:`agents.trainers.ppo_core.ppo_update`) on ``role``'s samples from
        the envs where it learns (not those where a past generation or one of its exploiters
        played it; it does learn from its games against the other role's exploiters)."""
        live = torch.ones(b.act.shape[1], dtype=torch.bool, device=b.act.device)
        if self.last_plan[role] is not None:
            live[self.last_plan[role][0]] = False
        for rows in self.exploiter_rows[role]:
            live[rows] = False
        return self._learn(self.models[role], self.optims[role], b, live)

    def _learn(self, model: TeamModel, optim: torch.optim.Optimizer, b: Rollout,
               live: torch.Tensor) -> tuple[float, float, float]:
        """PPO epochs of ``model`` on the samples of the ``live`` envs of ``b``."""
        samples = b.samples(self.cfg.gamma, self.cfg.gae_lambda, keep=live[None, :, None], copy=False)
        return ppo_update(model, optim, samples, self.cfg, self.gen, flat=self.cfg.lean_loop)
