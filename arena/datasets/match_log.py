"""The match log with ratings as one table, streamed as Parquet or CSV (the board page's download).

One row per rated match of an env, in log (``match_seq``) order:

``match_seq``, ``match_id``, ``created_at`` (UTC), ``seed``, ``league_id``, ``winner`` (the
winning team; empty: a draw), ``termination``, ``forfeit_seat``, then for every seat ``i``
of the env: ``seat{i}_agent_id``, ``seat{i}_agent`` (its name), ``seat{i}_score`` (what the
seat scored: +1/0/-1 in the board games), ``seat{i}_mu`` and ``seat{i}_sigma`` (the agent's
TrueSkill rating in the seat's role when the match was played), ``seat{i}_mu_after`` and
``seat{i}_sigma_after`` (after it). The ratings come from the log's rating events, so the
table is the history a rating was built from, not today's board.

It is read page by page from the log (keyset pages of :func:`~arena.storage.db.repositories.iter_match_columns`
without the action lists, a short read transaction each) and written as each page arrives,
so memory stays at one page whatever the board's size. The stream covers the matches
recorded before it started (up to the env's newest ``match_seq`` then), after ``after``, at
most ``limit`` of them: ask again with ``after`` = the last row's ``match_seq`` for the
next part. Nothing is written to the database (``docs/datasets.md``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from arena.datasets.parquet import COMPRESSION, seat_keys
from arena.storage.db import repositories as repo
from arena.storage.db.connection import Sessions
from envs.spec import EnvSpec

__all__ = ["MEDIA_TYPES", "PAGE", "AgentNames", "match_log_pages", "match_log_schema", "match_log_table",
           "stream_match_log", "write_match_log"]

LogFormat = Literal["parquet", "csv"]
MEDIA_TYPES: dict[str, str] = {"parquet": "application/vnd.apache.parquet", "csv": "text/csv; charset=utf-8"}
PAGE = 10_000
"""Matches read, converted and written at a time (one Parquet row group)."""

_RATING_FIELDS = ("mu", "sigma", "mu_after", "sigma_after")


def match_log_schema(spec: EnvSpec) -> pa.Schema:
    """The columns of ``spec``'s match log (module docstring)."""
    columns = [("match_seq", pa.int64()), ("match_id", pa.string()), ("created_at", pa.timestamp("us", tz="UTC")),
               ("seed", pa.int64()), ("league_id", pa.int64()), ("winner", pa.int8()),
               ("termination", pa.string()), ("forfeit_seat", pa.int8())]
    for seat in range(spec.num_seats):
        columns += [(f"seat{seat}_agent_id", pa.int64()), (f"seat{seat}_agent", pa.string()),
                    (f"seat{seat}_score", pa.float64())]
        columns += [(f"seat{seat}_{name}", pa.float64()) for name in _RATING_FIELDS]
    return pa.schema(columns, metadata={b"arena": json.dumps({"env": spec.env_id, "table": "match_log"}).encode()})


@dataclass
class AgentNames:
    """Agent ids and names by key (match records name seats by key), read again when a key is new."""

    sessions: Sessions
    env_id: str
    by_key: dict[str, tuple[int, str]] = field(default_factory=dict)

    def lookup(self, keys: list[str]) -> tuple[np.ndarray, list[str | None]]:
        """``(ids, names)`` of ``keys`` (id -1 and no name for a key that is no agent)."""
        if any(k not in self.by_key for k in keys):  # an agent registered since the last page
            with self.sessions() as session:
                self.by_key = {a.key: (a.id, a.name) for a in repo.list_agents(session, self.env_id)}
        found = [self.by_key.get(k, (-1, None)) for k in keys]
        return np.array([i for i, _ in found], dtype=np.int64), [name for _, name in found]


def match_log_table(spec: EnvSpec, columns: repo.MatchColumns, agents: AgentNames,
                    events: list[tuple]) -> pa.Table:
    """One page of the log as rows of the match-log table.

    Args:
        spec: The env.
        columns: The page (read with ``times=True``).
        agents: Ids and names by key.
        events: The page's rating events (:func:`~arena.storage.db.repositories.rating_events_between`).
    """
    schema = match_log_schema(spec)
    if not len(columns):
        return schema.empty_table()
    index, keys = seat_keys(columns)
    key_ids, key_names = agents.lookup(keys)
    ids = key_ids[index]
    seat_roles = [spec.roles[spec.seat_team[s]] for s in range(spec.num_seats)]
    by_match = {(seq, agent, role): values for seq, agent, role, *values in events}
    ratings = np.full((len(columns), spec.num_seats, len(_RATING_FIELDS)), np.nan)
    for row, (seq, agents_of) in enumerate(zip(columns.seq, ids.tolist())):
        for seat, agent in enumerate(agents_of):
            values = by_match.get((seq, agent, seat_roles[seat]))
            if values is not None:
                ratings[row, seat] = values
    names = np.array(key_names, dtype=object)
    scores = np.asarray(columns.scores, dtype=np.float64).reshape(len(columns), spec.num_seats)
    data: dict[str, pa.Array] = {
        "match_seq": pa.array(columns.seq, pa.int64()), "match_id": pa.array(columns.id, pa.string()),
        "created_at": pa.array(columns.created_at, pa.timestamp("us", tz="UTC")),
        "seed": pa.array(columns.seed, pa.int64()), "league_id": pa.array(columns.league_id, pa.int64()),
        "winner": pa.array(columns.winner, pa.int8()), "termination": pa.array(columns.termination, pa.string()),
        "forfeit_seat": pa.array(columns.forfeit_seat, pa.int8()),
    }
    for seat in range(spec.num_seats):
        agent = ids[:, seat]
        data[f"seat{seat}_agent_id"] = pa.array(agent, pa.int64(), mask=agent < 0)
        data[f"seat{seat}_agent"] = pa.array(names[index[:, seat]], pa.string())
        data[f"seat{seat}_score"] = pa.array(scores[:, seat], pa.float64())
        for k, name in enumerate(_RATING_FIELDS):
            value = ratings[:, seat, k]
            data[f"seat{seat}_{name}"] = pa.array(value, pa.float64(), mask=np.isnan(value))
    return pa.table(data, schema=schema)


def match_log_pages(sessions: Sessions, spec: EnvSpec, after: int = 0, limit: int | None = None,
                    page: int = PAGE, board: str | None = None) -> Iterator[pa.Table]:
    """The rated matches of ``spec``'s env after ``after`` (at most ``limit``), ``page`` at a time.

    Each page is read in a session of its own, so no read transaction stays open while the
    stream is sent; the stream stops at the newest match of the env when it started.
    ``board``: the matches of that board instead (a competition's; its ratings are derived on
    the board, so the rating columns stay empty).
    """
    with sessions() as session:
        upto = repo.newest_match_seq(session, spec.env_id, board)
    agents = AgentNames(sessions, spec.env_id)
    last, left = after, limit
    while left is None or left > 0:
        batch = page if left is None else min(page, left)
        with sessions() as session:
            columns = next(repo.iter_match_columns(session, spec.env_id, after_seq=last, batch=batch, upto_seq=upto,
                                                   rated_only=board is None, actions=False, times=True,
                                                   board=board), None)
            if columns is None:
                return
            events = (repo.rating_events_between(session, columns.seq[0], columns.seq[-1]) if board is None
                      else [])
        yield match_log_table(spec, columns, agents, events)
        if len(columns) < batch:
            return
        last = columns.seq[-1]
        left = None if left is None else left - len(columns)


class _Chunks:
    """A write-only file that keeps what was written until :meth:`take` (a streamed body's sink)."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._written = 0
        self.closed = False

    def write(self, data) -> int:
        self._parts.append(bytes(data))
        self._written += len(data)
        return len(data)

    def tell(self) -> int:
        return self._written

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data


def write_match_log(tables: Iterator[pa.Table], schema: pa.Schema, fmt: LogFormat) -> Iterator[bytes]:
    """The bytes of a Parquet file (one row group per table) or a CSV file (a header line, then the
    rows) of ``tables``, yielded as each table is written."""
    sink = _Chunks()
    if fmt == "parquet":
        writer = pq.ParquetWriter(sink, schema, compression=COMPRESSION)
    elif fmt == "csv":
        writer = pa_csv.CSVWriter(sink, schema)
    else:
        raise ValueError(f"format must be parquet or csv; got {fmt!r}")
    try:
        for table in tables:
            writer.write_table(table)
            chunk = sink.take()
            if chunk:
                yield chunk
    finally:
        writer.close()
    yield sink.take()


def stream_match_log(sessions: Sessions, spec: EnvSpec, fmt: LogFormat, after: int = 0,
                     limit: int | None = None, board: str | None = None) -> Iterator[bytes]:
    """The match log of ``spec``'s env (rated matches after ``after``, at most ``limit``; ``board``:
    that board's matches) as the bytes of a ``fmt`` file, page by page."""
    return write_match_log(match_log_pages(sessions, spec, after, limit, board=board), match_log_schema(spec), fmt)
