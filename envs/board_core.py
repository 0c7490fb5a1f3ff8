"""Vectorized cores for two-player, alternating-move board games.

A core steps thousands of boards at once with numpy; it must behave exactly like
the PettingZoo env it mirrors (``tests/envs/test_differential.py`` checks masks,
observation planes, rewards and winners step by step).

State lives in a :class:`BoardBatch`; cores are stateless objects with methods
taking the batch and the ``rows`` to act on, so the engine can keep finished
boards in place and only touch the live ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

Array = TypeVar("Array")


@dataclass
class Boards(Generic[Array]):
    """The state of ``n`` boards, one array of each field, of one kind: :class:`BoardBatch` holds
    numpy arrays, :class:`envs.device.boards.TorchBoards` tensors (their docs give the layouts)."""

    cells: Array
    to_move: Array
    done: Array
    winner: Array
    plies: Array

    def __len__(self) -> int:
        return len(self.done)


class BoardBatch(Boards[np.ndarray]):
    """The state of ``n`` boards.

    Attributes:
        cells: ``(n, H, W)`` int8; 0 empty, ``seat + 1`` for a seat's piece.
        to_move: ``(n,)`` int8 seat index of the player to move.
        done: ``(n,)`` bool, game over.
        winner: ``(n,)`` int8 winning seat, ``-1`` for draw or not finished.
        plies: ``(n,)`` int32 moves played so far.
    """


class BoardCore:
    """Base class: observation planes and bookkeeping shared by the board games."""

    env_id: str = ""
    shape: tuple[int, int] = (0, 0)
    num_actions: int = 0
    windows_through: np.ndarray  # (cells, L, line_length): the winning lines through each cell

    @property
    def obs_shape(self) -> tuple[int, int, int]:
        return (*self.shape, 2)

    def new_batch(self, n: int) -> BoardBatch:
        """``n`` empty boards, seat 0 to move."""
        return BoardBatch(
            cells=np.zeros((n, *self.shape), dtype=np.int8),
            to_move=np.zeros(n, dtype=np.int8),
            done=np.zeros(n, dtype=bool),
            winner=np.full(n, -1, dtype=np.int8),
            plies=np.zeros(n, dtype=np.int32),
        )

    def observe(self, batch: BoardBatch, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Observation planes and legal-move mask of the player to move in ``rows``.

        Returns:
            ``obs`` of shape ``(k, H, W, 2)`` int8 (own pieces, opponent pieces) and
            ``mask`` of shape ``(k, num_actions)`` bool, exactly as PettingZoo's
            ``observe(agent_selection)``.
        """
        cells = batch.cells[rows]
        me = (batch.to_move[rows] + 1).astype(np.int8)[:, None, None]
        obs = np.empty((len(rows), *self.shape, 2), dtype=np.int8)
        np.equal(cells, me, out=obs[..., 0], casting="unsafe")
        np.equal(cells, 3 - me, out=obs[..., 1], casting="unsafe")
        return obs, self.legal_mask(batch, rows)

    def legal_mask(self, batch: BoardBatch, rows: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def target_cells(self, batch: BoardBatch, rows: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Flat cell index (``row * W + col``) where each row's move lands."""
        raise NotImplementedError

    def _place(self, batch: BoardBatch, rows: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Put the mover's pieces down; return ``(k,)`` bool: the move completed a line."""
        cells = self.target_cells(batch, rows, actions)
        flat = batch.cells.reshape(len(batch), -1)
        me = (batch.to_move[rows] + 1).astype(np.int8)
        flat[rows, cells] = me
        windows = self.windows_through[cells]  # (k, L, line_length) flat cell ids
        return (flat[rows[:, None, None], windows] == me[:, None, None]).all(-1).any(-1)

    def play(self, batch: BoardBatch, rows: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Apply one legal move per row and advance the turn.

        The caller guarantees legality (the engine checks masks first).

        Returns:
            ``(k,)`` bool, which of ``rows`` finished with this move.
        """
        rows = np.asarray(rows)
        won = self._place(batch, rows, np.asarray(actions, dtype=np.int64))
        batch.plies[rows] += 1
        full = batch.plies[rows] >= self.shape[0] * self.shape[1]
        finished = won | full
        batch.winner[rows[won]] = batch.to_move[rows[won]]
        batch.done[rows[finished]] = True
        batch.to_move[rows] ^= 1
        return finished

    @staticmethod
    def rewards(batch: BoardBatch, rows: np.ndarray) -> np.ndarray:
        """PettingZoo's final rewards per seat ``(k, 2)``: +1 win, -1 loss, 0 draw."""
        w = batch.winner[rows].astype(np.int64)
        out = np.zeros((len(rows), 2), dtype=np.float64)
        has = w >= 0
        out[has, w[has]] = 1.0
        out[has, 1 - w[has]] = -1.0
        return out


def windows_through_cells(lines: list[tuple[int, ...]], num_cells: int) -> np.ndarray:
    """For every cell, the winning lines that contain it, padded by repetition.

    Padding repeats a real line through the same cell, which leaves ``any()`` unchanged.
    """
    per_cell = [[line for line in lines if c in line] for c in range(num_cells)]
    width = max(len(p) for p in per_cell)
    return np.array([p + [p[0]] * (width - len(p)) for p in per_cell], dtype=np.int64)
