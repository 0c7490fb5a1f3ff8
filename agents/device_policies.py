"""Policies that answer on the device: the torch twin of the batched Policy interface.

A device policy answers a batch of decisions without leaving the device::

    actions, invalid = policy.act_device(obs, mask, rng)

``obs`` is ``(k, *obs_shape)`` float32 on the device, ``mask`` ``(k, A)`` bool and
``rng`` a :class:`~agents.device_rng.DeviceMatchRng`. It returns ``(k,)`` int64
actions (``-1`` where a row has no legal action) and ``(k,)`` bool flags of rows whose
output was invalid (non-finite logits), which the engine scores as ``invalid_output``.

Arena's own policies have device twins that draw the same random numbers from the same
streams and make the same arithmetic, so for the same match they choose the same
actions as on the numpy path (a network's logits agree up to float rounding, see
:mod:`agents.neural`): :func:`to_device_policy` converts a ``NeuralPolicy``, ``random``
and the ``heuristic`` baselines (any epsilon). Anything else stays on the CPU path.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch
from torch import nn

from agents.baselines import (
    C4_CENTRALITY,
    TTT_PREFERENCE,
    HeuristicConnectFour,
    HeuristicTicTacToe,
    RandomPolicy,
)
from agents.device_rng import DeviceMatchRng
from agents.nets import build_net
from agents.neural import NeuralPolicy
from envs.device.boards import TorchBoardCore, TorchConnectFour, TorchTicTacToe


@runtime_checkable
class DevicePolicy(Protocol):
    """Anything that answers a batch of decisions on the device (see the module docstring)."""

    agent_id: str
    weights_hash: str | None

    def act_device(
        self, obs: torch.Tensor, mask: torch.Tensor, rng: DeviceMatchRng
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(k,)`` int64 actions and ``(k,)`` bool invalid-output flags."""
        ...


def _no_invalid(mask: torch.Tensor) -> torch.Tensor:
    return torch.zeros(len(mask), dtype=torch.bool, device=mask.device)


class DeviceNeuralPolicy:
    """A frozen registry network sampling on its device, like :class:`NeuralPolicy`.

    Args:
        net: The network (moved to ``device``; not copied, so pass a frozen one).
        agent_id, weights_hash: As the ``NeuralPolicy`` it came from.
        obs_shape: Observation shape of one decision.
        num_actions: Logits per decision.
        temperature: Softmax temperature; ``0`` is greedy argmax.
        device: Where the forward runs.
    """

    def __init__(self, net: nn.Module, agent_id: str, weights_hash: str | None,
                 obs_shape: tuple[int, ...], num_actions: int, temperature: float,
                 device: str | torch.device) -> None:
        self.agent_id, self.weights_hash, self.num_actions = agent_id, weights_hash, num_actions
        self.obs_shape, self.temperature = tuple(obs_shape), float(temperature)
        self.net = net.to(device).eval().requires_grad_(False)

    @classmethod
    def from_policy(cls, policy: NeuralPolicy, device: str | torch.device) -> DeviceNeuralPolicy:
        """The device twin of ``policy`` (its network shared if already on ``device``, else copied)."""
        device = torch.device(device)
        net = policy._net  # NeuralPolicy keeps its frozen module private
        if policy.device != device:
            spec = policy.spec
            copy = build_net(spec.arch, spec.hparams, spec.obs_shape, spec.num_actions)
            copy.load_state_dict(net.state_dict())
            net = copy
        spec = policy.spec
        return cls(net, policy.agent_id, policy.weights_hash, spec.obs_shape, spec.num_actions,
                   policy.temperature, device)

    def act_device(
        self, obs: torch.Tensor, mask: torch.Tensor, rng: DeviceMatchRng
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Gumbel-max sampling over legal actions with the rows' streams (float64, as on the CPU)."""
        k, n = len(mask), self.num_actions
        if tuple(mask.shape) != (k, n) or len(obs) != k or len(rng) != k:  # NeuralPolicy's checks
            raise ValueError(
                f"act got {len(obs)} observations, mask {tuple(mask.shape)} and {len(rng)} rng rows; "
                f"expected k rows each and mask (k, {n})"
            )
        if tuple(obs.shape[1:]) != self.obs_shape:
            raise ValueError(f"{self.agent_id} expects observations (k, "
                             f"{', '.join(map(str, self.obs_shape))}), got {tuple(obs.shape)}")
        with torch.inference_mode():
            logits = self.net(obs.to(torch.float32)).to(torch.float64)
        broken = ~torch.isfinite(logits).all(1)
        scores = logits
        if self.temperature > 0:
            scores = logits / self.temperature + rng.gumbel(logits.shape[1])
        actions = scores.masked_fill(~mask, -torch.inf).argmax(1)
        return torch.where(mask.any(1), actions, -1), broken


class DeviceScriptedPolicy:
    """Epsilon-random exploration around a device ``choose`` (the scripted baselines' twin).

    Args:
        agent_id: The numpy policy's id.
        epsilon: Probability of a uniformly random legal move.
    """

    weights_hash: str | None = None

    def __init__(self, agent_id: str, epsilon: float) -> None:
        self.agent_id, self.epsilon = agent_id, float(epsilon)

    def act_device(
        self, obs: torch.Tensor, mask: torch.Tensor, rng: DeviceMatchRng
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # The draws happen in ScriptedPolicy.act's order: explore, random move, choose.
        explore = rng.uniform(1)[:, 0] < self.epsilon
        random_moves = rng.choice(mask)
        if self.epsilon >= 1.0:
            return random_moves, _no_invalid(mask)
        chosen = self.choose(obs, mask, rng)
        return torch.where(explore, random_moves, chosen), _no_invalid(mask)

    def choose(self, obs: torch.Tensor, mask: torch.Tensor, rng: DeviceMatchRng) -> torch.Tensor:
        raise NotImplementedError


class DeviceHeuristic(DeviceScriptedPolicy):
    """Win now, else block the opponent's immediate win, else a preferred move.

    Args:
        agent_id, epsilon: As the numpy heuristic.
        core: The game's torch core (for its winning-move test).
        preference: Weight of every action among the candidates.
        strict: Only the best-ranked legal actions are candidates (tictactoe's rule).
    """

    def __init__(self, agent_id: str, epsilon: float, core: TorchBoardCore,
                 preference: torch.Tensor, strict: bool) -> None:
        super().__init__(agent_id, epsilon)
        self.core, self.strict = core, strict
        self.preference = preference.to(core.device, torch.float64)

    def choose(self, obs: torch.Tensor, mask: torch.Tensor, rng: DeviceMatchRng) -> torch.Tensor:
        k = len(obs)
        own, opp = (obs[..., i].reshape(k, -1) > 0.5 for i in (0, 1))
        occupied = own | opp
        win_now = self.core.winning_moves(own, occupied) & mask
        must_block = self.core.winning_moves(opp, occupied) & mask
        legal, weights = mask, self.preference
        if self.strict:
            ranked = self.preference * mask
            legal = mask & (ranked == ranked.max(1, keepdim=True).values)
            weights = torch.ones_like(self.preference)
        has_win = win_now.any(1, keepdim=True)
        has_block = must_block.any(1, keepdim=True)
        candidates = torch.where(has_win, win_now, torch.where(has_block, must_block, legal))
        # agents.baselines._sample_preferred, same float64 arithmetic.
        cdf = torch.cumsum(candidates * weights, 1)
        u = rng.uniform(1) * cdf[:, -1:]
        return (cdf <= u).sum(1).clamp(0, mask.shape[1] - 1)


def to_device_policy(policy: object, device: str | torch.device) -> DevicePolicy:
    """The device twin of one of Arena's policies (a device policy is returned as it is).

    Raises:
        TypeError: ``policy`` has no device twin (the caller plays it on the CPU path).
    """
    device = torch.device(device)
    if isinstance(policy, NeuralPolicy):
        return DeviceNeuralPolicy.from_policy(policy, device)
    if isinstance(policy, RandomPolicy):
        return DeviceScriptedPolicy(policy.agent_id, 1.0)
    if isinstance(policy, HeuristicConnectFour):
        return DeviceHeuristic(policy.agent_id, policy.epsilon, TorchConnectFour(device),
                               torch.as_tensor(C4_CENTRALITY), strict=False)
    if isinstance(policy, HeuristicTicTacToe):
        return DeviceHeuristic(policy.agent_id, policy.epsilon, TorchTicTacToe(device),
                               torch.as_tensor(TTT_PREFERENCE), strict=True)
    if isinstance(policy, DevicePolicy):
        return policy
    raise TypeError(f"{getattr(policy, 'agent_id', policy)!r} has no device version")
