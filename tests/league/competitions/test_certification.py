"""The final evaluation's stopping rule (league.competitions.certification) on constructed results."""

from __future__ import annotations

import json

import numpy as np
import pytest

from league.competitions.certification import (
    CertificationConfig,
    FinalEvaluation,
    PairStatus,
    certify,
)
from league.evaluation.headtohead import Game


def unit_games(a: str, b: str, a_scores: list[tuple[float, float]]) -> list[Game]:
    """Units of two games: ``a`` seated first scoring ``s1``, then seated second scoring ``s2``."""
    return [g for s1, s2 in a_scores for g in (Game(a, b, s1), Game(b, a, 1.0 - s2))]


def drawn(a: str, b: str, p: float, units: int, seed: int) -> list[Game]:
    rng = np.random.default_rng(seed)
    wins = rng.random((units, 2)) < p
    return unit_games(a, b, [(float(x), float(y)) for x, y in wins])


def status(cert, upper, lower):
    return next(p for p in cert.pairs if (p.upper, p.lower) == (upper, lower))


def test_a_clearly_stronger_entry_is_separated_and_the_pool_certified():
    cert = certify(["a", "b"], drawn("a", "b", 0.75, 300, seed=0), CertificationConfig(floor=10))
    assert [s.entry for s in cert.standings] == ["a", "b"]
    pair = status(cert, "a", "b")
    assert pair.status is PairStatus.SEPARATED and pair.kind == "adjacent"
    assert pair.units == 300 and pair.games == 600
    assert 0.5 < pair.low < pair.score < pair.high and pair.confidence > 0.95
    assert cert.certified and cert.floor_met and cert.family_pairs == 1


def test_even_entries_are_declared_tied_not_separated():
    # Each wins when seated first: every unit scores exactly 1/2.
    cert = certify(["a", "b"], unit_games("a", "b", [(1.0, 0.0)] * 400))
    pair = cert.pairs[0]
    assert pair.status is PairStatus.TIED
    assert 0.47 < pair.low <= 0.5 <= pair.high < 0.53
    assert cert.certified


def test_few_games_leave_the_pair_open_and_the_evaluation_uncertified():
    cert = certify(["a", "b"], drawn("a", "b", 0.75, 10, seed=1), CertificationConfig(floor=0))
    assert cert.pairs[0].status is PairStatus.OPEN
    assert not cert.certified
    assert cert.open_pairs() == [cert.pairs[0]]


def test_the_floor_holds_certification_back():
    games = drawn("a", "b", 0.8, 200, seed=2) + drawn("b", "c", 0.8, 200, seed=3)
    games += unit_games("c", "d", [(1.0, 1.0)] * 2)  # d has played only 4 games
    cert = certify(["a", "b", "c", "d"], games, CertificationConfig(top_k=1, floor=5))
    assert [p.status for p in cert.pairs] == [PairStatus.SEPARATED]
    assert not cert.floor_met and not cert.certified
    assert certify(["a", "b", "c", "d"], games, CertificationConfig(top_k=1, floor=4)).certified


def test_the_top_k_chain_and_its_boundary_pair_are_tested():
    games = []
    for k, (a, b) in enumerate(zip("abcde", "bcdef")):
        games += drawn(a, b, 0.9, 60, seed=k)
    cert = certify(list("abcdef"), games, CertificationConfig(top_k=3, floor=0))
    assert [s.entry for s in cert.standings] == list("abcdef")
    assert [(p.upper, p.lower, p.kind) for p in cert.pairs if p.kind == "adjacent"] == [
        ("a", "b", "adjacent"), ("b", "c", "adjacent"), ("c", "d", "adjacent")]
    assert all(p.status is PairStatus.SEPARATED for p in cert.pairs if p.kind == "adjacent")


def test_an_entry_whose_interval_reaches_the_top_k_is_a_challenger():
    games = []
    for k, (a, b) in enumerate(zip("abcd", "bcde")):
        games += drawn(a, b, 0.9, 60, seed=k)
    games += unit_games("f", "e", [(1.0, 0.0)])  # f: two games, a wide interval
    cert = certify(list("abcdef"), games, CertificationConfig(top_k=3, floor=0))
    ranks = {s.entry: s for s in cert.standings}
    assert ranks["f"].rank > 4 and ranks["f"].rank_lo <= 3
    challengers = [(p.upper, p.lower) for p in cert.pairs if p.kind == "challenger"]
    assert (cert.standings[2].entry, "f") in challengers
    assert not cert.certified


def test_head_to_head_against_the_rating_order_is_reversed():
    # b wins its meetings with a; then a crushes c and d, which b beats less often: a cycle-like
    # pool where the ratings put a first and head to head says otherwise.
    games = drawn("a", "b", 0.3, 150, seed=4)
    games += drawn("a", "c", 0.98, 150, seed=0) + drawn("a", "d", 0.98, 150, seed=1)
    games += drawn("b", "c", 0.6, 150, seed=2) + drawn("b", "d", 0.6, 150, seed=3)
    cert = certify(list("abcd"), games, CertificationConfig(top_k=1, floor=0))
    assert [s.entry for s in cert.standings][:2] == ["a", "b"]
    assert cert.pairs[0].status is PairStatus.REVERSED and cert.pairs[0].high < 0.5
    assert not cert.certified
    assert cert.open_pairs() == [cert.pairs[0]]


def test_the_union_bound_grows_with_the_pool():
    games = drawn("a", "b", 0.7, 200, seed=5)
    small = certify(["a", "b"], games)
    others = [f"other{k}" for k in range(30)]
    for other in others:  # below b, so that a and b stay the top pair
        games += unit_games("b", other, [(1.0, 1.0)])
    large = certify(["a", "b"] + others, games, CertificationConfig(top_k=1, floor=0))
    assert large.family_pairs == 32 * 31 // 2
    assert (large.pairs[0].upper, large.pairs[0].lower) == ("a", "b")
    assert small.pairs[0].confidence > large.pairs[0].confidence > 0.0
    assert small.pairs[0].low > large.pairs[0].low


def test_a_leftover_game_waits_for_its_partner():
    games = unit_games("a", "b", [(1.0, 1.0)] * 5) + [Game("a", "b", 1.0)]
    cert = certify(["a", "b"], games)
    assert cert.pairs[0].games == 11 and cert.pairs[0].units == 5


def test_same_games_same_certificate_whether_folded_at_once_or_in_batches():
    games = []
    for k, (a, b) in enumerate(zip("abcde", "bcdef")):
        games += drawn(a, b, 0.6, 80, seed=10 + k)
    once = certify(list("abcdef"), games, CertificationConfig(top_k=3))
    evaluation = FinalEvaluation(list("abcdef"), CertificationConfig(top_k=3))
    for lo in range(0, len(games), 37):
        evaluation.add(games[lo:lo + 37])
    assert evaluation.certificate() == once
    assert certify(list("abcdef"), games, CertificationConfig(top_k=3)).to_json() == once.to_json()


def test_golden_certificate():
    cert = certify(["a", "b", "c"], drawn("a", "b", 0.6, 300, seed=7) + drawn("b", "c", 0.65, 300, seed=8),
                   CertificationConfig(top_k=2, floor=0))
    got = [(p.upper, p.lower, p.status.value, p.low, p.high, round(p.confidence, 6)) for p in cert.pairs]
    assert got == GOLDEN
    assert [round(s.mu, 6) for s in cert.standings] == GOLDEN_MU


GOLDEN = [("a", "b", "separated", 0.52774, 0.65485, 0.999777), ("b", "c", "separated", 0.62413, 0.75225, 1.0)]
GOLDEN_MU = [25.609413, 24.304636, 21.27938]


def test_a_game_outside_the_pool_is_refused():
    with pytest.raises(ValueError, match="outside the frozen pool"):
        certify(["a", "b"], [Game("a", "z", 1.0)])


def test_the_published_json_is_strict_json_and_names_the_statuses():
    cert = certify(["a", "b", "c"], drawn("a", "b", 0.9, 50, seed=9), CertificationConfig(top_k=2, floor=0))
    text = json.dumps(cert.to_json(), allow_nan=False)
    data = json.loads(text)
    assert [p["status"] for p in data["pairs"]] == [p.status.value for p in cert.pairs]
    assert data["pairs"][1]["score"] is None  # b and c never met
    assert data["config"]["top_k"] == 2 and data["family_pairs"] == 3
