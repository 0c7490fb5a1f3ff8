"""Win/draw/loss records: :class:`Record` (games and their results), and one game's result
counted into any such record from the winning team's index."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(kw_only=True)
class Record:
    """Games played and how they went; a base of the dataclasses that keep one (keyword-only, so
    a subclass's own fields stay positional)."""

    games: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0


class WinDrawLoss(Protocol):
    """Anything that counts wins, draws and losses."""

    wins: int
    draws: int
    losses: int


def count_result(record: WinDrawLoss, winner: int | None, team: int) -> None:
    """Adds one game of ``team`` to ``record``: a draw when ``winner`` is ``None``, else a win or a loss."""
    if winner is None:
        record.draws += 1
    elif winner == team:
        record.wins += 1
    else:
        record.losses += 1
