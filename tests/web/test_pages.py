"""The web pages and the frames endpoint, through TestClient on a real, seeded database."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from arena.engine.records import MatchRecord
from arena.read.frames import match_frames
from arena.storage.db import repositories as repo
from arena.web.routes import STATIC_DIR, TEMPLATES_DIR, web_router
from envs.registry import make_env
from tests.web.seed import C4, C4_AGENTS, NEWCOMER, NEWCOMER_MATCHES, TAG, TTT, SeededArena


@pytest.fixture(scope="module")
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


def _matches(seeded: SeededArena, env_id: str, limit: int = 50) -> list[repo.StoredMatch]:
    with seeded.sessions() as session:
        return repo.match_history(session, env_id=env_id, limit=limit).matches


def _agent(seeded: SeededArena, env_id: str, key: str) -> repo.AgentInfo:
    with seeded.sessions() as session:
        agent = repo.get_agent_by_key(session, env_id, key)
    assert agent is not None
    return agent


def _embedded_json(html: str, element_id: str) -> object:
    match = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', html, re.DOTALL)
    assert match, f"no #{element_id} in the page"
    return json.loads(match.group(1))


def test_index_lists_every_env_with_counts_and_links(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    for env_id in (C4, TTT, TAG):
        assert f'href="/envs/{env_id}' in html
    assert 'href="/envs/simple_tag-v3?role=predator"' in html
    assert 'href="/envs/simple_tag-v3?role=prey"' in html
    assert f"<dd>{300 + NEWCOMER_MATCHES}</dd>" in html  # connect four matches


def test_leaderboard_ranks_agents_by_conservative_rating(client: TestClient, seeded: SeededArena) -> None:
    html = client.get(f"/envs/{C4}").text
    with seeded.sessions() as session:
        board = repo.board_rows(session, C4, "player")
    rows = re.findall(r'<tr data-agent="(\d+)" data-games="(\d+)"', html)
    assert [int(a) for a, _ in rows] == [r.agent_id for r in board]
    assert [int(g) for _, g in rows] == [r.rating.games for r in board]
    assert len(rows) == len(C4_AGENTS) + 1
    assert board[0].key == "heuristic" and board[-1].key == NEWCOMER  # few games: low mu - 3 sigma
    for r in board:
        assert f">{r.rating.mu:.2f}<" in html and f">{r.rating.conservative:.2f}<" in html
        assert f">{r.name}</a>" in html
    api = client.get("/api/v1/leaderboard", params={"env": C4, "role": "player"}).json()
    shown = re.findall(r'<span class="range" title="plausible ranks">([^<]*)</span>', html)
    assert shown == ["" if r["rank_lo"] == r["rank_hi"] else f"{r['rank_lo']}–{r['rank_hi']}" for r in api["data"]]
    assert shown[-1] == "1–4"  # the newcomer's wide interval overlaps everyone's
    assert [f"{r['win_rate'] * 100:.1f}%" for r in api["data"]] == re.findall(r'<td class="n">([\d.]+%)</td>', html)
    assert '<th scope="col">95% interval</th>' in html
    assert f'data-source="/api/v1/leaderboard?env={C4}&amp;role=player&amp;limit=100"' in html
    assert html.count('<time class="ago" datetime="20') >= len(board)  # last match times


def test_leaderboard_of_a_role_without_ratings_and_an_unknown_role(client: TestClient) -> None:
    prey = client.get(f"/envs/{TAG}", params={"role": "prey"})
    assert prey.status_code == 200
    assert "No rated agents yet." in prey.text
    assert 'aria-current="page">prey</a>' in prey.text
    fallback = client.get(f"/envs/{TAG}", params={"role": "bogus"})
    assert 'aria-current="page">predator</a>' in fallback.text


@pytest.mark.parametrize("path", ["/envs/nope-v1", "/envs/nope-v1/payoff", "/agents/987654", "/matches/no-such-id"])
def test_unknown_things_are_404_pages(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert "Not found" in response.text


def test_frames_of_an_unknown_match_is_a_json_404(client: TestClient) -> None:
    response = client.get("/api/v1/matches/no-such-id/frames")
    assert response.status_code == 404
    assert "no-such-id" in response.json()["detail"]


def test_agent_page_has_ratings_history_matches_and_head_to_head(client: TestClient, seeded: SeededArena) -> None:
    agent = _agent(seeded, C4, "heuristic")
    html = client.get(f"/agents/{agent.id}").text
    with seeded.sessions() as session:
        rating = repo.load_ratings(session, [agent.id])[(agent.id, "player")]
        pairs = repo.head_to_head(session, [a.id for a in repo.list_agents(session, C4)])
    assert f">{rating.mu:.2f}<" in html and f">{rating.sigma:.2f}<" in html
    assert f"{rating.wins} / {rating.draws} / {rating.losses}" in html
    history = _embedded_json(html, "rating-history")
    assert len(history["player"]) == rating.games  # one point per rated match (< the thinning cap)
    assert history["player"][-1]["mu"] == pytest.approx(rating.mu)
    assert '<svg id="rating-chart"' in html
    # Head to head: every match of this ladder was against one of the others.
    h2h = re.findall(r'<a href="/agents/(\d+)">[^<]+</a></th>\s*<td class="n">(\d+)</td>'
                     r'<td class="n">(\d+) / (\d+) / (\d+)</td>', html)
    assert len(h2h) == len([pair for pair in pairs if pair[0] == agent.id]) >= 2
    assert sum(int(g) for _, g, *_ in h2h) == rating.games
    for other, games, w, d, losses in h2h:
        res = pairs[(agent.id, int(other))]
        assert (int(w), int(d), int(losses)) == (res["W"], res["D"], res["L"])
    recent = re.findall(r'<a href="/matches/([0-9a-f-]{36})">#\d+</a>', html)
    assert len(recent) == 20


def test_match_page_shows_seats_result_and_the_final_board(client: TestClient, seeded: SeededArena) -> None:
    match = next(m for m in _matches(seeded, C4) if m.termination == "normal" and m.winner is not None)
    html = client.get(f"/matches/{match.id}").text
    for key in match.seats:
        assert f">{key}</a>" in html
    assert f"<strong>{match.seats[match.winner]}</strong> won" in html
    assert "ended by <strong>normal</strong>" in html
    assert len(re.findall(r'class="cell p[12]', html)) == len(match.actions)
    assert len(re.findall(r'class="cell p', html)) == 42
    assert 'aria-label="Replay controls"' in html and 'id="scrub"' in html
    frames = _embedded_json(html, "frames-data")
    assert frames["kind"] == "board" and len(frames["frames"]) == len(match.actions) + 1


def _pettingzoo_board(env_id: str, record: MatchRecord) -> np.ndarray:
    env = make_env(env_id)
    env.reset(seed=int(record.seed % 2**31))
    for _, action in record.actions:
        env.step(action)
    board = env.unwrapped.board
    env.close()
    if env_id == C4:
        return np.array(board).reshape(6, 7)
    return np.array(board.squares).reshape(3, 3).T  # PettingZoo numbers squares down columns


@pytest.mark.parametrize("env_id", [C4, TTT])
def test_frames_replay_boards_exactly_as_pettingzoo(client: TestClient, seeded: SeededArena, env_id: str) -> None:
    matches = [m for m in _matches(seeded, env_id) if m.termination == "normal"][:8]
    assert matches
    for match in matches:
        body = client.get(f"/api/v1/matches/{match.id}/frames").json()
        assert body["kind"] == "board"
        assert (body["rows"], body["cols"]) == ((6, 7) if env_id == C4 else (3, 3))
        frames = np.array(body["frames"])
        assert len(frames) == len(match.actions) + 1
        assert [(frames[i] != 0).sum() for i in range(len(frames))] == list(range(len(frames)))
        np.testing.assert_array_equal(frames[-1], _pettingzoo_board(env_id, match.to_record()))
        # Each move lands where the frame changed, with the mover's piece.
        for i, move in enumerate(body["moves"], start=1):
            assert frames[i][move["row"]][move["col"]] == move["seat"] + 1
            assert frames[i - 1][move["row"]][move["col"]] == 0
        assert body["winner"] == match.winner and body["seats"] == match.seats
        line = body["win_cells"]
        if match.winner is None:
            assert line == []
        else:  # the winning line: at least 4 (3) of the winner's pieces, through the last move
            assert len(line) >= (4 if env_id == C4 else 3)
            assert all(frames[-1][r][c] == match.winner + 1 for r, c in line)
            assert [body["moves"][-1]["row"], body["moves"][-1]["col"]] in line


def test_frames_of_simple_tag_follow_the_mpe2_world(client: TestClient, seeded: SeededArena) -> None:
    with seeded.sessions() as session:
        match = repo.get_match(session, seeded.tag_match_id)
    assert match is not None and not match.rated
    body = client.get(f"/api/v1/matches/{match.id}/frames").json()
    assert body["kind"] == "particles"
    assert len(body["frames"]) == len(match.actions) // 4 + 1 == 26
    roles = [e["role"] for e in body["frames"][0]["entities"]]
    assert roles == ["predator"] * 3 + ["prey"] + ["obstacle"] * 2
    env = make_env(TAG)
    env.reset(seed=int(match.seed % 2**31))
    start = {a.name: a.state.p_pos.copy() for a in env.unwrapped.world.entities}
    env.close()
    for entity in body["frames"][0]["entities"]:
        assert (entity["x"], entity["y"]) == pytest.approx(tuple(start[entity["name"]]), abs=1e-4)
    first, last = body["frames"][0]["entities"], body["frames"][-1]["entities"]
    assert any(abs(a["x"] - b["x"]) > 1e-3 for a, b in zip(first[:4], last[:4]))  # agents moved
    assert all(a == b for a, b in zip(first[4:], last[4:]))  # obstacles did not
    page = client.get(f"/matches/{match.id}").text
    assert page.count('class="entity ') == 6 and "unrated" in page


def test_frames_stop_before_a_recorded_illegal_move() -> None:
    actions = [(i % 2, 3) for i in range(6)] + [(0, 3)]  # column 3 is full after six moves
    record = MatchRecord(env=C4, seed=1, seats=["a", "b"], weights=[None, None], actions=actions,
                         scores=[-1.0, 1.0], winner=1, termination="illegal_action", forfeit_seat=0,
                         match_id="m", detail="")
    body = match_frames(record)
    assert body["kind"] == "board" and len(body["frames"]) == 7
    assert body["illegal"] == {"seat": 0, "action": 3}
    assert [row[3] for row in body["frames"][-1]] == [2, 1, 2, 1, 2, 1]
    bad = MatchRecord(env=C4, seed=1, seats=["a", "b"], weights=[None, None], actions=[(1, 0)],
                      scores=[0.0, 0.0], winner=None, termination="normal", forfeit_seat=None,
                      match_id="m", detail="")
    assert match_frames(bad)["kind"] == "none"  # out of turn: reported, not raised
    rps = MatchRecord(env="rps-v2", seed=1, seats=["a", "b"], weights=[None, None], actions=[],
                      scores=[0.0, 0.0], winner=None, termination="normal", forfeit_seat=None,
                      match_id="m", detail="")
    assert match_frames(rps) == {"kind": "none", "reason": "rps-v2 has no visual replay"}


def test_leaderboard_links_the_match_log_downloads(client: TestClient, seeded: SeededArena) -> None:
    import pyarrow.parquet as pq

    html = client.get(f"/envs/{C4}").text
    links = re.findall(r'<p id="match-log".*?<a href="([^"]+)" download>Parquet</a> · '
                       r'<a href="([^"]+)" download>CSV</a>', html, re.DOTALL)
    url = f"/api/v1/envs/{C4}/matches/export"
    assert links == [(f"{url}?format=parquet", f"{url}?format=csv")]
    with seeded.sessions() as session:
        rated = sum(m.rated for m in repo.iter_matches(session, C4))
    table = pq.read_table(io.BytesIO(client.get(links[0][0]).content))
    assert table.num_rows == rated > 0 and table.column("seat1_mu").null_count == 0
    assert len(client.get(links[0][1]).text.splitlines()) == rated + 1  # the header, then a row per match


def test_payoff_page_shows_the_win_rate_heatmap_and_nash_mixture(client: TestClient, seeded: SeededArena) -> None:
    html = client.get(f"/envs/{C4}/payoff").text
    with seeded.sessions() as session:
        board = repo.board_rows(session, C4, "player")
        pairs = repo.head_to_head(session, [r.agent_id for r in board])
    best, worst = board[0].agent_id, board[-1].agent_id
    res = pairs[(best, worst)]
    rate = (res["W"] + 0.5 * res["D"]) / sum(res.values())
    assert f"{100 * rate:.0f}%</td>" in html
    assert html.count('<td class="heat"') == len(board) ** 2
    assert re.search(r"background: hsl\(212 \d+% \d+%\)", html)  # a winning (blue) cell
    shares = [float(v) for v in re.findall(r'<span class="value">([\d.]+)%</span>', html)]
    assert len(shares) == len(board) and sum(shares) == pytest.approx(100, abs=0.5)
    assert shares[0] > 50  # the heuristic dominates this population
    tag = client.get(f"/envs/{TAG}/payoff").text
    assert "for symmetric games" in tag


def test_assets_are_served_locally_and_pages_reference_nothing_external(
        client: TestClient, seeded: SeededArena) -> None:
    # Our own assets; static/vendor/ holds the API docs' third-party bundles (their pages
    # are checked offline by tests/api/test_app.py and tests/web/test_browser.py).
    ours = sorted(p for p in STATIC_DIR.iterdir() if p.is_file())
    for path in ours:
        response = client.get(f"/static/{path.name}")
        assert response.status_code == 200 and response.content == path.read_bytes()
    svg_ns = "http://www.w3.org/2000/svg"
    for path in [*ours, *Path(TEMPLATES_DIR).iterdir()]:
        text = path.read_text().replace(svg_ns, "")
        assert not re.search(r"https?://|//cdn|@import|fonts\.", text), f"{path.name} loads something external"
    agent = _agent(seeded, C4, "random")
    for page in ("/", f"/envs/{C4}", f"/agents/{agent.id}", f"/envs/{C4}/payoff", f"/matches/{seeded.tag_match_id}"):
        html = client.get(page).text
        for url in re.findall(r'(?:src|href)="([^"]+)"', html):
            assert url.startswith(("/", "#", "?")), f"{page} references {url}"
        assert '<html lang="en">' in html and 'href="#main"' in html  # skip link for keyboards


def test_frames_endpoint_is_in_the_openapi_schema(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "404" in paths["/api/v1/matches/{match_id}/frames"]["get"]["responses"]
    assert "/envs/{env_id}" not in paths  # pages stay out of the API schema


def test_the_router_also_serves_pages_on_a_bare_app(seeded: SeededArena) -> None:
    """Mounted alone, the router finds the database in ``app.state.sessions``."""
    app = FastAPI()
    app.state.sessions = seeded.sessions
    app.include_router(web_router())
    with TestClient(app) as bare:
        assert bare.get(f"/envs/{TTT}").status_code == 200
        assert bare.get(f"/matches/{seeded.tag_match_id}").status_code == 200
        assert bare.get("/static/replay.js").status_code == 200
