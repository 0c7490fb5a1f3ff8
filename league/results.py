"""One game's result counted into a win/draw/loss record, from the winning team's index."""

from __future__ import annotations

from typing import Protocol


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
