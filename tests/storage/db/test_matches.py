"""The match log: idempotent bulk inserts, sequence order, history pages, replay."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import delete, func, select, text
from sqlalchemy.exc import IntegrityError

from arena.engine.records import MatchRecord
from arena.storage.db import repositories as repo
from arena.storage.db import session_factory
from arena.storage.db.models import Match
from tests.storage.db.builders import ENV, match, participants, setup_env


def _count(session) -> int:
    return session.execute(select(func.count()).select_from(Match)).scalar_one()


def test_inserting_the_same_match_ids_twice_inserts_once(db_session):
    setup_env(db_session)
    rows = [match(f"00000000-0000-0000-0000-{i:012d}", seed=i) for i in range(50)]

    first = repo.insert_matches(db_session, rows)
    db_session.commit()
    second = repo.insert_matches(db_session, rows)
    db_session.commit()

    assert set(first) == {r["id"] for r in rows}
    assert second == {}
    assert _count(db_session) == 50


def test_a_mixed_batch_returns_exactly_the_new_ids_with_increasing_seqs(db_session):
    setup_env(db_session)
    old = [match() for _ in range(3)]
    before = repo.insert_matches(db_session, old)
    new = [match() for _ in range(4)]
    batch = [new[0], old[0], new[1], old[2], new[2], new[3], old[1]]

    got = repo.insert_matches(db_session, batch)

    assert set(got) == {r["id"] for r in new}
    seqs = [got[r["id"]] for r in new]  # in batch order
    assert seqs == sorted(seqs) and len(set(seqs)) == 4
    assert min(seqs) > max(before.values())
    assert _count(db_session) == 7


def test_a_batch_repeating_an_id_stores_the_first_copy(db_session):
    setup_env(db_session)
    a = match(seed=1)
    twin = {**a, "seed": 2}

    got = repo.insert_matches(db_session, [a, match(), twin])

    assert len(got) == 2 and a["id"] in got
    assert repo.get_match(db_session, a["id"]).seed == 1


def test_seqs_follow_insert_order(db_session):
    setup_env(db_session)
    rows = [match(seed=i) for i in range(300)]

    got = repo.insert_matches(db_session, rows)

    seqs = [got[r["id"]] for r in rows]
    assert seqs == sorted(seqs) and len(set(seqs)) == 300
    assert [m.seed for m in repo.iter_matches(db_session)] == list(range(300))


def test_a_seq_is_never_reused_after_the_newest_match_is_deleted(db_session):
    setup_env(db_session)
    first = repo.insert_matches(db_session, [match(), match()])
    newest = max(first.values())
    db_session.execute(delete(Match).where(Match.seq == newest))

    again = repo.insert_matches(db_session, [match()])

    assert next(iter(again.values())) > newest


def test_stored_match_round_trips_to_the_engine_record(db_session):
    setup_env(db_session, keys=("heuristic", "mlp-0123abcd"))
    record = MatchRecord(
        env=ENV, seed=2**63 - 1, seats=["heuristic", "mlp-0123abcd"],
        weights=[None, "ab" * 32], actions=[(0, 3), (1, 6), (0, 0)], scores=[-1.0, 1.0],
        winner=None, termination="illegal_action", forfeit_seat=0,
        match_id="9b2f5a8e-1111-4222-8333-944455556666", detail="column 0 is full",
    )

    seq = repo.insert_matches(db_session, [repo.match_row(record, rated=False)])[record.match_id]
    db_session.commit()
    stored = repo.get_match(db_session, record.match_id)

    assert stored.seq == seq and stored.rated is False and stored.league_id is None
    assert stored.to_record() == record
    assert stored.created_at.tzinfo is not None and stored.created_at.utcoffset().total_seconds() == 0
    assert repo.get_match(db_session, "no-such-id") is None


def test_a_nul_character_in_the_detail_is_stored_escaped(db_session):
    # Forfeit details quote agent-controlled exception text; PostgreSQL text rejects NUL.
    setup_env(db_session)
    row = match(detail="boom\x00tail", termination="error", forfeit_seat=1)

    repo.insert_matches(db_session, [row])

    assert repo.get_match(db_session, row["id"]).detail == "boom\\x00tail"


def test_rows_with_missing_or_unknown_fields_are_refused(db_session):
    setup_env(db_session)
    row = match()
    del row["seed"]
    with pytest.raises(ValueError, match="missing seed"):
        repo.insert_matches(db_session, [row])
    with pytest.raises(ValueError, match="unknown columns"):
        repo.insert_matches(db_session, [match(colour="red")])
    with pytest.raises(ValueError, match="non-finite score"):
        repo.insert_matches(db_session, [match(scores=[float("nan"), 0.0])])


def test_a_match_of_an_unregistered_env_violates_the_foreign_key(db_session):
    setup_env(db_session)
    with pytest.raises(IntegrityError):
        repo.insert_matches(db_session, [match(env_id="nope-v0")])


def test_existing_ids_and_counts(db_session):
    setup_env(db_session)
    setup_env(db_session, env_id="tictactoe-v3")
    stored = repo.insert_matches(db_session, [match() for _ in range(3)])
    repo.insert_matches(db_session, [match(env_id="tictactoe-v3")])

    probe = [*stored, "not-stored"]
    assert repo.existing_match_ids(db_session, probe) == set(stored)
    assert repo.count_matches(db_session, ENV) == 3
    assert repo.count_matches(db_session, "tictactoe-v3") == 1
    assert repo.count_matches(db_session) == 4


def test_iter_matches_walks_the_log_in_seq_order_in_batches(db_session):
    setup_env(db_session)
    setup_env(db_session, env_id="tictactoe-v3")
    rows = [match(seed=i, env_id=ENV if i % 3 else "tictactoe-v3") for i in range(23)]
    seqs = repo.insert_matches(db_session, rows)

    everything = list(repo.iter_matches(db_session, batch=5))
    connect_four = list(repo.iter_matches(db_session, env_id=ENV, batch=4))
    tail = list(repo.iter_matches(db_session, after_seq=seqs[rows[19]["id"]], batch=2))

    assert [m.seed for m in everything] == list(range(23))
    assert [m.seed for m in connect_four] == [i for i in range(23) if i % 3]
    assert [m.seed for m in tail] == [20, 21, 22]


def test_history_is_newest_first_with_a_cursor(db_session):
    setup_env(db_session)
    rows = [match(seed=i) for i in range(7)]
    repo.insert_matches(db_session, rows)

    pages, cursor = [], None
    while True:
        page = repo.match_history(db_session, env_id=ENV, before_seq=cursor, limit=3)
        pages.append([m.seed for m in page.matches])
        if page.next_before_seq is None:
            break
        cursor = page.next_before_seq

    assert pages == [[6, 5, 4], [3, 2, 1], [0]]
    exact = repo.match_history(db_session, env_id=ENV, limit=7)
    assert len(exact.matches) == 7 and exact.next_before_seq is None


def test_agent_history_lists_each_match_once_even_in_two_seats(db_session):
    ids = setup_env(db_session, keys=("a", "b", "c"))
    games = [("a", "b"), ("b", "c"), ("a", "a"), ("c", "a"), ("b", "c")]
    rows = [match(seats=seats, seed=i) for i, seats in enumerate(games)]
    seqs = repo.insert_matches(db_session, rows)
    for row, seats in zip(rows, games):
        repo.insert_participants(db_session, participants(seqs[row["id"]], ids, seats, 0))

    first = repo.match_history(db_session, agent_id=ids["a"], limit=2)
    rest = repo.match_history(db_session, agent_id=ids["a"], before_seq=first.next_before_seq)

    assert [m.seed for m in first.matches] == [3, 2]
    assert [m.seed for m in rest.matches] == [0] and rest.next_before_seq is None
    seats = repo.get_participants(db_session, seqs[rows[3]["id"]])
    assert [(p.seat, p.agent_id, p.result) for p in seats] == [(0, ids["c"], "W"), (1, ids["a"], "L")]


def test_participants_refuse_a_repeated_seat_and_an_unknown_agent(db_session):
    ids = setup_env(db_session)
    row = match()
    seq = repo.insert_matches(db_session, [row])[row["id"]]
    assert repo.insert_participants(db_session, participants(seq, ids, ("a", "b"), 1)) == 2
    db_session.commit()

    with pytest.raises(IntegrityError):
        repo.insert_participants(db_session, participants(seq, ids, ("a", "b"), 1))
    db_session.rollback()
    bad = participants(seq, {"a": ids["a"], "b": 999_999}, ("a", "b"), 1)[1:]
    bad[0]["seat"] = 5
    with pytest.raises(IntegrityError):
        repo.insert_participants(db_session, bad)


def test_a_writer_waiting_for_another_gets_exactly_its_own_seqs(db_engine):
    # The insert reads back seqs it cannot get from the driver (SQLite) or takes them
    # from a staging table (PostgreSQL): a second writer blocked behind an open insert
    # transaction must still get back its own rows only, numbered after the first's.
    sessions = session_factory(db_engine)
    with sessions.begin() as session:
        setup_env(session)
    first, second = [match(seed=i) for i in range(20)], [match(seed=100 + i) for i in range(20)]
    got: dict[str, int] = {}
    with sessions() as holder:
        holder.begin()
        mine = repo.insert_matches(holder, first)  # holds the log's write lock until commit
        waiter = threading.Thread(target=lambda: _insert_and_commit(sessions, second, got))
        waiter.start()
        waiter.join(timeout=0.5)
        assert waiter.is_alive()  # blocked behind the open transaction
        holder.commit()
    waiter.join(timeout=30)
    assert set(mine) == {r["id"] for r in first} and set(got) == {r["id"] for r in second}
    assert min(got.values()) > max(mine.values())
    assert [got[r["id"]] for r in second] == sorted(got.values())


def _insert_and_commit(sessions, rows, out: dict) -> None:
    with sessions.begin() as session:
        out.update(repo.insert_matches(session, rows))


@pytest.mark.postgres
def test_the_postgresql_staging_table_is_gone_after_the_insert_and_after_a_rollback(db_session):
    if db_session.get_bind().dialect.name != "postgresql":
        pytest.skip("PostgreSQL's COPY path")
    setup_env(db_session)
    db_session.commit()
    staged = "SELECT to_regclass('pg_temp.matches_incoming') IS NOT NULL"
    repo.insert_matches(db_session, [match()])
    assert db_session.execute(text(staged)).scalar_one() is False
    with pytest.raises(IntegrityError):
        repo.insert_matches(db_session, [match(env_id="nope-v0")])
    db_session.rollback()
    assert repo.insert_matches(db_session, [match()]) and db_session.execute(text(staged)).scalar_one() is False
