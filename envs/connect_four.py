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


# Bitboards for move generation: cell (r, c) is bit r * 8 + c. The eighth column of
# every row is always empty, so shifting a line across a row boundary breaks it.
_SHIFTS = tuple(np.uint64(x) for x in (1, 8, 7, 9))  # horizontal, vertical, both diagonals
_ROW_PAD = np.zeros((1, 1, 1), dtype=bool)


def _bitboards(cells: np.ndarray) -> np.ndarray:
    """``(k, 6, 7)`` bool -> ``(k,)`` uint64 in the 8-wide layout."""
    k = cells.shape[0]
    padded = np.concatenate([cells, np.broadcast_to(_ROW_PAD, (k, ROWS, 1))], axis=2)
    packed = np.packbits(padded.reshape(k, ROWS * 8), axis=1, bitorder="little")  # (k, 6)
    return np.pad(packed, ((0, 0), (0, 2))).view(np.uint64)[:, 0]


def _has_four(b: np.ndarray) -> np.ndarray:
    out = np.zeros(b.shape, dtype=bool)
    for s in _SHIFTS:
        m = b & (b >> s)
        out |= (m & (m >> (s + s))) != 0
    return out


def winning_columns(own: np.ndarray, occupied: np.ndarray) -> np.ndarray:
    """Which columns complete four-in-a-row for the owner of ``own`` if played now.

    Args:
        own: ``(k, 6, 7)`` bool, the player's pieces.
        occupied: ``(k, 6, 7)`` bool, all pieces.

    Returns:
        ``(k, 7)`` bool; full columns are never winning.
    """
    heights = occupied.sum(axis=1)  # (k, 7)
    legal = heights < ROWS
    landing = ((ROWS - 1 - np.minimum(heights, ROWS - 1)) * 8 + np.arange(COLS)).astype(np.uint64)
    moves = np.left_shift(np.uint64(1), landing)
    return _has_four(_bitboards(own)[:, None] | moves) & legal
