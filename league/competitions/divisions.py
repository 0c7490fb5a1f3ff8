"""Divisions with bosses (CodinGame's leagues). Pure.

A competition may split its board into divisions, bottom (0) to top. Every division
below the top has a *boss*, a reference agent on the same board; an entry moves up when
its rating's lower bound ``mu - k sigma`` passes its division's boss's ``mu``: it is then
sure (at the level ``k`` buys: 3 is about 99.9% one-sided) to be stronger than the boss,
not merely lucky. Promotion repeats while the entry also passes the next boss up, and
nobody is ever moved down (CodinGame's rule: a league, once reached, is kept). A boss
sits in the division it guards. New entries start at the bottom.

:func:`place` takes the current placements and ratings and returns the new ones; the
service calls it after each rating update and stores what changed.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from league.ratings.rating import Rating

__all__ = ["DEFAULT_K", "Division", "place", "promotion_bar"]

DEFAULT_K = 3.0


@dataclass(frozen=True)
class Division:
    """One division: its ``name`` and its ``boss`` (a reference agent's id; ``None`` for the top)."""

    name: str
    boss: Hashable | None


def promotion_bar(rating: Rating, k: float = DEFAULT_K) -> float:
    """The score compared with a boss's ``mu``: ``mu - k sigma``."""
    return rating.mu - k * rating.sigma


def place(divisions: Sequence[Division], ratings: Mapping[Hashable, Rating],
          current: Mapping[Hashable, int] | None = None, k: float = DEFAULT_K) -> dict[Hashable, int]:
    """Every rated entry's division index after promotions (module doc).

    Args:
        divisions: Bottom to top; every division but the top needs a boss, the top none.
        ratings: Ratings of the entries and of the bosses (an unrated boss blocks promotion).
        current: Divisions so far (default: everyone at the bottom).
        k: Sigmas below ``mu`` the promotion bar sits.

    Returns:
        The division of every entry in ``ratings`` that is not a boss, and of each boss.

    Raises:
        ValueError: No divisions, a boss missing below the top or present at the top, or
            one agent boss of two divisions.
    """
    if not divisions:
        raise ValueError("give at least one division")
    bosses = [d.boss for d in divisions[:-1]]
    if any(b is None for b in bosses) or divisions[-1].boss is not None:
        raise ValueError("every division but the top needs a boss, and the top has none")
    if len(set(bosses)) != len(bosses):
        raise ValueError("an agent can be the boss of one division only")
    guarded = {b: d for d, b in enumerate(bosses)}
    current = current or {}
    out: dict[Hashable, int] = {}
    for entry, rating in ratings.items():
        if entry in guarded:
            out[entry] = guarded[entry]
            continue
        level = current.get(entry, 0)
        if not 0 <= level < len(divisions):
            raise ValueError(f"{entry!r} is in division {level}, outside 0..{len(divisions) - 1}")
        while level < len(divisions) - 1:
            boss = ratings.get(bosses[level])
            if boss is None or promotion_bar(rating, k) <= boss.mu:
                break
            level += 1
        out[entry] = level
    return out
