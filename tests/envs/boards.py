"""Test helpers for the board cores: random batched play recorded ply by ply.

Not a test module (no ``test_`` prefix): ``test_differential.py`` and
``test_board_cores.py`` share it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envs.board_core import BoardBatch, BoardCore


@dataclass(frozen=True)
class BatchRecord:
    """Everything one batch of random games did, ply by ply.

    Arrays indexed ``[ply, game]`` hold zeros (``-1`` for actions) once a game is over.

    Attributes:
        actions: ``(P, n)`` int64 move played at each ply.
        obs: ``(P, n, H, W, 2)`` int8 mover's planes before each ply.
        masks: ``(P, n, A)`` bool legal-move mask before each ply.
        won: ``(P, n)`` bool, the move at this ply completed a line.
        length: ``(n,)`` plies until the game finished.
        final_obs: ``(n, H, W, 2)`` planes of the player to move after the end.
        final_to_move: ``(n,)`` seat to move after the end.
        winner: ``(n,)`` winning seat or ``-1``.
        rewards: ``(n, 2)`` final rewards per seat.
    """

    actions: np.ndarray
    obs: np.ndarray
    masks: np.ndarray
    won: np.ndarray
    length: np.ndarray
    final_obs: np.ndarray
    final_to_move: np.ndarray
    winner: np.ndarray
    rewards: np.ndarray


def random_actions(rng: np.random.Generator, mask: np.ndarray) -> np.ndarray:
    """One uniformly random legal action per row of ``mask`` (every row has one)."""
    scores = rng.random(mask.shape)
    scores[~mask] = -1.0
    return scores.argmax(axis=1)


def play_random_batch(core: BoardCore, n: int, seed: int) -> BatchRecord:
    """Play ``n`` uniformly random games as one batch in ``core`` and record them."""
    rng = np.random.default_rng(seed)
    batch = core.new_batch(n)
    max_plies = core.shape[0] * core.shape[1]
    actions = np.full((max_plies, n), -1, dtype=np.int64)
    obs = np.zeros((max_plies, n, *core.obs_shape), dtype=np.int8)
    masks = np.zeros((max_plies, n, core.num_actions), dtype=bool)
    won = np.zeros((max_plies, n), dtype=bool)
    length = np.zeros(n, dtype=np.int64)
    for ply in range(max_plies):
        live = np.flatnonzero(~batch.done)
        if len(live) == 0:
            break
        live_obs, live_mask = core.observe(batch, live)
        act = random_actions(rng, live_mask)
        obs[ply, live], masks[ply, live], actions[ply, live] = live_obs, live_mask, act
        finished = core.play(batch, live, act)
        won[ply, live] = finished & (batch.winner[live] >= 0)
        length[live[finished]] = ply + 1
    everyone = np.arange(n)
    final_obs, _ = core.observe(batch, everyone)
    return BatchRecord(
        actions=actions,
        obs=obs,
        masks=masks,
        won=won,
        length=length,
        final_obs=final_obs,
        final_to_move=batch.to_move.astype(np.int64),
        winner=batch.winner.astype(np.int64),
        rewards=core.rewards(batch, everyone),
    )


def play_sequence(core: BoardCore, moves: list[int]) -> tuple[BoardBatch, list[bool]]:
    """Play ``moves`` on one board; return the final batch and ``finished`` after each move."""
    batch = core.new_batch(1)
    row = np.array([0])
    finished = []
    for move in moves:
        _, mask = core.observe(batch, row)
        assert mask[0, move], f"move {move} is illegal after {len(finished)} plies of {moves}"
        finished.append(bool(core.play(batch, row, np.array([move]))[0]))
    return batch, finished
