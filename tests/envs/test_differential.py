"""Differential tests: the vectorized board cores against the PettingZoo envs they mirror.

5,000 uniformly random games per game are played as ONE batch in the core (recorded
ply by ply), then replayed one by one in a single reused PettingZoo env. Every ply
compares the legal-move mask and the observation planes of the player to move; every
game compares its length, termination, final rewards, cumulative rewards and winner.
The PettingZoo replay (nearly all of the time: ~4 ms a connect four game) is split into
chunks so pytest-xdist can spread it.

Connect four's 5,000 games reach every game length from 7 to 42 plies, 133 of the 138
(line, seat) wins, wins that complete two lines at once, draws and a win with the last
empty cell (10,000 games: 136 lines, the suite's size until the replay cost a minute).
``ARENA_DIFFERENTIAL_EPISODES`` (e.g. 10000; it raises the hide-and-seek differential
batches too) sets both batches' games: worth it before changing a core.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from pettingzoo.classic import connect_four_v3, tictactoe_v3

from envs.board_core import BoardCore
from envs.connect_four import ConnectFourCore
from envs.registry import get_spec
from envs.tictactoe import TicTacToeCore
from tests.envs.boards import BatchRecord, play_random_batch, play_sequence

N_GAMES = int(os.environ.get("ARENA_DIFFERENTIAL_EPISODES", "5000"))


@dataclass(frozen=True)
class Game:
    core: Callable[[], BoardCore]
    pettingzoo_env: Callable[[], object]
    seed: int
    chunks: int  # PettingZoo replay chunks (connect four is ~3x slower per game)


GAMES = {
    "connect_four-v3": Game(ConnectFourCore, connect_four_v3.env, seed=20240601, chunks=4),
    "tictactoe-v3": Game(TicTacToeCore, tictactoe_v3.env, seed=20240602, chunks=1),
}
CHUNK_PARAMS = [(env_id, c) for env_id, game in GAMES.items() for c in range(game.chunks)]


@functools.cache
def core_record(env_id: str) -> BatchRecord:
    """The ``N_GAMES`` batch of ``env_id``, computed once per test process."""
    game = GAMES[env_id]
    return play_random_batch(game.core(), N_GAMES, game.seed)


def assert_arrays_equal(what: str, pz: np.ndarray, core: np.ndarray, games: np.ndarray) -> None:
    """Compare ``(P, k, ...)`` arrays; on mismatch name the first differing game and ply."""
    assert pz.shape == core.shape
    if np.array_equal(pz, core):
        return
    differs = (pz != core).reshape(*pz.shape[:2], -1).any(-1)
    ply, i = np.argwhere(differs)[0]
    pytest.fail(
        f"{what} differ in game {games[i]} before ply {ply}:\n"
        f"pettingzoo:\n{pz[ply, i]}\ncore:\n{core[ply, i]}"
    )


def replay_chunk(env_id: str, rec: BatchRecord, games: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Replay ``games`` of the core batch in one PettingZoo env, checking each game's end.

    Returns:
        PettingZoo's per-ply observation planes ``(P, k, H, W, 2)`` and masks ``(P, k, A)``
        of the player to move, zero after each game's end like the core record.
    """
    seats = get_spec(env_id).seats
    env = GAMES[env_id].pettingzoo_env()
    assert tuple(env.possible_agents) == seats
    pz_obs = np.zeros((rec.obs.shape[0], len(games), *rec.obs.shape[2:]), dtype=np.int8)
    pz_masks = np.zeros((rec.masks.shape[0], len(games), rec.masks.shape[2]), dtype=bool)
    for i, g in enumerate(games):
        env.reset()
        length = int(rec.length[g])
        for ply in range(length):
            agent = env.agent_selection
            assert agent == seats[ply % 2], f"game {g} ply {ply}: {agent} to move"
            assert not env.terminations[agent], (
                f"game {g}: PettingZoo ended after {ply} plies, core after {length}"
            )
            assert not any(env.rewards.values()), f"game {g}: reward before the end, ply {ply}"
            observation = env.observe(agent)
            pz_obs[ply, i] = observation["observation"]
            pz_masks[ply, i] = observation["action_mask"]
            env.step(int(rec.actions[ply, g]))
        assert all(env.terminations.values()), (
            f"game {g}: core ended after {length} plies, PettingZoo did not"
        )
        assert not any(env.truncations.values())
        rewards = [env.rewards[s] for s in seats]
        cumulative = [env._cumulative_rewards[s] for s in seats]
        assert rewards == cumulative == rec.rewards[g].tolist(), f"game {g}: rewards"
        pz_winner = int(np.argmax(rewards)) if any(rewards) else -1
        assert pz_winner == rec.winner[g], f"game {g}: winner"
        assert env.agent_selection == seats[rec.final_to_move[g]]
        final = env.observe(env.agent_selection)["observation"]
        assert np.array_equal(final, rec.final_obs[g]), f"game {g}: final observation planes"
        _, last_reward, terminated, _, _ = env.last()
        assert terminated and last_reward == rec.rewards[g, rec.final_to_move[g]]
    env.close()
    return pz_obs, pz_masks


@pytest.mark.parametrize(("env_id", "chunk"), CHUNK_PARAMS)
def test_core_matches_pettingzoo_on_random_games(env_id: str, chunk: int) -> None:
    rec = core_record(env_id)
    games = np.array_split(np.arange(N_GAMES), GAMES[env_id].chunks)[chunk]
    pz_obs, pz_masks = replay_chunk(env_id, rec, games)
    assert_arrays_equal("legal-move masks", pz_masks, rec.masks[:, games], games)
    assert_arrays_equal("observation planes", pz_obs, rec.obs[:, games], games)


@pytest.mark.parametrize("env_id", GAMES)
def test_random_batch_covers_every_outcome(env_id: str) -> None:
    """The batch is only a good differential test if it reaches every kind of ending."""
    rec = core_record(env_id)
    spec = get_spec(env_id)
    counts = {w: int((rec.winner == w).sum()) for w in (-1, 0, 1)}
    assert all(c > 0 for c in counts.values()), counts
    assert (rec.length > 0).all() and rec.length.max() <= spec.step_limit
    core = GAMES[env_id].core()
    full_board = core.shape[0] * core.shape[1]
    fastest_win = 7 if env_id == "connect_four-v3" else 5
    assert (rec.length.min(), rec.length.max()) == (fastest_win, full_board)
    # Draws fill the board; every game ends with exactly one winning move or a draw.
    assert (rec.length[rec.winner == -1] == full_board).all()
    assert ((rec.length == full_board) & (rec.winner >= 0)).any()  # a win with the last empty cell
    assert set(rec.length.tolist()) == set(range(fastest_win, full_board + 1))  # every length between
    assert np.array_equal(rec.won.sum(axis=0), (rec.winner >= 0).astype(np.int64))


@pytest.mark.parametrize("env_id", GAMES)
def test_rewards_agree_with_spec_winner(env_id: str) -> None:
    rec = core_record(env_id)
    assert np.array_equal(get_spec(env_id).winner(rec.rewards), rec.winner)
    assert np.array_equal(rec.rewards.sum(axis=1), np.zeros(N_GAMES))
    assert set(np.unique(rec.rewards)) == {-1.0, 0.0, 1.0}


# (moves, winning seat or -1, what the sequence shows)
KNOWN_GAMES = {
    "connect_four-v3": [
        ([0, 1, 0, 1, 0, 1, 0], 0, "vertical"),
        ([0, 1, 0, 1, 2, 1, 2, 1], 1, "vertical, second player"),
        ([0, 0, 1, 1, 2, 2, 3], 0, "horizontal"),
        ([0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3], 0, "rising diagonal"),
        ([6, 5, 5, 4, 4, 3, 4, 3, 3, 0, 3], 0, "falling diagonal"),
        (
            [
                2,
                1,
                2,
                4,
                6,
                6,
                1,
                0,
                6,
                4,
                5,
                5,
                2,
                6,
                4,
                4,
                3,
                2,
                2,
                5,
                3,
                0,
                0,
                1,
                2,
                4,
                6,
                5,
                1,
                3,
                5,
                6,
                3,
                5,
                0,
                0,
                4,
                0,
                1,
                1,
                3,
                3,
            ],
            -1,
            "draw, board full",
        ),
        (
            [
                1,
                6,
                0,
                5,
                5,
                3,
                6,
                6,
                1,
                1,
                1,
                0,
                2,
                1,
                0,
                3,
                4,
                5,
                2,
                1,
                4,
                4,
                6,
                4,
                6,
                0,
                6,
                2,
                5,
                0,
                3,
                3,
                3,
                2,
                0,
                3,
                2,
                4,
                4,
                2,
                5,
                5,
            ],
            1,
            "win with the last empty cell",
        ),
    ],
    "tictactoe-v3": [
        ([0, 4, 8, 1, 7, 6, 2, 5, 3], -1, "draw"),
        ([0, 3, 1, 4, 2], 0, "row"),
        ([1, 0, 2, 4, 3, 8], 1, "diagonal, second player"),
        ([0, 1, 2, 3, 4, 5, 7, 6, 8], 0, "win with the last empty square"),
    ],
}
KNOWN_PARAMS = [
    pytest.param(env_id, moves, winner, id=f"{env_id}-{why}")
    for env_id, known in KNOWN_GAMES.items()
    for moves, winner, why in known
]


@pytest.mark.parametrize(("env_id", "moves", "winner"), KNOWN_PARAMS)
def test_known_game(env_id: str, moves: list[int], winner: int) -> None:
    core = GAMES[env_id].core()
    batch, finished = play_sequence(core, moves)
    assert finished == [False] * (len(moves) - 1) + [True]
    assert batch.done[0] and batch.winner[0] == winner and batch.plies[0] == len(moves)
    expected = [0.0, 0.0] if winner < 0 else [1.0 if s == winner else -1.0 for s in (0, 1)]
    assert core.rewards(batch, np.array([0])).tolist() == [expected]
    # PettingZoo agrees, move by move.
    env = GAMES[env_id].pettingzoo_env()
    env.reset()
    seats = env.possible_agents
    for ply, move in enumerate(moves):
        assert not env.terminations[env.agent_selection], f"PettingZoo ended at ply {ply}"
        env.step(move)
    assert all(env.terminations.values())
    assert [env.rewards[s] for s in seats] == expected
