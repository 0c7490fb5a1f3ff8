"""Vectorized Tic-Tac-Toe core, equivalent to PettingZoo's ``tictactoe_v3``.

Action ``a`` marks flat square ``a``; observation planes are the squares reshaped
to ``(3, 3)`` exactly as PettingZoo does.

Version history (of the env id this core mirrors):
    v3: PettingZoo 1.27 ``tictactoe_v3`` (current).
"""

from __future__ import annotations

import numpy as np

from envs.board_core import BoardBatch, BoardCore, windows_through_cells

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]
WINDOWS = windows_through_cells(LINES, 9)


class TicTacToeCore(BoardCore):
    """Steps many Tic-Tac-Toe boards at once."""

    env_id = "tictactoe-v3"
    shape = (3, 3)
    num_actions = 9
    windows_through = WINDOWS

    def legal_mask(self, batch: BoardBatch, rows: np.ndarray) -> np.ndarray:
        return batch.cells[rows].reshape(len(rows), 9) == 0

    def target_cells(self, batch: BoardBatch, rows: np.ndarray, actions: np.ndarray) -> np.ndarray:
        return actions


def winning_squares(own: np.ndarray, occupied: np.ndarray) -> np.ndarray:
    """``(k, 9)`` bool: which empty squares complete a line for ``own`` (``(k, 3, 3)``)."""
    k = own.shape[0]
    flat = own.reshape(k, 9)
    empty = ~occupied.reshape(k, 9)
    pieces = flat[:, WINDOWS]  # (k, 9, L, 3)
    pieces = pieces | (WINDOWS == np.arange(9)[:, None, None])[None]
    return pieces.all(-1).any(-1) & empty
