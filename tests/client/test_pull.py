"""``arena agent pull`` and ``arena:<id>@<url>`` opponents against a live server (SQLite)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from agents.checkpoint import load_checkpoint
from agents.neural import write_checkpoint
from arena.client import ArenaClient
from arena.client.onnx_export import export_submission
from arena.gym import make as make_env
from envs.errors import UnknownAgent
from tests.client.live import run_cli
from tests.client.test_roundtrip import C4

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def _episodes(env, episodes: int = 3) -> list[tuple]:
    """``(observations, rewards, opponents)`` of a few episodes, the learner always playing its first legal move."""
    out = []
    obs, _ = env.reset(seed=5)
    for _ in range(episodes):
        seen, done = [obs.copy()], False
        while not done:
            obs, reward, terminated, truncated, info = env.step(int(np.flatnonzero(env.action_masks())[0]))
            seen.append(obs.copy())
            done = terminated or truncated
        out.append((np.stack(seen), reward, tuple(info["opponents"].values())))
        obs, _ = env.reset()
    return out


@sqlite_only
def test_pull_a_published_agent_and_play_it_as_file_and_arena_opponent(arena, cli_home, tmp_path, monkeypatch):
    with ArenaClient(arena.url, token="") as anonymous:
        ada = anonymous.create_user("ada")["token"]
        bob = anonymous.create_user("bob")["token"]
    ck = write_checkpoint(tmp_path / "bot.safetensors", C4, "mlp", {"hidden": [16]}, seed=3)
    with ArenaClient(arena.url, token=ada) as client:
        agent_id = client.submit_agent(tmp_path / "bot.safetensors", name="pullable")["id"]

    private = run_cli("agent", "pull", str(agent_id), "--out", "pulled", home=cli_home, server=arena.url, token=bob)
    assert private.returncode == 2 and "is private" in private.stderr and "HTTP 403" in private.stderr
    assert not (cli_home / "pulled").exists()
    monkeypatch.setenv("ARENA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ARENA_TOKEN", bob)
    with pytest.raises(UnknownAgent, match="private"):
        make_env(C4, opponents=[f"arena:{agent_id}@{arena.url}"])

    published = run_cli("agent", "publish", str(agent_id), home=cli_home, server=arena.url, token=ada)
    assert published.returncode == 0 and "published" in published.stdout, published.stderr
    pulled = run_cli("agent", "pull", str(agent_id), "--out", "pulled", home=cli_home, server=arena.url, token=bob)
    assert pulled.returncode == 0, pulled.stderr
    weights = cli_home / "pulled" / f"agent-{agent_id}.safetensors"
    assert weights.read_bytes() == (tmp_path / "bot.safetensors").read_bytes()
    assert load_checkpoint(weights).sha256 == ck.sha256  # weights + spec side by side, as file: wants them
    again = run_cli("agent", "pull", str(agent_id), "--out", "pulled", home=cli_home, server=arena.url)
    assert again.returncode == 0, again.stderr  # anonymous now, same files: nothing to overwrite

    as_file = _episodes(make_env(C4, opponents=[f"file:{weights}"], seed=0))
    name = f"arena:{agent_id}@{arena.url}"
    fetched = make_env(C4, opponents=[name], seed=0)
    as_arena = _episodes(fetched)
    cached = tmp_path / "cache" / "agents"
    assert [p.name for p in cached.rglob("*")] and all(p.suffix in (".safetensors", ".json")
                                                         for p in cached.rglob("*") if p.is_file())
    for (obs_a, reward_a, _), (obs_b, reward_b, opponents) in zip(as_file, as_arena):
        np.testing.assert_array_equal(obs_a, obs_b)  # the same agent made the same moves
        assert reward_a == reward_b and opponents == (name,)


@sqlite_only
def test_an_onnx_agent_is_pulled_as_onnx(arena, cli_home, tmp_path):
    torch.manual_seed(0)
    actor = nn.Sequential(nn.Flatten(), nn.Linear(84, 16), nn.Tanh(), nn.Linear(16, 7))
    export_submission(actor, C4, tmp_path / "actor.onnx")
    with ArenaClient(arena.url, token="") as client:
        client.token = client.create_user("ada")["token"]
        agent_id = client.submit_agent(tmp_path / "actor.onnx")["id"]
        client.publish(agent_id)
        path = client.pull_agent(agent_id, cli_home / "onnx")
    assert path.suffix == ".onnx" and path.read_bytes() == (tmp_path / "actor.onnx").read_bytes()
    env = make_env(C4, opponents=[f"file:{path}"], seed=0)
    assert len(_episodes(env, 1)) == 1
