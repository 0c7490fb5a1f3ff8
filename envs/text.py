"""Text renderings of observations, for agents that read (language models) and for logs.

:func:`render_observations` turns a batch of one seat's observations and legal-action
masks into one text per row: the board as the mover sees it (``X`` its own pieces,
``O`` the opponent's), how actions map to it, and the legal moves. Every built-in
board game has one; other envs get a generic line with the legal actions.
"""

from __future__ import annotations

import numpy as np

RPS_MOVES = ("rock", "paper", "scissors")


def _grid(obs: np.ndarray) -> list[str]:
    own, opp = obs[..., 0] > 0, obs[..., 1] > 0
    return ["".join("X" if o else "O" if p else "." for o, p in zip(r1, r2)) for r1, r2 in zip(own, opp)]


def connect_four_text(obs: np.ndarray, mask: np.ndarray) -> str:
    rows = [" ".join(line) for line in _grid(obs)]
    legal = [int(a) for a in np.flatnonzero(mask)]
    return ("Connect four, 6 rows x 7 columns; you are X, your opponent O; pieces fall to the lowest "
            "empty cell of a column. Four in a row (across, down or diagonal) wins.\n"
            + "\n".join(rows) + "\n" + " ".join(str(c) for c in range(7))
            + f"\nLegal moves (column numbers): {legal}")


def tictactoe_text(obs: np.ndarray, mask: np.ndarray) -> str:
    cells = _grid(obs)
    rows = [" ".join(ch if ch != "." else str(3 * i + j) for j, ch in enumerate(line)) for i, line in enumerate(cells)]
    legal = [int(a) for a in np.flatnonzero(mask)]
    return ("Tic-tac-toe; you are X, your opponent O. Empty squares show the action that marks them. "
            "Three in a line wins.\n" + "\n".join(rows) + f"\nLegal moves: {legal}")


def rps_text(obs: np.ndarray, mask: np.ndarray) -> str:
    last = int(np.asarray(obs).reshape(-1)[0]) if np.asarray(obs).size else 3
    seen = RPS_MOVES[last] if 0 <= last < 3 else "nothing yet"
    return ("Rock-paper-scissors, repeated rounds; actions: 0 rock, 1 paper, 2 scissors. "
            f"Your opponent's last move: {seen}.\nLegal moves: {[int(a) for a in np.flatnonzero(mask)]}")


def generic_text(env_id: str, obs: np.ndarray, mask: np.ndarray) -> str:
    return (f"{env_id}: observation of shape {list(np.shape(obs))}; "
            f"legal actions: {[int(a) for a in np.flatnonzero(mask)]}")


_RENDER = {"connect_four-v3": connect_four_text, "tictactoe-v3": tictactoe_text, "rps-v2": rps_text}


def render_observations(env_id: str, obs: np.ndarray, mask: np.ndarray) -> list[str]:
    """One text per row of ``obs`` (``(k, *obs_shape)``) and ``mask`` (``(k, A)``)."""
    render = _RENDER.get(env_id)
    if render is None:
        return [generic_text(env_id, o, m) for o, m in zip(obs, mask)]
    return [render(o, m) for o, m in zip(obs, mask)]
