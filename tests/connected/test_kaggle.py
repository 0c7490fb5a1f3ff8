"""Kaggle ConnectX agents, unchanged, as connected agents (arena.client.connected.kaggle).

The agents are the ones kaggle-environments ships (``negamax`` and ``random`` in
kaggle_environments/envs/connectx/connectx.py); the package is in the ``dev`` extra
(pinned to 1.12.0, whose dependencies fit ours: docs/connected.md says why).
"""

from __future__ import annotations

import numpy as np
import pytest

from arena.client.connected.kaggle import (
    CONNECTX_CONFIGURATION,
    KaggleStruct,
    call_kaggle_agent,
    connectx_board,
    connectx_observation,
    connectx_request_act,
)
from arena.connected.protocol import pack_array
from arena.engine import MatchEngine
from arena.engine.plan import plan_matches
from arena.runners import AgentSource
from envs.connect_four import ConnectFourCore
from envs.registry import get_spec
from tests.connected.test_live_protocol import ENV, wait_online

connectx = pytest.importorskip("kaggle_environments.envs.connectx.connectx",
                               reason="kaggle-environments is in the dev extra")


def position(columns: list[int]) -> tuple[np.ndarray, np.ndarray, int]:
    """Arena's observation and mask of the player to move after ``columns``, and its seat."""
    core = ConnectFourCore()
    batch = core.new_batch(1)
    rows = np.array([0])
    for c in columns:
        core.play(batch, rows, np.array([c]))
    obs, mask = core.observe(batch, rows)
    return obs[0], mask[0], int(batch.to_move[0])


def test_board_and_mark_of_a_hand_built_position_for_both_seats():
    # Seat 0 (mark 1) played 3, 4, 3; seat 1 (mark 2) played 3, 0. Seat 1 is to move.
    obs, _, seat = position([3, 3, 4, 0, 3])
    assert seat == 1
    empty = [0] * 7
    expected = [*empty, *empty, *empty,
                0, 0, 0, 1, 0, 0, 0,  # row 3: seat 0's second piece in column 3
                0, 0, 0, 2, 0, 0, 0,  # row 4
                2, 0, 0, 1, 1, 0, 0]  # row 5, the bottom
    assert connectx_board(obs, seat) == expected
    observation = connectx_observation(obs, seat, step=5, overage_s=12.5)
    assert observation.mark == observation["mark"] == 2
    assert observation.board == expected and observation.step == 5 and observation.remainingOverageTime == 12.5
    # One more move (seat 1 plays column 6): seat 0 sees the same marks, and is mark 1.
    obs, _, seat = position([3, 3, 4, 0, 3, 6])
    assert seat == 0
    assert connectx_board(obs, seat) == [*expected[:-1], 2]
    assert connectx_observation(obs, seat).mark == 1


def test_board_matches_kaggles_own_rules_over_random_games():
    config = KaggleStruct(CONNECTX_CONFIGURATION)
    rng = np.random.default_rng(0)
    for _ in range(20):
        moves: list[int] = []
        board = [0] * 42
        for ply in range(int(rng.integers(0, 30))):
            obs, mask, seat = position(moves)
            assert seat == ply % 2 and connectx_board(obs, seat) == board
            legal = [c for c in range(7) if board[c] == 0]
            assert list(np.flatnonzero(mask)) == legal
            column = int(rng.choice(legal))
            connectx.play(board, column, seat + 1, config)
            moves.append(column)
            if connectx.is_win(board, column, seat + 1, config):
                break


def test_request_act_calls_the_agent_as_kaggle_does():
    seen = []

    def agent(observation, configuration):
        seen.append((observation, configuration))
        return next(c for c in range(configuration.columns) if observation.board[c] == 0)

    obs0, mask0, _ = position([])
    obs1, mask1, _ = position([2])
    request = {"type": "request", "id": "r1", "matches": ["m0", "m1"], "seats": [0, 1], "plies": [0, 1],
               "budget_ms": 1500, "overage_ms": [30000, 29000],
               "obs": pack_array(np.stack([obs0, obs1])), "mask": pack_array(np.stack([mask0, mask1]))}
    assert connectx_request_act(agent)(request) == [0, 0]
    (o0, c0), (o1, c1) = seen
    assert (o0.mark, o1.mark, o1.step, o1["remainingOverageTime"]) == (1, 2, 1, 29.0)
    assert o1.board[5 * 7 + 2] == 1 and sum(o1.board) == 1
    assert (c0.rows, c0.columns, c0.inarow, c0.actTimeout, c0["timeout"]) == (6, 7, 4, 1.5, 1.5)
    # A one-argument agent gets the observation only; a raising agent forfeits only its row.
    assert call_kaggle_agent(lambda obs: obs.mark, o1, c1) == 2

    def flaky(observation, configuration):
        if observation.mark == 2:
            raise RuntimeError("boom")
        return 3

    assert connectx_request_act(flaky)(request) == [3, None]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the adapter, not the database, is under test
def test_kaggle_negamax_beats_kaggle_random_both_connected_without_forfeits(live, run_client):
    """Both of kaggle-environments' ConnectX agents play through the adapter, on both seats."""
    token = live.user("kaggler")
    negamax = live.connected_agent(token, "kaggle-negamax")
    rand = live.connected_agent(token, "kaggle-random")
    run_client(live.url, token, negamax["id"], request_act=connectx_request_act(connectx.negamax_agent))
    run_client(live.url, token, rand["id"], request_act=connectx_request_act(connectx.random_agent),
               encoding="json")
    wait_online(live, negamax["id"])
    wait_online(live, rand["id"])
    connected = live.services.connected_policies()
    policies = {a["key"]: connected.get(ENV, AgentSource(key=a["key"], connected=a["id"])) for a in (negamax, rand)}
    jobs = plan_matches([negamax["key"], rand["key"]], get_spec(ENV), 6, seed=11)
    with MatchEngine() as engine:
        records = engine.play(ENV, jobs, policies)
    assert [r.termination for r in records] == ["normal"] * 6
    assert {r.seats[0] for r in records} == {negamax["key"], rand["key"]}  # both seats played
    # Negamax looks for an immediate win before anything else: given the right board and
    # mark it never misses one. An adapter that swapped the marks or the board would have it
    # block the opponent's four instead, or play blind.
    for r in records:
        assert_immediate_wins_taken(r.actions, r.seats.index(negamax["key"]))
    wins = sum(r.winner is not None and r.seats[r.winner] == negamax["key"] for r in records)
    # Negamax beats random in about 59 games of 60 (60 played in process, 40 of 40 through
    # the adapter): 4 wins of 6 fail once in thousands of runs; a broken adapter loses most.
    assert wins >= 4, [(r.seats, r.winner) for r in records]


def assert_immediate_wins_taken(actions: list[tuple[int, int]], seat: int) -> None:
    """Wherever ``seat`` had a winning column on its move in this match's ``actions``, it played one."""
    config = KaggleStruct(CONNECTX_CONFIGURATION)
    board = [0] * 42
    for mover, column in actions:
        mark = mover + 1
        if mover == seat:
            winning = [c for c in range(7) if board[c] == 0 and connectx.is_win(board, c, mark, config, False)]
            assert not winning or column in winning, (board, mark, winning, column)
        connectx.play(board, column, mark, config)
