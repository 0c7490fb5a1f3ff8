"""``/api/v1/competitions`` on SQLite and PostgreSQL: organizers, private competitions (404),
teams and merges, entries through the one submission path, quotas counted atomically."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from fastapi.testclient import TestClient

from arena.competitions import entries, teams
from arena.competitions.service import Caller
from arena.ladder.submissions import Submission, submit_agent
from arena.storage.db import repositories as repo
from arena.storage.db.base import utcnow
from arena.storage.db.repositories import competitions as comp_repo
from arena.storage.wiring import Services
from tests.api.conftest import ADMIN_TOKEN
from tests.api.helpers import API, ENV, auth, checkpoint, new_user, stored_state

ADMIN = auth(ADMIN_TOKEN)


def _competition(client: TestClient, headers: dict[str, str] = ADMIN, open_: bool = True, **overrides) -> dict:
    now = utcnow()
    body = {"env": ENV, "title": "Season one", "rules_md": "# Rules\nBe nice.",
            "opens_at": (now - timedelta(minutes=1)).isoformat(), "deadline": (now + timedelta(hours=1)).isoformat(),
            "daily_submissions": 2, "active_entries": 2, "team_size": 2, "reference_agents": ["random"],
            **overrides}
    made = client.post(f"{API}/competitions", json=body, headers=headers)
    assert made.status_code == 201, made.text
    if open_:
        opened = client.post(f"{API}/competitions/{made.json()['id']}/open", headers=headers)
        assert opened.status_code == 200 and opened.json()["state"] == "open", opened.text
        return opened.json()
    return made.json()


def _entry(client: TestClient, competition_id: int, token: str, seed: int, **fields: str):
    weights, spec, _ = checkpoint(seed=seed)
    parts = [("weights", ("agent.safetensors", weights, "application/octet-stream")),
             ("spec", (None, spec)), ("env", (None, fields.get("env", ENV))), ("name", (None, f"e{seed}"))]
    return client.post(f"{API}/competitions/{competition_id}/entries", files=parts, headers=auth(token))


def _team(client: TestClient, competition_id: int, token: str, name: str) -> dict:
    made = client.post(f"{API}/competitions/{competition_id}/teams", json={"name": name}, headers=auth(token))
    assert made.status_code == 201, made.text
    return made.json()


def test_only_admins_and_organizers_create_and_settings_freeze_once_open(client):
    alice = new_user(client, "alice")
    body = {"env": ENV, "title": "x", "opens_at": utcnow().isoformat(),
            "deadline": (utcnow() + timedelta(hours=1)).isoformat()}
    refused = client.post(f"{API}/competitions", json=body, headers=auth(alice))
    assert refused.status_code == 403 and "organizer" in refused.json()["detail"]
    assert client.put(f"{API}/competitions/organizers/alice", headers=auth(alice)).status_code == 403
    assert client.put(f"{API}/competitions/organizers/alice", headers=ADMIN).status_code == 200
    unknown = client.post(f"{API}/competitions", json={**body, "reference_agents": ["grandmaster"]},
                          headers=auth(alice))
    assert unknown.status_code == 422 and "grandmaster" in unknown.json()["detail"]
    not_1v1 = client.post(f"{API}/competitions", json={**body, "env": "simple_tag-v3"}, headers=auth(alice))
    assert not_1v1.status_code == 422 and "two-player" in not_1v1.json()["detail"]
    competition = _competition(client, auth(alice))
    assert competition["created_at"] and competition["reference_agents"]
    url = f"{API}/competitions/{competition['id']}"
    frozen = client.patch(url, json={"daily_submissions": 9}, headers=auth(alice))
    assert frozen.status_code == 409 and "frozen" in frozen.json()["detail"]
    earlier = client.patch(url, json={"deadline": utcnow().isoformat()}, headers=auth(alice))
    assert earlier.status_code == 409 and "extended" in earlier.json()["detail"]
    later = (utcnow() + timedelta(hours=5)).isoformat()
    extended = client.patch(url, json={"deadline": later, "merge_deadline": later}, headers=auth(alice))
    assert extended.status_code == 200, extended.text
    assert extended.json()["deadline"].startswith(later[:19])
    bob = new_user(client, "bob")
    assert client.patch(url, json={"title": "mine"}, headers=auth(bob)).status_code == 403


def test_a_private_competition_is_a_404_until_joined_with_its_invite_code(client):
    private = _competition(client, is_public=False)
    code, url = private["invite_code"], f"{API}/competitions/{private['id']}"
    assert code
    carol = new_user(client, "carol")
    assert client.get(url, headers=auth(carol)).status_code == 404
    assert client.get(url).status_code == 404
    assert client.get(f"{url}/board").status_code == 404
    assert private["id"] not in [c["id"] for c in client.get(f"{API}/competitions", headers=auth(carol)).json()["data"]]
    wrong = client.post(f"{url}/join", json={"invite_code": "nope-nope"}, headers=auth(carol))
    assert wrong.status_code == 404
    joined = client.post(f"{url}/join", json={"invite_code": code}, headers=auth(carol))
    assert joined.status_code == 200 and joined.json()["invite_code"] is None  # the organizer's only
    assert client.get(url, headers=auth(carol)).status_code == 200
    assert private["id"] in [c["id"] for c in client.get(f"{API}/competitions", headers=auth(carol)).json()["data"]]


def test_entries_are_refused_with_the_reason_and_nothing_stored(client, services):
    competition = _competition(client, allowed_paths=["onnx"])
    cid = competition["id"]
    dave = new_user(client, "dave")
    before = stored_state(services)
    no_team = _entry(client, cid, dave, seed=1)
    assert no_team.status_code == 403 and "team" in no_team.json()["detail"]
    _team(client, cid, dave, "davids")
    wrong_path = _entry(client, cid, dave, seed=1)
    assert wrong_path.status_code == 422 and "does not take weights" in wrong_path.json()["detail"]
    assert stored_state(services) == before

    weights_ok = _competition(client)
    _team(client, weights_ok["id"], dave, "davids")
    for seed in (1, 2):
        made = _entry(client, weights_ok["id"], dave, seed=seed)
        assert made.status_code == 201, made.text
        assert made.json()["entry"]["active"] and made.json()["agent"]["env"] == ENV
    after_two = stored_state(services)
    over = _entry(client, weights_ok["id"], dave, seed=3)
    assert over.status_code == 429 and "submissions of today" in over.json()["detail"]
    assert int(over.headers["Retry-After"]) <= 86_400
    assert stored_state(services) == after_two
    quota = client.get(f"{API}/competitions/{weights_ok['id']}/quota", headers=auth(dave)).json()
    assert (quota["used_today"], quota["left_today"], len(quota["active_entries"])) == (2, 0, 2)

    def close(session):
        comp_repo.update_competition(session, weights_ok["id"], {"deadline": utcnow() - timedelta(seconds=1)})
    services.sessions.write_transaction(close, what="closing the season for the test")
    late = _entry(client, weights_ok["id"], dave, seed=4)
    assert late.status_code == 409 and "deadline" in late.json()["detail"]
    services.sessions.write_transaction(
        lambda s: comp_repo.update_competition(s, weights_ok["id"], {"state": "finished"}), what="finishing")
    finished = _entry(client, weights_ok["id"], dave, seed=4)
    assert finished.status_code == 409 and "finished" in finished.json()["detail"]
    assert stored_state(services) == after_two


def test_only_the_latest_entries_stay_active(client):
    competition = _competition(client, daily_submissions=5, active_entries=2)
    erin = new_user(client, "erin")
    _team(client, competition["id"], erin, "e-team")
    ids = [_entry(client, competition["id"], erin, seed=s).json()["agent"]["id"] for s in (1, 2, 3)]
    entries = client.get(f"{API}/competitions/{competition['id']}/entries").json()["data"]
    assert {e["agent_id"]: e["active"] for e in entries} == {ids[0]: False, ids[1]: True, ids[2]: True}
    board = client.get(f"{API}/competitions/{competition['id']}/board").json()
    assert board["board"] == f"competition:{competition['id']}"
    assert {r["agent_id"] for r in board["data"] if not r["reference"]} == set(ids[1:])
    assert [r["reference"] for r in board["data"]].count(True) == 1


def test_teams_join_within_the_size_and_merge_by_kaggles_rule(client):
    competition = _competition(client, team_size=2, daily_submissions=1)
    cid = competition["id"]
    ann, ben, cat = (new_user(client, n) for n in ("ann", "ben", "cat"))
    team = _team(client, cid, ann, "ann-team")
    joined = client.post(f"{API}/competitions/{cid}/teams/join", json={"join_code": team["join_code"]},
                         headers=auth(ben))
    assert joined.status_code == 200 and joined.json()["members"] == ["ann", "ben"]
    full = client.post(f"{API}/competitions/{cid}/teams/join", json={"join_code": team["join_code"]},
                       headers=auth(cat))
    assert full.status_code == 409 and "full" in full.json()["detail"]
    cats = _team(client, cid, cat, "cat-team")
    too_big = client.post(f"{API}/competitions/{cid}/teams/merge", json={"join_code": cats["join_code"]},
                          headers=auth(ann))
    assert too_big.status_code == 409 and "members" in too_big.json()["detail"]
    # Two one-person teams that each used today's one submission: 2 > 1 x 1 day -> refused.
    dan, eve = new_user(client, "dan"), new_user(client, "eve")
    dans, eves = _team(client, cid, dan, "dan-team"), _team(client, cid, eve, "eve-team")
    assert _entry(client, cid, dan, seed=11).status_code == 201
    assert _entry(client, cid, eve, seed=12).status_code == 201
    refused = client.post(f"{API}/competitions/{cid}/teams/merge", json={"join_code": eves["join_code"]},
                          headers=auth(dan))
    assert refused.status_code == 409 and "at most 1" in refused.json()["detail"]
    teams = {t["name"]: t for t in client.get(f"{API}/competitions/{cid}/teams", headers=auth(dan)).json()["data"]}
    assert teams["dan-team"]["join_code"] == dans["join_code"] and teams["eve-team"]["join_code"] is None


def _concurrent(services: Services, cid: int, callers: list[Caller], seeds: list[int]) -> list[BaseException | int]:
    """Submit one entry per (caller, seed) from threads started together; results or errors."""
    start = threading.Barrier(len(seeds))
    out: list[BaseException | int] = [0] * len(seeds)

    def submit(i: int) -> None:
        weights, spec, _ = checkpoint(seed=seeds[i])
        sub = Submission(weights, spec.encode(), ENV, f"c{seeds[i]}")
        start.wait()
        try:
            out[i] = submit_agent(services, callers[i].user_id, callers[i].name, sub,
                                  tag=entries.entry_tag(cid, callers[i], "weights", ENV))
        except BaseException as exc:  # noqa: BLE001 - the refusals are the result
            out[i] = exc

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(len(seeds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_concurrent_submissions_never_exceed_the_daily_quota(client, services):
    competition = _competition(client, daily_submissions=3, team_size=4)
    cid = competition["id"]
    tokens = [new_user(client, f"racer{i}") for i in range(4)]
    team = _team(client, cid, tokens[0], "racers")
    for token in tokens[1:]:
        assert client.post(f"{API}/competitions/{cid}/teams/join", json={"join_code": team["join_code"]},
                           headers=auth(token)).status_code == 200
    with services.sessions() as session:
        callers = [Caller(repo.get_user_by_name(session, f"racer{i}").id, f"racer{i}", False) for i in range(4)]
    results = _concurrent(services, cid, [callers[i % 4] for i in range(8)], list(range(100, 108)))
    stored = [r for r in results if isinstance(r, int)]
    refused = [r for r in results if not isinstance(r, int)]
    assert len(stored) == 3, results
    assert all(type(r).__name__ == "TooManyRequests" for r in refused), refused
    with services.sessions() as session:
        entries = comp_repo.entries(session, cid)
        agents = repo.get_agents(session, stored)
    assert sorted(e.agent_id for e in entries) == sorted(stored) and len(agents) == 3
    quota = client.get(f"{API}/competitions/{cid}/quota", headers=auth(tokens[0])).json()
    assert quota["used_today"] == 3 and quota["left_today"] == 0


def test_concurrent_joins_never_exceed_the_team_size(client, services):
    members = 3
    competition = _competition(client, team_size=members)
    cid = competition["id"]
    owner = new_user(client, "owner")
    team = _team(client, cid, owner, "crowd")
    for i in range(6):
        new_user(client, f"joiner{i}")
    with services.sessions() as session:
        callers = [Caller(repo.get_user_by_name(session, f"joiner{i}").id, f"joiner{i}", False) for i in range(6)]
    start = threading.Barrier(len(callers))
    outcomes: list[str] = []

    def join(caller: Caller) -> None:
        start.wait()
        try:
            teams.join_team(services, caller, cid, team["join_code"])
            outcomes.append("joined")
        except Exception as exc:  # noqa: BLE001 - a refusal is an outcome
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=join, args=(c,)) for c in callers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("joined") == members - 1 and outcomes.count("Conflict") == 6 - (members - 1)
    with services.sessions() as session:
        assert len(comp_repo.team_members(session, [team["id"]])[team["id"]]) == members


def _seed_entries(services: Services, cid: int, teams_n: int) -> None:
    """``teams_n`` teams of one, two entries each, through the one submission function. The users are
    made in one transaction and the teams by the service's function (not over HTTP: only their
    entries count here), four teams at a time (their entries in order within each team)."""
    def create_users(session) -> list[int]:
        return [repo.create_user(session, f"seeded{i}") for i in range(teams_n)]
    user_ids = services.sessions.write_transaction(create_users, what="the seeded users")

    def seed(i: int) -> None:
        caller = Caller(user_ids[i], f"seeded{i}", False)
        teams.create_team(services, caller, cid, f"s{i}")
        for k in range(2):
            weights, spec, _ = checkpoint(seed=5000 + 2 * i + k)
            submit_agent(services, caller.user_id, caller.name, Submission(weights, spec.encode(), ENV, f"s{i}-{k}"),
                         tag=entries.entry_tag(cid, caller, "weights", ENV))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(seed, range(teams_n)))


def test_twenty_teams_submitting_at_once_get_no_5xx_and_no_quota_exceeded(client, services):
    """A board of 200 entries read all along while 20 teams each send three entries at once
    (quota two a day): every answer a 201, a 429 or a 200 read, never a 5xx or a third entry."""
    competition = _competition(client, daily_submissions=2, active_entries=2, team_size=1)
    cid = competition["id"]
    _seed_entries(services, cid, 100)
    assert client.get(f"{API}/competitions/{cid}/board").json()["count"] == 201
    tokens = [new_user(client, f"team{i}") for i in range(20)]
    for i, token in enumerate(tokens):
        _team(client, cid, token, f"t{i}")
    readers = 5
    start = threading.Barrier(len(tokens) * 3 + readers)
    sending = threading.Event()
    sending.set()

    def send(job: tuple[int, int]) -> int:
        team, k = job
        weights, spec, _ = checkpoint(seed=1000 + 3 * team + k)
        parts = [("weights", ("agent.safetensors", weights, "application/octet-stream")),
                 ("spec", (None, spec)), ("env", (None, ENV)), ("name", (None, f"t{team}-{k}"))]
        start.wait()
        return client.post(f"{API}/competitions/{cid}/entries", files=parts, headers=auth(tokens[team])).status_code

    def read(_: int) -> list[tuple[int, int]]:
        start.wait()
        seen: list[tuple[int, int]] = []
        while sending.is_set() or not seen:
            answer = client.get(f"{API}/competitions/{cid}/board")
            seen.append((answer.status_code, answer.json().get("count", -1) if answer.status_code == 200 else -1))
        return seen

    with ThreadPoolExecutor(len(tokens) * 3 + readers) as pool:
        reads = [pool.submit(read, r) for r in range(readers)]
        codes = list(pool.map(send, [(t, k) for t in range(len(tokens)) for k in range(3)]))
        sending.clear()
        board_reads = [seen for r in reads for seen in r.result()]
    assert sorted(set(codes)) == [201, 429], codes
    assert codes.count(201) == 40 and codes.count(429) == 20
    assert {code for code, _ in board_reads} == {200}, board_reads
    assert all(201 <= count <= 241 for _, count in board_reads), board_reads
    with services.sessions() as session:
        per_team = [len(comp_repo.entries(session, cid, team_id=t.id)) for t in comp_repo.teams(session, cid)]
    assert per_team == [2] * 120
    board = client.get(f"{API}/competitions/{cid}/board").json()
    assert board["count"] == 241  # every team's two active entries and the reference agent
