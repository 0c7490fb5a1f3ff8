"""People against agents (issue 19, item 6): POST /agents/{id}/play, the play token, the
service's human-match queue, and the humans board (people rated, agents' ratings untouched)."""

from __future__ import annotations

import functools
import subprocess
import sys
import time

import httpx
import msgpack
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from agents.catalog import make_policy
from arena.connected.protocol import CLOSE_FORBIDDEN, CLOSE_UNAUTHORIZED
from arena.engine import MatchEngine, MatchJob
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.lane import ConnectedLane
from arena.ladder.people import (
    GUEST_DONE,
    OPEN_GAMES,
    OPEN_GAMES_NAME,
    PLAYABLE_ENVS,
    START_WITHIN_S,
    HumanMatchQueue,
    PlayRequest,
    people_queue,
    play_token_agent,
    token_sha256,
)
from arena.ladder.recorder import record_unrated
from arena.ladder.registration import ladder_rating_env, register_builtin_agents, register_connected_agent
from arena.ladder.work_queue import MAX_ATTEMPTS
from arena.read.humans import humans_board
from arena.runners import InProcessRunner
from arena.storage.db import repositories as repo
from envs.errors import ArenaError
from envs.registry import get_spec
from league.ratings.closed_form import rate_1v1_fast
from league.ratings.rating import Rating, RatingEnv
from tests.api.helpers import seed_ladder
from tests.client.live import REPO_ROOT
from tests.races import race
from tests.waiting import wait_for

ENV = "tictactoe-v3"
API = "/api/v1"


def first_legal(obs: np.ndarray, mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def expected_person(person: Rating, result: str, agent: Rating, env: RatingEnv) -> Rating:
    """The person's rating after one game, the agent's held fixed (written out here, not imported)."""
    if result == "W":
        return rate_1v1_fast(person, agent, env=env)[0]
    if result == "L":
        return rate_1v1_fast(agent, person, env=env)[1]
    return rate_1v1_fast(person, agent, drawn=True, env=env)[0]


def agent_rating(services, agent_id: int) -> tuple[Rating, int]:
    """The agent's rating and how many rating events it has."""
    with services.sessions() as session:
        [stored] = repo.load_ratings(session, [agent_id]).values()
        events = len(repo.rating_history(session, agent_id))
    return Rating(stored.mu, stored.sigma), events


def user_id(services, token: str) -> int:
    with services.sessions() as session:
        return repo.user_for_token(session, token).id


def hello(live, token: str, agent_id: int) -> dict | int:
    """Say hello on agent ``agent_id``'s WebSocket with ``token``: the welcome, or the close
    code of a refusal."""
    url = live.url.replace("http://", "ws://") + f"{API}/agents/{agent_id}/connect"
    with connect(url) as ws:
        ws.send(msgpack.packb({"type": "hello", "protocol": 1, "token": token}))
        answer = msgpack.unpackb(ws.recv(timeout=10))
        if answer["type"] == "welcome":
            return answer
        assert answer["type"] == "error", answer
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        return closed.value.rcvd.code


def wait_for_match(services, match_id: str, timeout: float = 30.0) -> repo.StoredMatch:
    def stored() -> repo.StoredMatch | None:
        with services.sessions() as session:
            return repo.get_match(session, match_id)
    return wait_for(f"match {match_id} to be recorded", stored, timeout_s=timeout)


def test_signed_in_person_plays_with_the_python_client_and_is_rated_on_the_humans_board(live, run_client):
    services = live.services
    ids = seed_ladder(services, ["heuristic", "random"], 40)
    agent_id = ids["heuristic"]
    rating_before, events_before = agent_rating(services, agent_id)
    token = live.user("dana")
    auth = {"Authorization": f"Bearer {token}"}
    # No ladders: only the human-match queue of the service plays.
    service = BackgroundService(services, InProcessRunner(), ServiceConfig(envs=(), seed=3)).start()
    try:
        r = httpx.post(f"{live.url}{API}/agents/{agent_id}/play", json={"seat": 0}, headers=auth)
        assert r.status_code == 202, r.text
        ticket = r.json()
        assert ticket["seat"] == 0 and ticket["ws_path"] == f"{API}/agents/{ticket['human_agent_id']}/connect"
        again = httpx.post(f"{live.url}{API}/agents/{agent_id}/play", json={"seat": 1}, headers=auth)
        assert again.status_code == 429 and "of tictactoe-v3" in again.json()["detail"]  # one open game per env

        client = run_client(live.url, ticket["play_token"], ticket["human_agent_id"], first_legal, max_matches=1)
        stored = wait_for_match(services, ticket["match_id"])
        assert client.progress.matches == 1 and client.progress.results[0]["match"] == ticket["match_id"]
    finally:
        service.stop()

    assert not stored.rated and stored.termination == "normal"
    with services.sessions() as session:
        human = repo.get_agent(session, ticket["human_agent_id"])
        participants = repo.get_participants(session, stored.seq)
    assert human.kind == "human" and human.name == "dana" and human.owner_id == user_id(services, token)
    assert human.status_reason == ""  # a person waits for nothing: on no "waiting" list
    assert [p.agent_id for p in sorted(participants, key=lambda p: p.seat)] == [human.id, agent_id]
    assert stored.seats[0] == human.key

    assert agent_rating(services, agent_id) == (rating_before, events_before)  # the agent's rating did not move
    open_games = services.pool.keys.busy(OPEN_GAMES_NAME, f"user:{human.owner_id}:{ENV}")
    # Given back by the match's done callback, just after it is recorded.
    wait_for("the open game to be given back", lambda: services.redis.get(open_games) is None, timeout_s=10,
             every_s=0.05)
    assert hello(live, ticket["play_token"], human.id) == CLOSE_UNAUTHORIZED  # the token ended with it

    board = httpx.get(f"{live.url}{API}/envs/{ENV}/humans").json()
    assert board["count"] == 1
    [row] = board["data"]
    result = next(p.result for p in participants if p.agent_id == human.id)
    with services.sessions() as session:
        env = ladder_rating_env(session, ENV)
    expected = expected_person(env.new_rating(), result, rating_before, env)
    assert (row["name"], row["agent_id"], row["games"]) == ("dana", human.id, 1)
    assert (row["wins"], row["draws"], row["losses"]) == ({"W": 1, "D": 0, "L": 0}[result],
                                                          {"W": 0, "D": 1, "L": 0}[result],
                                                          {"W": 0, "D": 0, "L": 1}[result])
    assert row["mu"] == pytest.approx(expected.mu, abs=1e-9) and row["sigma"] == pytest.approx(expected.sigma, abs=1e-9)
    assert 'id="humans"' in httpx.get(f"{live.url}/envs/{ENV}").text


def play_recorded(services, env_id: str, seats: tuple[str, str], ids: dict[str, int], seed: int) -> str:
    """A real match between ``seats`` (scripted stand-ins for people), stored unrated as the lane stores it."""
    policies = {key: make_policy("random" if key.startswith("human-") else key, env_id) for key in seats}
    job = MatchJob(seed=seed, agents=seats)
    with MatchEngine() as engine:
        [record] = engine.play(env_id, [job], policies)
    record_unrated(services.sessions, get_spec(env_id), [record], ids)
    return record.match_id


def test_humans_board_rates_each_game_against_the_agents_rating_at_the_time(live):
    services = live.services
    ids = seed_ladder(services, ["heuristic", "random"], 30, seed=1)
    uid = user_id(services, live.user("erin"))

    def humans(session):
        person, _ = register_connected_agent(session, ENV, "erin", uid, None, kind="human")
        guest, _ = register_connected_agent(session, ENV, "guest-0001", None, None, kind="human")
        return person, guest

    person, guest = services.sessions.write_transaction(humans, what="people")
    ids = {**ids, person.key: person.id, guest.key: guest.id}
    games = []  # (match id, agent id, the agent's rating then)
    for round_, opponent in enumerate(["heuristic", "random", "heuristic"]):
        then, _ = agent_rating(services, ids[opponent])
        seats = (person.key, opponent) if round_ % 2 == 0 else (opponent, person.key)
        games.append((play_recorded(services, ENV, seats, ids, seed=100 + round_), ids[opponent], then))
        play_recorded(services, ENV, (guest.key, opponent), ids, seed=200 + round_)  # guests are on no board
        seed_ladder(services, ["heuristic", "random"], 30, seed=10 + round_)  # the agents' ratings move on
    assert agent_rating(services, ids["heuristic"])[0] != games[0][2]

    with services.sessions() as session:
        env = ladder_rating_env(session, ENV)
        expected, results = env.new_rating(), []
        for match_id, agent_id, then in games:
            seq = repo.get_match(session, match_id).seq
            [mine] = [p for p in repo.get_participants(session, seq) if p.agent_id == person.id]
            results.append(mine.result)
            expected = expected_person(expected, mine.result, then, env)
        board = humans_board(session, ENV)
    assert board["count"] == 1
    [row] = board["data"]
    assert (row["name"], row["agent_id"], row["games"]) == ("erin", person.id, 3)
    assert row["wins"] + row["draws"] + row["losses"] == 3 and row["wins"] == results.count("W")
    assert row["mu"] == pytest.approx(expected.mu, abs=1e-9) and row["sigma"] == pytest.approx(expected.sigma, abs=1e-9)
    assert row["conservative"] == pytest.approx(expected.mu - 3 * expected.sigma, abs=1e-9)


def test_guests_open_at_most_a_few_games_per_address_and_play_tokens_play_only_their_agent(live):
    services = live.services
    agents = {env: services.sessions.write_transaction(lambda s, env=env: register_builtin_agents(s, env, ["random"]),
                                                       what="builtins")["random"] for env in (ENV, "simple_tag-v3")}
    # No background service runs here: the requests stay queued.
    url = f"{live.url}{API}/agents/{agents[ENV]}/play"
    tickets = [httpx.post(url, json={"seat": None}) for _ in range(OPEN_GAMES)]
    assert [t.status_code for t in tickets] == [202] * OPEN_GAMES
    tickets = [t.json() for t in tickets]
    over = httpx.post(url)
    assert over.status_code == 429 and "open games" in over.json()["detail"]
    assert services.redis.llen(services.pool.keys.work_queue("people").queue) == OPEN_GAMES

    with services.sessions() as session:
        guests = [repo.get_agent(session, t["human_agent_id"]) for t in tickets]
    assert len({g.id for g in guests}) == OPEN_GAMES  # a fresh guest each time
    assert all(g.kind == "human" and g.owner_id is None and g.name.startswith("guest-") for g in guests)
    assert {t["seat"] for t in tickets} <= {0, 1}

    assert hello(live, tickets[0]["play_token"], tickets[1]["human_agent_id"]) == CLOSE_FORBIDDEN
    welcome = hello(live, tickets[0]["play_token"], tickets[0]["human_agent_id"])
    assert welcome["agent"]["id"] == tickets[0]["human_agent_id"] and welcome["agent"]["kind"] == "human"
    assert welcome["agent"]["name"] == guests[0].name and welcome["env"] == ENV  # the guest, nobody else

    wrong_env = httpx.post(f"{live.url}{API}/agents/{agents['simple_tag-v3']}/play")
    assert wrong_env.status_code == 422 and "tictactoe-v3" in wrong_env.json()["detail"]
    person = httpx.post(f"{live.url}{API}/agents/{tickets[0]['human_agent_id']}/play")
    assert person.status_code == 409 and "a person" in person.json()["detail"]  # checked before the cap
    assert httpx.get(f"{live.url}{API}/envs/{ENV}/humans").json() == {"env": ENV, "count": 0, "data": []}


def _queue_game(services, match_id: str, hold: str, token: str, queued: float, guest_id: int = 2,
                agent_id: int = 1) -> None:
    """A person's game as ``open_game`` queues it (its hold counted, its token live), queued at ``queued``."""
    keys = services.pool.keys
    services.redis.incr(hold)
    services.redis.set(keys.play_token(token_sha256(token)), guest_id)
    request = PlayRequest(match_id=match_id, env_id=ENV, agent_id=agent_id, human_agent_id=guest_id, seat=0, seed=1,
                          guest=True, holds=(hold,), created=queued, token_sha256=token_sha256(token))
    pipe = services.redis.pipeline(transaction=True)
    people_queue(services.redis, keys).put(pipe, match_id, request.to_json(), queued)
    pipe.execute()


def test_a_game_not_started_in_time_or_started_too_often_fails_and_gives_its_slot_back(live):
    services, keys = live.services, live.services.pool.keys
    people = keys.work_queue("people")
    guest = services.sessions.write_transaction(
        lambda s: register_connected_agent(s, ENV, "guest-00000001", None, None, kind="human")[0], what="a guest")
    hold = keys.busy(OPEN_GAMES_NAME, "address:10.0.0.1")
    _queue_game(services, "m-stale", hold, "token-stale", time.time() - START_WITHIN_S - 1, guest.id)
    _queue_game(services, "m-doomed", hold, "token-doomed", time.time(), guest.id)
    services.redis.hset(people.record("m-doomed"), "attempts", MAX_ATTEMPTS)  # its service died thrice
    _queue_game(services, "m-gone", hold, "token-gone", time.time(), guest.id, agent_id=10**6)  # no such agent
    assert services.redis.get(hold) == b"3"
    lane = ConnectedLane(services)
    try:
        queue = HumanMatchQueue(services, lane)
        stale, doomed, gone = queue.take(), queue.take(), queue.take()
        assert queue.take() is None
    finally:
        lane.close()
    with pytest.raises(ArenaError, match="its page gave up"):
        stale.result(timeout=10)
    with pytest.raises(ArenaError, match=f"{MAX_ATTEMPTS} times"):
        doomed.result(timeout=10)
    with pytest.raises(ArenaError, match=f"agent {10**6} is gone"):
        gone.result(timeout=10)
    assert people_queue(services.redis, keys).fields("m-gone")["attempts"] == "1"  # failed at once, not retried
    for match_id in ("m-stale", "m-doomed", "m-gone"):
        record = people_queue(services.redis, keys).fields(match_id)
        assert (record["status"], record["owner"]) == ("failed", "")
    assert services.redis.get(hold) is None  # the three slots given back, once each
    assert services.redis.llen(people.queue) == 0 and services.redis.scard(people.open_set) == 0
    assert play_token_agent(services.redis, keys, "token-stale") is None
    assert play_token_agent(services.redis, keys, "token-doomed") is None
    assert play_token_agent(services.redis, keys, "token-gone") is None
    with services.sessions() as session:
        retired = repo.get_agent(session, guest.id)
        assert (retired.status, retired.status_reason) == ("retired", GUEST_DONE)
        assert [repo.get_match(session, m) for m in ("m-stale", "m-doomed", "m-gone")] == [None] * 3


def _record_when(services, match_id: str, ready, timeout: float = 60.0) -> dict[str, str]:
    """The game's record once ``ready(record)`` holds (polled: another process changes it)."""
    queue = people_queue(services.redis, services.pool.keys)
    [record] = wait_for(f"game {match_id}'s record to be ready",  # in a list: an empty record may be the one
                        lambda: [record] if ready(record := queue.fields(match_id)) else None,
                        timeout_s=timeout, every_s=0.05, explain=lambda: f"it stayed {queue.fields(match_id)}")
    return record


def test_a_game_whose_service_is_killed_is_played_once_by_the_next_and_gives_its_slot_back(
        live, run_client, migrated_db_url, redis_url, tmp_path):
    services, keys = live.services, live.services.pool.keys
    people = keys.work_queue("people")
    agent_id = services.sessions.write_transaction(lambda s: register_builtin_agents(s, ENV, ["heuristic"]),
                                                   what="builtins")["heuristic"]
    token = live.user("fay")
    uid = user_id(services, token)
    r = httpx.post(f"{live.url}{API}/agents/{agent_id}/play", json={"seat": 0},
                   headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 202, r.text
    ticket = r.json()
    slot = keys.busy(OPEN_GAMES_NAME, f"user:{uid}:{ENV}")
    assert services.redis.get(slot) == b"1"

    # A service of its own claims the game, then dies (SIGKILL: no stop, no heartbeat of 0).
    owner = subprocess.Popen([sys.executable, "-m", "tests.connected.people_owner", migrated_db_url, redis_url,
                              str(tmp_path / "server")], cwd=REPO_ROOT)
    try:
        claimed = _record_when(services, ticket["match_id"], lambda r: r.get("status") == "playing")
    finally:
        owner.kill()
        owner.wait(30)
    assert claimed["attempts"] == "1" and claimed["owner"] != ""
    left = people_queue(services.redis, keys).fields(ticket["match_id"])
    assert (left["status"], left["owner"]) == ("playing", claimed["owner"])  # nobody gave it back
    assert services.redis.get(slot) == b"1"  # still held: the game is not over

    # The next service: its sweep sees the heartbeat lapse (1 s here) and plays the game.
    lane = ConnectedLane(services)
    queue = HumanMatchQueue(services, lane, poll_s=0.1, stale_s=1.0, heartbeat_s=0.2, sweep_s=0.2).start()
    try:
        client = run_client(live.url, ticket["play_token"], ticket["human_agent_id"], first_legal, max_matches=1)
        stored = wait_for_match(services, ticket["match_id"])
        done = _record_when(services, ticket["match_id"], lambda r: r.get("status") != "playing")
    finally:
        queue.stop()
        lane.close()
    assert (done["status"], done["attempts"], done["owner"], done["error"]) == ("done", "2", "", "")
    assert client.progress.results[0]["match"] == ticket["match_id"]
    with services.sessions() as session:
        assert repo.existing_match_ids(session, [ticket["match_id"]]) == {ticket["match_id"]}
        games = repo.match_history(session, agent_id=ticket["human_agent_id"]).matches
    assert [m.id for m in games] == [ticket["match_id"]] and not stored.rated  # played once
    assert services.redis.get(slot) is None  # the slot given back
    assert services.redis.get(keys.busy(OPEN_GAMES_NAME, f"user:{uid}")) is None
    assert play_token_agent(services.redis, keys, ticket["play_token"]) is None
    assert services.redis.scard(people.open_set) == 0 and services.redis.llen(people.queue) == 0


def test_racing_play_requests_open_one_game_per_env_and_at_most_the_open_games(live):
    services, keys = live.services, live.services.pool.keys
    people = keys.work_queue("people")
    agents = {env: services.sessions.write_transaction(lambda s, env=env: register_builtin_agents(s, env, ["random"]),
                                                       what="builtins")["random"] for env in PLAYABLE_ENVS}
    auth = {"Authorization": f"Bearer {live.user('gail')}"}
    racers = 20

    def play(agent_id: int) -> int:
        with httpx.Client(base_url=live.url, headers=auth, timeout=60) as client:
            return client.post(f"{API}/agents/{agent_id}/play", json={"seat": 0}).status_code

    # No background service runs: every game accepted stays open. 20 at once at one env: one game.
    codes = race([functools.partial(play, agents[ENV]) for _ in range(racers)])
    assert sorted(codes) == [202] + [429] * (racers - 1)
    uid = user_id(services, auth["Authorization"].removeprefix("Bearer "))
    assert services.redis.get(keys.busy(OPEN_GAMES_NAME, f"user:{uid}:{ENV}")) == b"1"
    assert services.redis.get(keys.busy(OPEN_GAMES_NAME, f"user:{uid}")) == b"1"
    assert services.redis.llen(people.queue) == 1

    # 20 at once spread over the envs: OPEN_GAMES in all, one per env.
    codes = race([functools.partial(play, agents[PLAYABLE_ENVS[k % len(PLAYABLE_ENVS)]]) for k in range(racers)])
    assert sorted(codes) == [202] * (OPEN_GAMES - 1) + [429] * (racers - OPEN_GAMES + 1)
    assert services.redis.get(keys.busy(OPEN_GAMES_NAME, f"user:{uid}")) == str(OPEN_GAMES).encode()
    for env in PLAYABLE_ENVS:
        assert services.redis.get(keys.busy(OPEN_GAMES_NAME, f"user:{uid}:{env}")) == b"1"
    assert services.redis.llen(people.queue) == OPEN_GAMES
    with services.sessions() as session:
        humans = [a for env in PLAYABLE_ENVS for a in repo.list_agents(session, env) if a.kind == "human"]
    assert sorted(a.env_id for a in humans) == sorted(PLAYABLE_ENVS)  # one human agent per env, no twins
