"""Names built in arena/snapshots/keys.py: a training league's pool, with and without a role; the
durable work queues' keys, which stored data depends on."""

from __future__ import annotations

import pytest

from arena.snapshots.keys import WORK_QUEUES, RedisKeys, league_pool


def test_a_league_pool_is_named_after_the_league_and_its_env_and_a_role_pool_adds_the_role():
    assert league_pool("tiny", "connect_four-v3") == "league.tiny.connect_four-v3"
    assert league_pool("hs", "hide_and_seek-v1", "hider") == "league.hs.hide_and_seek-v1.hider"


def test_a_league_name_that_cannot_name_a_pool_is_refused():
    with pytest.raises(ValueError, match="pool name"):
        league_pool("two words", "connect_four-v3")


def test_the_work_queues_keep_their_stored_key_names() -> None:
    """A service upgraded over a running Redis still finds the items queued before."""
    keys = RedisKeys("arena")
    stored = {
        "people": ("arena:people:game:m1", "arena:people:matches", "arena:people:open"),
        "challenges": ("arena:challenge:m1", "arena:challenges:queue", "arena:challenges:open"),
        "tournament_games": ("arena:tgame:m1", "arena:tgames:queue", "arena:tgames:open"),
    }
    assert set(WORK_QUEUES) == set(stored)
    for kind, names in stored.items():
        queue = keys.work_queue(kind)
        assert (queue.record("m1"), queue.queue, queue.open_set) == names


def test_an_unknown_work_queue_or_a_bad_item_id_is_refused() -> None:
    keys = RedisKeys("arena")
    with pytest.raises(ValueError, match="no work queue 'games'; one of people, challenges, tournament_games"):
        keys.work_queue("games")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="1-160 characters"):
        keys.work_queue("people").record("a b")
