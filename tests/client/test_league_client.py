"""LeagueClient and examples/league_sb3.py against a live server: draw, report, push, resume."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from arena.client import ArenaClient, LeagueClient, tally
from arena.gym import make as make_env
from envs.errors import ArenaError
from tests.api.helpers import seed_ladder
from tests.client.live import REPO_ROOT

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
TTT = "tictactoe-v3"


def _token(url: str, name: str) -> str:
    with ArenaClient(url, token="") as client:
        return client.create_user(name)["token"]


@sqlite_only
def test_draw_play_report_push_and_resume(arena, tmp_path, monkeypatch):
    ids = seed_ladder(arena.services, ["random", "heuristic"], 6, env=TTT)
    token = _token(arena.url, "ada")
    monkeypatch.setenv("ARENA_CACHE_DIR", str(tmp_path / "cache"))
    with LeagueClient(arena.url, token, "ttt", TTT) as league:
        assert not league.resumed
        drawn = league.sample_opponents(16, seed=1)
        assert {o.kind for o in drawn} <= {"self", "builtin"} and any(o.kind == "builtin" for o in drawn)
        names = league.gym_opponents(drawn)  # self left out: no policy of our own given
        assert set(names) <= {"random", "heuristic"}
        env = make_env(TTT, names, seed=0)
        outcomes = []
        for _ in range(6):
            env.reset()
            done = False
            while not done:
                _, reward, terminated, truncated, info = env.step(int(env.action_masks().nonzero()[0][0]))
                done = terminated or truncated
            outcomes.append((info["opponents"][1 - info["learner_team"]], reward))
        report = league.report(tally(outcomes))
        assert report["applied"] and report["learner"]["games"] == 6
        with pytest.raises(ArenaError, match="not an opponent the league drew"):
            league.report({"grandmaster": (1, 0, 0)})
        from agents.neural import write_checkpoint

        write_checkpoint(tmp_path / "me.safetensors", TTT, "mlp", {"hidden": [16]}, seed=4)
        pushed = league.push_snapshot(tmp_path / "me.safetensors")
        assert pushed["snapshot"]["generation"] == 1 and pushed["agent"]["status"] == "queued"
        snapshot_id = pushed["agent"]["id"]
        rows = league.sample_opponents(200, seed=2)
        assert snapshot_id in {o.agent_id for o in rows}
        mine = [o for o in rows if o.agent_id == snapshot_id][:1]
        assert mine[0].gym_name == f"arena:{snapshot_id}@{arena.url}"
        [as_gym] = league.gym_opponents(mine)  # our private snapshot, downloaded with our token
        assert as_gym.startswith("file:") and as_gym.endswith(f"agent-{snapshot_id}.safetensors")
        assert make_env(TTT, [as_gym], seed=0).reset()
        assert league.report({as_gym: (0, 1, 0)})["learner"]["win_rates"][str(snapshot_id)] == 0.5
    with LeagueClient(arena.url, token, "ttt", TTT) as again:  # a restarted trainer
        assert again.resumed and again.id == league.id
        state = again.learner_state()
        assert state["games"] == 7 and state["generation"] == 1
        assert set(state["win_rates"]) <= {str(ids["random"]), str(ids["heuristic"]), str(snapshot_id)}
    with pytest.raises(ArenaError, match="someone else's"):
        LeagueClient(arena.url, _token(arena.url, "bob"), "ttt", TTT)


@pytest.mark.slow
@sqlite_only
def test_the_sb3_example_trains_pushes_and_resumes(arena, tmp_path):
    seed_ladder(arena.services, ["random", "heuristic"], 6, env=TTT)
    token = _token(arena.url, "ada")
    command = [sys.executable, str(REPO_ROOT / "examples" / "league_sb3.py"), "--server", arena.url, "--token", token,
               "--league", "sb3", "--env-id", TTT, "--steps-per-round", "256", "--num-envs", "4", "--n-steps", "64",
               "--batch-size", "64", "--n-epochs", "1", "--opponents-per-round", "4",
               "--run-dir", str(tmp_path / "runs")]
    env = {**os.environ, "ARENA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO_ROOT)}
    first = subprocess.run([*command, "--rounds", "2"], capture_output=True, text=True, timeout=600, env=env,
                           cwd=tmp_path, check=False)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "new, learner main" in first.stdout
    assert re.findall(r"snapshot g(\d+)", first.stdout) == ["1", "2"]
    second = subprocess.run([*command, "--rounds", "1"], capture_output=True, text=True, timeout=600, env=env,
                            cwd=tmp_path, check=False)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed" in second.stdout and re.findall(r"snapshot g(\d+)", second.stdout) == ["3"]
    with LeagueClient(arena.url, token, "sb3", TTT) as league:
        state = league.state()
    [learner] = state["learners"]
    assert learner["games"] > 0 and learner["generation"] == 3 and len(state["snapshots"]) == 3
    assert (tmp_path / "runs" / "sb3" / "model.safetensors").exists()
