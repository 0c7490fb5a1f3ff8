"""Whom the final evaluation plays next, given its certificate. Pure.

:func:`final_pairings` turns the current :class:`~league.competitions.certification.Certificate`
into the next batch of games:

1. **The floor first.** Entries short of ``floor`` games play each other, neighbours in
   the current order (the pairs alternate between rounds so neighbours differ), until every
   entry has its floor: equal game counts, and a first look at everyone for the ratings
   that choose the tested pairs.
2. **Then the open pairs.** The rest of the batch goes to the tested pairs that are open
   or reversed, shared in proportion to their remaining uncertainty (the width of their
   confidence sequence; the widest get the rounding). Nothing goes to separated or tied
   pairs, nor to entries outside the top K and its challengers: those games would not
   change what is certified.

Every pairing is a *unit*: two games, each entry seated first once, on seeds drawn
from ``rng``, which is how the certificate pairs games by seat. An empty list means
nothing is left to play (certified).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import NamedTuple

import numpy as np

from league.competitions.certification import Certificate

__all__ = ["ScheduledGame", "final_pairings"]

SEED_BOUND = 2**63 - 1


class ScheduledGame(NamedTuple):
    """One game to play: seat 0 ``first``, seat 1 ``second``, its match ``seed``."""

    first: Hashable
    second: Hashable
    seed: int


def final_pairings(certificate: Certificate, games: int, rng: np.random.Generator) -> list[ScheduledGame]:
    """The next batch of at most ``games`` games (rounded down to whole units of two, at least one).

    Args:
        certificate: The evaluation's state now (:meth:`FinalEvaluation.certificate`).
        games: Batch size in games.
        rng: The source of the floor's alternation and of every seed.

    Returns:
        Games in seat-swapped couples; empty when certified.
    """
    if len(certificate.standings) < 2:
        return []
    units = max(1, games // 2)
    pairs = _floor_units(certificate, units, rng)
    pairs += _open_units(certificate, units - len(pairs))
    seeds = rng.integers(0, SEED_BOUND, size=2 * len(pairs)).tolist()
    out: list[ScheduledGame] = []
    for k, (a, b) in enumerate(pairs):
        out += [ScheduledGame(a, b, seeds[2 * k]), ScheduledGame(b, a, seeds[2 * k + 1])]
    return out


def _floor_units(certificate: Certificate, units: int, rng: np.random.Generator) -> list[tuple[Hashable, Hashable]]:
    """Units that bring short entries towards the floor: neighbours in rank order, in passes."""
    floor = certificate.config.floor
    order = [s.entry for s in certificate.standings]
    need = {s.entry: max(0, floor - s.games) for s in certificate.standings}
    out: list[tuple[Hashable, Hashable]] = []
    while len(out) < units:
        short = [e for e in order if need[e] > 0]
        if not short:
            break
        if len(short) == 1:  # the last one short plays its nearest neighbour in rank
            i = order.index(short[0])
            short.append(order[i + 1] if i + 1 < len(order) else order[i - 1])
        start = int(rng.integers(2)) if len(short) > 2 else 0
        rotated = short[start:] + short[:start]
        for a, b in zip(rotated[0::2], rotated[1::2]):
            if len(out) == units:
                break
            out.append((a, b))
            need[a] -= 2
            need[b] -= 2
    return out


def _open_units(certificate: Certificate, units: int) -> list[tuple[Hashable, Hashable]]:
    """``units`` units over the open tested pairs, in proportion to their interval width."""
    pairs = certificate.open_pairs()
    if units <= 0 or not pairs:
        return []
    width = np.array([max(p.high - p.low, 1e-9) for p in pairs])
    share = units * width / width.sum()
    count = np.floor(share).astype(np.int64)
    # Largest remainder, ties to the wider pair, then to the higher rank (list order).
    rest = np.lexsort((np.arange(len(pairs)), -width, -(share - count)))[: units - int(count.sum())]
    count[rest] += 1
    return [(p.upper, p.lower) for p, c in zip(pairs, count.tolist()) for _ in range(c)]
