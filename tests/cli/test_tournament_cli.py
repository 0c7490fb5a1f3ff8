"""``arena tournament`` against a live server: an admin runs a round robin of a competition's
top 3 (seeded from its board, the reference agent left out), a user who is not its organizer
is refused (exit 2, nothing stored), the service plays it, and ``show`` prints the standings
and the crosstable; ``list`` finds it under its competition."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from arena.client import ArenaClient
from arena.competitions import service
from arena.competitions.rules import CompetitionSettings, board_key
from arena.competitions.tournament_games import TournamentGames
from arena.core.settings import Settings
from arena.ladder.registration import register_builtin_agents
from arena.storage.db.base import utcnow
from arena.storage.db.repositories import competitions as comp_repo
from tests.api.helpers import RAISED_LIMITS
from tests.client.live import run_cli, serving
from tests.waiting import wait_for

ENV = "tictactoe-v3"
ADMIN_TOKEN = "tournament-admin-token"
ENTRIES = ["heuristic", "heuristic:epsilon=0.3", "heuristic:epsilon=0.6", "heuristic:epsilon=0.9"]


def _competition(services) -> tuple[int, dict[str, int]]:
    admin = service.Caller(None, "admin", True)
    now = utcnow()
    cid = service.create_competition(services, admin, CompetitionSettings(
        env_id=ENV, title="Cup", opens_at=now - timedelta(hours=1), deadline=now + timedelta(days=1),
        reference_agents=("random",)))
    service.open_competition(services, admin, cid)
    ids = services.sessions.write_transaction(lambda s: register_builtin_agents(s, ENV, [*ENTRIES, "random"]),
                                              what="agents")

    def season(session) -> None:
        team = comp_repo.create_team(session, cid, "Owls", "owls-code-1")
        for name in ENTRIES:
            comp_repo.add_entry(session, cid, team, ids[name], None, now)
        # The board: the reference agent on top (left out: not an entry), then 0.6, heuristic, 0.3, 0.9.
        mus = {"random": 40.0, "heuristic:epsilon=0.6": 30.0, "heuristic": 28.0, "heuristic:epsilon=0.3": 26.0,
               "heuristic:epsilon=0.9": 20.0}
        comp_repo.upsert_board_ratings(session, board_key(cid), [
            {"agent_id": ids[n], "role": "player", "env_id": ENV, "mu": mu, "sigma": 1.0, "games": 10, "wins": 5,
             "draws": 0, "losses": 5, "last_match_seq": None} for n, mu in mus.items()])

    services.sessions.write_transaction(season, what="a season")
    return cid, ids


def test_a_competitions_top_three_play_a_round_robin_from_the_command_line(tmp_path: Path, migrated_db_url,
                                                                         redis_url):
    home = tmp_path / "home"
    home.mkdir()
    settings = Settings(page_cache_s=0.0, data_dir=tmp_path / "server", database_url=migrated_db_url,
                        redis_url=redis_url, admin_token=ADMIN_TOKEN, **RAISED_LIMITS)
    with serving(settings) as (url, services):
        cid, ids = _competition(services)
        with ArenaClient(url, token="") as client:
            eve = client.create_user("eve")["token"]
        args = ("tournament", "create", "--title", "Top three", "--kind", "round_robin", "--games", "3",
                "--competition", str(cid), "--top", "3")
        refused = run_cli(*args, home=home, server=url, token=eve)
        assert refused.returncode == 2 and "organizer" in refused.stderr, refused.stderr + refused.stdout
        made = run_cli(*args, home=home, server=url, token=ADMIN_TOKEN)
        assert made.returncode == 0 and "3 entrants, best of 3, 3 rounds" in made.stdout, made.stderr + made.stdout

        with ArenaClient(url, token="") as client:
            [listed] = client.tournaments(cid)["data"]
            tid = listed["id"]
            seeded = [e["agent_id"] for e in client.tournament(tid)["entrants"]]
            assert seeded == [ids["heuristic:epsilon=0.6"], ids["heuristic"], ids["heuristic:epsilon=0.3"]]
            worker = TournamentGames(services, poll_s=0.05, sweep_s=0.2).start()
            try:
                t = wait_for(f"tournament {tid} to end",
                             lambda: (found := client.tournament(tid))["state"] != "running" and found, timeout_s=120)
            finally:
                worker.stop()
        assert t["state"] == "finished" and t["games_played"] == 3 * 3

        shown = run_cli("tournament", "show", str(tid), home=home, server=url)
        assert shown.returncode == 0, shown.stderr + shown.stdout
        assert "finished, round 3 of 3, 9 games" in shown.stdout and "crosstable" in shown.stdout
        leader = t["standings"][0]
        assert f"{leader['name']} ({leader['agent_id']})" in shown.stdout
        listing = run_cli("tournament", "list", "--competition", str(cid), home=home, server=url)
        assert listing.returncode == 0 and "Top three" in listing.stdout and "finished" in listing.stdout
