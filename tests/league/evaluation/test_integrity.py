"""Integrity flags (league.evaluation.integrity) on a board with a planted pair that throws games.

Every game is played through the real match engine. ``thrower`` plays
``heuristic:epsilon=0.1`` against everyone except its partner, and random moves against
``partner`` (a ``heuristic:epsilon=0.6`` account of the same owner); the pair meets
twice as often as the others, as rated challenges would let it. The board is rated by
TrueSkill in a shuffled order, as a ladder would interleave it.
"""

from __future__ import annotations

import numpy as np
import pytest

from agents.catalog import make_policy
from league.evaluation.headtohead import Game
from league.evaluation.integrity import expected_outcome, suspicious_pairs
from league.evaluation.rating_dependence import rated_matches, rating_dependence
from league.ratings.closed_form import Result1v1, apply_results
from league.ratings.rating import Rating, RatingEnv
from tests.league.evaluation.played_boards import Alias, play_pairs

ENV = "connect_four-v3"
HONEST = ["random", "heuristic:epsilon=0.75", "heuristic:epsilon=0.5", "heuristic:epsilon=0.25", "heuristic"]
OWNERS = {"thrower": "mallory", "partner": "mallory", "heuristic": "alice", "heuristic:epsilon=0.25": "alice"}


def planted_board(seed: int) -> list[Game]:
    policies = {n: make_policy(n, ENV) for n in HONEST}
    policies["thrower"] = Alias("thrower", make_policy("heuristic:epsilon=0.1", ENV))
    policies["partner"] = Alias("partner", make_policy("heuristic:epsilon=0.6", ENV))
    names = sorted(policies)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:] if {a, b} != {"thrower", "partner"}]
    games = play_pairs(ENV, policies, pairs, games_per_pair=40, seed=seed)
    throwing = {"thrower": Alias("thrower", make_policy("random", ENV)), "partner": policies["partner"]}
    games += play_pairs(ENV, throwing, [("thrower", "partner")], games_per_pair=80, seed=seed + 1000)
    order = np.random.default_rng(seed).permutation(len(games))
    return [games[i] for i in order]


@pytest.fixture(scope="module", params=[1, 2])
def board(request):
    games = planted_board(request.param)
    matches, ratings = rated_matches(games)
    return games, matches, ratings


def test_the_planted_pair_is_flagged_and_no_honest_pair_is(board):
    _, matches, _ = board
    flags = suspicious_pairs(matches, OWNERS)
    assert len(flags) == 1
    flag = flags[0]
    assert (flag.beneficiary, flag.thrower, flag.same_owner, flag.family) == ("partner", "thrower", True,
                                                                              "same_owner")
    assert flag.adjusted_p <= 0.01
    assert flag.observed_win_share > flag.expected_win_share + 0.2
    assert flag.wins + flag.draws + flag.losses == 80
    assert flag.observed_score == pytest.approx((flag.wins + flag.draws / 2) / 80)


def test_without_the_owner_family_the_pair_is_still_flagged_among_all_pairs(board):
    _, matches, _ = board
    flags = suspicious_pairs(matches, owners=None)
    assert [(f.beneficiary, f.thrower, f.family) for f in flags] == [("partner", "thrower", "other")]


def test_both_accounts_ratings_rest_on_each_other(board):
    _, matches, _ = board
    flags = rating_dependence(matches)
    assert {(f.agent, f.opponent, f.direction) for f in flags} == {("partner", "thrower", "up"),
                                                                  ("thrower", "partner", "down")}
    partner = next(f for f in flags if f.agent == "partner")
    assert partner.shift > 2.5 * partner.sigma_without
    assert partner.games_vs_opponent == 80 and partner.wins_vs_opponent > 40


def test_an_honest_board_raises_no_flag():
    policies = {n: make_policy(n, ENV) for n in HONEST}
    names = sorted(policies)
    games = play_pairs(ENV, policies, [(a, b) for i, a in enumerate(names) for b in names[i + 1:]], 40, seed=9)
    matches, _ = rated_matches(games)
    assert suspicious_pairs(matches) == []
    assert rating_dependence(matches) == []


def test_replayed_ratings_equal_the_ladders_update():
    games = [Game("a", "b", 1.0), Game("b", "c", 0.5), Game("c", "a", 0.0), Game("a", "c", 1.0)]
    _, ratings = rated_matches(games)
    results = [Result1v1("a", "b"), Result1v1("b", "c", True), Result1v1("a", "c"), Result1v1("a", "c")]
    assert ratings == apply_results({}, results, env=RatingEnv())


def test_expected_outcome_is_even_for_equal_ratings_and_sums_below_one():
    env = RatingEnv()
    p_a, p_b = expected_outcome(Rating(25, 3), Rating(25, 3), env)
    assert p_a == pytest.approx(p_b)
    assert 0 < 1 - p_a - p_b < 0.2  # the draw chance
    strong, weak = expected_outcome(Rating(35, 1), Rating(20, 1), env)
    assert strong > 0.99 and weak < 0.01
