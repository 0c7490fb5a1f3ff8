"""Board-core invariants and the tactical helpers, against brute-force references.

Companion of ``test_differential.py`` (which compares the cores with PettingZoo):
masks never allow an illegal move, full columns and frozen finished boards, and
``winning_columns`` / ``winning_squares`` against straightforward re-implementations.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from pettingzoo.classic import connect_four_v3

from envs.board_core import BoardCore
from envs.connect_four import ConnectFourCore, winning_columns
from envs.tictactoe import TicTacToeCore, winning_squares
from tests.envs.boards import play_random_batch, play_sequence, random_actions

CORES = {"connect_four-v3": ConnectFourCore, "tictactoe-v3": TicTacToeCore}


def reference_legal(core: BoardCore, cells: np.ndarray) -> np.ndarray:
    """Legal moves straight from the rules: a column with < 6 pieces / an empty square."""
    if isinstance(core, ConnectFourCore):
        return (cells != 0).sum(axis=1) < cells.shape[1]
    return cells.reshape(len(cells), -1) == 0


@pytest.mark.parametrize("env_id", CORES)
def test_masks_allow_exactly_the_legal_moves(env_id: str) -> None:
    """Every ply of 2,000 random games: mask == rules, and the move changes one empty cell."""
    core = CORES[env_id]()
    rng = np.random.default_rng(7)
    batch = core.new_batch(2_000)
    height, width = core.shape
    while not batch.done.all():
        live = np.flatnonzero(~batch.done)
        before = batch.cells.copy()
        _, mask = core.observe(batch, live)
        assert np.array_equal(mask, reference_legal(core, before[live]))
        assert mask.any(axis=1).all(), "a live board with no legal move"
        actions = random_actions(rng, mask)
        movers = batch.to_move[live] + 1
        core.play(batch, live, actions)
        changed = (batch.cells != before).reshape(len(batch), -1)
        finished_earlier = np.ones(len(batch), dtype=bool)
        finished_earlier[live] = False
        assert not changed[finished_earlier].any(), "a finished board changed"
        assert (changed[live].sum(axis=1) == 1).all(), "a move must change exactly one cell"
        where = changed[live].argmax(axis=1)
        assert (before[live].reshape(len(live), -1)[np.arange(len(live)), where] == 0).all()
        assert (
            batch.cells[live].reshape(len(live), -1)[np.arange(len(live)), where] == movers
        ).all()
        row, col = np.divmod(where, width)
        if env_id == "connect_four-v3":
            assert np.array_equal(col, actions)
            below = batch.cells[live, np.minimum(row + 1, height - 1), col]
            assert ((row == height - 1) | (below != 0)).all(), "a piece must rest on another"
        else:
            assert np.array_equal(where, actions)


def test_connect_four_full_column_is_masked_in_core_and_pettingzoo() -> None:
    core = ConnectFourCore()
    batch, finished = play_sequence(core, [3] * 6)
    assert not any(finished) and not batch.done[0]
    obs, mask = core.observe(batch, np.array([0]))
    assert mask[0].tolist() == [True, True, True, False, True, True, True]
    assert obs[0, :, 3].sum() == 6 and obs[0, :, :3].sum() == 0
    env = connect_four_v3.env()
    env.reset()
    for move in [3] * 6:
        env.step(move)
    assert env.observe(env.agent_selection)["action_mask"].tolist() == mask[0].astype(int).tolist()
    # The reference env treats the masked move as illegal: the mover loses the game.
    mover = env.agent_selection
    env.step(3)
    assert env.terminations[mover] and env.rewards[mover] == -1
    # The core keeps playing around the full column.
    batch, finished = play_sequence(core, [3] * 6 + [0, 1, 0, 1])
    assert not any(finished) and batch.plies[0] == 10


def test_play_touches_only_the_given_rows() -> None:
    core = ConnectFourCore()
    batch = core.new_batch(4)
    core.play(batch, np.array([1, 3]), np.array([2, 5]))
    assert batch.plies.tolist() == [0, 1, 0, 1]
    assert batch.to_move.tolist() == [0, 1, 0, 1]
    assert batch.cells[[0, 2]].sum() == 0
    assert batch.cells[1, 5, 2] == 1 and batch.cells[3, 5, 5] == 1
    assert batch.cells.sum() == 2


def test_finished_board_has_no_legal_moves_only_when_full() -> None:
    core = TicTacToeCore()
    draw, _ = play_sequence(core, [0, 4, 8, 1, 7, 6, 2, 5, 3])
    win, _ = play_sequence(core, [0, 3, 1, 4, 2])
    assert not core.observe(draw, np.array([0]))[1].any()
    assert core.observe(win, np.array([0]))[1].sum() == 4


# ---------- winning_columns / winning_squares against brute force ----------


def has_four(own: np.ndarray) -> bool:
    """Brute force: any four in a row (any direction) on a ``(6, 7)`` bool board."""
    h = own[:, :-3] & own[:, 1:-2] & own[:, 2:-1] & own[:, 3:]
    v = own[:-3] & own[1:-2] & own[2:-1] & own[3:]
    d = own[:-3, :-3] & own[1:-2, 1:-2] & own[2:-1, 2:-1] & own[3:, 3:]
    a = own[3:, :-3] & own[2:-1, 1:-2] & own[1:-2, 2:-1] & own[:-3, 3:]
    return bool(h.any() or v.any() or d.any() or a.any())


def reference_winning_columns(own: np.ndarray, occupied: np.ndarray) -> list[bool]:
    out = []
    for col in range(7):
        empty_rows = np.flatnonzero(~occupied[:, col])
        if len(empty_rows) == 0:
            out.append(False)
            continue
        after = own.copy()
        after[empty_rows.max(), col] = True  # lowest empty cell: row 0 is the top
        out.append(has_four(after))
    return out


def test_winning_columns_matches_brute_force() -> None:
    rec = play_random_batch(ConnectFourCore(), 400, seed=11)
    ply, game = np.nonzero(rec.masks.any(axis=2))  # every position before a move
    pick = np.random.default_rng(12).choice(len(ply), size=1_500, replace=False)
    obs = rec.obs[ply[pick], game[pick]].astype(bool)
    occupied = obs[..., 0] | obs[..., 1]
    checked = 0
    for side in (0, 1):  # the player to move, and the opponent
        got = winning_columns(obs[..., side], occupied)
        want = np.array(
            [reference_winning_columns(o, occ) for o, occ in zip(obs[..., side], occupied)]
        )
        assert np.array_equal(got, want), f"first mismatch at sample {np.argwhere(got != want)[0]}"
        checked += int(want.sum())
    assert checked > 100, "the sample must contain winning moves"
    assert occupied[:, 0, :].any(), "the sample must contain full columns"


def test_winning_columns_predicts_the_winning_move_in_play() -> None:
    """Across a batch: a move ends the game with a win exactly when winning_columns said so."""
    rec = play_random_batch(ConnectFourCore(), 2_000, seed=13)
    ply, game = np.nonzero(rec.actions >= 0)
    obs = rec.obs[ply, game].astype(bool)
    wins = winning_columns(obs[..., 0], obs[..., 0] | obs[..., 1])
    assert np.array_equal(wins[np.arange(len(ply)), rec.actions[ply, game]], rec.won[ply, game])
    assert rec.won.sum() > 1_000


def has_line(own: np.ndarray) -> np.ndarray:
    """Brute force: ``(k,)`` any complete row, column or diagonal on ``(k, 3, 3)`` boards."""
    i = np.arange(3)
    return (
        own.all(axis=2).any(axis=1)
        | own.all(axis=1).any(axis=1)
        | own[:, i, i].all(axis=1)
        | own[:, i, 2 - i].all(axis=1)
    )


def test_winning_squares_matches_brute_force_on_every_board() -> None:
    """All 3^9 boards where the owner has no line yet, pieces marked 1 = own, 2 = other."""
    cells = np.array(list(itertools.product((0, 1, 2), repeat=9)), dtype=np.int8).reshape(-1, 3, 3)
    own = cells == 1
    cells, own = cells[~has_line(own)], own[~has_line(own)]
    occupied = cells != 0
    want = np.zeros((len(cells), 9), dtype=bool)
    for square in range(9):
        after = own.reshape(-1, 9).copy()
        after[:, square] = True
        want[:, square] = has_line(after.reshape(-1, 3, 3)) & ~occupied.reshape(-1, 9)[:, square]
    got = winning_squares(own, occupied)
    assert np.array_equal(got, want)
    assert want.any(axis=1).sum() > 1_000 and len(cells) > 10_000
