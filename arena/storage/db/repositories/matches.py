"""The match log: the source of truth every rating is derived from.

``matches.seq`` is the log's sequence number. It increases strictly in insert order,
and on PostgreSQL writers of the log are serialised by a transaction-scoped advisory
lock, so seq order is also commit order: a reader tailing the log with
``iter_matches(after_seq=last_seen)`` can never skip a match that commits late with
a smaller seq. (SQLite has a single writer anyway.)
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, Text, bindparam, cast, func, select, text
from sqlalchemy.orm import Session

from arena.storage.db.base import UTCDateTime, utcnow
from arena.storage.db.connection import dump_json
from arena.storage.db.models import Match, MatchParticipant
from arena.storage.db.repositories.dialect import (
    bulk_append,
    chunks,
    dialect_name,
    driver_connection,
    driver_errors,
)

if TYPE_CHECKING:  # the engine package pulls in numpy and the envs; import it lazily
    from arena.engine.records import MatchRecord

# pg_advisory_xact_lock key of the match log writers ("arena.mt" as a 64-bit int).
MATCH_LOG_LOCK = int.from_bytes(b"arena.mt", "big") >> 1

# The transaction-local table PostgreSQL COPYs new matches into (see _insert_postgresql).
_STAGING = "matches_incoming"

_MATCH_DEFAULTS: dict[str, Any] = {
    "league_id": None,
    "weights": None,
    "winner": None,
    "forfeit_seat": None,
    "detail": "",
    "rated": True,
    "replay_requested": False,
    "replay_dropped": False,
    "board": None,
}
_REQUIRED = ("id", "env_id", "seed", "seats", "actions", "scores", "termination")


@dataclass(frozen=True)
class StoredMatch:
    """A match as stored: the record plus its log position and league context."""

    seq: int
    id: str
    env_id: str
    league_id: int | None
    seed: int
    seats: list[str]
    weights: list[str | None]
    actions: list[list[int]]
    scores: list[float]
    winner: int | None
    termination: str
    forfeit_seat: int | None
    detail: str
    rated: bool
    created_at: datetime

    def to_record(self) -> MatchRecord:
        """The engine's :class:`MatchRecord` (e.g. to replay the match)."""
        from arena.engine.records import MatchRecord

        return MatchRecord(
            env=self.env_id, seed=self.seed, seats=list(self.seats),
            weights=list(self.weights), actions=[(s, a) for s, a in self.actions],
            scores=list(self.scores), winner=self.winner, termination=self.termination,
            forfeit_seat=self.forfeit_seat, match_id=self.id, detail=self.detail,
        )


@dataclass(frozen=True)
class MatchPage:
    """One page of newest-first history; pass ``next_before_seq`` to get the next."""

    matches: list[StoredMatch]
    next_before_seq: int | None = None


@dataclass(frozen=True)
class Participant:
    match_seq: int
    seat: int
    agent_id: int
    team: int
    role: str
    score: float
    result: str


_MATCH_COLUMNS = [getattr(Match, f) for f in StoredMatch.__dataclass_fields__]
_REPLAY_FIELDS = ("weights", "actions", "detail")
_SUMMARY_FIELDS = tuple(f for f in StoredMatch.__dataclass_fields__ if f not in _REPLAY_FIELDS)


_SUMMARY_JSON = ("seats", "scores")


def _summary_matches(rows: Sequence[Any]) -> list[StoredMatch]:
    """Rows of the :data:`_SUMMARY_FIELDS` as matches with empty replay columns.

    Their JSON columns come as text (see :func:`_history_stmt`) and are decoded with
    one ``json.loads`` for the whole page: two per row cost more than the query itself.
    """
    values = json.loads("[" + ",".join(f"{row.seats},{row.scores}" for row in rows) + "]")
    out = []
    for row, seats, scores in zip(rows, values[::2], values[1::2], strict=True):
        seq, id_, env_id, league_id, seed, _, _, winner, termination, forfeit_seat, rated, created = row
        out.append(StoredMatch(seq, id_, env_id, league_id, seed, seats, [], [], scores, winner,
                               termination, forfeit_seat, "", rated, created))
    return out


_INSERT_COLUMNS = tuple(c.key for c in Match.__table__.c if c.key not in ("seq", "created_at"))
_INSERT_COLUMN_SET = frozenset(_INSERT_COLUMNS)
_JSON_COLUMNS = ("seats", "weights", "actions", "scores")
_PARTICIPANT_KEYS = tuple(f for f in Participant.__dataclass_fields__)


def match_row(
    record: MatchRecord, *, league_id: int | None = None, rated: bool = True, board: str | None = None
) -> dict[str, Any]:
    """The ``insert_matches`` row of an engine record (``board``: the board other than the env's
    ladder that rates it, e.g. ``competition:<id>``; such a match is not rated on the ladder)."""
    return {
        "board": board,
        "id": record.match_id, "env_id": record.env, "league_id": league_id,
        "seed": record.seed, "seats": list(record.seats), "weights": list(record.weights),
        # (seat, action) tuples serialise as JSON arrays; no per-pair copy needed.
        "actions": record.actions, "scores": list(record.scores),
        "winner": record.winner, "termination": record.termination,
        "forfeit_seat": record.forfeit_seat, "detail": record.detail, "rated": rated,
    }


def insert_matches(session: Session, rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Appends matches to the log, skipping ids that are already stored.

    The fastest path each database allows (see :func:`_insert_postgresql` and
    :func:`_insert_sqlite`); both keep the log's two promises: an id is stored once
    (``ON CONFLICT (id) DO NOTHING`` on the unique id), and seqs follow the order of
    ``rows``.

    Args:
        session: The session (the caller commits).
        rows: Dicts with ``id`` (the match UUID), ``env_id``, ``seed``, ``seats``,
            ``actions`` (``[seat, action]`` pairs), ``scores``, ``termination`` and
            optionally ``weights``, ``winner``, ``forfeit_seat``, ``detail``,
            ``league_id``, ``rated`` (see :func:`match_row`). ``created_at`` is the
            time of this call.

    Returns:
        ``{match id: seq}`` of the rows inserted by this call only; seqs increase in
        the order of ``rows``. A repeated id (already stored, or earlier in ``rows``)
        is not in the result.
    """
    params = [_full_match_row(row) for row in rows]
    if not params:
        return {}
    dialect = dialect_name(session)
    if dialect == "postgresql":
        return _insert_postgresql(session, params)
    if dialect == "sqlite":
        return _insert_sqlite(session, params)
    raise NotImplementedError(f"no bulk match insert for {dialect}")


def _cells(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """A full match row as a tuple in :data:`_INSERT_COLUMNS` order, JSON columns as text."""
    return tuple(dump_json(row[c]) if c in _JSON_COLUMNS else row[c] for c in _INSERT_COLUMNS)


def _created_at(session: Session) -> Any:
    """Now, as the driver takes a ``created_at`` value (for statements run on the driver)."""
    process = Match.__table__.c.created_at.type.bind_processor(session.get_bind().dialect)
    now = utcnow()
    return process(now) if process is not None else now


def _insert_postgresql(session: Session, params: list[dict[str, Any]]) -> dict[str, int]:
    """``COPY`` into a transaction-local staging table, then one ``INSERT ... SELECT``.

    ``COPY`` cannot skip conflicts or return seqs, so the rows are staged (with their
    position) and moved with ``INSERT ... SELECT ... ORDER BY pos ON CONFLICT (id) DO
    NOTHING RETURNING id, seq``: exactly once, seqs in row order. The staging table takes
    its column types from ``matches`` and lives until the end of this call (``ON COMMIT
    DROP`` covers a rollback). Writers take the match-log advisory lock first (module
    docstring). Measured in ``benchmarks/league.py --ingest``.
    """
    session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MATCH_LOG_LOCK})
    names = ", ".join(_INSERT_COLUMNS)
    session.execute(text(f"CREATE TEMP TABLE {_STAGING} ON COMMIT DROP AS "
                         f"SELECT 0::bigint AS pos, {names} FROM matches WITH NO DATA"))
    bulk_append(session, _STAGING, ("pos", *_INSERT_COLUMNS),
                ((pos, *_cells(row)) for pos, row in enumerate(params)))
    result = session.execute(
        text(f"INSERT INTO matches ({names}, created_at) SELECT {names}, :created_at FROM {_STAGING} "
             "ORDER BY pos ON CONFLICT (id) DO NOTHING RETURNING id, seq")
        .bindparams(bindparam("created_at", type_=UTCDateTime())),
        {"created_at": utcnow()},
    )
    inserted = {match_id: seq for match_id, seq in result}
    session.execute(text(f"DROP TABLE {_STAGING}"))
    return inserted


def _insert_sqlite(session: Session, params: list[dict[str, Any]]) -> dict[str, int]:
    """One prepared ``INSERT ... ON CONFLICT (id) DO NOTHING`` run by sqlite3's executemany.

    sqlite3 cannot return rows from an executemany, so the new seqs are read back:
    after a no-op write that takes the database's write lock (no other writer can
    append until this transaction ends), every row with a seq above the current
    maximum is one of ours (``AUTOINCREMENT`` seqs only grow).
    """
    marks = ", ".join("?" * (len(_INSERT_COLUMNS) + 1))
    statement = (f"INSERT INTO matches ({', '.join(_INSERT_COLUMNS)}, created_at) VALUES ({marks}) "
                 "ON CONFLICT (id) DO NOTHING")
    created_at = _created_at(session)
    cursor = driver_connection(session).cursor()
    try:
        with driver_errors(session, statement):
            cursor.execute("UPDATE sqlite_sequence SET seq = seq WHERE name = 'matches'")
            (last,) = cursor.execute("SELECT coalesce(max(seq), 0) FROM matches").fetchone()
            cursor.executemany(statement, ((*_cells(row), created_at) for row in params))
            return dict(cursor.execute("SELECT id, seq FROM matches WHERE seq > ?", (last,)).fetchall())
    finally:
        cursor.close()


def _full_match_row(row: Mapping[str, Any]) -> dict[str, Any]:
    missing = [k for k in _REQUIRED if k not in row]
    if missing:
        raise ValueError(f"match row is missing {', '.join(missing)}: {dict(row)!r:.200}")
    unknown = row.keys() - _INSERT_COLUMN_SET
    if unknown:
        raise ValueError(f"match row has unknown columns {sorted(unknown)}; see match_row()")
    full = {**_MATCH_DEFAULTS, **row}
    if full["weights"] is None:
        full["weights"] = [None] * len(full["seats"])
    for column in _JSON_COLUMNS:
        if not isinstance(full[column], list | tuple):
            raise TypeError(f"match row field {column} must be a list, got {full[column]!r:.80}")
    if not math.isfinite(math.fsum(full["scores"])):  # inf/nan anywhere makes the sum non-finite
        raise ValueError(f"match {full['id']} has a non-finite score: {full['scores']!r}")
    if "\x00" in full["detail"]:
        # The detail quotes agent-controlled text (exception messages); PostgreSQL
        # text cannot hold NUL, and one such match must not stall the recorder.
        full["detail"] = full["detail"].replace("\x00", "\\x00")
    return full


def insert_participants(session: Session, rows: Iterable[Mapping[str, Any]]) -> int:
    """Stores the seats of inserted matches (:func:`bulk_append`); returns the row count.

    Rows carry ``match_seq``, ``seat``, ``agent_id``, ``team``, ``role``, ``score`` and
    ``result`` (``W``/``D``/``L``). A repeated (match_seq, seat) raises
    ``IntegrityError``: insert participants only for the seqs ``insert_matches``
    returned.
    """
    params = [tuple(row[k] for k in _PARTICIPANT_KEYS) for row in rows]
    if params:
        bulk_append(session, MatchParticipant.__tablename__, _PARTICIPANT_KEYS, params)
    return len(params)


def existing_match_ids(session: Session, ids: Iterable[str]) -> set[str]:
    """The subset of ``ids`` already in the log."""
    found: set[str] = set()
    for part in chunks(list(set(ids))):
        found.update(session.execute(select(Match.id).where(Match.id.in_(part))).scalars())
    return found


def count_matches(session: Session, env_id: str | None = None, *, board: str | None = None) -> int:
    """Number of stored matches (of ``env_id``, or of all envs; of ``board`` only, if given)."""
    stmt = select(func.count()).select_from(Match)
    if env_id is not None:
        stmt = stmt.where(Match.env_id == env_id)
    if board is not None:
        stmt = stmt.where(Match.board == board)
    return session.execute(stmt).scalar_one()


def iter_matches(
    session: Session, env_id: str | None = None, after_seq: int = 0, batch: int = 5000, *,
    board: str | None = None,
) -> Iterator[StoredMatch]:
    """Matches with ``seq > after_seq`` in seq order, fetched ``batch`` at a time.

    Keyset pagination (``WHERE seq > last ORDER BY seq LIMIT batch``): every batch is
    an index range scan, however far into the log it is. This is the order ratings
    are rebuilt in. ``board``: only the matches rated on that board (a competition's).
    """
    last = after_seq
    while True:
        stmt = select(*_MATCH_COLUMNS).where(Match.seq > last).order_by(Match.seq).limit(batch)
        if env_id is not None:
            stmt = stmt.where(Match.env_id == env_id)
        if board is not None:
            stmt = stmt.where(Match.board == board)
        page = [StoredMatch(*row) for row in session.execute(stmt)]
        yield from page
        if len(page) < batch:
            return
        last = page[-1].seq


@dataclass(frozen=True)
class MatchColumns:
    """One page of the match log as columns, for readers of the whole log (the dataset export,
    the match-log download).

    ``seats`` and ``scores`` are decoded with one ``json.loads`` for the page; ``actions``
    stay JSON text (``[[seat, action], ...]``, ``[]`` once retention dropped them), for
    the reader to parse in bulk: decoding them row by row costs more than the query.
    ``actions_json`` is empty when the reader asked for no actions, ``created_at`` when it
    asked for no times.
    """

    seq: list[int]
    id: list[str]
    seed: list[int]
    league_id: list[int | None]
    seats: list[list[str]]
    scores: list[list[float]]
    winner: list[int | None]
    termination: list[str]
    forfeit_seat: list[int | None]
    rated: list[bool]
    actions_json: list[str]
    created_at: list[datetime] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.seq)


_COLUMN_FIELDS = ("seq", "id", "seed", "league_id", "seats", "scores", "winner", "termination",
                  "forfeit_seat", "rated", "actions", "created_at")
_TEXT_FIELDS = ("seats", "scores", "actions")


def iter_match_columns(
    session: Session, env_id: str, after_seq: int = 0, batch: int = 10000, *, upto_seq: int | None = None,
    rated_only: bool = False, actions: bool = True, times: bool = False, board: str | None = None,
) -> Iterator[MatchColumns]:
    """The matches of ``env_id`` with ``seq > after_seq`` in seq order, ``batch`` per page, as columns.

    Keyset pagination as :func:`iter_matches`, without the per-row JSON decoding.

    Args:
        session: The session.
        env_id: The env.
        after_seq: Only matches after this seq.
        batch: Matches per page.
        upto_seq: Only matches up to this seq (``None``: to the end of the log).
        rated_only: Only rated matches.
        actions: Read the action lists (the readers that re-simulate need them).
        times: Read ``created_at``, whose per-row conversion alone costs a third of
            reading a page (the export leaves it out).
        board: Only the matches rated on this board (a competition's).
    """
    table = Match.__table__.c
    wanted = [f for f in _COLUMN_FIELDS if (f != "actions" or actions) and (f != "created_at" or times)]
    columns = [cast(getattr(table, f), Text).label(f) if f in _TEXT_FIELDS else getattr(table, f) for f in wanted]
    where = [table.env_id == env_id]
    if upto_seq is not None:
        where.append(table.seq <= upto_seq)
    if rated_only:
        where.append(table.rated.is_(True))
    if board is not None:
        where.append(table.board == board)
    last = after_seq
    while True:
        stmt = select(*columns).where(*where, table.seq > last).order_by(table.seq).limit(batch)
        rows = session.execute(stmt).all()
        if not rows:
            return
        page = dict(zip(wanted, (list(c) for c in zip(*rows))))
        values = json.loads("[" + ",".join(f"{a},{b}" for a, b in zip(page["seats"], page["scores"])) + "]")
        yield MatchColumns(page["seq"], page["id"], page["seed"], page["league_id"], values[::2], values[1::2],
                           page["winner"], page["termination"], page["forfeit_seat"], page["rated"],
                           page.get("actions", []), page.get("created_at", []))
        if len(rows) < batch:
            return
        last = page["seq"][-1]


def newest_match_seq(session: Session, env_id: str, board: str | None = None) -> int:
    """The seq of the newest match of ``env_id`` (of ``board`` only, if given; 0: none); an index lookup."""
    stmt = select(func.max(Match.seq)).where(Match.env_id == env_id)
    if board is not None:
        stmt = stmt.where(Match.board == board)
    return session.execute(stmt).scalar() or 0


def match_history(
    session: Session,
    env_id: str | None = None,
    agent_id: int | None = None,
    before_seq: int | None = None,
    limit: int = 50,
    summary: bool = False,
) -> MatchPage:
    """Newest-first matches (of an env and/or an agent), one page at a time.

    Args:
        session: The session.
        env_id: Only matches of this env.
        agent_id: Only matches this agent played (in any seat).
        before_seq: Cursor: only matches with ``seq < before_seq`` (``None``: newest).
        limit: Page size.
        summary: Skip the replay columns (``actions``, ``weights``, ``detail`` come back
            empty): decoding the actions JSON dominates a listing otherwise.

    Returns:
        The page; its ``next_before_seq`` is ``None`` on the last page.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    stmt = _history_stmt(summary, env_id is not None, agent_id is not None, before_seq is not None)
    params = {"env_id": env_id, "agent_id": agent_id, "before_seq": before_seq, "limit": limit + 1}
    result = session.execute(stmt, {k: v for k, v in params.items() if v is not None})
    if summary:
        rows = _summary_matches(result.all())
    else:
        rows = [StoredMatch(*row) for row in result]
    if len(rows) > limit:
        return MatchPage(rows[:limit], rows[limit - 1].seq)
    return MatchPage(rows, None)


@functools.lru_cache(maxsize=16)
def _history_stmt(summary: bool, by_env: bool, by_agent: bool, paged: bool) -> Select:
    """The :func:`match_history` statement for one combination of filters.

    Built once with bound parameters, from the table's columns: a listing then skips
    building the statement and the ORM's row handling, most of its cost after SQLite's.
    A summary's JSON columns are read as text, for :func:`_summary_matches`.
    """
    table = Match.__table__.c
    if summary:
        columns = [cast(getattr(table, f), Text).label(f) if f in _SUMMARY_JSON else getattr(table, f)
                   for f in _SUMMARY_FIELDS]
    else:
        columns = [getattr(table, f) for f in StoredMatch.__dataclass_fields__]
    stmt = select(*columns).order_by(table.seq.desc()).limit(bindparam("limit"))
    if by_env:
        stmt = stmt.where(table.env_id == bindparam("env_id"))
    if paged:
        stmt = stmt.where(table.seq < bindparam("before_seq"))
    if by_agent:
        # Walk the (agent_id, match_seq DESC) index; an agent in several seats of one
        # match (a team) is one match.
        seat = MatchParticipant.__table__.c
        seqs = (
            select(seat.match_seq)
            .where(seat.agent_id == bindparam("agent_id"))
            .distinct()
            .order_by(seat.match_seq.desc())
            .limit(bindparam("limit"))
        )
        if paged:
            seqs = seqs.where(seat.match_seq < bindparam("before_seq"))
        stmt = stmt.where(table.seq.in_(seqs.scalar_subquery()))
    return stmt


def get_match(session: Session, match_id: str) -> StoredMatch | None:
    """The match with UUID ``match_id``, or ``None``."""
    row = session.execute(select(*_MATCH_COLUMNS).where(Match.id == match_id)).first()
    return None if row is None else StoredMatch(*row)


def get_participants(session: Session, match_seq: int) -> list[Participant]:
    """The seats of match ``match_seq``, in seat order."""
    stmt = (
        select(*[getattr(MatchParticipant, k) for k in _PARTICIPANT_KEYS])
        .where(MatchParticipant.match_seq == match_seq)
        .order_by(MatchParticipant.seat)
    )
    return [Participant(*row) for row in session.execute(stmt)]


def get_matches(session: Session, match_ids: Iterable[str]) -> list[StoredMatch]:
    """The stored matches among ``match_ids``, in seq order (unknown ids are left out)."""
    found: list[StoredMatch] = []
    for part in chunks(list(set(match_ids))):
        stmt = select(*_MATCH_COLUMNS).where(Match.id.in_(part))
        found.extend(StoredMatch(*row) for row in session.execute(stmt))
    return sorted(found, key=lambda m: m.seq)
