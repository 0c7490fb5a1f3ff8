"""The hide-and-seek league on the services: generations in the database, on the API, replayable firsts.

A tiny budget (2 generations of 1 update of 32 episodes) on SQLite and an embedded Redis:
this checks the wiring (agents registered, matches recorded, timeline published and
served, resume records nothing twice, ``arena league status``), not learning.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient

from arena.api import create_app
from arena.core.settings import Settings
from arena.read.grid_frames import match_phases
from arena.storage.db import repositories as repo
from arena.storage.wiring import open_services
from arena.training.hide_and_seek.config import HideAndSeekLeagueConfig, default_v1_ppo
from arena.training.hide_and_seek.service import HideAndSeekLeagueRun, league_row_name, load_timeline
from envs.hide_and_seek.rules import PHASES
from league.evaluation.phases import HAPPENED
from tests.cli.test_ladder_cli import run as run_cli

pytestmark = pytest.mark.redis
ENV = "hide_and_seek-v1"


def tiny(name: str = "wired") -> HideAndSeekLeagueConfig:
    ppo = replace(default_v1_ppo(seed=2), num_envs=32, hidden=[16], minibatches=4, epochs=1, device="cpu")
    return HideAndSeekLeagueConfig(name=name, ppo=ppo, updates_per_generation=1, eval_episodes=16)


def test_generations_reach_the_database_the_api_and_replays(redis_url: str, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    settings = Settings(data_dir=tmp_path, redis_url=redis_url)
    with open_services(settings) as services:
        run = HideAndSeekLeagueRun(services, tiny(), record_matches=3)
        run.run(5.0, max_generations=2)
        league_id = run.league_id
        with services.sessions() as session:
            assert repo.get_league_by_name(session, league_row_name(run.cfg)).id == league_id
            rows = repo.league_generations(session, league_id)
            agents = {key for gen in run.agents.values() for key in gen.values()}
            ids = repo.agent_ids_for_keys(session, ENV, agents)
        assert len(agents) == 4 and set(ids) == agents  # hider and seeker of generations 0 and 1
        assert [r.generation for r in rows] == [0, 1]
        for row, summary in zip(rows, run.league.generations, strict=True):
            assert set(row.phase_rates) == set(PHASES)
            # the evaluation's episodes (generation 0) or the training episodes that started as
            # the standard layout (generation 1, between evaluations), and the recorded ones
            assert row.episodes == (16 if summary.evaluated else summary.phase_episodes) + 3
            assert summary.evaluated == (summary.generation == 0)
            assert row.ratings == {"hider": [summary.hider_mu, summary.hider_sigma],
                                   "seeker": [summary.seeker_mu, summary.seeker_sigma]}
            assert row.ratings["hider"][1] < 25 / 3  # rated
        recorded = run.recorded
        assert sorted({r["generation"] for r in recorded}) == [0, 1] and len(recorded) == 6
        happened = [r for r in recorded if max(r["phases"].values()) >= HAPPENED]

        with TestClient(create_app(services)) as client:
            data = client.get(f"/api/v1/leagues/{league_id}/timeline").json()
            assert [r["generation"] for r in data["rows"]] == [0, 1]
            assert data["roles"] == ["hider", "seeker"]
            assert data["rows"][1]["ratings"]["seeker"] == pytest.approx(rows[1].ratings["seeker"])
            firsts = {f["phase"]: f["match_id"] for f in data["firsts"]}
            assert bool(firsts) == bool(happened)
            for phase, match_id in firsts.items():
                frames = client.get(f"/api/v1/matches/{match_id}/frames")
                assert frames.status_code == 200 and frames.json()["kind"] == "grid"
                assert frames.json()["phases"][phase] >= HAPPENED
            # every recorded match replays to the phase values it was counted with
            rec = recorded[0]
            frames = client.get(f"/api/v1/matches/{rec['match_id']}/frames").json()
            assert frames["phases"] == pytest.approx(rec["phases"])
            assert data["exploiters"] == []  # a league without exploiters
            page = client.get(f"/leagues/{league_id}")
            assert page.status_code == 200 and 'id="exploiters"' not in page.text

    # Resumed: nothing recorded twice, the same league row.
    with open_services(settings) as services:
        again = HideAndSeekLeagueRun(services, tiny(), record_matches=3)
        assert again.resumed and again.league_id == league_id and len(again.recorded) == 6
        with services.sessions() as session:
            assert len(repo.league_generations(session, league_id)) == 2

    env_id, timeline = load_timeline(tmp_path, "wired")
    assert env_id == ENV and sorted(timeline.generations) == [0, 1]
    status = run_cli("league", "status", "--name", "wired", data_dir=tmp_path)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "strategy phases" in status.stdout and "ramp" in status.stdout and "hider mu±sigma" in status.stdout


def test_exploiter_events_reach_the_database_the_api_and_the_page(redis_url: str, tmp_path: Path) -> None:
    """One exploiter per role and ``exploiter_margin=-1`` (every generation a win): generation 1's
    row has both exploiters frozen, with the summary's scores and edges, apart from the mains."""
    torch.set_num_threads(1)
    cfg = replace(tiny("exploited"), exploiter_margin=-1.0)
    cfg.ppo = replace(cfg.ppo, exploiters=1, exploiter_share=0.25)
    with open_services(Settings(data_dir=tmp_path, redis_url=redis_url)) as services:
        run = HideAndSeekLeagueRun(services, cfg, record_matches=1)
        run.run(5.0, max_generations=2)
        events = run.league.generations[1].exploiters
        assert [(e["role"], e["index"], e["snapshot"], e["reset"]) for e in events] == [
            ("hider", 0, "x0", False), ("seeker", 0, "x0", False)]
        with services.sessions() as session:
            rows = repo.league_generations(session, run.league_id)
        assert [r.generation for r in rows] == [0, 1]
        assert rows[0].exploiters == []  # generation 0 trained nobody
        fields = ("role", "index", "score", "edge", "snapshot", "reset")
        assert rows[1].exploiters == [{k: e[k] for k in fields} for e in events]
        assert all(0.0 <= e["score"] <= 1.0 and -1.0 <= e["edge"] <= 1.0 for e in rows[1].exploiters)

        with TestClient(create_app(services)) as client:
            data = client.get(f"/api/v1/leagues/{run.league_id}/timeline").json()
            assert data["exploiters"] == [{"generation": 1, **{k: e[k] for k in fields}} for e in events]
            assert all("exploiters" not in row for row in data["rows"])  # the mains' rows stay the mains'
            html = client.get(f"/leagues/{run.league_id}").text
        section = html[html.index('id="exploiters"'):]
        assert html.index('id="phase-table"') < html.index('id="exploiters"')  # its own table, after the mains'
        assert re.findall(r'data-exploiter="([\w-]+)"', section) == ["hider-0", "seeker-0"]
        assert section.count('<th scope="row" class="n">') == 1  # generation 1 only
        assert section.count("frozen as x0") == 2 and "tag reset" not in section
        for e in events:
            assert f'{e["score"]:.2f}</span> <span class="muted">({e["edge"]:+.2f})' in section


def test_recorded_phases_are_the_replayed_ones(redis_url: str, tmp_path: Path) -> None:
    """A recorded match's stored phase values are what re-simulating it gives."""
    torch.set_num_threads(1)
    with open_services(Settings(data_dir=tmp_path, redis_url=redis_url)) as services:
        run = HideAndSeekLeagueRun(services, tiny("zero"), record_matches=1)
        [rec] = run.recorded
        with services.sessions() as session:
            stored = repo.get_match(session, rec["match_id"])
        assert match_phases(stored.to_record()) == rec["phases"]
