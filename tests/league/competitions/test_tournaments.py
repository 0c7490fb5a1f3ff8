"""Tournament formats (league.competitions.tournaments, pairing_rules)."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import numpy as np
import pytest

from league.competitions.pairing_rules import bracket_slots, round_robin_round, round_robin_rounds
from league.competitions.tournaments import Kind, TournamentFormat, tournament


def play_out(entrants, fmt, result, limit=100):
    """Run a tournament to the end; ``result(first, second, game)`` is seat 0's score."""
    results: dict[tuple[int, int], list[float]] = {}
    for _ in range(limit):
        state = tournament(entrants, fmt, results)
        if state.finished:
            return state, results
        for g in state.pending_games():
            score = result(g.first, g.second, g.game)
            a_first = g.game % 2 == 0
            results.setdefault((g.round, g.table), []).append(score if a_first else 1.0 - score)
    raise AssertionError("the tournament did not finish")


def stronger_wins(first, second, game):
    return 1.0 if int(first[1:]) < int(second[1:]) else 0.0


@pytest.mark.parametrize("n", range(2, 10))
def test_a_round_robin_meets_everyone_once_with_seats_balanced(n):
    meetings, opened, byes = Counter(), Counter(), Counter()
    for r in range(round_robin_rounds(n)):
        pairs = round_robin_round(n, r)
        seen = [e for a, b in pairs for e in (a, b) if e is not None]
        assert sorted(seen) == list(range(n))
        for a, b in pairs:
            if b is None:
                byes[a] += 1
            else:
                meetings[frozenset((a, b))] += 1
                opened[a] += 1
    assert set(meetings) == {frozenset(p) for p in combinations(range(n), 2)}
    assert set(meetings.values()) == {1}
    assert all(byes[e] == (n % 2) for e in range(n))
    games = n - 1  # each entrant's pairings
    assert all(abs(opened[e] - (games - opened[e])) <= 1 for e in range(n))


def test_a_double_round_robin_plays_every_pair_twice_seats_swapped_and_fills_the_crosstable():
    field = [f"p{k}" for k in range(5)]
    state, _ = play_out(field, TournamentFormat(Kind.DOUBLE_ROUND_ROBIN, games=2), stronger_wins)
    openings = Counter((m.pairing.a, m.pairing.b) for rnd in state.rounds for m in rnd if m.pairing.b)
    assert len(state.rounds) == 10
    assert all(openings[(a, b)] == 1 and openings[(b, a)] == 1 for a, b in combinations(field, 2))
    table = state.crosstable()
    assert table["p0"]["p4"] == [1.0, 1.0] and table["p4"]["p0"] == [0.0, 0.0]
    assert [s.entrant for s in state.standings] == field
    assert [s.points for s in state.standings] == [8.0, 6.0, 4.0, 2.0, 0.0]


def test_mini_match_games_alternate_seats_and_share_the_round_seeds():
    state = tournament([f"p{k}" for k in range(4)], TournamentFormat(Kind.ROUND_ROBIN, games=3, seed=9), {})
    games = state.pending_games()
    assert len(games) == 6
    for table in (1, 2):
        mine = [g for g in games if g.table == table]
        assert [g.game for g in mine] == [0, 1, 2]
        assert mine[0].first == mine[1].second == mine[2].first
    assert [g.seed for g in games if g.table == 1] == [g.seed for g in games if g.table == 2]
    assert len({g.seed for g in games}) == 3
    other = tournament([f"p{k}" for k in range(4)], TournamentFormat(Kind.ROUND_ROBIN, games=3, seed=10), {})
    assert {g.seed for g in other.pending_games()}.isdisjoint({g.seed for g in games})


def random_result(seed):
    rng = np.random.default_rng(seed)
    return lambda first, second, game: float(rng.choice([0.0, 0.5, 1.0]))


@pytest.mark.parametrize("seed", range(5))
def test_swiss_never_rematches_and_rotates_byes(seed):
    field = [f"p{k}" for k in range(9)]
    state, _ = play_out(field, TournamentFormat(Kind.SWISS, games=1, rounds=5), random_result(seed))
    pairs = [frozenset((m.pairing.a, m.pairing.b)) for rnd in state.rounds for m in rnd if m.pairing.b]
    assert len(pairs) == len(set(pairs)) == 5 * 4
    byes = Counter(m.pairing.a for rnd in state.rounds for m in rnd if m.pairing.b is None)
    assert sum(byes.values()) == 5 and set(byes.values()) == {1}
    assert sum(s.points for s in state.standings) == 5 * 4 + 5  # a point a mini-match, a point a bye


def test_swiss_pairs_by_score_top_half_against_bottom_half():
    field = [f"p{k}" for k in range(8)]
    state = tournament(field, TournamentFormat(Kind.SWISS, rounds=3), {})
    assert [(m.pairing.a, m.pairing.b) for m in state.rounds[0]] == [("p0", "p4"), ("p1", "p5"), ("p2", "p6"),
                                                                      ("p3", "p7")]
    results = {(1, t): [1.0] for t in range(1, 5)}  # p0..p3 win
    state = tournament(field, TournamentFormat(Kind.SWISS, rounds=3), results)
    assert [(m.pairing.a, m.pairing.b) for m in state.rounds[1]] == [("p0", "p2"), ("p1", "p3"), ("p4", "p6"),
                                                                      ("p5", "p7")]


def test_swiss_standings_break_ties_by_buchholz():
    field = [f"p{k}" for k in range(4)]
    fmt = TournamentFormat(Kind.SWISS, rounds=2)
    # Round 1: p0 beats p2, p3 beats p1. Round 2 (winners, losers): p0 beats p3, p1 beats p2.
    state = tournament(field, fmt, {(1, 1): [1.0], (1, 2): [0.0]})
    assert [(m.pairing.a, m.pairing.b) for m in state.rounds[1]] == [("p0", "p3"), ("p1", "p2")]
    state = tournament(field, fmt, {(1, 1): [1.0], (1, 2): [0.0], (2, 1): [1.0], (2, 2): [1.0]})
    assert state.finished
    lines = {s.entrant: s for s in state.standings}
    assert [s.entrant for s in state.standings] == ["p0", "p3", "p1", "p2"]
    assert (lines["p3"].points, lines["p1"].points) == (1.0, 1.0)
    assert lines["p3"].tiebreak == 3.0 and lines["p1"].tiebreak == 1.0  # Buchholz: p1 + p0 against p3 + p2


def test_bracket_seeding_and_byes_to_the_top_seeds():
    assert bracket_slots(8) == [0, 7, 3, 4, 1, 6, 2, 5]
    assert bracket_slots(6) == [0, None, 3, 4, 1, None, 2, 5]
    state = tournament([f"p{k}" for k in range(6)], TournamentFormat(Kind.SINGLE_ELIMINATION, games=3), {})
    first = [(m.pairing.a, m.pairing.b) for m in state.rounds[0]]
    assert first == [("p0", None), ("p3", "p4"), ("p1", None), ("p2", "p5")]


def test_single_elimination_top_seeds_meet_in_the_final_and_rank_by_round_reached():
    field = [f"p{k}" for k in range(8)]
    state, _ = play_out(field, TournamentFormat(Kind.SINGLE_ELIMINATION, games=3), stronger_wins)
    assert len(state.rounds) == 3
    assert {state.rounds[-1][0].pairing.a, state.rounds[-1][0].pairing.b} == {"p0", "p1"}
    assert [s.entrant for s in state.standings] == field
    assert [s.tiebreak for s in state.standings] == [4, 3, 2, 2, 1, 1, 1, 1]


def test_a_drawn_mini_match_sends_the_higher_seed_through():
    fmt = TournamentFormat(Kind.SINGLE_ELIMINATION, games=2)
    state = tournament(["p0", "p1", "p2", "p3"], fmt, {(1, 1): [1.0, 0.0], (1, 2): [0.5, 0.5]})
    assert [(m.pairing.a, m.pairing.b) for m in state.rounds[1]] == [("p0", "p1")]


def test_resuming_from_partial_results_and_refusing_strays():
    field = [f"p{k}" for k in range(4)]
    fmt = TournamentFormat(Kind.ROUND_ROBIN, games=3)
    state = tournament(field, fmt, {(1, 1): [1.0, 0.0]})
    assert len(state.rounds) == 1 and not state.finished
    assert [(g.table, g.game) for g in state.pending_games()] == [(1, 2), (2, 0), (2, 1), (2, 2)]
    with pytest.raises(ValueError, match="do not exist"):
        tournament(field, fmt, {(2, 1): [1.0]})
    with pytest.raises(ValueError, match="at most 3"):
        tournament(field, fmt, {(1, 1): [1.0] * 4})
