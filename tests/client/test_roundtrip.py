"""ArenaClient against a live server: every endpoint, round trips and error surfaces.

Runs on SQLite and PostgreSQL (the ``arena`` fixture's database). Ratings and matches
come from a real ladder played in-process on the server's database, as ``arena
serve`` records them.
"""

from __future__ import annotations

import pytest

from agents.neural import write_checkpoint
from arena.client import ArenaClient, ArenaHTTPError
from arena.ladder.dispatch import LadderConfig, open_ladder
from arena.runners import AgentSource, InProcessRunner
from arena.storage.db import repositories as repo

C4 = "connect_four-v3"
BUILTINS = ("heuristic", "heuristic:epsilon=0.5", "random")


def play_ladder(arena, matches: int = 120) -> dict[str, int]:
    """Rated matches between the built-in agents on the server's database; ``{key: id}``."""
    ladder = open_ladder(arena.services.sessions, LadderConfig(C4, batch_size=60, seed=3))
    ladder.add_agents([AgentSource(key=k, builtin=k) for k in BUILTINS])
    runner = InProcessRunner()
    try:
        assert ladder.run(runner, matches).recorded == matches
    finally:
        runner.close()
    return dict(ladder.agent_ids)


@pytest.fixture
def user(arena) -> dict:
    with ArenaClient(arena.url, token="") as anon:
        return anon.create_user("ada")


def test_user_submit_show_list_and_delete(arena, user, tmp_path):
    ck = write_checkpoint(tmp_path / "bot.safetensors", C4, "mlp", {"hidden": [32]}, seed=1, name="bot one")
    write_checkpoint(tmp_path / "two.safetensors", C4, "mlp", {"hidden": [32]}, seed=2)
    assert len(user["token"]) >= 32 and user["name"] == "ada"
    with ArenaClient(arena.url, token=user["token"]) as client:
        assert client.health()["status"] == "ok"
        assert C4 in {e["id"] for e in client.envs()["data"]}
        agent = client.submit_agent(tmp_path / "bot.safetensors")
        assert agent["key"] == f"mlp-{ck.sha256[:16]}"
        assert (agent["name"], agent["env"], agent["kind"], agent["owner"]) == ("bot one", C4, "neural", "ada")
        assert agent["status"] == "queued" and agent["queue_position"] == 1
        assert agent["ratings"] == []
        # bytes + spec dict + explicit name: the second in the queue
        two = client.submit_agent((tmp_path / "two.safetensors").read_bytes(),
                                  spec=(tmp_path / "two.json").read_text(), name="second")
        assert (two["name"], two["queue_position"]) == ("second", 2)
        shown = client.agent(agent["id"])
        assert {k: shown[k] for k in ("id", "key", "status", "queue_position")} == \
               {k: agent[k] for k in ("id", "key", "status", "queue_position")}
        mine = client.agents(env=C4, status="queued")
        assert mine["count"] == 2 and {a["id"] for a in mine["data"]} == {agent["id"], two["id"]}
        assert [a["id"] for a in client.iter_agents(env=C4, page_size=1)] == [a["id"] for a in mine["data"]]
        with pytest.raises(ArenaHTTPError) as dup:
            client.submit_agent(tmp_path / "bot.safetensors")
        assert dup.value.status == 409 and dup.value.body["existing_id"] == agent["id"]
        assert f"agent {agent['id']}" in dup.value.detail

        with ArenaClient(arena.url, token="") as anon:
            bob = anon.create_user("bob")["token"]
        with ArenaClient(arena.url, token=bob) as other, pytest.raises(ArenaHTTPError) as forbidden:
            other.delete_agent(agent["id"])
        assert forbidden.value.status == 403

        client.delete_agent(agent["id"])
        assert client.agent(agent["id"])["status"] == "retired"
        assert client.agent(two["id"])["queue_position"] == 1
        assert client.wait_for_status(agent["id"], "retired", timeout=1)["status"] == "retired"


def test_leaderboard_matches_challenge_history_payoff(arena, user):
    ids = play_ladder(arena, 120)
    with ArenaClient(arena.url, token=user["token"]) as client:
        board = client.leaderboard(C4)
        assert (board["env"], board["role"], board["count"]) == (C4, "player", 3)
        rows = board["data"]
        assert [r["key"] for r in rows] == list(BUILTINS)
        assert [r["rank"] for r in rows] == [1, 2, 3]
        assert all(r["rank_lo"] <= r["rank"] <= r["rank_hi"] for r in rows)
        assert all(r["ci_low"] < r["mu"] < r["ci_high"] for r in rows)
        assert sum(r["games"] for r in rows) == 240
        assert [r["agent_id"] for r in client.iter_leaderboard(C4, page_size=2)] == [r["agent_id"] for r in rows]
        assert [r["rank"] for r in client.leaderboard(C4, limit=1, offset=2)["data"]] == [3]

        # The whole log, newest first, across cursor pages of 7.
        first = client.matches(env=C4, limit=50)
        assert len(first["data"]) == 50 and first["next_cursor"]
        every = list(client.iter_matches(env=C4, page_size=7))
        seqs = [m["seq"] for m in every]
        assert len(every) == 120 == len({m["id"] for m in every})
        assert seqs == sorted(seqs, reverse=True)
        assert [m["id"] for m in every[:50]] == [m["id"] for m in first["data"]]
        assert len(list(client.iter_matches(env=C4, page_size=7, max_items=10))) == 10
        rand = ids["random"]
        theirs = list(client.iter_matches(agent=rand, page_size=16))
        assert len(theirs) == rows[2]["games"] and all(rand in m["agent_ids"] for m in theirs)

        full = client.match(every[0]["id"])
        with arena.services.sessions() as session:
            stored = repo.get_match(session, every[0]["id"])
        assert (full["seed"], full["actions"], full["rated"]) == (stored.seed, stored.actions, True)

        before = {r["agent_id"]: r["games"] for r in rows}
        result = client.challenge(C4, [ids["heuristic"], rand], matches=2)
        assert len(result["match_ids"]) == 2 == len(result["results"])
        lineups = {tuple(m["agent_ids"]) for m in result["results"]}
        assert lineups == {(ids["heuristic"], rand), (rand, ids["heuristic"])}
        assert client.matches(env=C4, limit=2)["data"][0]["id"] in result["match_ids"]
        after = {r["agent_id"]: r["games"] for r in client.leaderboard(C4)["data"]}
        assert after == before  # unrated by default

        history = client.history(rand)
        assert history["agent_id"] == rand and len(history["data"]) == rows[2]["games"]
        payoff = client.payoff(C4, top=3)
        assert [a["id"] for a in payoff["agents"]] == [r["agent_id"] for r in rows]
        assert len(payoff["win_rate"]) == 3 and abs(sum(payoff["nash"]) - 1) < 1e-6


def test_error_surfaces(arena, user, tmp_path):
    write_checkpoint(tmp_path / "bot.safetensors", C4, "mlp", {"hidden": [16]}, seed=4)
    with ArenaClient(arena.url, token="not-a-token") as bad, pytest.raises(ArenaHTTPError) as err:
        bad.submit_agent(tmp_path / "bot.safetensors")
    assert err.value.status == 401 and "invalid or revoked API token" in err.value.detail
    with ArenaClient(arena.url, token="") as anon:
        with pytest.raises(ArenaHTTPError) as err:
            anon.submit_agent(tmp_path / "bot.safetensors")
        assert err.value.status == 401 and "ARENA_TOKEN" in err.value.detail  # the client's hint
        with pytest.raises(ArenaHTTPError) as err:
            anon.agent(999_999)
        assert err.value.status == 404
        with pytest.raises(ArenaHTTPError) as err:
            anon.leaderboard("nope-v0")
        assert err.value.status == 404 and "nope-v0" in err.value.detail
        with pytest.raises(ArenaHTTPError) as err:
            anon.matches(limit=0)
        assert err.value.status == 422 and "limit" in err.value.detail
        with pytest.raises(ArenaHTTPError) as err:
            anon.create_user("ada")
        assert err.value.status == 409
    with ArenaClient(arena.url, token=user["token"]) as client, pytest.raises(ArenaHTTPError) as err:
        client.submit_agent(tmp_path / "bot.safetensors", env="tictactoe-v3")
    assert err.value.status == 422 and "connect_four-v3" in err.value.detail
