"""A connected agent as a competition entry (SQLite and PostgreSQL): entered under the same checks
as an upload, rated on the competition's own board while its client is online, in the board's
own connected lane; the board rebuilt from its matches equals the live one."""

from __future__ import annotations

from datetime import timedelta

import httpx

from arena.competitions.season import CompetitionBoards
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.dispatch import queue_lane
from arena.ladder.lane import ConnectedLane
from arena.ladder.pacing import LadderPacer
from arena.ladder.recorder import rebuild_ratings
from arena.ladder.registration import register_builtin_agents
from arena.runners import InProcessRunner
from arena.storage.db import repositories as repo
from arena.storage.db.base import utcnow
from arena.storage.db.repositories import competitions as comp_repo
from envs.registry import get_spec
from tests.connected.conftest import ADMIN_TOKEN
from tests.connected.test_ladder_lane import ENV, heuristic_batch
from tests.connected.test_live_protocol import wait_online
from tests.waiting import wait_for

API = "/api/v1"


def _post(live, path: str, token: str, body: dict) -> httpx.Response:
    return httpx.post(f"{live.url}{API}{path}", json=body, headers={"Authorization": f"Bearer {token}"})


def _competition(live, paths: list[str]) -> int:
    now = utcnow()
    body = {"env": ENV, "title": "connected cup", "opens_at": (now - timedelta(minutes=1)).isoformat(),
            "deadline": (now + timedelta(hours=1)).isoformat(), "allowed_paths": paths,
            "reference_agents": ["random", "heuristic:epsilon=0.5"]}
    made = _post(live, "/competitions", ADMIN_TOKEN, body)
    assert made.status_code == 201, made.text
    assert _post(live, f"/competitions/{made.json()['id']}/open", ADMIN_TOKEN, {}).status_code == 200
    return made.json()["id"]


def _board_games(live, board: str, agent_id: int) -> int:
    with live.services.sessions() as session:
        return sum(r.games for r in comp_repo.load_board_ratings(session, board, [agent_id]).values())


def test_a_connected_entry_plays_the_season_board_while_online(live, run_client):
    token = live.user("carol")
    weights_only = _competition(live, ["weights"])
    assert _post(live, f"/competitions/{weights_only}/teams", token, {"name": "c"}).status_code == 201
    refused = _post(live, f"/competitions/{weights_only}/entries/connected", token, {"name": "lane-heuristic"})
    assert refused.status_code == 422 and "connected" in refused.json()["detail"]

    cid = _competition(live, ["weights", "connected"])
    assert _post(live, f"/competitions/{cid}/teams", token, {"name": "carols"}).status_code == 201
    entered = _post(live, f"/competitions/{cid}/entries/connected", token, {"name": "lane-heuristic"})
    assert entered.status_code == 201, entered.text
    agent_id = entered.json()["agent"]["id"]
    assert entered.json()["agent"]["kind"] == "connected" and entered.json()["entry"]["active"]
    again = _post(live, f"/competitions/{cid}/entries/connected", token, {"name": "lane-heuristic"})
    assert again.status_code == 409 and again.json()["existing_id"] == agent_id

    board = f"competition:{cid}"
    service = BackgroundService(live.services, InProcessRunner(), ServiceConfig(envs=(ENV,), seed=7, batch_size=64))
    try:
        service.step()  # offline: the board plays its reference agents only
        assert _board_games(live, board, agent_id) == 0
        run_client(live.url, token, agent_id, heuristic_batch, batched=True)
        wait_online(live, agent_id)

        def played() -> bool:
            if _board_games(live, board, agent_id) >= 10:
                return True
            service.step()  # the service plays a round per poll
            return False
        wait_for("the connected entry to play 10 games on its competition's board", played, timeout_s=90,
                 every_s=0.05)
        wait_for("the lane to finish its batch", lambda: not service.lane.busy(board), timeout_s=30, every_s=0.05)
    finally:
        service.stop()
    assert rebuild_ratings(live.services.sessions, get_spec(ENV), board=board).equal
    with live.services.sessions() as session:
        lanes = {queue_lane(q.batch_key) for q in repo.queued_matches(session, ENV)}
    assert f"{board}+c" not in lanes  # the board's connected lane recorded everything it dispatched


def test_an_offline_connected_entry_forfeits_its_final_games_and_the_final_still_ends(live):
    token = live.user("dora")
    cid = _competition(live, ["connected"])
    assert _post(live, f"/competitions/{cid}/teams", token, {"name": "doras"}).status_code == 201
    agent_id = _post(live, f"/competitions/{cid}/entries/connected", token, {"name": "gone"}).json()["agent"]["id"]
    services = live.services
    with services.sessions.begin() as session:  # two scripted entries of another team
        team = comp_repo.create_team(session, cid, "scripts", "code-scripts")
        for builtin in register_builtin_agents(session, ENV, ["heuristic", "random"]).values():
            comp_repo.add_entry(session, cid, team, builtin, None, utcnow())
        comp_repo.update_competition(session, cid, {"top_k": 2, "final_floor": 2, "final_match_budget": 24})
    late = utcnow() + timedelta(hours=2)
    lane = ConnectedLane(services)
    rounds = CompetitionBoards(services, InProcessRunner(), LadderPacer(seed=2), batch_size=16, now=lambda: late,
                               lane=lane)
    board = f"competition:{cid}:final"
    try:
        for _ in range(40):
            rounds.round()
            wait_for("the lane to finish the connected entry's batch", lambda: not lane.busy(board), timeout_s=60,
                     every_s=0.05)
            with services.sessions() as session:
                competition = comp_repo.get_competition(session, cid)
            if competition.state == "finished":
                break
    finally:
        lane.close()
    assert competition.state == "finished", competition.state
    with services.sessions() as session:
        key = repo.get_agent(session, agent_id).key
        played = [m for m in repo.iter_matches(session, env_id=ENV, board=board) if key in m.seats]
    assert played and all(m.termination == "disconnected" and m.seats[m.forfeit_seat] == key for m in played)
    line = next(s for s in competition.final_result["standings"] if s["entry"] == agent_id)
    assert line["games"] == len(played) and line["wins"] == 0
