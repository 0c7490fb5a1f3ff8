"""Vectorized Connect Four core, equivalent to PettingZoo's ``connect_four_v3``.

Board cells are indexed like PettingZoo's flat board: ``row * 7 + col`` with row 0
at the top; a piece dropped in column ``c`` lands on the lowest empty row.

Version history (of the env id this core mirrors):
    v3: PettingZoo 1.27 ``connect_four_v3`` (current).
"""

from __future__ import annotations

import numpy as np

from envs.board_core import BoardBatch, BoardCore, windows_through_cells

ROWS, COLS = 6, 7


def _lines() -> list[tuple[int, ...]]:
    lines = []
    for r in range(ROWS):
        for c in range(COLS):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (-1, 1)):
                cells = [(r + i * dr, c + i * dc) for i in range(4)]
                if all(0 <= rr < ROWS and 0 <= cc < COLS for rr, cc in cells):
                    lines.append(tuple(rr * COLS + cc for rr, cc in cells))
    return lines


LINES = _lines()  # 69 winning lines
WINDOWS = windows_through_cells(LINES, ROWS * COLS)


class ConnectFourCore(BoardCore):
    """Steps many Connect Four boards at once."""

    env_id = "connect_four-v3"
    shape = (ROWS, COLS)
    num_actions = COLS
    windows_through = WINDOWS

    def legal_mask(self, batch: BoardBatch, rows: np.ndarray) -> np.ndarray:
        return batch.cells[rows, 0, :] == 0

    def target_cells(self, batch: BoardBatch, rows: np.ndarray, actions: np.ndarray) -> np.ndarray:
        column = batch.cells[rows, :, actions]  # (k, ROWS)
        landing_row = ROWS - 1 - (column != 0).sum(axis=1)
        return landing_row * COLS + actions


def winning_columns(own: np.ndarray, occupied: np.ndarray) -> np.ndarray:
    """Which columns complete four-in-a-row for the owner of ``own`` if played now.

    Args:
        own: ``(k, 6, 7)`` bool, the player's pieces.
        occupied: ``(k, 6, 7)`` bool, all pieces.

    Returns:
        ``(k, 7)`` bool; full columns are never winning.
    """
    k = own.shape[0]
    heights = occupied.sum(axis=1)  # (k, 7)
    legal = heights < ROWS
    landing = (ROWS - 1 - np.minimum(heights, ROWS - 1)) * COLS + np.arange(COLS)
    flat = own.reshape(k, -1)
    windows = WINDOWS[landing]  # (k, 7, L, 4)
    pieces = flat[np.arange(k)[:, None, None, None], windows]
    # The landing cell itself is empty; count it as ours.
    pieces |= windows == landing[:, :, None, None]
    return pieces.all(-1).any(-1) & legal
