"""Reading an env's match log for export: pages of matches with their actions as numpy arrays,
and the board's agents with their ratings.

The log is read through :func:`~arena.storage.db.repositories.iter_match_columns` (columns,
actions as JSON text) and the actions of a whole page are parsed by numpy in one call:
the per-row ``json.loads`` of :func:`~arena.storage.db.repositories.iter_matches` alone
would cap an export near 8,000 matches/s.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields

import numpy as np

from arena.storage.db import repositories as repo
from arena.storage.db.connection import Sessions

# "[[0, 3], [1, 4]]" -> " 0, 3 ,  1, 4 ": numbers separated by commas, brackets blanked.
_BRACKETS = str.maketrans("[]", "  ")


@dataclass
class LogChunk:
    """One page of the log with its actions parsed.

    Attributes:
        columns: The page as stored (seqs, ids, seeds, seats, scores, outcomes).
        lengths: ``(n,)`` recorded actions per match (0: retention dropped the moves).
        starts: ``(n,)`` index of each match's first action in ``seats``/``actions``.
        seats: ``(T,)`` the seat of every recorded action, matches one after another.
        actions: ``(T,)`` every recorded action.
    """

    columns: repo.MatchColumns
    lengths: np.ndarray
    starts: np.ndarray
    seats: np.ndarray
    actions: np.ndarray

    def __len__(self) -> int:
        return len(self.lengths)

    @classmethod
    def empty(cls) -> LogChunk:
        """No matches."""
        none = np.zeros(0, dtype=np.int64)
        return cls(repo.MatchColumns(*([] for _ in fields(repo.MatchColumns))), none, none, none.astype(np.int8), none)

    @property
    def scores(self) -> np.ndarray:
        """``(n, seats)`` recorded score of every seat."""
        return np.asarray(self.columns.scores, dtype=np.float64)


def parse_actions(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lengths, seats, actions)`` of JSON ``[[seat, action], ...]`` texts, parsed in one numpy call.

    Raises:
        ValueError: A text is not a list of ``[seat, action]`` pairs of integers.
    """
    lengths = np.fromiter((t.count("[") - 1 for t in texts), dtype=np.int64, count=len(texts))
    body = ",".join(t for t, n in zip(texts, lengths.tolist()) if n > 0).translate(_BRACKETS)
    flat = _numbers(body)
    if flat.size != 2 * int(lengths.sum()):
        raise ValueError("match actions are not lists of [seat, action] pairs")
    pairs = flat.reshape(-1, 2)
    return lengths, pairs[:, 0].astype(np.int8), pairs[:, 1]


def _numbers(text: str) -> np.ndarray:
    if not text.strip():
        return np.empty(0, dtype=np.int64)
    return np.fromstring(text, dtype=np.int64, sep=",")


def read_log(sessions: Sessions, env_id: str, chunk: int = 10000, limit: int | None = None) -> Iterator[LogChunk]:
    """The matches of ``env_id`` in log order (the first ``limit`` only), ``chunk`` at a time, actions parsed."""
    left = limit
    with sessions() as session:
        for columns in repo.iter_match_columns(session, env_id, batch=chunk if left is None else min(chunk, left)):
            if left is not None:
                columns = _head(columns, left)
                left -= len(columns)
            lengths, seats, actions = parse_actions(columns.actions_json)
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
            yield LogChunk(columns, lengths, starts, seats, actions)
            if left is not None and left <= 0:
                return


def _head(columns: repo.MatchColumns, k: int) -> repo.MatchColumns:
    """The first ``k`` matches of a page."""
    return repo.MatchColumns(**{f.name: getattr(columns, f.name)[:k] for f in fields(columns)})


@dataclass
class BoardAgents:
    """The agents of an env and their current ratings (the dataset's metadata).

    Attributes:
        agents: Every agent of the env, oldest first.
        ids: ``{key: agent id}`` (match records name seats by key).
        ratings: ``{(agent id, role): rating}`` as the leaderboards show them now.
    """

    agents: list[repo.AgentInfo]
    ids: dict[str, int]
    ratings: dict[tuple[int, str], repo.StoredRating]


def read_agents(sessions: Sessions, env_id: str) -> BoardAgents:
    """The agents of ``env_id`` with their ratings."""
    with sessions() as session:
        agents = repo.list_agents(session, env_id)
        ratings = repo.load_ratings(session, [a.id for a in agents])
    return BoardAgents(agents, {a.key: a.id for a in agents}, ratings)
