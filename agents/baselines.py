"""Scripted baselines: calibrated opponents of known strength.

Every baseline is batched and reads only what a learned policy sees (observation
planes and the action mask). ``epsilon`` makes a baseline play a uniformly random
legal move with that probability, which gives a ladder of opponents whose strength
is known in advance (``heuristic:epsilon=0.0`` ... ``heuristic:epsilon=1.0``).
"""

from __future__ import annotations

import numpy as np

from agents.policy import MatchRng
from envs.connect_four import winning_columns
from envs.tictactoe import winning_squares

# Connect Four: prefer central columns.
C4_CENTRALITY = np.array([1.0, 2.0, 3.0, 4.0, 3.0, 2.0, 1.0])
# Tic-Tac-Toe: centre, then corners, then edges.
TTT_PREFERENCE = np.array([2.0, 1.0, 2.0, 1.0, 3.0, 1.0, 2.0, 1.0, 2.0])


def _fmt(value: float) -> str:
    return f"{value:g}"


class ScriptedPolicy:
    """Common parts: id, no weights, epsilon-random exploration."""

    name = "scripted"
    weights_hash: str | None = None
    bounded_runtime = True  # vectorized numpy over a fixed-size board

    def __init__(self, epsilon: float = 0.0) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        self.epsilon = float(epsilon)

    @property
    def agent_id(self) -> str:
        return f"{self.name}:epsilon={_fmt(self.epsilon)}" if self.epsilon else self.name

    def act(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        mask = np.asarray(mask, dtype=bool)
        explore = rng.uniform(1)[:, 0] < self.epsilon
        random_moves = rng.choice(mask)
        if explore.all():
            return random_moves
        return np.where(explore, random_moves, self.choose(obs, mask, rng))

    def choose(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        raise NotImplementedError


class RandomPolicy(ScriptedPolicy):
    """Uniformly random legal moves (any env with a discrete action space)."""

    name = "random"

    def __init__(self) -> None:
        super().__init__(epsilon=1.0)

    @property
    def agent_id(self) -> str:
        return "random"


def _sample_preferred(candidates: np.ndarray, weights: np.ndarray, rng: MatchRng) -> np.ndarray:
    """Sample one candidate column per row, with probability proportional to ``weights``."""
    w = candidates * weights[None, :]
    cdf = np.cumsum(w, axis=1)
    total = cdf[:, -1:]
    u = rng.uniform(1) * total
    return (cdf <= u).sum(axis=1).clip(0, candidates.shape[1] - 1)


def _win_block_prefer(obs, mask, winning, legal, preference, rng) -> np.ndarray:
    """Win now if possible, else block the opponent's immediate win, else prefer among ``legal``.

    ``winning(own, occupied)``: the moves that complete a line of ``own`` pieces (the board's rule).
    """
    own, opp = obs[..., 0].astype(bool), obs[..., 1].astype(bool)
    occupied = own | opp
    win_now = winning(own, occupied) & mask
    must_block = winning(opp, occupied) & mask
    has_win = win_now.any(axis=1, keepdims=True)
    has_block = must_block.any(axis=1, keepdims=True)
    candidates = np.where(has_win, win_now, np.where(has_block, must_block, legal))
    return _sample_preferred(candidates.astype(np.float64), preference, rng)


class HeuristicConnectFour(ScriptedPolicy):
    """Connect Four: win now, else block, else a central column."""

    name = "heuristic"

    def choose(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        return _win_block_prefer(obs, mask, winning_columns, mask, C4_CENTRALITY, rng)


class HeuristicTicTacToe(ScriptedPolicy):
    """Tic-Tac-Toe: win now, else block, else centre, corners, edges."""

    name = "heuristic"

    def choose(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        # Strict preference: only the best-ranked legal squares are candidates.
        legal = mask & (TTT_PREFERENCE[None, :] * mask == (TTT_PREFERENCE[None, :] * mask).max(1, keepdims=True))
        return _win_block_prefer(obs, mask, winning_squares, legal, np.ones(9), rng)


HEURISTICS = {
    "connect_four-v3": HeuristicConnectFour,
    "tictactoe-v3": HeuristicTicTacToe,
}
