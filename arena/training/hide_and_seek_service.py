"""Deprecated: moved to :mod:`arena.training.hide_and_seek.service`; this path re-exports it for one release."""

from arena.training.hide_and_seek.service import (
    SERVICE_FILE,
    HideAndSeekLeagueRun,
    league_row_name,
    load_timeline,
    make_timeline,
)

__all__ = ["SERVICE_FILE", "HideAndSeekLeagueRun", "league_row_name", "load_timeline", "make_timeline"]
