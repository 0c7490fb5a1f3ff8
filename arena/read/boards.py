"""Leaderboards and payoff matrices, built from few queries and cached.

A board is every rated agent of an (env, role), ranked by ``mu - 3 sigma``, with each
agent's rank range from the 95% intervals of everyone on it (:mod:`league.ratings.ranking`).
Ranges need the whole board, so it lives in memory in a :class:`BoardCache`, stamped
with the env's :func:`~arena.storage.db.repositories.board_version` (newest match seq, newest
agent update). A request costs that marker query and a slice.

When the marker moves (a ladder recorded a batch, a status changed) the board is not
reloaded: only the rows of agents rated or updated since the stamped version are
re-read (:func:`~arena.storage.db.repositories.board_changes`, one statement) and merged in,
so a live ladder does not turn every poll into a full reload. A full reload happens
on first use and after ``max_age_s`` (which also picks up a rating rebuild, the one
change the marker cannot see). One request per board refreshes it at a time; the others wait
for its result rather than repeating the work. Every board object carries a unique
``stamp``: a page rendered from a board is valid exactly as long as that board is the
current one, so rendered pages are cached under it (:class:`arena.api.state.PageCache`).

Payoff matrices need a join over the match log, which is slow for agents with many
matches, so a computed matrix is served for at least ``min_age_s`` even if new
matches arrived meanwhile.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Generic, TypeVar

import numpy as np
from pydantic import Field
from sqlalchemy.orm import Session

from arena.core.agent_status import FINISHED
from arena.ladder.registration import ladder_rating_env
from arena.read.evaluation import rankings_public
from arena.read.ratings import RatingStats
from arena.storage.db import repositories as repo
from league.evaluation.payoff import nash_mixture, win_rates
from league.ratings.ranking import interval_bounds, rank_ranges
from league.ratings.rating import Rating, RatingEnv

OFF_BOARD = sorted(FINISHED)
"""Statuses whose agents are left off leaderboards (their history stays)."""

V = TypeVar("V")
_stamps = itertools.count(1)  # itertools.count is atomic under the GIL


@dataclass(frozen=True)
class Board:
    """A whole leaderboard, ranked, with rank ranges and intervals per row.

    Attributes:
        version: The ``board_version`` marker the rows are current for (``None``:
            unknown, never refreshed incrementally).
        stamp: Unique to this object (``replace`` draws a new one): identifies what a
            page rendered from it shows.
    """

    rows: list[repo.BoardRow]
    rank_lo: list[int]
    rank_hi: list[int]
    ci_low: list[float]
    ci_high: list[float]
    rating_env: RatingEnv
    version: tuple[Any, ...] | None = None
    probes: dict[int, repo.ProbeInfo] = field(default_factory=dict)
    stamp: int = field(init=False, compare=False, default_factory=lambda: next(_stamps))


class LeaderboardRow(RatingStats):
    """One ranked agent of a leaderboard: the row the API, the web pages and the CLI show."""

    agent_id: int
    key: str
    name: str
    kind: str
    status: str
    rank: int
    rank_lo: int = Field(description="Best rank consistent with everyone's 95% intervals.")
    rank_hi: int = Field(description="Worst rank consistent with everyone's 95% intervals.")
    win_rate: float | None = Field(description="(wins + draws / 2) / games; null before a game.")
    last_match_at: datetime | None = Field(description="When its last rated match was recorded.")
    probe_win_rate: float | None = Field(
        default=None, description="Exploiter's win rate in the agent's latest exploitability probe "
        "(high = exploitable); null: not probed.")
    probe_ci_low: float | None = Field(default=None, description="Lower end of its 95% interval.")
    probe_ci_high: float | None = Field(default=None, description="Upper end of its 95% interval.")
    probe_budget_env_steps: int | None = Field(
        default=None, description="Env steps that probe's exploiter trained for (compare probes at equal budgets).")



def build_board(rows: list[repo.BoardRow], rating_env: RatingEnv,
                version: tuple[Any, ...] | None = None, probes: dict[int, repo.ProbeInfo] | None = None) -> Board:
    """Rank ranges and 95% intervals of ``rows`` (already best-first).

    Args:
        rating_env: The TrueSkill constants of the env's ladder (for matches to settle).
    """
    mu = np.fromiter((r.rating.mu for r in rows), dtype=np.float64, count=len(rows))
    sigma = np.fromiter((r.rating.sigma for r in rows), dtype=np.float64, count=len(rows))
    low, high = interval_bounds(mu, sigma)
    best, worst = rank_ranges(low, high, np.arange(1, len(rows) + 1))
    return Board(rows, best.tolist(), worst.tolist(), low.tolist(), high.tolist(), rating_env, version,
                 probes or {})


def read_board(session: Session, env_id: str, role: str,
               version: tuple[Any, ...] | None = None) -> Board:
    """The whole board of ``env_id``/``role`` straight from the database (no cache)."""
    rows = repo.board_rows(session, env_id, role, OFF_BOARD)
    probes = repo.latest_probes(session, [r.agent_id for r in rows])
    return build_board(rows, ladder_rating_env(session, env_id), version, probes)


def refresh_board(session: Session, board: Board, env_id: str, role: str,
                  version: tuple[Any, ...]) -> Board:
    """``board`` brought up to ``version`` by re-reading only the agents that changed."""
    assert board.version is not None
    changed = repo.board_changes(session, env_id, role, *board.version)
    if not changed:
        return replace(board, version=version)
    ids = {r.agent_id for r in changed}
    kept = [r for r in board.rows if r.agent_id not in ids]
    fresh = [r for r in changed if r.status not in OFF_BOARD]
    probes = {a: p for a, p in board.probes.items() if a not in ids}
    probes.update(repo.latest_probes(session, [r.agent_id for r in fresh]))
    return build_board(sorted(kept + fresh, key=repo.board_order), board.rating_env, version, probes)


class BoardCache:
    """Boards by (env, role), refreshed incrementally (thread-safe; see the module doc).

    Args:
        max_age_s: A board older than this is reloaded in full.
        max_entries: Boards kept (least recently used dropped first).
        clock: Monotonic seconds (a test moves its own).
    """

    def __init__(self, max_age_s: float = 300.0, max_entries: int = 64,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age_s, self.max_entries = max_age_s, max_entries
        self.clock = clock
        self._boards: OrderedDict[tuple[str, str], tuple[float, Board]] = OrderedDict()
        self._checked: dict[tuple[str, str], float] = {}  # when each board was last found current
        self._key_locks: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()

    def recent(self, env_id: str, role: str, within_s: float) -> Board | None:
        """The board of ``env_id``/``role`` if found current less than ``within_s`` ago.

        No query: callers that may serve data up to ``within_s`` old skip the version
        check (and, with a page cached under the board's stamp, the database).
        """
        board, _ = self._current((env_id, role))
        return board if board is not None and self.checked_age(env_id, role) < within_s else None

    def checked_age(self, env_id: str, role: str) -> float:
        """Seconds since the board of ``env_id``/``role`` was last found current."""
        return self.clock() - self._checked.get((env_id, role), -math.inf)

    def _current(self, key: tuple[str, str]) -> tuple[Board | None, float]:
        """The cached board of ``key`` and when it was loaded in full (``None`` if too old)."""
        with self._lock:
            entry = self._boards.get(key)
            if entry is None:
                return None, 0.0
            self._boards.move_to_end(key)
        loaded, board = entry
        if self.clock() - loaded >= self.max_age_s:
            return None, 0.0
        return board, loaded

    def get(self, session: Session, env_id: str, role: str,
            version: tuple[Any, ...] | None = None) -> Board:
        """The board of ``env_id``/``role`` as of ``version`` (read now if not given)."""
        key = (env_id, role)
        checked = self.clock()  # before the version is read: found current as of now
        version = version if version is not None else repo.board_version(session, env_id)
        board, _ = self._current(key)
        if board is not None and board.version == version:
            self._checked[key] = checked
            return board
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:  # one refresher per board; the others then find its result
            board, loaded = self._current(key)
            if board is not None and board.version == version:
                self._checked[key] = checked
                return board
            if board is None:
                loaded = self.clock()
                board = read_board(session, env_id, role, version)
            else:
                board = refresh_board(session, board, env_id, role, version)
            with self._lock:
                self._boards[key] = (loaded, board)
                self._checked[key] = checked
                self._boards.move_to_end(key)
                while len(self._boards) > self.max_entries:
                    dropped, _ = self._boards.popitem(last=False)
                    self._key_locks.pop(dropped, None)
                    self._checked.pop(dropped, None)
            return board

    def clear(self) -> None:
        with self._lock:
            self._boards.clear()
            self._checked.clear()


class VersionedCache(Generic[V]):
    """A small LRU of values stamped with a version marker and a build time (thread-safe).

    Args:
        max_age_s: An entry older than this is rebuilt even if its version still matches.
        min_age_s: An entry younger than this is served even if its version moved.
        max_entries: Entries kept (least recently used dropped first).
    """

    def __init__(self, max_age_s: float, min_age_s: float = 0.0, max_entries: int = 64) -> None:
        self.max_age_s, self.min_age_s, self.max_entries = max_age_s, min_age_s, max_entries
        self._entries: OrderedDict[Hashable, tuple[Any, float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, version: Any, build: Callable[[], V]) -> V:
        """The cached value of ``key`` if still fresh for ``version``, else ``build()``."""
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                stamp, built, value = entry
                age = now - built
                if age < self.min_age_s or (stamp == version and age < self.max_age_s):
                    self._entries.move_to_end(key)
                    return value
        value = build()  # outside the lock: a slow build must not block other keys
        with self._lock:
            self._entries[key] = (version, now, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def board_page(board: Board, limit: int, offset: int) -> list[LeaderboardRow]:
    """Rows ``offset .. offset + limit`` of ``board``."""
    out = []
    for i in range(offset, min(offset + limit, len(board.rows))):
        r = board.rows[i]
        s = r.rating
        out.append(LeaderboardRow.of(
            s, r.status, board.rating_env, rank=i + 1, rank_lo=board.rank_lo[i], rank_hi=board.rank_hi[i],
            agent_id=r.agent_id, key=r.key, name=r.name, kind=r.kind, status=r.status,
            win_rate=(s.wins + 0.5 * s.draws) / s.games if s.games else None, last_match_at=r.last_match_at,
            **_probe_columns(board.probes.get(r.agent_id)),
        ))
    return out


def _probe_columns(probe: repo.ProbeInfo | None) -> dict[str, Any]:
    if probe is None:
        return {}
    return {"probe_win_rate": probe.win_rate, "probe_ci_low": probe.ci_low, "probe_ci_high": probe.ci_high,
            "probe_budget_env_steps": probe.budget_env_steps}


def payoff_matrix(session: Session, board: Board, top: int) -> dict[str, Any]:
    """Head-to-head win rates, game counts and Nash mixture of the board's ``top`` agents, their
    alpha-Rank and Nash-averaging places beside TrueSkill's, and the significant cycles.

    Returns:
        ``PayoffPublic`` fields except ``env`` and ``role``.
    """
    rows = board.rows[:top]
    ids = [r.agent_id for r in rows]
    results = repo.head_to_head(session, ids)
    n = len(ids)
    wins, draws, losses = (np.zeros((n, n)) for _ in range(3))
    for i, a in enumerate(ids):
        for j, b in enumerate(ids):
            counts = results.get((a, b))
            if counts is not None:
                wins[i, j], draws[i, j], losses[i, j] = counts["W"], counts["D"], counts["L"]
    rates = win_rates(wins, draws, losses)
    games = (wins + draws + losses).astype(int)
    return {
        "agents": [{"id": r.agent_id, "key": r.key, "name": r.name} for r in rows],
        "win_rate": [[None if np.isnan(x) else float(x) for x in row] for row in rates],
        "games": games.tolist(),
        "nash": nash_mixture(rates).tolist() if n else [],
        **rankings_public(ids, wins, draws, losses, {r.agent_id: Rating(r.rating.mu, r.rating.sigma) for r in rows}),
    }
