"""``arena league`` as a user runs it: a short training run, then its status."""

from __future__ import annotations

import json

from tests.cli.test_ladder_cli import run


def test_league_train_then_status(tmp_path):
    res = run("league", "train", "--env", "tictactoe-v3", "--minutes", "0.01", "--name", "cli",
              "--roles", "main,main_exploiter", "--eval-matches", "6", "--threads", "1",
              data_dir=tmp_path, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ladder ratings" in res.stdout and "cli-main-g1" in res.stdout
    png = tmp_path / "leagues" / "cli" / "ratings.png"
    assert png.read_bytes()[:4] == b"\x89PNG"
    status = run("league", "status", "--name", "cli", data_dir=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "cli-main_exploiter-g1" in status.stdout and "plot:" in status.stdout
    # The league's generations are on the web leaderboard the service serves.
    from fastapi.testclient import TestClient

    from arena.api import create_app
    from arena.core.settings import Settings
    from arena.storage.wiring import open_services

    with open_services(Settings(data_dir=tmp_path)) as services, TestClient(create_app(services)) as client:
        page = client.get("/envs/tictactoe-v3")
        board = client.get("/api/v1/leaderboard", params={"env": "tictactoe-v3", "limit": 100})
    assert page.status_code == 200 and board.status_code == 200
    names = {row["name"] for row in board.json()["data"]} | {row["key"] for row in board.json()["data"]}
    assert {"cli-main-g1", "cli-main_exploiter-g1"} <= names, names
    assert "cli-main-g1" in page.text


def test_league_errors_say_what_to_fix(tmp_path):
    res = run("league", "status", "--name", "nope", data_dir=tmp_path)
    assert res.returncode == 2 and "arena league train --name nope" in res.stdout + res.stderr
    res = run("league", "train", "--roles", "main_exploiter", "--minutes", "0.01", data_dir=tmp_path)
    assert res.returncode == 2 and "add 'main' to the roles" in res.stdout + res.stderr


def test_hide_and_seek_league_command_publishes_its_timeline(tmp_path):
    res = run("league", "hide-and-seek", "--name", "hs", "--minutes", "1", "--generations", "2", "--envs", "32",
              "--eval-episodes", "16", "--updates", "1", "--record", "2", "--threads", "1", "--exploiters", "1",
              "--exploiter-share", "0.5", "--precision", "bf16", data_dir=tmp_path, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "web page /leagues/1" in res.stdout and "generation 1:" in res.stdout
    assert "exploiters: hider 0 " in res.stdout and ", seeker 0 " in res.stdout  # shown apart from the mains
    from arena.core.settings import Settings
    from arena.storage.db import repositories as repo
    from arena.storage.wiring import open_services

    with open_services(Settings(data_dir=tmp_path)) as services, services.sessions() as session:
        rows = repo.league_generations(session, 1)
    # generation 0 is evaluated (16 episodes and 2 recorded); generation 1 (eval_every 5) is read
    # from its own training episodes
    assert [r.generation for r in rows] == [0, 1] and rows[0].episodes == 18 and rows[1].episodes > 0
    assert all(set(r.ratings) == {"hider", "seeker"} and "fort" in r.phase_rates for r in rows)
    again = run("league", "hide-and-seek", "--name", "hs", "--minutes", "1", "--generations", "2",
                data_dir=tmp_path, timeout=120)  # already there: resumes, trains nothing
    assert again.returncode == 0 and "resuming league hs: 2 generations" in again.stdout, again.stdout
    saved = json.loads(next(tmp_path.rglob("hide_and_seek.json")).read_text())["config"]["ppo"]
    assert (saved["exploiters"], saved["exploiter_share"], saved["precision"]) == (1, 0.5, "bf16")
    bad = run("league", "hide-and-seek", "--name", "other", "--precision", "fp16", "--minutes", "0.01",
              data_dir=tmp_path)
    assert bad.returncode == 2 and "precision must be one of" in bad.stdout + bad.stderr
