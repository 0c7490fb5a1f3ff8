"""A family of scripted Connect Four agents whose strength is graded by one number.

``level`` runs from 0 to 3 through four styles, and between two neighbouring styles
an agent plays each move in the stronger one with probability ``level - floor(level)``
(the way ``heuristic:epsilon=x`` mixes the heuristic with random moves):

* 0, *anti*: never takes a win, never blocks, prefers moves that let the opponent
  win right above them, prefers edge columns;
* 1, *random*: a uniformly random legal move;
* 2, *heuristic*: win now, else block, else a central column (the catalog's
  ``heuristic``);
* 3, *threat*: also never gives the opponent a win above its move, looks one reply
  ahead for double threats (making its own, denying the opponent's) and counts open
  threats.

Measured over a round-robin of 25 levels (160 games per pair), Bradley-Terry
strength rises with level at about 3.3 logits per unit, 10 logits from anti to
threat: the widest strength range these heuristics give, which is what a board
of ladder agents from random to competent spans. ``heuristic:epsilon`` alone spans
3.5 logits (heuristic vs random, 97%).

Everything is computed on bitboards (cell ``(r, c)`` is bit ``r * 8 + c``, row 0 at
the top, as in :mod:`envs.connect_four`), batched over the rows of one ``act`` call.
"""

from __future__ import annotations

import numpy as np

from agents.policy import MatchRng
from envs.connect_four import _has_four  # same bitboard layout as ours

U64 = np.uint64
CENTRALITY = np.array([1.0, 2.0, 3.0, 4.0, 3.0, 2.0, 1.0])
_BITS = np.left_shift(U64(1), (np.arange(6)[:, None] * 8 + np.arange(7)[None, :]).astype(U64))
_COLUMN = np.array([sum(1 << (r * 8 + c) for r in range(6)) for c in range(7)], dtype=U64)
_VALID = U64(sum(1 << (r * 8 + c) for r in range(6) for c in range(7)))
_SHIFTS = tuple(U64(s) for s in (1, 8, 7, 9))  # horizontal, vertical, both diagonals


def _pack(cells: np.ndarray) -> np.ndarray:
    """``(k, 6, 7)`` bool -> ``(k,)`` uint64 bitboards."""
    return np.where(cells.astype(bool), _BITS, U64(0)).reshape(len(cells), 42).sum(axis=1, dtype=U64)


def _landing(occupied: np.ndarray) -> np.ndarray:
    """``(...,)`` -> ``(..., 7)``: the bit a piece dropped in each column lands on (0: full)."""
    height = np.bitwise_count(occupied[..., None] & _COLUMN).astype(np.int64)
    bit = ((5 - np.minimum(height, 5)) * 8 + np.arange(7)).astype(U64)
    return np.where(height < 6, np.left_shift(U64(1), bit), U64(0))


def _wins(pieces: np.ndarray, landing: np.ndarray) -> np.ndarray:
    """``(..., 7)``: dropping in this column completes four for ``pieces``."""
    return _has_four(pieces[..., None] | landing) & (landing != 0)


def _open_threats(b: np.ndarray, occupied: np.ndarray) -> np.ndarray:
    """Number of empty cells that would complete four for ``b`` (playable or not)."""
    r = np.zeros_like(b)
    for s in _SHIFTS:
        p = (b << s) & (b << (s + s))
        r |= (p & (b << (s + s + s))) | (p & (b >> s))
        p = (b >> s) & (b >> (s + s))
        r |= (p & (b << s)) | (p & (b >> (s + s + s)))
    return np.bitwise_count(r & ~occupied & _VALID).astype(np.float64)


def _threat_scores(own: np.ndarray, opp: np.ndarray) -> np.ndarray:
    """``(k, 7)`` score of each move for the *threat* style (higher is better)."""
    occupied = own | opp
    land = _landing(occupied)
    own2, occ2 = own[:, None] | land, occupied[:, None] | land  # after each of my moves
    land2 = _landing(occ2)
    opp_b = np.broadcast_to(opp[:, None], own2.shape)
    double = _wins(own2, land2).sum(axis=-1) >= 2
    gift = _wins(opp_b, land2).any(axis=-1)
    opp3, occ3 = opp[:, None, None] | land2, occ2[..., None] | land2  # after each reply
    land3 = _landing(occ3)
    their_double = _wins(opp3, land3).sum(axis=-1) >= 2
    my_answer = _wins(np.broadcast_to(own2[..., None], opp3.shape), land3).any(axis=-1)
    danger = (their_double & ~my_answer & (land2 != 0)).any(axis=-1)
    threats = _open_threats(own2, occ2) - _open_threats(opp_b, occ2)
    return 10.0 * double - 20.0 * gift - 8.0 * danger + 0.5 * threats


def _first_nonempty(*choices: np.ndarray) -> np.ndarray:
    """Row-wise, the first of ``choices`` (bool ``(k, 7)``) with any ``True``."""
    out = choices[-1]
    for choice in reversed(choices[:-1]):
        out = np.where(choice.any(axis=1, keepdims=True), choice, out)
    return out


class GradedConnectFour:
    """A scripted Connect Four agent of strength ``level`` in ``[0, 3]`` (see module doc)."""

    weights_hash: str | None = None
    bounded_runtime = True

    def __init__(self, level: float) -> None:
        if not 0.0 <= level <= 3.0:
            raise ValueError(f"level must be in [0, 3], got {level}")
        self.level = float(level)
        self.agent_id = f"graded:{level:.4f}"

    def act(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        legal = np.asarray(mask, dtype=bool)
        own, opp = _pack(obs[..., 0]), _pack(obs[..., 1])
        draws = rng.uniform(2)
        base = min(int(self.level), 2)
        style = base + (draws[:, 0] < self.level - base)
        weights = legal.astype(np.float64)  # random
        land = _landing(own | opp)
        win, block = _wins(own, land) & legal, _wins(opp, land) & legal
        for s in np.unique(style):
            rows = style == s
            if s == 0:
                weights[rows] = self._anti(opp[rows], land[rows], legal[rows], win[rows], block[rows])
            elif s == 2:
                weights[rows] = _first_nonempty(win[rows], block[rows], legal[rows]) * CENTRALITY
            elif s == 3:
                # The centrality term only breaks ties: the most central of the best moves.
                score = _threat_scores(own[rows], opp[rows]) + 0.01 * CENTRALITY
                score = np.where(legal[rows], score, -np.inf)
                best = score >= score.max(axis=1, keepdims=True)
                weights[rows] = _first_nonempty(win[rows], block[rows], best) * CENTRALITY
        cdf = np.cumsum(weights, axis=1)
        pick = (cdf <= draws[:, 1:] * cdf[:, -1:]).sum(axis=1)
        return np.minimum(pick, 6)

    @staticmethod
    def _anti(opp: np.ndarray, land: np.ndarray, legal: np.ndarray, win: np.ndarray,
              block: np.ndarray) -> np.ndarray:
        above = np.where(land >= U64(1 << 8), land >> U64(8), U64(0))
        gift = _wins(opp, above) & legal
        harmless = legal & ~win & ~block
        return _first_nonempty(harmless & gift, harmless, legal) * (5.0 - CENTRALITY)
