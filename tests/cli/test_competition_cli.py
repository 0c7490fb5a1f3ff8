"""``arena competition`` against a live server (SQLite and PostgreSQL): an admin creates and opens
a competition, two teams submit with ``arena submit --competition`` (one over its quota), the
service's competition rounds, their clock past the deadline, freeze the pool and play the final
evaluation to its budget, ``standings`` prints the frozen result
and ``verify`` recomputes it from the downloaded match log: equal, and not equal once tampered."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from agents.neural import write_checkpoint
from arena.client import ArenaClient
from arena.competitions.season import CompetitionBoards
from arena.core.settings import Settings
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.pacing import LadderPacer
from arena.runners import InProcessRunner
from arena.storage.db.base import utcnow
from arena.storage.db.repositories import competitions as comp_repo
from tests.api.helpers import RAISED_LIMITS
from tests.client.live import run_cli, serving

ENV = "connect_four-v3"
ADMIN_TOKEN = "competition-admin-token"


def test_a_competition_from_the_command_line_to_verified_standings(tmp_path: Path, migrated_db_url, redis_url):
    home = tmp_path / "home"
    home.mkdir()
    settings = Settings(page_cache_s=0.0, data_dir=tmp_path / "server", database_url=migrated_db_url,
                        redis_url=redis_url, admin_token=ADMIN_TOKEN, **RAISED_LIMITS)
    with serving(settings) as (url, services):
        _season(services, url, home, tmp_path)


def _season(services, url: str, home: Path, tmp_path: Path) -> None:
    made = run_cli("competition", "create", "--env", ENV, "--title", "CLI cup", "--deadline", "+1h", "--open",
                   "--settings", '{"top_k": 2, "final_floor": 4, "final_match_budget": 120, '
                   '"daily_submissions": 2, "reference_agents": ["random"]}',
                   home=home, server=url, token=ADMIN_TOKEN)
    assert made.returncode == 0, made.stderr + made.stdout
    with ArenaClient(url, token="") as client:
        cid = client.competitions()["data"][0]["id"]
        tokens = [client.create_user(n)["token"] for n in ("ann", "ben")]
    for k, token in enumerate(tokens):
        team = run_cli("competition", "team", "create", str(cid), f"team{k}", home=home, server=url, token=token)
        assert team.returncode == 0 and "join code" in team.stdout, team.stderr + team.stdout
        for seed in (1, 2):
            path = tmp_path / f"a{k}{seed}.safetensors"
            write_checkpoint(path, ENV, "mlp", {"hidden": [8]}, seed=10 * k + seed)
            sent = run_cli("submit", str(path), "--competition", str(cid), home=home, server=url, token=token)
            assert sent.returncode == 0 and f"in competition {cid}" in sent.stdout, sent.stderr + sent.stdout
    over = run_cli("submit", str(path), "--competition", str(cid), home=home, server=url, token=tokens[1])
    assert over.returncode == 2 and "submissions of today" in over.stderr

    background = BackgroundService(services, InProcessRunner(), ServiceConfig(envs=(ENV,), seed=1))
    assert background.process_submissions() == 4  # validated like every submission
    background.stop()
    late = utcnow() + timedelta(hours=2)
    runner = InProcessRunner(services.snapshot_cache_factory()())
    rounds = CompetitionBoards(services, runner, LadderPacer(seed=1), batch_size=32, now=lambda: late)
    for _ in range(40):
        rounds.round()
        with services.sessions() as session:
            if comp_repo.get_competition(session, cid).state == "finished":
                break

    shown = run_cli("competition", "standings", str(cid), home=home, server=url)
    assert shown.returncode == 0 and "after" in shown.stdout, shown.stderr + shown.stdout
    verified = run_cli("competition", "verify", str(cid), home=home, server=url)
    assert verified.returncode == 0 and "equal" in verified.stdout, verified.stderr + verified.stdout

    def tamper(session):
        competition = comp_repo.get_competition(session, cid)
        result = dict(competition.final_result)
        result["standings"] = [dict(s) for s in result["standings"]]
        result["standings"][0]["mu"] += 1.0
        comp_repo.update_competition(session, cid, {"final_result": result})
    services.sessions.write_transaction(tamper, what="tampering with the published standings")
    caught = run_cli("competition", "verify", str(cid), home=home, server=url)
    assert caught.returncode == 1 and "NOT equal" in caught.stdout, caught.stderr + caught.stdout
