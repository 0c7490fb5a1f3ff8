"""examples/sb3_maskable_ppo.py and examples/ppo_arena_gym.py end to end, as a user runs them: each
trains briefly on arena.gym against random, exports an ONNX submission, submits it to one live
server whose background service plays the ladder (as ``arena serve`` does), and waits until the
agent is rated; both then stand on the leaderboard."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from arena.client import ArenaClient
from tests.client.live import REPO_ROOT, live_arena

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
ENV = "tictactoe-v3"
TINY = {  # a few hundred learner steps, a few dozen evaluation episodes
    "sb3_maskable_ppo": ["--total-timesteps", "256", "--num-envs", "4", "--n-steps", "64", "--batch-size", "64",
                         "--n-epochs", "1", "--eval-episodes", "32"],
    "ppo_arena_gym": ["--total-timesteps", "256", "--num-envs", "8", "--num-steps", "32", "--eval-episodes", "32"],
}


def run_example(name: str, server: str, token: str, cwd) -> subprocess.CompletedProcess:
    command = [sys.executable, str(REPO_ROOT / "examples" / f"{name}.py"), "--env-id", ENV, *TINY[name],
               "--out", f"{name}.onnx", "--submit", server, "--token", token, "--submit-timeout", "120"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=cwd, env=env, check=False)


@pytest.mark.slow
@sqlite_only
def test_both_examples_train_export_submit_and_reach_rated(tmp_path, migrated_db_url, redis_url):
    with live_arena(tmp_path, migrated_db_url, redis_url, ENV, ladder=True) as live:
        agents = {}
        for name in TINY:
            run = run_example(name, live.url, live.token, tmp_path)
            assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
            assert "win rate against random: untrained" in run.stdout and (tmp_path / f"{name}.onnx").exists()
            assert re.search(r"agent \d+ (queued|validating|placement); ", run.stdout), run.stdout  # the progress
            agents[name] = int(re.search(r"agent (\d+) rated; player: \d+ games, mu ", run.stdout).group(1))
            assert f"agent {agents[name]} is on the leaderboard: {live.url}/envs/{ENV}" in run.stdout
        with ArenaClient(live.url, token=live.token) as client:
            shown = {a: client.agent(a) for a in agents.values()}
            board = {row["agent_id"]: row for row in client.leaderboard(ENV)["data"]}
    assert {a["status"] for a in shown.values()} == {"rated"} and len(set(agents.values())) == 2
    assert {(a["format"], a["owner"]) for a in shown.values()} == {("onnx", "ada")}
    assert all(board[a]["games"] > 0 for a in agents.values()), board


@sqlite_only
def test_waiting_on_a_server_that_rates_nothing_times_out_saying_why(tmp_path, migrated_db_url, redis_url):
    from torch import nn

    from arena.client import ArenaTimeout, progress_printer, submit_until_rated
    from arena.client.onnx_export import export_submission

    export_submission(nn.Sequential(nn.Flatten(), nn.Linear(18, 9)), ENV, tmp_path / "tiny.onnx")
    lines: list[str] = []
    with (live_arena(tmp_path, migrated_db_url, redis_url, ENV, ladder=False) as live,  # no background service
          pytest.raises(ArenaTimeout) as waited):
        submit_until_rated(tmp_path / "tiny.onnx", live.url, live.token, timeout=0.5,
                           on_progress=progress_printer(lines.append))
    assert re.fullmatch(r"agent \d+ queued; 1 in the queue; .*", lines[0]) and len(lines) == 1  # printed once
    message = str(waited.value)
    assert "is still 'queued' after 0.5 s" in message and "background service" in message
