"""Kaggle agents, unchanged, as connected agents: ``arena connect main.py:agent --kaggle connectx``.

A Kaggle ConnectX agent is ``agent(observation, configuration) -> column``, called as
kaggle-environments calls it: ``observation.board`` is the flat row-major board (42
ints, row 0 at the top; 0 empty, 1 and 2 the players' marks), ``observation.mark`` the
mover's mark (1 moves first), ``observation.step`` the moves played so far and
``remainingOverageTime`` its overage bank in seconds; ``configuration`` has ``rows``,
``columns``, ``inarow``, ``actTimeout`` (this request's budget) and the rest of
kaggle-environments' ConnectX defaults. Both support attribute and item access (an
agent may write ``obs.board`` or ``obs["board"]``), and an agent of one argument gets
only the observation, as on Kaggle.

Arena's ``connect_four-v3`` observation is ``(6, 7, 2)``: plane 0 the mover's pieces,
plane 1 the opponent's, row 0 at the top (PettingZoo's layout). The request says which
seat moves in every row; seat 0 moves first, so the mover's mark is ``seat + 1``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from arena.client.connected.client import unpack_array

log = logging.getLogger(__name__)

ROWS, COLUMNS = 6, 7

CONNECTX_CONFIGURATION: dict[str, Any] = {
    "episodeSteps": 1000, "actTimeout": 2, "runTimeout": 1200, "columns": COLUMNS, "rows": ROWS,
    "inarow": 4, "agentTimeout": 60, "timeout": 2,
}
"""What kaggle-environments passes a ConnectX agent (its defaults; ``actTimeout`` and
``timeout`` are set to each request's budget)."""


class KaggleStruct(dict):
    """A dict whose keys also read as attributes, like kaggle-environments' ``Struct``."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


def connectx_board(obs: np.ndarray, seat: int) -> list[int]:
    """Kaggle's flat board from one Arena ``connect_four-v3`` observation.

    Args:
        obs: ``(6, 7, 2)``: the mover's pieces, then the opponent's; row 0 at the top.
        seat: The mover's seat (0 moved first: Kaggle mark 1).

    Returns:
        42 ints, row-major from the top row: 0 empty, else the mark of the piece's owner.
    """
    obs = np.asarray(obs)
    if obs.shape != (ROWS, COLUMNS, 2):
        raise ValueError(f"a connect_four-v3 observation is {(ROWS, COLUMNS, 2)}, got {obs.shape}; "
                         "--kaggle connectx plays --env connect_four-v3 only")
    mark = int(seat) + 1
    board = np.where(obs[..., 0] > 0, mark, np.where(obs[..., 1] > 0, 3 - mark, 0))
    return [int(v) for v in board.reshape(-1)]


def connectx_observation(obs: np.ndarray, seat: int, step: int = 0, overage_s: float = 60.0) -> KaggleStruct:
    """The ``observation`` a Kaggle ConnectX agent gets for one Arena decision row."""
    return KaggleStruct(board=connectx_board(obs, seat), mark=int(seat) + 1, step=int(step),
                        remainingOverageTime=float(overage_s))


def call_kaggle_agent(agent: Callable[..., Any], observation: KaggleStruct, configuration: KaggleStruct) -> Any:
    """``agent(observation, configuration)``, or ``agent(observation)`` for a one-argument agent
    (kaggle-environments trims the arguments to what the function takes, too)."""
    code = getattr(agent, "__code__", None)
    if code is not None and code.co_argcount < 2 and not code.co_flags & 0x04:  # no *args
        return agent(observation)
    return agent(observation, configuration)


def connectx_request_act(agent: Callable[..., Any],
                         configuration: dict[str, Any] | None = None) -> Callable[[dict], list[int | None]]:
    """A ``request_act`` for :class:`~arena.client.connected.client.AgentClient` that plays ``agent``.

    Args:
        agent: A Kaggle ConnectX agent, ``agent(observation, configuration) -> column``.
        configuration: Overrides of :data:`CONNECTX_CONFIGURATION`.

    Returns:
        A function of one ``request`` message answering each row with the agent's column
        (``None`` where the agent raised: only that match forfeits).
    """
    base = {**CONNECTX_CONFIGURATION, **(configuration or {})}

    def request_act(request: dict[str, Any]) -> list[int | None]:
        obs = unpack_array(request["obs"])
        seats: Sequence[int] = request["seats"]
        plies: Sequence[int] = request.get("plies") or [0] * len(seats)
        overage: Sequence[int] = request.get("overage_ms") or [0] * len(seats)
        budget_s = request.get("budget_ms", 2000) / 1000
        out: list[int | None] = []
        for i, seat in enumerate(seats):
            configuration = KaggleStruct(base, actTimeout=budget_s, timeout=budget_s)
            observation = connectx_observation(obs[i], seat, plies[i], overage[i] / 1000)
            try:
                out.append(int(call_kaggle_agent(agent, observation, configuration)))
            except Exception:
                log.exception("the Kaggle agent raised on row %d (match %s)", i, request["matches"][i])
                out.append(None)
        return out

    return request_act


ADAPTERS: dict[str, tuple[str, Callable[..., Callable[[dict], list[int | None]]]]] = {
    "connectx": ("connect_four-v3", connectx_request_act),
}
"""``--kaggle NAME``: the Arena env it plays and the adapter that wraps the agent."""
