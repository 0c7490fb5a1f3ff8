"""Whom the final evaluation plays (league.competitions.final_schedule)."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import numpy as np

from league.competitions.certification import CertificationConfig, FinalEvaluation, PairStatus, certify
from league.competitions.final_schedule import final_pairings
from league.evaluation.headtohead import Game


def seat_swapped_couples(games) -> bool:
    return all((a.first, a.second) == (b.second, b.first) for a, b in zip(games[0::2], games[1::2]))


def test_the_floor_comes_first_and_every_pairing_is_two_games_seats_swapped():
    cert = certify([f"e{k}" for k in range(6)], [], CertificationConfig(floor=4))
    games = final_pairings(cert, 12, np.random.default_rng(0))
    assert len(games) == 12 and seat_swapped_couples(games)
    assert Counter(e for g in games for e in (g.first, g.second)) == {f"e{k}": 4 for k in range(6)}
    assert len({g.seed for g in games}) == 12


def test_same_rng_same_batch():
    cert = certify([f"e{k}" for k in range(7)], [], CertificationConfig(floor=6))
    one = final_pairings(cert, 20, np.random.default_rng(3))
    assert one == final_pairings(cert, 20, np.random.default_rng(3))
    assert one != final_pairings(cert, 20, np.random.default_rng(4))


def test_after_the_floor_only_open_tested_pairs_play():
    entries = list("abcdef")
    games = [Game("a", "b", 1.0), Game("b", "a", 0.0)] * 100  # a and b: separated
    for a, b in pairwise(entries[1:]):
        games += [Game(a, b, 1.0), Game(b, a, 0.0)] * 2
    cert = certify(entries, games, CertificationConfig(top_k=3, floor=4))
    assert cert.floor_met
    assert [s.entry for s in cert.standings[:2]] == ["a", "b"]
    assert cert.pairs[0].status is PairStatus.SEPARATED
    open_pairs = {(p.upper, p.lower) for p in cert.open_pairs()}
    assert len(open_pairs) >= 2
    batch = final_pairings(cert, 64, np.random.default_rng(0))
    assert len(batch) == 64 and seat_swapped_couples(batch)
    assert {(g.first, g.second) for g in batch[0::2]} == open_pairs


def test_a_certified_evaluation_plays_nothing():
    games = [Game("a", "b", 1.0), Game("b", "a", 0.0)] * 200
    cert = certify(["a", "b"], games, CertificationConfig(floor=4))
    assert cert.certified
    assert final_pairings(cert, 64, np.random.default_rng(0)) == []


def test_a_small_pool_is_certified_in_its_true_order():
    strength = {f"e{k}": -0.6 * k for k in range(8)}
    evaluation = FinalEvaluation(list(strength), CertificationConfig(top_k=3, floor=8))
    rng = np.random.default_rng(11)
    played = 0
    while not (cert := evaluation.certificate()).certified:
        batch = final_pairings(cert, 64, rng)
        evaluation.add(Game(g.first, g.second, float(rng.random() < 1 / (1 + np.exp(strength[g.second] -
                                                                                   strength[g.first]))))
                       for g in batch)
        played += len(batch)
        assert played < 100_000
    assert [s.entry for s in cert.standings[:4]] == ["e0", "e1", "e2", "e3"]
    assert min(s.games for s in cert.standings) >= 8
    assert all(p.status is PairStatus.SEPARATED for p in cert.pairs)


def test_a_pool_of_one_is_certified_and_plays_nothing():
    cert = certify(["solo"], [], CertificationConfig(floor=10))
    assert cert.certified and cert.pairs == ()
    assert final_pairings(cert, 64, np.random.default_rng(0)) == []
