"""The ladder scheduler: expected information, line-ups, and its phases."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from scipy.special import ndtr

from league.ratings.book import RatingBook, Standing
from league.ratings.closed_form import rate_1v1_fast
from league.ratings.information import expected_variance_reduction
from league.ratings.rating import Rating, RatingEnv
from league.scheduling.lineups import WINDOW, SlotBoard, candidate_pairs, select_lineups
from league.scheduling.scheduler import (
    LadderScheduler,
    Phase,
    SchedulerConfig,
    information_lineups,
    slot_board,
    unsettled_slots,
)

ENV = RatingEnv()
PLAYERS = ("player", "player")


def settled_book(n: int, gap: float = 6.0, sigma: float = 1.0, role: str = "player") -> RatingBook:
    """``n`` agents ``a0..`` with well separated, certain ratings (a0 strongest)."""
    standings = {(f"a{i}", role): Standing(Rating(40.0 - gap * i, sigma), games=50) for i in range(n)}
    return RatingBook(ENV, standings)


@pytest.mark.parametrize("a, b", [((25, 8.333), (25, 8.333)), ((25, 8.333), (30, 1.0)),
                                  ((20, 1.5), (35, 1.2)), ((20, 3.0), (24, 2.0)), ((0, 0.5), (40, 0.5))])
def test_expected_reduction_is_the_outcome_weighted_trueskill_update(a, b):
    ra, rb = Rating(*a), Rating(*b)
    c = np.sqrt(ra.sigma**2 + rb.sigma**2 + 2 * ENV.tau**2 + 2 * ENV.beta**2)
    t, eps = (ra.mu - rb.mu) / c, ENV.draw_margin_1v1 / c
    p_a, p_b = ndtr(t - eps), ndtr(-t - eps)
    a_wins, b_loses = rate_1v1_fast(ra, rb, env=ENV)
    b_wins, a_loses = rate_1v1_fast(rb, ra, env=ENV)
    a_draw, b_draw = rate_1v1_fast(ra, rb, drawn=True, env=ENV)
    expect_a = ra.sigma**2 - (p_a * a_wins.sigma**2 + p_b * a_loses.sigma**2 + (1 - p_a - p_b) * a_draw.sigma**2)
    expect_b = rb.sigma**2 - (p_a * b_loses.sigma**2 + p_b * b_wins.sigma**2 + (1 - p_a - p_b) * b_draw.sigma**2)
    drop_a, drop_b = expected_variance_reduction(ra.mu, ra.sigma, rb.mu, rb.sigma, env=ENV)
    assert drop_a == pytest.approx(expect_a, rel=1e-5, abs=1e-9)
    assert drop_b == pytest.approx(expect_b, rel=1e-5, abs=1e-9)


def test_information_is_highest_for_uncertain_evenly_matched_pairs():
    def drop(mu_a, s_a, mu_b, s_b):
        return float(sum(expected_variance_reduction(mu_a, s_a, mu_b, s_b, env=ENV)))

    assert drop(25, 3, 25, 3) > drop(25, 3, 30, 3) > drop(25, 3, 40, 3)
    assert drop(25, 5, 25, 5) > drop(25, 2, 25, 2) > drop(25, 1, 25, 1)
    # A certain mismatch teaches nothing: tau adds more variance than the result removes.
    assert drop(0, 0.5, 60, 0.5) < 0


def test_a_new_agent_gets_most_of_a_batch_against_opponents_near_its_prior():
    book = settled_book(10, gap=3.0)
    agents = [f"a{i}" for i in range(10)] + ["new"]
    plan = LadderScheduler(PLAYERS, ENV, seed=0).plan(agents, book, now=0.0)
    assert plan.phase == Phase.ACTIVE and plan.reason == "start"
    with_new = [lineup for lineup in plan.lineups if "new" in lineup]
    assert len(with_new) > 0.7 * len(plan.lineups)
    # Its opponents are the agents rated nearest its prior mu of 25 (a4 = 28, a5 = 25).
    opponents = Counter(a for lineup in with_new for a in lineup if a != "new")
    assert {a for a, _ in opponents.most_common(2)} <= {"a3", "a4", "a5", "a6"}
    seat0 = sum(lineup[0] == "new" for lineup in with_new)
    assert 0.25 < seat0 / len(with_new) < 0.75


def test_a_fresh_board_spreads_the_batch_over_many_pairs_with_balanced_seats():
    agents = [f"a{i}" for i in range(8)]
    lineups = information_lineups(agents, PLAYERS, RatingBook(ENV), 280, np.random.default_rng(1),
                                  env=ENV, config=SchedulerConfig())
    assert all(a != b for a, b in lineups)
    pairs = Counter(tuple(sorted(lineup)) for lineup in lineups)
    assert len(pairs) == 28  # every pair of 8 agents
    assert max(pairs.values()) <= 3 * min(pairs.values())
    games = Counter(a for lineup in lineups for a in lineup)
    assert max(games.values()) - min(games.values()) <= 0.2 * max(games.values())
    first = Counter(lineup[0] for lineup in lineups)
    assert all(abs(first[a] - games[a] / 2) < 4 * np.sqrt(games[a]) for a in agents)


def test_role_envs_pair_across_roles_and_use_each_roles_own_rating():
    # "x" is certain as a seeker but brand new as a hider; the others are settled.
    standings = {(f"s{i}", role): Standing(Rating(20.0 + 3 * i, 1.0), games=40)
                 for i in range(4) for role in ("hider", "seeker")}
    standings[("x", "seeker")] = Standing(Rating(25.0, 1.0), games=40)
    book = RatingBook(ENV, standings)
    agents = ["s0", "s1", "s2", "s3", "x"]
    lineups = information_lineups(agents, ("hider", "seeker"), book, 60, np.random.default_rng(2),
                                  env=ENV, config=SchedulerConfig())
    as_hider = sum(lineup[0] == "x" for lineup in lineups)
    as_seeker_only = sum(lineup[1] == "x" != lineup[0] for lineup in lineups)
    assert as_hider > 0.6 * len(lineups) and as_seeker_only < 0.2 * len(lineups)
    # Every line-up is one hider slot against one seeker slot: rating it moves exactly those.
    for hider, seeker in lineups[:5]:
        changes = book.apply([hider, seeker], ["hider", "seeker"], winner=0)
        assert {(c.agent, c.role) for c in changes} == {(hider, "hider"), (seeker, "seeker")}


def test_three_team_lineups_take_distinct_agents():
    agents = [f"a{i}" for i in range(6)]
    lineups = information_lineups(agents, ("player",) * 3, RatingBook(ENV), 30,
                                  np.random.default_rng(3), env=ENV, config=SchedulerConfig())
    assert len(lineups) == 30 and all(len(set(lineup)) == 3 for lineup in lineups)
    assert len(Counter(a for lineup in lineups for a in lineup)) == 6


def test_large_boards_only_pair_neighbours_in_mu_order():
    n = 450
    board = SlotBoard([f"a{i}" for i in range(n)], ["player"] * n, np.linspace(0, 50, n),
                      np.full(n, 2.0), np.ones(n))
    a, b = candidate_pairs(board, "player", "player")
    assert a.size == sum(min(WINDOW, n - 1 - i) for i in range(n))
    assert np.abs(a - b).max() == WINDOW  # mu order is index order here
    lineups = select_lineups(board, PLAYERS, 50, np.random.default_rng(4), env=ENV)
    assert len(lineups) == 50


def test_rank_span_keeps_ambiguous_agents_unsettled_only_while_they_can_improve():
    # Eight agents of equal strength and sigma 1.1: their ranges span all 8 ranks.
    book = RatingBook(ENV, {(f"a{i}", "player"): Standing(Rating(25.0, 1.1), games=80) for i in range(8)})
    board = slot_board([f"a{i}" for i in range(8)], PLAYERS, book)
    config = SchedulerConfig(target_sigma=1.5)
    # With the live tau sigma is near its floor: one more match cuts < 2% of the variance.
    assert not unsettled_slots(board, config, env=ENV).any()
    assert unsettled_slots(board, config, env=RatingEnv(tau=0.0)).all()
    assert not unsettled_slots(board, SchedulerConfig(target_sigma=1.5, rank_span=None),
                               env=RatingEnv(tau=0.0)).any()


def settle(scheduler: LadderScheduler, agents: list[str], book: RatingBook) -> float:
    """Drive a settled board through its start-up check; returns the time reached."""
    first = scheduler.plan(agents, book, now=0.0)
    assert first.phase == Phase.CHECK and first.lineups
    second = scheduler.plan(agents, book, now=1.0)
    assert second.phase == Phase.SETTLED and not second.lineups and second.wait_s > 0
    return 1.0


def test_a_settled_board_plays_only_the_maintenance_trickle():
    config = SchedulerConfig(maintenance_rate=1.0, maintenance_batch=8, drift_every_s=10_000)
    scheduler = LadderScheduler(PLAYERS, ENV, config, seed=5)
    agents, book = [f"a{i}" for i in range(6)], settled_book(6)
    now = settle(scheduler, agents, book)
    played = 0
    for step in range(1, 601):  # ten minutes of plans, one every second
        plan = scheduler.plan(agents, book, now=now + step)
        assert plan.phase == Phase.SETTLED
        played += len(plan.lineups)
        assert not plan.lineups or len(plan.lineups) == 8
    assert 560 <= played <= 600  # about 1 match/s, never more
    # Called rarely, it does not bank credit for a burst later.
    assert len(scheduler.plan(agents, book, now=now + 5_000).lineups) == 8


def test_a_new_agent_wakes_a_settled_board_and_it_settles_again_after_placement():
    scheduler = LadderScheduler(PLAYERS, ENV, SchedulerConfig(drift_every_s=10_000), seed=6)
    agents, book = [f"a{i}" for i in range(6)], settled_book(6)
    now = settle(scheduler, agents, book)
    plan = scheduler.plan([*agents, "new"], book, now=now + 1)
    assert plan.phase == Phase.ACTIVE and plan.reason == "new agent"
    assert sum("new" in lineup for lineup in plan.lineups) > 0.7 * len(plan.lineups)
    book.standings[("new", "player")] = Standing(Rating(31.0, 1.0), games=30)  # placed
    assert scheduler.plan([*agents, "new"], book, now=now + 2).phase == Phase.SETTLED


def test_a_retirement_starts_a_check_burst_then_settles():
    scheduler = LadderScheduler(PLAYERS, ENV, SchedulerConfig(drift_every_s=10_000), seed=7)
    agents, book = [f"a{i}" for i in range(6)], settled_book(6)
    now = settle(scheduler, agents, book)
    plan = scheduler.plan(agents[:-1], book, now=now + 1)
    assert plan.phase == Phase.CHECK and plan.reason == "retirement" and plan.lineups
    assert all("a5" not in lineup for lineup in plan.lineups)
    assert scheduler.plan(agents[:-1], book, now=now + 2).phase == Phase.SETTLED


def test_the_drift_check_raises_the_rate_and_repeats_while_results_surprise():
    config = SchedulerConfig(drift_every_s=600.0)
    scheduler = LadderScheduler(PLAYERS, ENV, config, seed=8)
    agents, book = [f"a{i}" for i in range(6)], settled_book(6, gap=2.0)
    now = settle(scheduler, agents, book)
    assert scheduler.plan(agents, book, now=now + 300).phase == Phase.SETTLED
    check = scheduler.plan(agents, book, now=now + 601)
    assert check.phase == Phase.CHECK and check.reason == "drift check" and check.lineups
    # Meanwhile the best agent lost six times to the worst: far beyond what TrueSkill
    # expects of six games.
    for _ in range(6):
        book.apply(["a5", "a0"], list(PLAYERS), winner=0)
    again = scheduler.plan(agents, book, now=now + 602)
    assert again.phase == Phase.CHECK and again.lineups
    assert again.reason.startswith("drift: a0") or again.reason.startswith("drift: a5")
    # Plausible results this time (no games at all): the board settles.
    assert scheduler.plan(agents, book, now=now + 603).phase == Phase.SETTLED


def test_a_drift_check_whose_results_match_the_ratings_settles():
    scheduler = LadderScheduler(PLAYERS, ENV, SchedulerConfig(drift_every_s=600.0, check_games=20), seed=9)
    agents, book = [f"a{i}" for i in range(6)], settled_book(6, gap=2.0)
    truth = {a: book.rating((a, "player")).mu for a in agents}
    now = settle(scheduler, agents, book)
    check = scheduler.plan(agents, book, now=now + 601)
    assert check.phase == Phase.CHECK and len(check.lineups) == 60
    rng = np.random.default_rng(10)
    for first, second in check.lineups:  # outcomes drawn from the rated skills themselves
        gap = (truth[first] - truth[second]) / (np.sqrt(2) * ENV.beta)
        book.apply([first, second], list(PLAYERS), winner=0 if rng.random() < ndtr(gap) else 1)
    assert scheduler.plan(agents, book, now=now + 602).phase == Phase.SETTLED


def test_agents_of_one_role_fill_only_that_roles_seats() -> None:
    """Regression (issue 11): a submitted hider must never be lined up as a seeker."""
    book = RatingBook(RatingEnv())
    plays = {"h1": "hider", "h2": "hider", "s1": "seeker", "random": None}
    lineups = information_lineups(list(plays), ("hider", "seeker"), book, 200, np.random.default_rng(0),
                                  env=RatingEnv(), config=SchedulerConfig(), plays=plays)
    assert {hider for hider, _ in lineups} == {"h1", "h2", "random"}
    assert {seeker for _, seeker in lineups} == {"s1", "random"}
    board = slot_board(list(plays), ("hider", "seeker"), book, plays)
    assert sorted(zip(board.agents, board.roles)) == [
        ("h1", "hider"), ("h2", "hider"), ("random", "hider"), ("random", "seeker"), ("s1", "seeker")]
