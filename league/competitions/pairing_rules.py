"""The pairing rules of the tournament formats, one function each. Pure.

* :func:`round_robin_round` - Berger tables (the circle method): round ``r`` of a round
  robin in which everyone meets everyone once; an odd field gets a bye per round.
* :func:`swiss_round` - a Swiss round: by score, no rematches, a bye for an odd field to
  the lowest-placed entrant who has had the fewest byes (so byes rotate).
* :func:`bracket_slots` - single-elimination seeding: 1 meets N in the first round and
  1 and 2 can only meet in the final; seeds past the field are byes, so the byes go to
  the top seeds.

Entrants are given by index into the seeded field (0 is the top seed); a pair
``(a, b)`` seats ``a`` first in the mini-match's first game, ``b is None`` is a bye.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["bracket_slots", "round_robin_round", "round_robin_rounds", "swiss_round"]

Pair = tuple[int, int | None]
SEARCH_LIMIT = 200_000
"""Nodes the Swiss search may visit before it allows rematches (a field with few rounds left)."""


def round_robin_rounds(n: int) -> int:
    """Rounds of a single round robin of ``n`` entrants."""
    return n - 1 if n % 2 == 0 else n


def round_robin_round(n: int, r: int) -> list[Pair]:
    """Round ``r`` (0-based) of a single round robin of ``n`` entrants (Berger tables).

    With ``m = n`` rounded up to even, entrant ``m - 1`` is fixed (a bye when ``n`` is odd)
    and the others ``i, j < m - 1`` meet in round ``(i + j) mod (m - 1)``; the one with
    ``2 i = r`` meets the fixed entrant. Seats: ``i`` opens against the ``(m - 2) / 2``
    entrants just ahead of it on the circle (``j - i mod (m - 1)`` up to half), so each
    opens exactly half its meetings among themselves, and the fixed entrant opens in the
    even rounds: over the ``n - 1`` rounds (``n`` for an odd field) every two entrants meet
    once and each opens half its pairings, within one.
    """
    m = n + (n % 2)
    circle = m - 1
    if not 0 <= r < circle:
        raise ValueError(f"a round robin of {n} has rounds 0..{circle - 1}, got {r}")
    lone = next(i for i in range(circle) if (2 * i) % circle == r)
    fixed: Pair = (lone, None) if m > n else ((m - 1, lone) if r % 2 == 0 else (lone, m - 1))
    out: list[Pair] = [fixed]
    for i in range(circle):
        j = (r - i) % circle
        if i < j:
            out.append((i, j) if 1 <= (j - i) % circle <= (m - 2) // 2 else (j, i))
    return out


def swiss_round(scores: Sequence[float], met: set[frozenset[int]], byes: Sequence[int]) -> list[Pair]:
    """The pairs of the next Swiss round.

    Entrants are placed by score, then seed; the bye (odd field) goes to the lowest
    placed among those with the fewest byes. The rest are paired top-down by a search
    that forbids rematches: each entrant's preferred opponent is the one half its score
    group below it (the Dutch system's top half against bottom half), then the nearest
    in score and place. Only if no rematch-free pairing exists (found within
    :data:`SEARCH_LIMIT` steps) are rematches allowed.

    Args:
        scores: Points of each entrant so far.
        met: Pairs of entrants who have already played.
        byes: Byes each entrant has had.
    """
    n = len(scores)
    placed = sorted(range(n), key=lambda i: (-scores[i], i))
    bye: int | None = None
    if n % 2:
        fewest = min(byes)
        bye = next(i for i in reversed(placed) if byes[i] == fewest)
        placed.remove(bye)
    pairs = _search(placed, scores, met) or _search(placed, scores, set()) or []
    return pairs + ([(bye, None)] if bye is not None else [])


def _search(placed: list[int], scores: Sequence[float], met: set[frozenset[int]]) -> list[Pair] | None:
    """Depth-first pairing of ``placed`` without a pair in ``met`` (None if none within the limit)."""
    budget = [SEARCH_LIMIT]

    def go(rest: list[int]) -> list[Pair] | None:
        if not rest:
            return []
        budget[0] -= 1
        if budget[0] < 0:
            return None
        top, others = rest[0], rest[1:]
        group = sum(1 for i in rest if scores[i] == scores[top])
        target = group // 2  # Dutch: the first of the bottom half of the score group
        order = sorted(range(len(others)), key=lambda k: (abs(scores[others[k]] - scores[top]),
                                                          abs(k + 1 - target), k))
        for k in order:
            partner = others[k]
            if frozenset((top, partner)) in met:
                continue
            found = go(others[:k] + others[k + 1:])
            if found is not None:
                return [(top, partner)] + found
        return None

    return go(list(placed))


def bracket_slots(n: int) -> list[int | None]:
    """The first-round bracket of ``n`` seeded entrants: slot ``2k`` meets slot ``2k + 1``.

    Entries are seed indices (0 is the top seed), ``None`` a bye. The bracket has the next
    power of two of slots; seed ``s`` meets seed ``P - 1 - s`` in the first round, and the
    order ``1, 8, 4, 5, 2, 7, 3, 6`` (for 8) keeps the top seeds apart until the end.
    """
    if n < 2:
        raise ValueError("an elimination bracket needs at least two entrants")
    order = [0]
    while len(order) < n:
        size = 2 * len(order)
        order = [s for seed in order for s in (seed, size - 1 - seed)]
    return [s if s < n else None for s in order]
