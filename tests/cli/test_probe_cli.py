"""``arena probe``: queue a probe of one's agent on a live server, follow it to the result."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.api.app import create_app
from arena.client import ArenaClient
from arena.core.settings import Settings
from arena.evaluation.probe_backends import ProcessProbeBackend
from arena.evaluation.probes import ProbeService
from arena.ladder.dispatch import LadderConfig, agent_source, open_ladder
from arena.runners import AgentSource, InProcessRunner
from arena.storage.db import repositories as repo
from arena.storage.wiring import open_services
from tests.api.helpers import ENV, checkpoint
from tests.client.live import LiveServer, run_cli

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.mark.slow
@sqlite_only
def test_arena_probe_follows_the_probe_to_its_result(tmp_path: Path, migrated_db_url: str, redis_url: str):
    settings = Settings(page_cache_s=0.0, data_dir=tmp_path / "server", database_url=migrated_db_url,
                        redis_url=redis_url, probe_budget_steps=8192, probe_eval_games=20, probe_auto=False,
                        probe_niceness=0)
    with open_services(settings) as services:
        server = LiveServer(create_app(services))
        probes = ProbeService(services, ProcessProbeBackend(), poll_s=0.1).start()
        try:
            with ArenaClient(server.url, token="") as anonymous:
                ada = anonymous.create_user("ada")["token"]
                bob = anonymous.create_user("bob")["token"]
            weights, spec, _ = checkpoint()
            (tmp_path / "agent.safetensors").write_bytes(weights)
            (tmp_path / "agent.json").write_text(spec)
            with ArenaClient(server.url, token=ada) as client:
                agent = client.submit_agent(tmp_path / "agent.safetensors")
            refused = run_cli("probe", str(agent["id"]), home=tmp_path, server=server.url, token=bob)
            assert refused.returncode == 2 and "not yours" in refused.stderr + refused.stdout
            done = run_cli("probe", str(agent["id"]), "--budget", "0", "--poll", "0.2", home=tmp_path,
                           server=server.url, token=ada, timeout=300)
            with services.sessions() as session:  # a few rated matches put it on the board
                info = repo.get_agent(session, agent["id"])
            ladder = open_ladder(services.sessions, LadderConfig(ENV, batch_size=20, seed=1))
            ladder.add_agents([agent_source(info), AgentSource(key="random", builtin="random")])
            runner = InProcessRunner(services.snapshot_cache_factory()())
            assert ladder.run(runner, 20).recorded == 20
            runner.close()
            board = run_cli("leaderboard", "--env", ENV, "--server", server.url, home=tmp_path)
        finally:
            probes.stop()
            server.stop()
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "exploiter win rate" in out and "0 env steps" in out and "done" in out
    assert board.returncode == 0 and "exploitability @ budget" in board.stdout and "@0" in board.stdout
