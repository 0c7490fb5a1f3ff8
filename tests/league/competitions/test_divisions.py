"""Divisions with bosses (league.competitions.divisions)."""

from __future__ import annotations

import pytest

from league.competitions.divisions import Division, place, promotion_bar
from league.ratings.rating import Rating

LEAGUES = [Division("wood", "boss-wood"), Division("bronze", "boss-bronze"), Division("legend", None)]
BOSSES = {"boss-wood": Rating(20.0, 1.0), "boss-bronze": Rating(30.0, 1.0)}


def test_an_entry_moves_up_only_when_its_lower_bound_passes_the_boss():
    ratings = {**BOSSES, "sure": Rating(26.0, 1.9), "lucky": Rating(26.0, 2.1), "even": Rating(23.0, 1.0)}
    got = place(LEAGUES, ratings)
    assert promotion_bar(ratings["sure"]) == pytest.approx(20.3)
    assert got["sure"] == 1
    assert got["lucky"] == 0  # mu above the boss, lower bound 19.7 not
    assert got["even"] == 0  # 23 - 3 = 20 ties the boss: not past it
    assert (got["boss-wood"], got["boss-bronze"]) == (0, 1)


def test_promotion_climbs_every_boss_it_passes_and_never_goes_down():
    ratings = {**BOSSES, "star": Rating(40.0, 2.0), "fallen": Rating(10.0, 1.0)}
    got = place(LEAGUES, ratings, current={"fallen": 2})
    assert got["star"] == 2
    assert got["fallen"] == 2


def test_k_sets_how_sure_a_promotion_is():
    ratings = {**BOSSES, "x": Rating(24.0, 1.5)}
    assert place(LEAGUES, ratings, k=3.0)["x"] == 0
    assert place(LEAGUES, ratings, k=2.0)["x"] == 1


def test_an_unrated_boss_blocks_promotion():
    assert place(LEAGUES, {"boss-wood": Rating(20.0, 1.0), "star": Rating(40.0, 1.0)})["star"] == 1


def test_malformed_divisions_are_refused():
    with pytest.raises(ValueError, match="needs a boss"):
        place([Division("a", None), Division("b", None)], {})
    with pytest.raises(ValueError, match="one division only"):
        place([Division("a", "x"), Division("b", "x"), Division("c", None)], {})
    with pytest.raises(ValueError, match="outside"):
        place(LEAGUES, {"e": Rating(25.0, 1.0)}, current={"e": 5})
