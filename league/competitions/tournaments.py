"""Tournaments among chosen entrants: round robin, Swiss, single elimination. Pure and resumable.

Everything is recomputed from three plain values, so a service restarted mid-tournament
continues where it stopped and a page can redraw the bracket from the database:

* ``entrants``: the seeded field, best seed first (e.g. a board's top N in rank order);
* a :class:`TournamentFormat`: the kind, M (each pairing is a best-of-M *mini-match* on
  M seeds, seats alternated game by game: Battlecode's maps) and the tournament's seed;
* ``results``: ``{(round, table): [score of a, ...]}``, the first entrant's (``a``'s)
  score in each game played so far, in game order (1 win, 1/2 draw, 0 loss).

:func:`tournament` returns a :class:`TournamentState`: the rounds so far (the last one
possibly unfinished), which games to play next (:meth:`TournamentState.pending_games`),
whether it is finished, and the standings. A round is paired once the previous one is
complete, so pairings never change after they are made.

Mini-match points: win 1, draw 1/2 (equal game points), loss 0; a bye scores
``bye_points`` (1) in Swiss, nothing in a round robin (everyone sits out once in an odd
field), and advances in elimination. Every game of a mini-match is
played even once it is decided (they all count in the tie-breaks). In elimination a
drawn mini-match goes to the higher seed.

Standings (rank 1 best, ties broken in this order, last by seed): round robin by points,
Sonneborn-Berger (the points of the opponents one beat, plus half those drawn with),
game points; Swiss by points, Buchholz (the sum of one's opponents' points; a bye adds
none), Sonneborn-Berger, game points; elimination by the round reached, then the seed.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

import numpy as np

from league.competitions import pairing_rules

__all__ = ["Kind", "MiniMatch", "Pairing", "TournamentFormat", "TournamentGame", "TournamentStanding",
           "TournamentState", "game_seed", "total_rounds", "tournament"]


class Kind(str, Enum):
    """The tournament formats."""

    ROUND_ROBIN = "round_robin"
    DOUBLE_ROUND_ROBIN = "double_round_robin"
    SWISS = "swiss"
    SINGLE_ELIMINATION = "single_elimination"


@dataclass(frozen=True)
class TournamentFormat:
    """How a tournament is played.

    Attributes:
        kind: The format.
        games: M, games per mini-match (seats alternate; use an odd M to avoid drawn
            mini-matches).
        rounds: Swiss only: the number of rounds (default ``ceil(log2 n)``).
        seed: Master seed of every game's seed.
        bye_points: Swiss: the points of a bye.
    """

    kind: Kind
    games: int = 1
    rounds: int | None = None
    seed: int = 0
    bye_points: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", Kind(self.kind))
        if self.games < 1 or (self.rounds is not None and self.rounds < 1):
            raise ValueError("a tournament needs at least one game per pairing and one round")


@dataclass(frozen=True)
class Pairing:
    """One mini-match: ``a`` opens (seat 0 in games 0, 2, ...), ``b`` is ``None`` for a bye."""

    round: int
    table: int
    a: Hashable
    b: Hashable | None


class TournamentGame(NamedTuple):
    """A game to play: seat 0 ``first``, seat 1 ``second``, its match ``seed``."""

    round: int
    table: int
    game: int
    first: Hashable
    second: Hashable
    seed: int


@dataclass(frozen=True)
class MiniMatch:
    """A pairing and its games so far: ``scores`` are ``a``'s."""

    pairing: Pairing
    scores: tuple[float, ...]
    complete: bool
    points_a: float  # 1, 1/2 or 0 once complete (a bye: Swiss's bye points, else 0)

    @property
    def points_b(self) -> float:
        return 1.0 - self.points_a if self.pairing.b is not None else 0.0


@dataclass(frozen=True)
class TournamentStanding:
    """An entrant's line in the standings."""

    entrant: Hashable
    rank: int
    points: float
    tiebreak: float  # Buchholz (Swiss), Sonneborn-Berger (round robin), round reached (elimination)
    game_points: float
    played: int
    wins: int
    draws: int
    losses: int
    byes: int


@dataclass(frozen=True)
class TournamentState:
    """A tournament now (module doc)."""

    format: TournamentFormat
    entrants: tuple[Hashable, ...]
    rounds: tuple[tuple[MiniMatch, ...], ...]
    finished: bool
    standings: tuple[TournamentStanding, ...]

    def pending_games(self) -> list[TournamentGame]:
        """The games of the current round not yet played (empty when finished)."""
        if self.finished or not self.rounds:
            return []
        out = []
        for mm in self.rounds[-1]:
            p = mm.pairing
            if p.b is None:
                continue
            for g in range(len(mm.scores), self.format.games):
                first, second = (p.a, p.b) if g % 2 == 0 else (p.b, p.a)
                out.append(TournamentGame(p.round, p.table, g, first, second, game_seed(self.format, p.round, g)))
        return out

    def crosstable(self) -> dict[Hashable, dict[Hashable, list[float]]]:
        """``[x][y]``: ``x``'s mini-match points against ``y``, one per finished meeting."""
        table: dict[Hashable, dict[Hashable, list[float]]] = {e: {} for e in self.entrants}
        for mm in (m for rnd in self.rounds for m in rnd if m.complete and m.pairing.b is not None):
            a, b = mm.pairing.a, mm.pairing.b
            table[a].setdefault(b, []).append(mm.points_a)
            table[b].setdefault(a, []).append(mm.points_b)
        return table


def game_seed(fmt: TournamentFormat, round: int, game: int) -> int:
    """The seed of game ``game`` of every mini-match of round ``round`` (the same "map" on every table)."""
    return int(np.random.SeedSequence([fmt.seed, round, game]).generate_state(1, np.uint64)[0] >> np.uint64(1))


def tournament(entrants: Sequence[Hashable], fmt: TournamentFormat,
               results: Mapping[tuple[int, int], Sequence[float]]) -> TournamentState:
    """The tournament's state from its seeded field, format and results so far (module doc).

    Raises:
        ValueError: Fewer than two entrants, duplicates, or results for a pairing that
            does not exist (yet), with more than M games, or with a score not 0, 1/2, 1.
    """
    field = tuple(entrants)
    if len(field) < 2 or len(set(field)) != len(field):
        raise ValueError("a tournament needs at least two distinct entrants")
    used: set[tuple[int, int]] = set()
    rounds: list[tuple[MiniMatch, ...]] = []
    total = _total_rounds(fmt, len(field))
    while len(rounds) < total and (not rounds or all(m.complete for m in rounds[-1])):
        pairs = _next_pairs(fmt, field, rounds)
        r = len(rounds) + 1
        rounds.append(tuple(_mini_match(fmt, Pairing(r, t, field[a], None if b is None else field[b]),
                                        results.get((r, t), ()), used) for t, (a, b) in enumerate(pairs, 1)))
    stray = set(results) - used
    if stray:
        raise ValueError(f"results for pairings that do not exist (yet): {sorted(stray)}")
    finished = len(rounds) == total and all(m.complete for m in rounds[-1])
    return TournamentState(fmt, field, tuple(rounds), finished, _standings(fmt, field, rounds))


def total_rounds(fmt: TournamentFormat, n: int) -> int:
    """How many rounds a field of ``n`` plays in ``fmt``."""
    return _total_rounds(fmt, n)


def _total_rounds(fmt: TournamentFormat, n: int) -> int:
    if fmt.kind is Kind.ROUND_ROBIN:
        return pairing_rules.round_robin_rounds(n)
    if fmt.kind is Kind.DOUBLE_ROUND_ROBIN:
        return 2 * pairing_rules.round_robin_rounds(n)
    if fmt.kind is Kind.SWISS:
        return fmt.rounds or max(1, math.ceil(math.log2(n)))
    return math.ceil(math.log2(n))


def _next_pairs(fmt: TournamentFormat, field: tuple[Hashable, ...],
                rounds: list[tuple[MiniMatch, ...]]) -> list[tuple[int, int | None]]:
    """Pairs (field indices) of round ``len(rounds) + 1``."""
    n, r = len(field), len(rounds)
    index = {e: i for i, e in enumerate(field)}
    if fmt.kind in (Kind.ROUND_ROBIN, Kind.DOUBLE_ROUND_ROBIN):
        single = pairing_rules.round_robin_rounds(n)
        pairs = pairing_rules.round_robin_round(n, r % single)
        return pairs if r < single else [(b, a) if b is not None else (a, b) for a, b in pairs]
    if fmt.kind is Kind.SWISS:
        scores, met, byes = [0.0] * n, set(), [0] * n
        for mm in (m for rnd in rounds for m in rnd):
            a = index[mm.pairing.a]
            scores[a] += mm.points_a
            if mm.pairing.b is None:
                byes[a] += 1
            else:
                b = index[mm.pairing.b]
                scores[b] += mm.points_b
                met.add(frozenset((a, b)))
        return pairing_rules.swiss_round(scores, met, byes)
    if not rounds:
        slots = pairing_rules.bracket_slots(n)
        return [(a, b) if a is not None else (b, None) for a, b in zip(slots[0::2], slots[1::2])]
    winners = [index[_winner(m, index)] for m in rounds[-1]]
    return list(zip(winners[0::2], winners[1::2]))


def _mini_match(fmt: TournamentFormat, pairing: Pairing, scores: Sequence[float],
                used: set[tuple[int, int]]) -> MiniMatch:
    if scores:
        used.add((pairing.round, pairing.table))
    if pairing.b is None:
        if scores:
            raise ValueError(f"round {pairing.round} table {pairing.table} is a bye: it has no games")
        return MiniMatch(pairing, (), True, fmt.bye_points if fmt.kind is Kind.SWISS else 0.0)
    if len(scores) > fmt.games or any(s not in (0.0, 0.5, 1.0) for s in scores):
        raise ValueError(f"round {pairing.round} table {pairing.table}: at most {fmt.games} scores of 0, 1/2 or 1")
    complete = len(scores) == fmt.games
    total = float(sum(scores))
    points = (1.0 if 2 * total > fmt.games else 0.0 if 2 * total < fmt.games else 0.5) if complete else 0.0
    return MiniMatch(pairing, tuple(float(s) for s in scores), complete, points)


def _winner(mm: MiniMatch, index: Mapping[Hashable, int]) -> Hashable:
    """Who advances: the bye, the one with more points, else the higher seed."""
    p = mm.pairing
    if p.b is None or mm.points_a == 1.0:
        return p.a
    if mm.points_a == 0.0:
        return p.b
    return p.a if index[p.a] < index[p.b] else p.b


def _standings(fmt: TournamentFormat, field: tuple[Hashable, ...],
               rounds: list[tuple[MiniMatch, ...]]) -> tuple[TournamentStanding, ...]:
    """Ranked lines (module doc): only complete mini-matches count."""
    index = {e: i for i, e in enumerate(field)}
    n = len(field)
    points, games, wdl = np.zeros(n), np.zeros(n), np.zeros((n, 4), dtype=np.int64)  # won, drawn, lost, byes
    meetings: list[tuple[int, int, float]] = []  # (x, y, x's points), both directions
    reached = np.zeros(n)
    for rnd in rounds:
        for mm in (m for m in rnd if m.complete):
            a = index[mm.pairing.a]
            points[a] += mm.points_a
            reached[a] = mm.pairing.round
            if mm.pairing.b is None:
                wdl[a, 3] += 1
                continue
            b = index[mm.pairing.b]
            points[b] += mm.points_b
            reached[b] = mm.pairing.round
            games[a] += sum(mm.scores)
            games[b] += len(mm.scores) - sum(mm.scores)
            for x, y, px in ((a, b, mm.points_a), (b, a, mm.points_b)):
                meetings.append((x, y, px))
                wdl[x, 0 if px == 1.0 else 1 if px == 0.5 else 2] += 1
    buchholz, sonneborn = np.zeros(n), np.zeros(n)
    for x, y, px in meetings:
        buchholz[x] += points[y]
        sonneborn[x] += px * points[y]
    if fmt.kind is Kind.SINGLE_ELIMINATION:
        champion = [_winner(m, index) for m in rounds[-1]] if rounds and len(rounds[-1]) == 1 else []
        for e in champion:
            if rounds[-1][0].complete:
                reached[index[e]] += 1
        keys, tiebreak = [reached], reached
    elif fmt.kind is Kind.SWISS:
        keys, tiebreak = [points, buchholz, sonneborn, games], buchholz
    else:
        keys, tiebreak = [points, sonneborn, games], sonneborn
    order = np.lexsort([np.arange(n)] + [-k for k in reversed(keys)])
    return tuple(TournamentStanding(field[i], rank, float(points[i]), float(tiebreak[i]), float(games[i]),
                                    int(wdl[i, :3].sum()), *(int(v) for v in wdl[i]))
                 for rank, i in enumerate(order.tolist(), 1))
