"""People against agents (issue 19, item 6): POST /agents/{id}/play, the play token, the
service's human-match queue, and the humans board (people rated, agents' ratings untouched)."""

from __future__ import annotations

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
    OPEN_GAMES,
    OPEN_GAMES_NAME,
    START_WITHIN_S,
    HumanMatchQueue,
    PlayRequest,
    play_token_agent,
    token_sha256,
)
from arena.ladder.recorder import record_unrated
from arena.ladder.registration import ladder_rating_env, register_builtin_agents, register_connected_agent
from arena.read.humans import humans_board
from arena.runners import InProcessRunner
from arena.storage.db import repositories as repo
from envs.registry import get_spec
from league.ratings.closed_form import rate_1v1_fast
from league.ratings.rating import Rating, RatingEnv
from tests.api.helpers import seed_ladder

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
    deadline = time.monotonic() + timeout
    while True:
        with services.sessions() as session:
            stored = repo.get_match(session, match_id)
        if stored is not None:
            return stored
        assert time.monotonic() < deadline, f"match {match_id} was never recorded"
        time.sleep(0.1)


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
    deadline = time.monotonic() + 10  # given back by the match's done callback, just after it is recorded
    while services.redis.get(open_games) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert services.redis.get(open_games) is None  # the open game was given back
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
    assert services.redis.llen(services.pool.keys.human_matches()) == OPEN_GAMES

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


def test_a_request_the_service_did_not_start_in_time_is_dropped_and_gives_its_game_back(live):
    services, keys = live.services, live.services.pool.keys
    hold, token = keys.busy(OPEN_GAMES_NAME, "user:7"), "a-play-token"
    services.redis.set(hold, 1)
    services.redis.set(keys.play_token(token_sha256(token)), 1)
    stale = PlayRequest(match_id="m-stale", env_id=ENV, agent_id=1, human_agent_id=2, seat=0, seed=1, guest=False,
                        holds=(hold,), created=time.time() - START_WITHIN_S - 1, token_sha256=token_sha256(token))
    services.redis.rpush(keys.human_matches(), stale.to_json())
    lane = ConnectedLane(services)
    try:
        assert HumanMatchQueue(services, lane).take(0) is None  # not played: its page gave up long ago
    finally:
        lane.close()
    assert services.redis.get(hold) is None and services.redis.llen(keys.human_matches()) == 0
    assert play_token_agent(services.redis, keys, token) is None
