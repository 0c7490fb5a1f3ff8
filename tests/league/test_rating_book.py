"""Pure ladder logic: rating one match, pairing the next batch."""

from __future__ import annotations

import numpy as np
import pytest
import trueskill

from league.rating_book import rate_match, sample_ladder_pairs
from league.ratings import Rating, RatingEnv

ENV = RatingEnv()


def test_two_team_win_equals_the_package_in_either_team_order():
    ratings = {("a", "player"): Rating(27.0, 5.0), ("b", "player"): Rating(22.0, 4.0)}
    for winner in (0, 1):
        changes = rate_match(ratings, ["a", "b"], ["player", "player"], winner, env=ENV)
        w, l = ("a", "b") if winner == 0 else ("b", "a")
        ew, el = trueskill.rate_1vs1(trueskill.Rating(*[getattr(ratings[(w, "player")], x) for x in ("mu", "sigma")]),
                                     trueskill.Rating(*[getattr(ratings[(l, "player")], x) for x in ("mu", "sigma")]),
                                     env=ENV.package)
        after = {c.agent: c.after for c in changes}
        assert after[w].mu == pytest.approx(ew.mu, abs=1e-9) and after[w].sigma == pytest.approx(ew.sigma, abs=1e-9)
        assert after[l].mu == pytest.approx(el.mu, abs=1e-9) and after[l].sigma == pytest.approx(el.sigma, abs=1e-9)


def test_draw_moves_both_towards_each_other_and_prior_is_used_for_newcomers():
    changes = rate_match({("a", "player"): Rating(30.0, 3.0)}, ["a", "new"], ["player", "player"], None, env=ENV)
    by = {c.agent: c for c in changes}
    assert by["new"].before == ENV.new_rating()
    assert by["a"].after.mu < 30.0 < by["a"].before.mu + 1e-12
    assert by["new"].after.mu > 25.0


def test_mirror_match_is_not_rated_but_roles_make_it_rateable():
    assert rate_match({}, ["a", "a"], ["player", "player"], 0, env=ENV) == []
    changes = rate_match({}, ["a", "a"], ["predator", "prey"], 0, env=ENV)
    assert {(c.agent, c.role) for c in changes} == {("a", "predator"), ("a", "prey")}
    by_role = {c.role: c.after for c in changes}
    assert by_role["predator"].mu > by_role["prey"].mu


def test_three_teams_use_the_team_update():
    changes = rate_match({}, ["a", "b", "c"], ["p", "p", "p"], 1, env=ENV)
    after = {c.agent: c.after.mu for c in changes}
    assert after["b"] > 25.0 > max(after["a"], after["c"])
    assert after["a"] == pytest.approx(after["c"], abs=0.05)  # tied for second


def test_pairs_are_valid_balanced_and_placement_gets_its_share():
    rng = np.random.default_rng(0)
    settled = [Rating(20 + i, 1.0) for i in range(9)]
    ratings = settled + [Rating(25.0, 8.0)]  # one newcomer
    pairs = sample_ladder_pairs(ratings, 4000, rng, env=ENV, target_sigma=2.0)
    assert len(pairs) == 4000 and all(i != j for i, j in pairs)
    with_newcomer = sum(9 in p for p in pairs)
    # Half the batch is placement; the rest favours uncertain agents, so it plays more.
    assert 2000 <= with_newcomer < 4000
    first_seat = sum(p[0] == 9 for p in pairs)
    assert abs(first_seat - with_newcomer / 2) < 4 * np.sqrt(with_newcomer / 4)
    # Placement opponents are the highest-quality ones: nearest in mu to 25.
    opponents = {j if i == 9 else i for i, j in pairs if 9 in (i, j)}
    assert {4, 5, 6} <= opponents


def test_everyone_placing_means_the_whole_batch_is_placement():
    rng = np.random.default_rng(1)
    pairs = sample_ladder_pairs([ENV.new_rating() for _ in range(5)], 100, rng, env=ENV, target_sigma=2.0)
    assert len(pairs) == 100 and all(i != j for i, j in pairs)
