"""PPO self-play rollouts on a torch device: the boards, opponents and restarts of
:class:`agents.trainers.ppo_selfplay.SelfPlayPPO` without a host round trip per move.

The numpy rollout picks the boards where an opponent is to move and hands each
opponent its rows; here every board is stepped under an ``active`` mask, the opponents
answer through their device twins (:mod:`agents.device_policies`, the same per-game
random streams), and finished games restart in place. What the host still does, once
per update: draw the opponents of all the games that may start during it (a pool from
the caller's ``pick_opponents``, consumed on the device in board order), and read the
finished games' results for the league's win-rate tables. With several opponents, each
opponent move phase also asks the device how many boards each opponent has (one small
read) so that every opponent forwards only its own boards.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from agents.device_policies import DevicePolicy, to_device_policy
from agents.device_rng import DeviceMatchRng
from agents.policy import Policy
from agents.trainers.ppo_core import Rollout
from envs.device.boards import TorchBoards, make_torch_board_core


class DeviceSelfPlayBoards:
    """The learner's boards on ``device``: one game per board, the learner in one seat.

    Args:
        env_id: A two-player board game with a torch core.
        n: Boards.
        device: Where everything lives.
        seed: Seeds the device generator (seats, game seeds, the learner's samples).
        pick_opponents: ``k -> k`` opponent indices (host), drawn for games to come.
    """

    def __init__(self, env_id: str, n: int, device: torch.device, seed: int,
                 pick_opponents: Callable[[int], np.ndarray]) -> None:
        core = make_torch_board_core(env_id, device)
        if core is None:
            raise ValueError(f"{env_id} has no torch core; device self-play needs one")
        self.core, self.n, self.device = core, n, device
        self.gen = torch.Generator(device).manual_seed(seed)
        self.pick_opponents = pick_opponents
        self.boards = core.new_boards(n)
        self.learner_seat = self._randint(2, n)
        self.game_seed = self._randint(2**62, n)
        self.opponent = self._upload(pick_opponents(n))
        self._twins: dict[str, DevicePolicy] = {}

    def _randint(self, high: int, n: int) -> torch.Tensor:
        return torch.randint(0, high, (n,), generator=self.gen, device=self.device)

    def _upload(self, picks: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(picks, dtype=np.int64), device=self.device)

    def twins(self, opponents: list[Policy]) -> list[DevicePolicy]:
        """Device twins of this update's opponents (kept while they stay in the list)."""
        twins = {p.agent_id: self._twins.get(p.agent_id) or to_device_policy(p, self.device)
                 for p in opponents}
        self._twins = twins
        return [twins[p.agent_id] for p in opponents]

    def _opponents_move(self, opponents: list[DevicePolicy]) -> None:
        """Every board where an opponent is to move gets one opponent move."""
        b = self.boards
        active = ~b.done & (b.to_move != self.learner_seat)
        obs, mask = self.core.observe(b, torch.float32)
        actions = torch.zeros(self.n, dtype=torch.int64, device=self.device)
        key = torch.where(active, self.opponent, len(opponents))  # idle boards sort last
        order = torch.argsort(key, stable=True)
        counts = torch.bincount(key, minlength=len(opponents) + 1).tolist()  # one read
        for o, rows in enumerate(torch.split(order, counts)[:-1]):
            if len(rows):
                rng = DeviceMatchRng(self.game_seed[rows], b.to_move[rows], b.plies[rows])
                actions[rows], _ = opponents[o].act_device(obs[rows], mask[rows], rng)
        self.core.play(b, actions, active)

    def _restart(self, finished: torch.Tensor, pool: torch.Tensor, used: torch.Tensor) -> torch.Tensor:
        """New games on ``finished`` boards; opponents come from ``pool`` in board order."""
        self.boards.replace_where(finished, self.core.new_boards(self.n))
        nxt = used + torch.cumsum(finished, 0) - 1
        self.opponent = torch.where(finished, pool[nxt.clamp(0, len(pool) - 1)], self.opponent)
        self.learner_seat = torch.where(finished, self._randint(2, self.n), self.learner_seat)
        self.game_seed = torch.where(finished, self._randint(2**62, self.n), self.game_seed)
        return used + finished.sum()

    @torch.no_grad()
    def collect(self, model: nn.Module, opponents: list[Policy],
                steps: int) -> tuple[Rollout, np.ndarray, np.ndarray]:
        """Play ``steps`` learner moves on every board (opponents reply in between).

        Returns:
            The rollout, then the opponent index of every game finished in it and the
            learner's score in each (1 win, 0.5 draw, 0 loss).
        """
        twins = self.twins(opponents)
        n, core, dev = self.n, self.core, self.device
        pool = self._upload(self.pick_opponents(n * steps))
        used = torch.zeros((), dtype=torch.int64, device=dev)
        bufs = [torch.zeros((steps, n, *core.obs_shape), device=dev),
                torch.zeros((steps, n, core.num_actions), dtype=torch.bool, device=dev)]
        bufs += [torch.zeros((steps, n), dtype=torch.int64, device=dev)]
        bufs += [torch.zeros((steps, n), device=dev) for _ in range(4)]
        obs_b, mask_b, act_b, logp_b, val_b, rew_b, done_b = bufs
        opp_b = torch.zeros((steps, n), dtype=torch.int64, device=dev)
        for t in range(steps):
            self._opponents_move(twins)  # new games where the opponent starts
            obs, mask = core.observe(self.boards, torch.float32)
            dist, value = model(obs, mask)
            action = torch.multinomial(dist.probs, 1, generator=self.gen)[:, 0]
            obs_b[t], mask_b[t], act_b[t] = obs, mask, action
            logp_b[t], val_b[t] = dist.log_prob(action), value
            core.play(self.boards, action, ~self.boards.done)
            self._opponents_move(twins)  # the reply, so this move's reward is known
            rew_b[t], done_b[t] = _learner_result(self.boards, self.learner_seat), self.boards.done
            opp_b[t] = self.opponent
            used = self._restart(self.boards.done.clone(), pool, used)
        obs, mask = core.observe(self.boards, torch.float32)
        _, next_value = model(obs, mask)
        finished = done_b.cpu().numpy() > 0  # the one bulk read of the update
        results = rew_b.cpu().numpy()[finished]
        return (Rollout(obs_b, mask_b, act_b, logp_b, val_b, rew_b, done_b, next_value),
                opp_b.cpu().numpy()[finished], (results.astype(np.float64) + 1.0) / 2.0)


def _learner_result(boards: TorchBoards, learner_seat: torch.Tensor) -> torch.Tensor:
    """``(n,)`` float32: +1 learner won, -1 lost, 0 draw or not finished."""
    won = torch.where(boards.winner == learner_seat, 1.0, -1.0)
    return torch.where(boards.done & (boards.winner >= 0), won, 0.0)
