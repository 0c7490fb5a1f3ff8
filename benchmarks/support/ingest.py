"""Recording throughput on PostgreSQL and SQLite: the match log's writes and the rating pass.

Three ways to write one recorded batch (matches, 2 participants and 2 rating events
per match, one transaction per batch; each on a fresh database):

* ``executemany``: what a competent person writes with SQLAlchemy Core: ``insert(...)
  .on_conflict_do_nothing().returning(id, seq)`` executemany (SQLAlchemy's
  "insertmanyvalues"), then executemany of the participants and events.
* ``json document``: the path Arena used before COPY: the batch as one JSON parameter
  expanded by the database (``json_array_elements`` / ``json_each``), participants and
  events by executemany.
* ``arena``: :func:`arena.storage.db.repositories.insert_matches` and friends (COPY on
  PostgreSQL, prepared driver executemany on SQLite).

Then the whole :class:`~arena.ladder.recorder.MatchRecorder` (insert, dequeue, rate,
write ratings, commit) on the ``arena`` path; and the rating pass alone, one match at a
time against waves (:meth:`league.ratings.book.RatingBook.apply_batch`).

Rows/s counts match rows (each brings 4 dependent rows along).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import bindparam, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker

from arena.engine import MatchRecord
from arena.engine.records import gc_paused
from arena.ladder.recorder import MatchRecorder, participant_rows
from arena.ladder.registration import register_builtin_agents
from arena.storage.db import make_engine, session_factory, upgrade, utcnow
from arena.storage.db import repositories as repo
from arena.storage.db.base import UTCDateTime
from arena.storage.db.models import Match, MatchParticipant, RatingEvent
from benchmarks.support.databases import POSTGRES_URL
from envs.registry import get_spec
from league.ratings.book import MatchResult, RatingBook
from league.ratings.rating import RatingEnv

ENV = "connect_four-v3"


def synthetic_records(keys: list[str], n: int, seed: int) -> list[MatchRecord]:
    """Connect-four-sized records (21 plies) between random pairs of ``keys``."""
    rng = np.random.default_rng(seed)
    pairs = rng.integers(len(keys), size=(n, 2))
    pairs[:, 1] = (pairs[:, 0] + 1 + rng.integers(len(keys) - 1, size=n)) % len(keys)
    winners = rng.integers(3, size=n)
    out = []
    for i, ((a, b), w) in enumerate(zip(pairs.tolist(), winners.tolist(), strict=True)):
        winner = None if w == 2 else w
        scores = [0.0, 0.0] if winner is None else [1.0 - 2 * winner, 2 * winner - 1.0]
        out.append(MatchRecord(env=ENV, seed=int(rng.integers(2**62)), seats=[keys[a], keys[b]],
                               weights=[None, None], actions=[(p % 2, int(c)) for p, c in enumerate(
                                   rng.integers(7, size=21))], scores=scores, winner=winner,
                               termination="normal", forfeit_seat=None, match_id=str(uuid.uuid4())))
    return out


@contextmanager
def fresh_database(backend: str, tmp: Path):
    """A migrated, empty database: a SQLite file, or a new schema on the local PostgreSQL."""
    with _database_url(backend, tmp) as url:
        upgrade(url)
        engine = make_engine(url)
        try:
            yield session_factory(engine)
        finally:
            engine.dispose()


@contextmanager
def _database_url(backend: str, tmp: Path):
    if backend == "sqlite":
        yield f"sqlite:///{tmp / f'ingest-{uuid.uuid4().hex[:8]}.db'}"
        return
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    libpq = POSTGRES_URL.replace("+psycopg", "")
    with psycopg.connect(libpq, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(libpq, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _dependent_rows(records: list[MatchRecord], seqs: dict[str, int], ids: dict[str, int]) -> tuple[list, list]:
    """Participants and (stand-in) rating events of the inserted records."""
    spec = get_spec(ENV)
    parts, events = [], []
    for r in records:
        if r.match_id not in seqs:
            continue
        seq = seqs[r.match_id]
        parts.extend(participant_rows(spec, r, seq, ids))
        events.extend({"match_seq": seq, "agent_id": ids[a], "role": "player", "mu_before": 25.0,
                       "sigma_before": 8.3, "mu_after": 25.5 - s, "sigma_after": 8.1} for s, a in enumerate(r.seats))
    return parts, events


def write_executemany(session: Session, records, ids) -> None:
    rows = [repo.match_row(r) for r in records]
    insert = (postgresql if session.get_bind().dialect.name == "postgresql" else sqlite).insert(Match.__table__)
    stmt = insert.on_conflict_do_nothing(index_elements=["id"]).returning(Match.id, Match.seq)
    now = utcnow()
    seqs = dict(session.execute(stmt, [{**row, "created_at": now} for row in rows]).all())
    parts, events = _dependent_rows(records, seqs, ids)
    session.execute(MatchParticipant.__table__.insert(), parts)
    session.execute(RatingEvent.__table__.insert(), events)


def write_json_document(session: Session, records, ids) -> None:
    dialect = session.get_bind().dialect.name
    columns = [c.key for c in Match.__table__.c if c.key not in ("seq", "created_at")]
    if dialect == "postgresql":
        source = (f"SELECT {', '.join('r.' + c for c in columns)}, :created_at "
                  "FROM json_array_elements(CAST(:rows AS json)) WITH ORDINALITY AS e(value, pos) "
                  "CROSS JOIN LATERAL json_populate_record(NULL::matches, e.value) AS r ORDER BY e.pos")
    else:
        fields = ", ".join(f"json_extract(value, '$.{c}')" for c in columns)
        source = f"SELECT {fields}, :created_at FROM json_each(:rows) WHERE true ORDER BY key"
    stmt = text(f"INSERT INTO matches ({', '.join(columns)}, created_at) {source} "
                "ON CONFLICT (id) DO NOTHING RETURNING id, seq").bindparams(
        bindparam("created_at", type_=UTCDateTime()))
    # The SQL reads every column from the document: the columns' defaults go in too
    # (an absent key would be NULL; the ORM and Core inserts fill them in themselves).
    defaults = {c.key: c.default.arg for c in Match.__table__.c
                if c.key in columns and c.default is not None and not callable(c.default.arg)}
    rows = json.dumps([{**defaults, **repo.match_row(r)} for r in records], separators=(",", ":"))
    seqs = dict(session.execute(stmt, {"rows": rows, "created_at": utcnow()}).all())
    parts, events = _dependent_rows(records, seqs, ids)
    session.execute(MatchParticipant.__table__.insert(), parts)
    session.execute(RatingEvent.__table__.insert(), events)


def write_arena(session: Session, records, ids) -> None:
    seqs = repo.insert_matches(session, [repo.match_row(r) for r in records])
    parts, events = _dependent_rows(records, seqs, ids)
    repo.insert_participants(session, parts)
    repo.insert_rating_events(session, events)


WRITERS: dict[str, Callable[[Session, Any, Any], None]] = {
    "executemany": write_executemany, "json document": write_json_document, "arena": write_arena,
}


def _setup(sessions: sessionmaker[Session], keys: list[str]) -> dict[str, int]:
    with sessions.begin() as session:
        return register_builtin_agents(session, ENV, keys)


def measure_writes(backend: str, tmp: Path, batches: list[list[MatchRecord]], keys: list[str]) -> dict[str, float]:
    """Match rows/s of every writer and of the whole recorder, each on its own fresh database.

    The paths take turns batch by batch (in rotating order), so a change in the load of
    a shared machine hits them all alike.
    """
    paths: dict[str, Callable[[sessionmaker[Session], list[MatchRecord], dict[str, int]], None]] = {
        name: _in_transaction(write) for name, write in WRITERS.items()}
    paths["recorder"] = lambda sessions, batch, ids: MatchRecorder(sessions, get_spec(ENV), RatingEnv()).record(
        batch, ids)
    seconds = dict.fromkeys(paths, 0.0)
    with ExitStack() as stack:
        databases = {name: stack.enter_context(fresh_database(backend, tmp)) for name in paths}
        ids = {name: _setup(sessions, keys) for name, sessions in databases.items()}
        for i, batch in enumerate(batches):
            names = list(paths)
            for name in names[i % len(names):] + names[:i % len(names)]:
                start = time.perf_counter()
                paths[name](databases[name], batch, ids[name])
                seconds[name] += time.perf_counter() - start
    rows = sum(map(len, batches))
    return {name: rows / s for name, s in seconds.items()}


def _in_transaction(write: Callable[[Session, Any, Any], None]):
    def run(sessions: sessionmaker[Session], batch: list[MatchRecord], ids: dict[str, int]) -> None:
        with gc_paused(), sessions.begin() as session:  # as the recorder does
            write(session, batch, ids)
    return run


def measure_rating(batches: list[list[MatchRecord]]) -> dict[str, float]:
    """Matches/s of the rating pass over ``batches``: one at a time, then in waves."""
    results = [[MatchResult(r.seats, ["player", "player"], r.winner, i) for i, r in enumerate(batch)]
               for batch in batches]
    n = sum(map(len, batches))
    out = {}
    one_at_a_time = lambda book, batch: [book.apply(*r) for r in batch]
    for name, rate in (("one_at_a_time", one_at_a_time), ("waves", RatingBook.apply_batch)):
        book = RatingBook(RatingEnv())
        start = time.perf_counter()
        for batch in results:
            with gc_paused():  # as the recorder does
                rate(book, batch)
        out[name] = n / (time.perf_counter() - start)
    return out

