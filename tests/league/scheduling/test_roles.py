"""AlphaStar roles: opponent distributions, the snapshot rule, resets. Pure, seeded."""

from __future__ import annotations

import numpy as np
import pytest

from league.scheduling.matchmaking import WinRateTable
from league.scheduling.roles import (
    SELF,
    RoleConfig,
    SnapshotRule,
    check_role,
    current_main_id,
    expected_win_rate,
    learner_names,
    opponent_distribution,
    reset_after_snapshot,
    snapshot_name,
)

BASE = ("random", "heuristic")


def dist(role, *, past=(), baselines=BASE, main_agents=(), past_main=(), rates=None, config=None):
    ids, probs = opponent_distribution(role, past=list(past), baselines=list(baselines),
                                       main_agents=list(main_agents), past_main=list(past_main),
                                       win_rates=rates or {}, config=config or RoleConfig())
    assert probs.sum() == pytest.approx(1.0)
    return dict(zip(ids, probs))


def test_main_agent_plays_itself_35_percent_and_pfsp_squared_over_everyone_past():
    d = dist("main", past=["s1", "s2"], rates={"random": 0.9, "heuristic": 0.4, "s1": 0.5, "s2": 0.8})
    assert d[SELF] == pytest.approx(0.35)
    # (1-x)^2 weights: 0.01, 0.36, 0.25, 0.04 over 0.66 total, times 0.65
    assert d["random"] == pytest.approx(0.65 * 0.01 / 0.66)
    assert d["heuristic"] == pytest.approx(0.65 * 0.36 / 0.66)
    assert d["s1"] == pytest.approx(0.65 * 0.25 / 0.66)
    assert d["s2"] == pytest.approx(0.65 * 0.04 / 0.66)


def test_main_agent_alone_only_plays_itself():
    assert dist("main", baselines=()) == {SELF: 1.0}


def test_unseen_opponents_read_half_and_share_equally():
    d = dist("main", config=RoleConfig(self_play=0.0))
    assert d == {"random": 0.5, "heuristic": 0.5}


def test_main_agent_baseline_share_of_the_pfsp_games_goes_to_the_baselines_alone():
    rates = {"random": 0.9, "heuristic": 0.4, "s1": 0.5}
    # 0.8 of the games are PFSP; half of them among the baselines: (1-x)^2 = 0.01, 0.36 over 0.37,
    # the other half over everyone: 0.01, 0.36, 0.25 over 0.62.
    d = dist("main", past=["s1"], rates=rates, config=RoleConfig(self_play=0.2, baseline_share=0.5))
    assert d[SELF] == pytest.approx(0.2)
    assert d["heuristic"] == pytest.approx(0.4 * 0.36 / 0.37 + 0.4 * 0.36 / 0.62)
    assert d["random"] == pytest.approx(0.4 * 0.01 / 0.37 + 0.4 * 0.01 / 0.62)
    assert d["s1"] == pytest.approx(0.4 * 0.25 / 0.62)
    only = dist("main", past=["s1"], baselines=(), config=RoleConfig(self_play=0.0, baseline_share=0.5))
    assert only == {"s1": 1.0}


def test_role_config_shares_are_probabilities():
    with pytest.raises(ValueError, match="baseline_share"):
        RoleConfig(baseline_share=1.5)


def test_main_exploiter_targets_the_current_main_agents():
    main = current_main_id("main")
    d = dist("main_exploiter", main_agents=[main], past_main=["m1"], rates={main: 0.3})
    assert d == {main: 1.0}


def test_main_exploiter_that_cannot_win_also_learns_from_past_main_snapshots():
    main = current_main_id("main")
    d = dist("main_exploiter", main_agents=[main], past_main=["m1", "m2"],
             rates={main: 0.05, "m1": 0.5, "m2": 0.9})
    assert d[main] == pytest.approx(0.5)
    # variance weighting x(1-x): 0.25 and 0.09
    assert d["m1"] == pytest.approx(0.5 * 0.25 / 0.34)
    assert d["m2"] == pytest.approx(0.5 * 0.09 / 0.34)


def test_main_exploiter_needs_a_main_agent():
    with pytest.raises(ValueError, match="main agent"):
        dist("main_exploiter")


def test_league_exploiter_pfsp_over_the_whole_league():
    main = current_main_id("main")
    d = dist("league_exploiter", past=["s1"], main_agents=[main],
             rates={"random": 1.0, "heuristic": 0.5, "s1": 0.0, main: 0.5})
    assert SELF not in d
    assert d["random"] == 0.0
    assert d["s1"] == pytest.approx(1.0 / 1.5)
    assert d["heuristic"] == pytest.approx(0.25 / 1.5) == pytest.approx(d[main])


def test_snapshot_rule_threshold_timeout_and_minimum_gap():
    rule = SnapshotRule(threshold=0.7, max_updates=50, min_updates=5)
    assert rule.due(0.71, 4) is None  # too soon after the last one
    assert rule.due(0.71, 5) == "beaten"
    assert rule.due(0.69, 49) is None
    assert rule.due(0.69, 50) == "timeout"
    assert rule.due(0.9, 50) == "beaten"


def test_expected_win_rate_ignores_self_play():
    ids, probs = [SELF, "a", "b"], np.array([0.5, 0.25, 0.25])
    assert expected_win_rate(ids, probs, {"a": 1.0, "b": 0.5, SELF: 0.0}) == pytest.approx(0.75)
    assert expected_win_rate([SELF], np.ones(1), {}) == 0.5


def test_resets_main_never_main_exploiter_always_league_exploiter_a_quarter():
    rng = np.random.default_rng(0)
    assert not any(reset_after_snapshot("main", r, rng) for r in ("beaten", "timeout"))
    assert reset_after_snapshot("main_exploiter", "beaten", rng)
    assert reset_after_snapshot("main_exploiter", "timeout", rng)  # stopped improving
    resets = sum(reset_after_snapshot("league_exploiter", "beaten", np.random.default_rng(s)) for s in range(4000))
    assert 900 < resets < 1100


def test_names_and_unknown_roles():
    assert snapshot_name("main", "league_exploiter", 3) == "main-league_exploiter-g3"
    with pytest.raises(ValueError, match="main_exploiter"):
        check_role("exploiter")
    assert learner_names(["main", "main_exploiter", "main_exploiter"]) == [
        ("main", "main"), ("main_exploiter0", "main_exploiter"), ("main_exploiter1", "main_exploiter")]
    for roles, why in (([], "at least one role"), (["main_exploiter"], "add 'main'"), (["coach"], "unknown")):
        with pytest.raises(ValueError, match=why):
            learner_names(roles)


def test_win_rate_table_survives_json():
    table = WinRateTable(decay=0.9, prior_games=2.0)
    for score in (1.0, 0.0, 0.5, 1.0):
        table.record("a", score)
    table.record("b", 0.0)
    again = WinRateTable.from_json(table.to_json())
    assert again.opponents() == ["a", "b"]
    assert again.win_rate("a") == table.win_rate("a") and again.games("b") == table.games("b")
    assert again.decay == 0.9 and again.prior_games == 2.0
