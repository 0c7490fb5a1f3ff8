"""Engine setup: SQLite pragmas, UTC timestamps, transactions, concurrent writers."""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import select, update
from sqlalchemy.exc import StatementError

from arena.storage.db import Base, make_engine, session_factory
from arena.storage.db import repositories as repo
from arena.storage.db.models import User
from tests.races import race
from tests.storage.db.builders import match, setup_env


def test_sqlite_connections_get_wal_foreign_keys_and_a_busy_timeout(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000
    finally:
        engine.dispose()


def test_an_in_memory_sqlite_database_is_one_database_for_all_sessions():
    engine = make_engine("sqlite://")
    try:
        # upgrade(url) would open a second, separate :memory: database; build directly.
        Base.metadata.create_all(engine)
        factory = session_factory(engine)
        with factory.begin() as session:
            repo.create_user(session, "alice")
        with factory() as session:
            assert repo.get_user_by_name(session, "alice") is not None
    finally:
        engine.dispose()


def test_timestamps_are_utc_aware_and_naive_ones_are_refused(db_session):
    plus_two = timezone(timedelta(hours=2))
    db_session.add(User(name="tz", created_at=datetime(2026, 1, 1, 12, tzinfo=plus_two)))
    db_session.commit()
    db_session.expire_all()

    stored = db_session.execute(select(User.created_at).where(User.name == "tz")).scalar_one()
    assert stored == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert stored.utcoffset() == timedelta(0)

    db_session.add(User(name="naive", created_at=datetime(2026, 1, 1)))
    with pytest.raises(StatementError, match="timezone-aware"):
        db_session.flush()


def test_a_savepoint_rolls_back_alone(db_session):
    repo.create_user(db_session, "kept")
    with pytest.raises(RuntimeError), db_session.begin_nested():
        repo.create_user(db_session, "discarded")
        raise RuntimeError("abort the savepoint")
    db_session.commit()

    names = set(db_session.execute(select(User.name)).scalars())
    assert names == {"kept"}


def test_concurrent_writers_store_each_match_exactly_once(db_engine):
    factory = session_factory(db_engine)
    with factory.begin() as session:
        setup_env(session)
    shared = [match() for _ in range(200)]
    batches = [shared + [match() for _ in range(50)] for _ in range(4)]

    def write(rows) -> dict[str, int]:
        with factory.begin() as session:
            return repo.insert_matches(session, rows)

    results = race([functools.partial(write, rows) for rows in batches])
    inserted = [match_id for result in results for match_id in result]
    assert len(inserted) == len(set(inserted)) == 200 + 4 * 50
    with factory() as session:
        assert repo.count_matches(session) == 400
        # Seq order is commit order: one writer's seqs form one contiguous block.
        seqs = sorted((seq, i) for i, result in enumerate(results) for seq in result.values())
        owners = [i for _, i in seqs]
        assert sum(1 for a, b in itertools.pairwise(owners) if a != b) == len(batches) - 1



def test_read_then_write_transactions_never_fail_while_another_writer_commits(db_engine):
    """Regression: on SQLite a deferred transaction that read and then wrote failed at once
    with "database is locked" when another writer committed in between (HTTP 500 on
    sign-up while the ladder wrote); write transactions now take the lock up front."""
    sessions = session_factory(db_engine)
    stop = threading.Event()

    def ladder() -> None:
        n = 0
        while not stop.is_set():
            with sessions.begin() as session:
                repo.create_user(session, f"ladder{n}")
            n += 1

    def sign_up(i: int) -> None:
        def create(session) -> int:
            assert repo.get_user_by_name(session, f"user{i}") is None
            time.sleep(0.01)  # the ladder commits meanwhile
            return repo.create_user(session, f"user{i}")
        for _ in range(5):
            sessions.write_transaction(create, what="sign-up")
            i += 100

    writer = threading.Thread(target=ladder)
    writer.start()
    try:
        race([functools.partial(sign_up, i) for i in range(8)])  # raises the first sign-up's error, if any
    finally:
        stop.set()
        writer.join()
    with sessions() as session:
        assert sum(repo.get_user_by_name(session, f"user{i + 100 * k}") is not None
                   for i in range(8) for k in range(5)) == 40


@pytest.mark.parametrize("db_url", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True)
def test_a_deadlocked_write_transaction_is_retried_on_postgresql(db_engine):
    """Two transactions locking two rows in opposite orders: PostgreSQL aborts one with
    40P01 (deadlock detected); it is retried and both commit."""
    sessions = session_factory(db_engine)
    with sessions.begin() as session:
        ids = [repo.create_user(session, name) for name in ("a", "b")]
    both = threading.Barrier(2)
    attempts = Counter()

    def lock(first: int, second: int) -> None:
        def work(session) -> None:
            attempts[first] += 1
            session.execute(update(User).where(User.id == first).values(name=User.name + "1"))
            if attempts[first] == 1:
                both.wait(timeout=10)
            session.execute(update(User).where(User.id == second).values(name=User.name + "2"))
        sessions.write_transaction(work, what="locking two users")

    race([functools.partial(lock, *pair) for pair in (ids, ids[::-1])])
    assert sorted(attempts.values()) == [1, 2]  # exactly one was deadlocked and retried
