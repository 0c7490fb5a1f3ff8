"""Served pages: bytes exactly as the response models write them, cached only while right."""

from __future__ import annotations

from arena.api.schemas import LeaderboardPublic, MatchesPublic
from arena.api.state import PageCache
from tests.api.helpers import API, ENV, seed_ladder

KEYS = ["heuristic", "random"]


def test_match_pages_are_the_response_models_bytes(client, services):
    ids = seed_ladder(services, KEYS, 30)
    for params in ({"env": ENV, "limit": 7}, {"agent": ids["random"], "limit": 5}, {"limit": 200}):
        response = client.get(f"{API}/matches", params=params)
        assert response.status_code == 200
        assert response.content == MatchesPublic.model_validate_json(response.content).model_dump_json().encode()
        cursor = response.json()["next_cursor"]
        if cursor:
            older = client.get(f"{API}/matches", params={**params, "cursor": cursor}).content
            assert older == MatchesPublic.model_validate_json(older).model_dump_json().encode()
    board = client.get(f"{API}/leaderboard", params={"env": ENV}).content
    assert board == LeaderboardPublic.model_validate_json(board).model_dump_json().encode()


def test_older_match_pages_stay_cached_and_newer_ones_follow_the_log(client, services):
    """A cursor the API handed out pages through committed matches only: that page is
    final. The newest page (page_cache_s=0 here) and a cursor past the newest match
    must show matches recorded later."""
    ids = seed_ladder(services, KEYS, 20)

    def get(**params):
        return client.get(f"{API}/matches", params={"agent": ids["random"], **params}).json()

    first = get(limit=5)
    older = get(limit=5, cursor=first["next_cursor"])
    beyond = str(first["data"][0]["seq"] + 1000)
    assert get(limit=5, cursor=beyond) == first
    seed_ladder(services, KEYS, 20, seed=2)
    newest = get(limit=5)
    assert newest["data"][0]["seq"] > first["data"][0]["seq"]
    assert get(limit=5, cursor=first["next_cursor"]) == older
    assert get(limit=5, cursor=beyond) == newest


def test_page_cache_expires_entries_and_keeps_to_its_byte_budget():
    now = [100.0]
    pages = PageCache(max_bytes=10, clock=lambda: now[0])
    pages.put("a", b"1234", fresh_s=5.0)
    pages.put("b", b"5678")
    pages.put("never", b"x", fresh_s=0)
    assert (pages.get("a"), pages.get("b"), pages.get("never")) == (b"1234", b"5678", None)
    now[0] += 4.0
    assert pages.get("a") == b"1234"  # fresh until its deadline ...
    now[0] += 1.0
    assert pages.get("a") is None and pages.get("b") == b"5678"  # ... gone at it; "b" has none
    pages.put("c", b"abcdefgh")  # 8 + 4 bytes > 10: the least recently used goes
    assert pages.get("b") is None and pages.get("c") == b"abcdefgh"
    pages.put("huge", b"x" * 11)
    assert pages.get("huge") is None and pages.get("c") == b"abcdefgh"


def test_leaderboard_pages_are_rendered_once_per_board(client, services):
    """With no cache window every read checks the board's version, but the page of an
    unchanged board is not rendered again; a change brings a new board and new pages."""
    seed_ladder(services, KEYS, 20)
    state = client.app.state.api
    first = client.get(f"{API}/leaderboard", params={"env": ENV}).content
    stamp = state.boards.recent(ENV, "player", 60).stamp
    assert client.get(f"{API}/leaderboard", params={"env": ENV}).content == first
    assert state.boards.recent(ENV, "player", 60).stamp == stamp
    assert state.pages.get(("leaderboard", stamp, 50, 0)) == first
    seed_ladder(services, KEYS, 20, seed=2)
    after = client.get(f"{API}/leaderboard", params={"env": ENV}).json()
    assert sum(r["games"] for r in after["data"]) == 80
    assert state.boards.recent(ENV, "player", 60).stamp != stamp
