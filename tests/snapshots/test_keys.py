"""Pool names built in arena/snapshots/keys.py: a training league's pool, with and without a role."""

from __future__ import annotations

import pytest

from arena.snapshots.keys import league_pool


def test_a_league_pool_is_named_after_the_league_and_its_env_and_a_role_pool_adds_the_role():
    assert league_pool("tiny", "connect_four-v3") == "league.tiny.connect_four-v3"
    assert league_pool("hs", "hide_and_seek-v1", "hider") == "league.hs.hide_and_seek-v1.hider"


def test_a_league_name_that_cannot_name_a_pool_is_refused():
    with pytest.raises(ValueError, match="pool name"):
        league_pool("two words", "connect_four-v3")
