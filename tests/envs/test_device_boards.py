"""Differential tests: the torch board cores against the numpy cores, 10,000 random games each.

The numpy cores are themselves checked against PettingZoo move by move
(``test_differential.py``), so agreement here means agreement with PettingZoo. Each
test plays all of its games as ONE batch on each side: the numpy core records 10,000
uniformly random games ply by ply (:func:`tests.envs.boards.play_random_batch`), the
torch core replays the same actions on every board at once, and every ply compares
observation planes, legal masks and which games finished; every game compares its
length, winner, rewards and final observation. Runs on CUDA too where one exists.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from envs.board_core import BoardCore
from envs.connect_four import ConnectFourCore, winning_columns
from envs.device.boards import TorchBoardCore, TorchConnectFour, TorchTicTacToe
from envs.tictactoe import TicTacToeCore, winning_squares
from tests.device_params import DEVICES, one_torch_thread  # noqa: F401 - a fixture
from tests.envs.boards import BatchRecord, play_random_batch

N_GAMES = 10_000
pytestmark = pytest.mark.usefixtures("one_torch_thread")
CORES: dict[str, tuple[type[BoardCore], type[TorchBoardCore], int]] = {
    "connect_four-v3": (ConnectFourCore, TorchConnectFour, 20240611),
    "tictactoe-v3": (TicTacToeCore, TorchTicTacToe, 20240612),
}


@functools.cache
def numpy_record(env_id: str) -> BatchRecord:
    numpy_core, _, seed = CORES[env_id]
    return play_random_batch(numpy_core(), N_GAMES, seed)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("env_id", CORES)
def test_torch_core_replays_10000_random_games_like_the_numpy_core(env_id: str, device: str) -> None:
    rec = numpy_record(env_id)
    core = CORES[env_id][1](device)
    boards = core.new_boards(N_GAMES)
    length = torch.zeros(N_GAMES, dtype=torch.int64, device=device)
    actions = torch.as_tensor(rec.actions, device=device)
    for ply in range(rec.actions.shape[0]):
        live = ~boards.done
        o, m = core.observe(boards)
        finished = core.play(boards, actions[ply], live)
        length = torch.where(finished, ply + 1, length)
        # The numpy record holds zeros once a game is over: compare the live games.
        rows = live.cpu().numpy()
        where = f"at ply {ply}"
        assert np.array_equal(o.cpu().numpy()[rows], rec.obs[ply, rows]), f"planes differ {where}"
        assert np.array_equal(m.cpu().numpy()[rows], rec.masks[ply, rows]), f"masks differ {where}"
        won = (finished & (boards.winner >= 0)).cpu().numpy()
        assert np.array_equal(won, rec.won[ply]), f"winning moves differ {where}"
    assert boards.done.all()
    assert np.array_equal(length.cpu().numpy(), rec.length)
    assert np.array_equal(boards.winner.cpu().numpy(), rec.winner)
    assert np.array_equal(boards.to_move.cpu().numpy(), rec.final_to_move)
    assert np.array_equal(core.rewards(boards).cpu().numpy(), rec.rewards.astype(np.float32))
    final_obs, _ = core.observe(boards)
    assert np.array_equal(final_obs.cpu().numpy(), rec.final_obs)
    # The batch reaches every kind of ending, so the comparison covers them all.
    assert {-1, 0, 1} <= set(rec.winner.tolist())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("env_id", CORES)
def test_torch_random_games_replay_in_the_numpy_core(env_id: str, device: str) -> None:
    """The other direction: actions drawn on the device, boards compared after every ply."""
    numpy_core, torch_cls, _ = CORES[env_id]
    core, ref = torch_cls(device), numpy_core()
    n = 1_000
    boards, batch = core.new_boards(n), ref.new_batch(n)
    gen = torch.Generator(device).manual_seed(5)
    while not batch.done.all():
        live = ~boards.done
        _, mask = core.observe(boards)
        scores = torch.rand(mask.shape, generator=gen, device=device).masked_fill(~mask, -1.0)
        act = scores.argmax(1)
        core.play(boards, act, live)
        rows = np.flatnonzero(~batch.done)
        ref.play(batch, rows, act.cpu().numpy()[rows])
        assert np.array_equal(boards.cells.cpu().numpy(), batch.cells.reshape(n, -1))
        assert np.array_equal(boards.done.cpu().numpy(), batch.done)
    assert np.array_equal(boards.winner.cpu().numpy(), batch.winner)
    assert np.array_equal(boards.plies.cpu().numpy(), batch.plies)


@pytest.mark.parametrize("env_id", CORES)
def test_winning_moves_match_the_numpy_tactics(env_id: str) -> None:
    rec = numpy_record(env_id)
    core = CORES[env_id][1]("cpu")
    planes = rec.obs[:, :1000].reshape(-1, *rec.obs.shape[2:])  # every ply of 1,000 games
    own, opp = planes[..., 0].astype(bool), planes[..., 1].astype(bool)
    occupied = own | opp
    reference = winning_columns if env_id == "connect_four-v3" else winning_squares
    flat = lambda x: torch.as_tensor(x.reshape(len(x), -1))
    for mine in (own, opp):
        got = core.winning_moves(flat(mine), flat(occupied)).numpy()
        assert np.array_equal(got, reference(mine, occupied))
    assert got.any()


def test_take_and_replace_where_keep_rows_apart() -> None:
    core = TorchConnectFour()
    boards = core.new_boards(4)
    core.play(boards, torch.tensor([3, 3, 3, 3]), torch.tensor([True, False, True, False]))
    picked = boards.take(torch.tensor([2, 1]))
    assert picked.plies.tolist() == [1, 0] and picked.to_move.tolist() == [1, 0]
    boards.replace_where(torch.tensor([True, False, False, False]), core.new_boards(4))
    assert boards.plies.tolist() == [0, 0, 1, 0]
    assert boards.cells.sum(1).tolist() == [0, 0, 1, 0]
