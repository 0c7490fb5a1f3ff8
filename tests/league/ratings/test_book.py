"""Pure ladder logic: rating one match, and a batch in waves."""

from __future__ import annotations

import numpy as np
import pytest
import trueskill

from league.ratings.book import MIN_WAVE, MatchResult, RatingBook, Standing, _waves, rate_match
from league.ratings.rating import Rating, RatingEnv, rate_teams

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


def _random_results(n: int, agents: int, seed: int, roles=("player", "player")) -> list[MatchResult]:
    rng = np.random.default_rng(seed)
    out = []
    for seq in range(n):
        a, b = rng.integers(agents, size=2)  # a == b now and then: a mirror match
        out.append(MatchResult([f"a{a}", f"a{b}"], list(roles), [None, 0, 1][rng.integers(3)], seq))
    return out


@pytest.mark.parametrize("agents", [3, 300, 1500])  # narrow waves (one at a time) up to wide ones
def test_a_batch_rated_in_waves_equals_rating_one_match_at_a_time_bit_for_bit(agents):
    results = _random_results(3000, agents, seed=agents)
    assert max(len(w) for w in _waves(results)) >= (MIN_WAVE if agents > 3 else 1)
    one_by_one, batched = RatingBook(ENV), RatingBook(ENV)

    expected = [one_by_one.apply(*r) for r in results]
    got = batched.apply_batch(results)

    assert got == expected  # exact float equality, every before and after
    assert batched.standings == one_by_one.standings
    assert sum(1 for c in got if c == []) > 0  # mirror matches stayed unrated


def test_waves_equal_trueskill_rate_1vs1_applied_in_sequence():
    results = _random_results(2000, 60, seed=7, roles=("predator", "prey"))
    book = RatingBook(ENV)
    book.apply_batch(results)
    package: dict = {}
    for agents, roles, winner, _ in results:
        keys = list(zip(agents, roles))
        before = [package.get(k, ENV.package.create_rating()) for k in keys]
        if winner is None:
            after = trueskill.rate_1vs1(*before, drawn=True, env=ENV.package)
        else:
            new_w, new_l = trueskill.rate_1vs1(before[winner], before[1 - winner], env=ENV.package)
            after = (new_w, new_l) if winner == 0 else (new_l, new_w)
        package.update(zip(keys, after))
    assert set(package) == set(book.standings)
    for key, rating in package.items():
        mine = book.standings[key].rating
        assert (mine.mu, mine.sigma) == pytest.approx((rating.mu, rating.sigma), abs=1e-9)


def test_a_wave_with_an_extreme_upset_falls_back_to_the_package_for_that_match_only():
    book = RatingBook(ENV, {(f"s{i}", "p"): Standing(Rating(150.0, 0.5)) for i in range(MIN_WAVE)})
    results = [MatchResult([f"w{i}", f"s{i}"], ["p", "p"], 0, i) for i in range(MIN_WAVE)]
    book.standings[("w0", "p")] = Standing(Rating(0.0, 0.5))  # a mu-0 agent beats a mu-150 one
    reference = RatingBook(ENV, {k: Standing(v.rating) for k, v in book.standings.items()})

    got = book.apply_batch(results)

    assert len(_waves(results)) == 1
    assert got == [reference.apply(*r) for r in results]
    [[package_after], _] = rate_teams([[Rating(0.0, 0.5)], [Rating(150.0, 0.5)]], [0, 1], env=ENV)
    assert got[0][0].after == package_after


def test_a_batch_with_three_team_matches_is_rated_in_order():
    results = [MatchResult(["a", "b", "c"], ["p"] * 3, 1, 1), MatchResult(["a", "b"], ["p"] * 2, 0, 2)]
    reference = RatingBook(ENV)
    assert RatingBook(ENV).apply_batch(results) == [reference.apply(*r) for r in results]
