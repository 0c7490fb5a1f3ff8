"""Time controls of connected agents: a budget per request plus an overage bank per match.

As Kaggle's ``actTimeout`` and ``remainingOverageTime``: each decision batch must be
answered within ``act_timeout_s``; time beyond it is taken from the bank of every match
in the batch, and a match whose bank runs dry forfeits with ``timeout``. A socket that
drops stays the agent's for ``grace_s``: a reconnect within it gets the same requests
again; after it the in-flight matches forfeit with ``disconnected``.

People play with a human-sized clock (:data:`HUMAN`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TimeControl:
    """One env's clock for connected agents.

    Attributes:
        act_timeout_s: Budget of one decision batch.
        overage_s: Each match's bank of extra time, spent as a batch runs over its budget.
        grace_s: How long a dropped connection may take to come back before its
            in-flight matches forfeit (``disconnected``).
    """

    act_timeout_s: float = 2.0
    overage_s: float = 30.0
    grace_s: float = 3.0

    def to_json(self) -> dict[str, int]:
        """The clock as the protocol shows it (milliseconds)."""
        return {"act_timeout_ms": int(self.act_timeout_s * 1000), "overage_ms": int(self.overage_s * 1000),
                "grace_ms": int(self.grace_s * 1000)}


BOARD = TimeControl(act_timeout_s=2.0, overage_s=30.0)
"""Turn-based board games (connect four, tictactoe, rps): 2 s a move, 30 s of overage."""
REALTIME = TimeControl(act_timeout_s=1.0, overage_s=20.0)
"""Envs with many short steps (simple_tag, hide-and-seek)."""
HUMAN = TimeControl(act_timeout_s=60.0, overage_s=300.0, grace_s=20.0)
"""A person in the browser: a minute a move, five minutes of overage, time to reload."""

_BY_ENV = {"connect_four-v3": BOARD, "tictactoe-v3": BOARD, "rps-v2": BOARD}


def time_control(env_id: str, *, human: bool = False) -> TimeControl:
    """The clock of connected agents (``human``: of people) on ``env_id``."""
    if human:
        return HUMAN
    return _BY_ENV.get(env_id, REALTIME)
