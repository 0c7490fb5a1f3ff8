"""The one durable queue (arena/ladder/work_queue.py) on a real Redis: every item claimed once
by racing workers, finished once and only by its owner, queued again when its owner's
heartbeat lapses (the old owner fenced off), recovered when its worker died between the pop
and the claim, and failed after MAX_ATTEMPTS claims."""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import Future

import pytest

from arena.core.errors import TooManyRequests
from arena.core.limits import Hold, take_holds
from arena.ladder.work_queue import DONE, FAILED, MAX_ATTEMPTS, Claim, QueueWorker, WorkQueue
from arena.snapshots.keys import RedisKeys
from arena.storage.redis_server import connect_redis
from tests.races import race
from tests.waiting import wait_for

STALE_S = 30.0


@pytest.fixture
def queue(redis_url: str) -> WorkQueue:
    client = connect_redis(redis_url, timeout_s=5)
    keys = RedisKeys(prefix="wq-test")
    return WorkQueue(client, keys.work_queue("challenges"), stale_s=STALE_S)


def _put(queue: WorkQueue, *ids: str) -> None:
    pipe = queue.client.pipeline(transaction=True)
    for item_id in ids:
        queue.put(pipe, item_id, f'{{"id": "{item_id}"}}', time.time())
    pipe.execute()


def _claim_all(queue: WorkQueue) -> list[Claim]:
    claims = []
    while (claim := queue.claim()) is not None:
        claims.append(claim)
    return claims


def test_racing_workers_claim_every_item_once_and_only_the_owner_finishes_it_once(queue):
    ids = [f"item-{k}" for k in range(50)]
    _put(queue, *ids)
    claims = [c for worker in race([lambda: _claim_all(queue)] * 8) for c in worker]
    assert Counter(c.id for c in claims) == Counter(ids)  # each once, none lost
    assert all(not c.exhausted and c.record["status"] == "playing" and c.record["attempts"] == "1" for c in claims)

    first = claims[0]
    assert not queue.finish(first.id, "someone-else", DONE)
    assert not queue.requeue(first.id, "someone-else")
    finished = race([lambda: queue.finish(first.id, first.owner, DONE)] * 8)
    assert finished.count(True) == 1  # done exactly once
    record = queue.fields(first.id)
    assert (record["status"], record["owner"]) == (DONE, "")
    assert queue.client.scard(queue.open_set) == len(ids) - 1
    # Nobody beats for the others: all go back, not the one done.
    assert sorted(queue.sweep(time.time() + 10 * STALE_S)) == sorted(c.id for c in claims[1:])


def test_a_lapsed_claim_is_queued_again_and_its_old_owner_is_fenced_off(queue):
    _put(queue, "a", "b")
    a = queue.claim()
    assert a is not None and a.id == "a"
    # Its worker died between popping "b" and claiming it: "b" is queued, on no list.
    assert queue.client.lpop(queue.queue) == b"b"
    now = time.time()
    assert queue.touch("a", a.owner, now)
    assert queue.sweep(now + STALE_S / 2) == []  # "a" still beats; "b" not stale yet
    assert sorted(queue.sweep(now + STALE_S + 1)) == ["a", "b"]  # both lapsed: queued again
    assert sorted(queue.sweep(now + STALE_S + 1)) == []  # once
    again = {c.id: c for c in _claim_all(queue)}
    assert sorted(again) == ["a", "b"]
    assert again["a"].owner != a.owner and again["a"].record["attempts"] == "2"
    assert not queue.touch("a", a.owner, now)  # the dead owner's heartbeat and end count for nothing
    assert not queue.finish("a", a.owner, DONE)
    assert queue.finish("a", again["a"].owner, FAILED, "why")
    assert queue.fields("a")["error"] == "why"


def test_an_item_claimed_max_attempts_times_without_finishing_is_to_fail(queue):
    _put(queue, "doomed")
    for attempt in range(1, MAX_ATTEMPTS + 2):
        claim = queue.claim()
        assert claim is not None and claim.exhausted == (attempt > MAX_ATTEMPTS)
        if not claim.exhausted:
            assert queue.touch("doomed", claim.owner, 0)  # its service stopped: stale at once
            assert queue.sweep() == ["doomed"]
    assert queue.finish("doomed", claim.owner, FAILED, "too often")
    assert queue.claim() is None and queue.client.scard(queue.open_set) == 0


def test_finishing_gives_back_the_holds_and_ends_the_tokens_in_the_same_script_once(queue):
    """Regression (benchmarks/process_faults.py): a service SIGKILLed after an item's finish and
    before its ``ended`` gave back a person's holds one key at a time left the person's
    one-game-per-env slot counted for an hour. The finish itself now gives them back."""
    client = queue.client
    holds, token = ("wq-test:busy:open-games:user:1", "wq-test:busy:open-games:user:1:env"), "wq-test:token"
    for key in holds:
        client.set(key, 2)
    client.set(token, "7")
    _put(queue, "a")
    claim = queue.claim()
    assert not queue.finish("a", "someone-else", DONE, holds=holds, deletes=(token,))
    assert [client.get(k) for k in holds] == [b"2", b"2"] and client.exists(token)
    finished = race([lambda: queue.finish("a", claim.owner, DONE, holds=holds, deletes=(token,))] * 4)
    assert Counter(finished) == {True: 1, False: 3}
    assert [client.get(k) for k in holds] == [b"1", b"1"] and not client.exists(token)
    _put(queue, "b")
    assert queue.finish("b", queue.claim().owner, FAILED, "why", holds=holds)
    assert [client.exists(k) for k in holds] == [0, 0]  # a counter at zero leaves no key


def test_holds_are_taken_in_the_transaction_that_queues_the_work(queue):
    """Regression: the API took a person's or a challenge's holds, then queued the work in a
    second round trip, so an API process killed in between left the holds counted for an hour
    with nothing queued to give them back. Racing requests never pass a limit, a refused one
    queues nothing, and a write that fails before EXEC (a process dying) counts nothing."""
    client = queue.client
    hold = Hold("wq-test:busy:challenges:9", 3, "too many requests: at most 3 challenges at a time")

    def ask(item_id: str) -> str:
        try:
            take_holds(client, [hold], write=lambda pipe: queue.put(pipe, item_id, "{}", time.time()))
        except TooManyRequests as refused:
            return str(refused)
        return "queued"

    answers = race([lambda i=i: ask(f"r{i}") for i in range(12)])
    assert Counter(answers) == {"queued": 3, hold.refusal: 9}
    assert client.get(hold.key) == b"3" and len(_claim_all(queue)) == 3

    def dies(pipe) -> None:
        queue.put(pipe, "lost", "{}", time.time())
        raise KeyboardInterrupt  # the process stops between queueing the commands and EXEC

    client.delete(hold.key)
    with pytest.raises(KeyboardInterrupt):
        take_holds(client, [hold], write=dies)
    assert not client.exists(hold.key) and not client.exists(queue.record("lost")) and queue.claim() is None


class _Plays(QueueWorker):
    """Plays each item on a thread of its own for 50 ms (long enough for its worker to find itself full)."""

    def begin(self, claim: Claim) -> Future:
        played: Future = Future()
        threading.Timer(0.05, played.set_result, args=(None,)).start()
        return played


def test_a_worker_takes_the_next_item_as_soon_as_a_slot_frees_not_at_its_next_poll(queue):
    """Regression: a full worker slept its whole poll (0.5 s in the service) before it looked for a
    free slot again, so a tournament's games, two at a time, started at most four a second. Here
    the poll is a minute: one slot, three items, all done long before one poll would end."""
    _put(queue, "a", "b", "c")
    worker = _Plays(queue, 1, "test item", poll_s=60.0).start()
    try:
        wait_for("the three items, one at a time", lambda: all(
            queue.fields(i)["status"] == DONE for i in ("a", "b", "c")), timeout_s=20)
    finally:
        worker.ask_to_stop()
        _put(queue, "wake")  # ends the worker's wait for a queued item (a minute, like its poll)
        worker.stop_loop(10)
    assert not worker._thread.is_alive()
