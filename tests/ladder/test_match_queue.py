"""The persisted match queue: a run that dies leaves its matches queued; the next run
plays them with the same ids and seeds, and every match is recorded exactly once."""

from __future__ import annotations

import functools

import pytest
from sqlalchemy import exc as sa_exc

from arena.ladder.dispatch import Ladder, LadderConfig, open_ladder
from arena.ladder.recorder import rebuild_ratings
from arena.runners import AgentSource, InProcessRunner
from arena.storage.db import make_engine, session_factory
from arena.storage.db import repositories as repo
from arena.storage.retry import retry_transient
from envs.errors import ServiceUnavailable
from tests.ladder.dying_runner import Crash, DiesAfter
from tests.races import race

NAMES = ["heuristic", "heuristic:epsilon=0.5", "random"]


def _ladder(url: str, batch: int = 200) -> Ladder:
    ladder = open_ladder(session_factory(make_engine(url)), LadderConfig("connect_four-v3", batch_size=batch, seed=5))
    ladder.add_agents([AgentSource(key=n, builtin=n) for n in NAMES])
    return ladder


def test_a_crashed_run_leaves_its_matches_queued_and_the_next_run_plays_them_once(migrated_db_url):
    first = _ladder(migrated_db_url)
    runner = DiesAfter(good=2)
    with pytest.raises(Crash):
        first.run(runner, 1000)
    recorded_ids = {m for batch in runner.dispatched[:2] for m in batch}
    lost_ids = set(runner.dispatched[2])
    with first.sessions() as session:
        queued = repo.queued_matches(session, "connect_four-v3")
        assert repo.count_matches(session, "connect_four-v3") == 400
        assert set(repo.existing_match_ids(session, recorded_ids)) == recorded_ids
    # Only the dispatched-but-unrecorded batch is queued (the rest was never scheduled).
    assert {q.match_id for q in queued} == lost_ids and len(queued) == 200

    second = _ladder(migrated_db_url)  # a restarted process
    progress = second.run(InProcessRunner(), 200)
    assert progress.resumed == 200 and progress.scheduled == 200 and progress.recorded == 400
    with second.sessions() as session:
        assert repo.queue_depth(session, "connect_four-v3") == 0
        assert repo.count_matches(session, "connect_four-v3") == 800
        assert set(repo.existing_match_ids(session, lost_ids)) == lost_ids
        by_id = {m.id: m for m in repo.get_matches(session, lost_ids)}
    # Same seeds and pairings as scheduled before the crash.
    assert {(m.id, m.seed, tuple(m.seats)) for m in by_id.values()} <= {
        (q.match_id, q.seed, q.agents) for q in queued} | {
        (q.match_id, q.seed, q.agents[::-1]) for q in queued}
    report = rebuild_ratings(second.sessions, second.spec)
    assert report.matches == 800 and report.equal, report.mismatches


def test_a_result_delivered_after_its_rerun_is_ignored(migrated_db_url):
    """The original worker was only slow: both copies arrive; one is recorded."""
    ladder = _ladder(migrated_db_url)
    runner = DiesAfter(good=0)
    with pytest.raises(Crash):
        ladder.run(runner, 200)
    with ladder.sessions() as session:
        queued = repo.queued_matches(session, "connect_four-v3")
    late = InProcessRunner()
    again = _ladder(migrated_db_url)
    progress = again.run(late, 0)
    assert progress.resumed == 200 and progress.recorded == 200
    # The slow original copy of the same jobs lands afterwards: all duplicates.
    from arena.engine import MatchJob
    from arena.runners import MatchBatch

    batch = MatchBatch("connect_four-v3", [MatchJob(q.seed, q.agents, q.match_id) for q in queued],
                       again.sources)
    records = next(iter(late.run([batch])))[1]
    outcome = again.recorder.record(records, again.agent_ids)
    assert outcome.inserted == 0 and outcome.duplicates == 200
    assert rebuild_ratings(again.sessions, again.spec).equal


def test_recording_rides_out_a_database_outage(migrated_db_url):
    """The driver error a dropped connection raises, three times, on both backends (a
    real network outage of PostgreSQL is injected by tests/deploy/test_multinode.py)."""
    ladder = _ladder(migrated_db_url)
    real = ladder.recorder._record
    failures = {"left": 3}

    def flaky(session, records, agent_ids):
        if failures["left"]:
            failures["left"] -= 1
            raise sa_exc.OperationalError("INSERT", {}, ConnectionRefusedError("connection refused"))
        return real(session, records, agent_ids)

    ladder.recorder._record = flaky
    progress = ladder.run(InProcessRunner(), 400)
    assert failures["left"] == 0 and progress.recorded == 400
    with ladder.sessions() as session:
        assert repo.count_matches(session, "connect_four-v3") == 400
        assert repo.queue_depth(session) == 0


def test_retry_gives_up_with_a_clear_error_and_never_retries_real_errors():
    calls = []

    def down():
        calls.append(1)
        raise sa_exc.OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused"))

    with pytest.raises(ServiceUnavailable) as err:
        retry_transient(down, timeout_s=0.3, what="recording 5 matches", hint="check the server")
    assert len(calls) > 1
    assert "recording 5 matches" in str(err.value) and "check the server" in str(err.value)

    def wrong():
        calls.append(1)
        raise sa_exc.IntegrityError("INSERT", {}, ValueError("duplicate key"))

    calls.clear()
    with pytest.raises(sa_exc.IntegrityError):
        retry_transient(wrong, timeout_s=5, what="x")
    assert len(calls) == 1


def test_concurrent_recorders_of_one_env_keep_live_ratings_equal_to_a_rebuild(migrated_db_url):
    """Two processes recording into the same env at once (e.g. ``arena serve`` and
    ``arena ladder run``): live ratings are applied per commit, a rebuild replays by
    sequence number; the match-log write lock keeps the two orders the same."""
    import threading

    from arena.engine import MatchJob
    from arena.runners import MatchBatch

    ladders = [_ladder(migrated_db_url) for _ in range(2)]
    runner, rounds = InProcessRunner(), 12
    played = [[next(iter(runner.run([MatchBatch(
        "connect_four-v3", [MatchJob(seed=1000 * w + 50 * r + i, agents=(NAMES[i % 3], NAMES[(i + 1) % 3]))
                            for i in range(50)], ladders[w].sources)])))[1] for r in range(rounds)]
              for w in range(2)]
    barrier = threading.Barrier(2)

    def record(w: int) -> None:
        try:
            for records in played[w]:
                barrier.wait()  # both transactions start together, every round
                ladders[w].recorder.record(records, ladders[w].agent_ids)
        except threading.BrokenBarrierError:
            return  # the other recorder failed: race raises its error
        except Exception:
            barrier.abort()  # the other recorder stops waiting for this one
            raise

    race([functools.partial(record, w) for w in range(2)])  # raises the first recorder's error, if any
    report = rebuild_ratings(ladders[0].sessions, ladders[0].spec)
    assert report.matches == 2 * rounds * 50 and report.equal, report.mismatches[:5]
