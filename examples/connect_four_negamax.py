"""A connect four search agent to play on Arena as a connected agent: bitboard negamax.

Run it against a server (your token from `arena user create` or `arena login`)::

    arena connect examples/connect_four_negamax.py:act --env connect_four-v3 --name negamax

The first run registers the agent ``negamax``; later runs reuse it. Leave it running:
the ladder schedules it while it is connected, and the screen shows its matches, W/D/L
and rating. Ctrl-C disconnects.

The search: negamax with alpha-beta pruning on two 49-bit bitboards (seven bits per
column, the top one a sentinel, as in Pascal Pons' solver), iterative deepening up to
:data:`MAX_DEPTH` plies within :data:`TIME_BUDGET_S` per move, centre-first move
ordering refined by how many threats a move makes, and the previous depth's best move
searched first. Immediate wins are taken, forced blocks played, and moves that put a
piece under an opponent's winning cell are skipped. Leaves are scored by threats
(empty cells that would complete four) for each side plus centre control. A row takes
about a tenth of a second on one core on average and never much more than
:data:`TIME_BUDGET_S` (0.4 s); the rows of one request share :data:`BATCH_BUDGET_S`
(1 s), well inside Arena's 2 s budget per request. ``ARENA_NEGAMAX_DEPTH``,
``ARENA_NEGAMAX_SECONDS`` and ``ARENA_NEGAMAX_BATCH_SECONDS`` override them. ``act`` is
marked :func:`arena.client.connected.batched`: it gets whole decision batches.

Arena's observation is ``(6, 7, 2)``: plane 0 the mover's pieces, plane 1 the
opponent's, row 0 at the top; the action is a column, 0-6.
"""

from __future__ import annotations

import os
import time

import numpy as np

from arena.client.connected import batched

ROWS, COLS = 6, 7
H1 = ROWS + 1  # bits per column: six cells and a sentinel
BOTTOM = sum(1 << (c * H1) for c in range(COLS))
BOARD = BOTTOM * ((1 << ROWS) - 1)
CENTRE = ((1 << ROWS) - 1) << (3 * H1)
ORDER = (3, 2, 4, 1, 5, 0, 6)
WIN = 1000

MAX_DEPTH = int(os.environ.get("ARENA_NEGAMAX_DEPTH", "7"))
"""Deepest search in plies."""
TIME_BUDGET_S = float(os.environ.get("ARENA_NEGAMAX_SECONDS", "0.4"))
"""Most search time per row: no deeper iteration starts after a fifth of it, a running one
is abandoned at it."""
BATCH_BUDGET_S = float(os.environ.get("ARENA_NEGAMAX_BATCH_SECONDS", "1.0"))
"""Search time shared by the rows of one request (Arena's budget is 2 s per request)."""


class _OutOfTime(Exception):
    pass


def column_bit(col: int) -> int:
    return ((1 << ROWS) - 1) << (col * H1)


COLUMN = tuple(column_bit(c) for c in range(COLS))


def threats(pos: int, mask: int) -> int:
    """Empty cells where ``pos``'s owner would complete four (Pons' winning positions)."""
    r = (pos << 1) & (pos << 2) & (pos << 3)  # vertical
    for s in (H1, ROWS, ROWS + 2):  # horizontal and both diagonals
        p = (pos << s) & (pos << 2 * s)
        r |= p & (pos << 3 * s)
        r |= p & (pos >> s)
        p = (pos >> s) & (pos >> 2 * s)
        r |= p & (pos << s)
        r |= p & (pos >> 3 * s)
    return r & (BOARD ^ mask)


def to_bitboards(obs: np.ndarray) -> tuple[int, int]:
    """``(mine, occupied)`` bitboards of an Arena observation (row 0 at the top)."""
    mine = occupied = 0
    for r in range(ROWS):
        for c in range(COLS):
            bit = 1 << (c * H1 + ROWS - 1 - r)
            if obs[r, c, 0]:
                mine |= bit
                occupied |= bit
            elif obs[r, c, 1]:
                occupied |= bit
    return mine, occupied


class Search:
    """One move's search (its clock and node count)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.nodes = 0

    def evaluate(self, mine: int, mask: int) -> int:
        opp = mine ^ mask
        return (4 * (threats(mine, mask).bit_count() - threats(opp, mask).bit_count())
                + (mine & CENTRE).bit_count() - (opp & CENTRE).bit_count())

    def ordered(self, mine: int, mask: int, moves: int, first: int | None) -> list[tuple[int, int]]:
        """``(column, move bit)`` of ``moves``, best-looking first."""
        scored = []
        for rank, c in enumerate(ORDER):
            move = moves & COLUMN[c]
            if move:
                score = threats(mine | move, mask | move).bit_count() * 8 - rank
                scored.append((1 << 20 if c == first else score, c, move))
        scored.sort(reverse=True)
        return [(c, move) for _, c, move in scored]

    def negamax(self, mine: int, mask: int, depth: int, alpha: int, beta: int, first: int | None = None
                ) -> tuple[int, int | None]:
        """``(score, column)`` for the player owning ``mine`` to move."""
        self.nodes += 1
        if self.nodes & 1023 == 0 and time.monotonic() > self.deadline:
            raise _OutOfTime
        played = mask.bit_count()
        possible = (mask + BOTTOM) & BOARD
        wins = threats(mine, mask) & possible
        if wins:
            col = next(c for c in ORDER if wins & COLUMN[c])
            return WIN - played, col
        opp_threats = threats(mine ^ mask, mask)
        forced = possible & opp_threats
        if forced:
            if forced & (forced - 1):  # two threats at once: lost
                return -(WIN - played - 1), next(c for c in ORDER if forced & COLUMN[c])
            possible = forced
        safe = possible & ~(opp_threats >> 1)  # never play just under the opponent's winning cell
        if not safe:
            return -(WIN - played - 1), next(c for c in ORDER if possible & COLUMN[c])
        if played >= ROWS * COLS - 1:
            return 0, next(c for c in ORDER if safe & COLUMN[c])
        if depth == 0:
            return self.evaluate(mine, mask), None
        best, best_col = -WIN * 2, None
        for col, move in self.ordered(mine, mask, safe, first):
            score = -self.negamax(mine ^ mask, mask | move, depth - 1, -beta, -alpha)[0]
            if score > best:
                best, best_col = score, col
            alpha = max(alpha, score)
            if alpha >= beta:
                break
        return best, best_col


def choose(obs: np.ndarray, mask: np.ndarray, max_depth: int = MAX_DEPTH, budget_s: float = TIME_BUDGET_S) -> int:
    """The column to play in one position (iterative deepening within ``budget_s``)."""
    legal = [int(c) for c in np.flatnonzero(mask)]
    mine, occupied = to_bitboards(obs)
    start = time.monotonic()
    search = Search(start + budget_s)
    best = min(legal, key=lambda c: ORDER.index(c))
    for depth in range(1, max_depth + 1):
        try:
            score, col = search.negamax(mine, occupied, depth, -WIN * 2, WIN * 2, first=best)
        except _OutOfTime:
            break
        if col is not None and col in legal:
            best = col
        if abs(score) >= WIN - ROWS * COLS or time.monotonic() - start > budget_s / 5:
            break  # a forced result, or the next depth would not finish in time
    return best


@batched
def act(obs: np.ndarray, mask: np.ndarray) -> list[int]:
    """One decision batch for ``arena connect``: ``(k, 6, 7, 2)`` observations, ``(k, 7)`` legal masks.

    The ladder may ask for many matches' moves in one request; the rows share
    :data:`BATCH_BUDGET_S`, so a big batch searches each row less deep rather than late.
    """
    per_row = min(TIME_BUDGET_S, BATCH_BUDGET_S / max(1, len(mask)))
    return [choose(o, m, budget_s=per_row) for o, m in zip(obs, mask)]
