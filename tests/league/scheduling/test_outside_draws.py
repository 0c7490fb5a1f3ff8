"""The outside leagues' opponent draws (league.scheduling.outside_draws), on plain values."""

from __future__ import annotations

import numpy as np
import pytest

from league.scheduling.matchmaking import WinRateTable
from league.scheduling.outside_draws import Candidate, PastPlayer, opponent_draws, sample_draws
from league.scheduling.roles import SELF, RoleConfig

CONFIG = RoleConfig(baseline_share=0.5)
BASELINES = [Candidate("1", "builtin", 1, "random", "random"), Candidate("2", "builtin", 2, "greedy", "greedy")]


def _snapshot(agent_id: int, learner: str, role: str) -> PastPlayer:
    return PastPlayer(Candidate(str(agent_id), "snapshot", agent_id, None, f"{learner}-{agent_id}"), learner, role)


def test_a_main_learner_draws_self_snapshots_baselines_and_the_board_once_each():
    table = WinRateTable()
    table.record_many("10", 20, 18.0)  # beats snapshot 10: PFSP (squared) draws it less
    snapshots = [_snapshot(10, "main", "main"), _snapshot(11, "main", "main")]
    board = [Candidate("11", "agent", 11, "k11", "also a snapshot"), Candidate("30", "agent", 30, "k30", "neural")]
    draws = opponent_draws("main", "main", table, snapshots, BASELINES, board, CONFIG)
    by_id = {d.candidate.id: d for d in draws}
    assert sorted(by_id) == sorted([SELF, "1", "2", "10", "11", "30"]) and len(draws) == len(by_id)
    assert by_id["11"].candidate.kind == "snapshot"  # the league's own, not the board's copy
    assert sum(d.probability for d in draws) == pytest.approx(1.0)
    assert by_id[SELF].probability == pytest.approx(CONFIG.self_play) and by_id[SELF].win_rate == 0.5
    assert by_id["10"].games == pytest.approx(table.games("10")) and by_id["10"].win_rate > 0.8
    assert by_id["10"].probability < by_id["11"].probability
    # baseline_share of the non-self games go to the baselines alone, on top of their share of everyone
    assert by_id["1"].probability + by_id["2"].probability > (1 - CONFIG.self_play) * CONFIG.baseline_share


def test_a_main_exploiter_plays_the_other_learners_latest_main_snapshots():
    snapshots = [_snapshot(10, "main", "main"), _snapshot(11, "main", "main"), _snapshot(12, "other", "main"),
                 _snapshot(13, "hunter", "main_exploiter")]
    draws = opponent_draws("hunter", "main_exploiter", WinRateTable(), snapshots, BASELINES, [], CONFIG)
    assert {d.candidate.id: d.probability for d in draws} == pytest.approx({"11": 0.5, "12": 0.5})


def test_a_main_exploiter_with_no_main_to_exploit_says_so():
    with pytest.raises(ValueError, match="main agent to exploit"):
        opponent_draws("hunter", "main_exploiter", WinRateTable(), [_snapshot(10, "hunter", "main")], BASELINES, [],
                       CONFIG)


def test_sample_draws_follows_the_probabilities_and_its_seed():
    probabilities = [0.0, 0.75, 0.25]
    drawn = sample_draws(probabilities, 4000, np.random.default_rng(3))
    assert drawn == sample_draws(probabilities, 4000, np.random.default_rng(3))
    counts = np.bincount(drawn, minlength=3)
    assert counts[0] == 0 and abs(counts[1] / 4000 - 0.75) < 0.03
