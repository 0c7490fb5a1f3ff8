"""Competitions for the page tests, made through the competitions service as an organizer would.

What the background service would add later (the season's ratings, the frozen pool, the
final evaluation's ratings and certificate) is written with the same repository
functions it uses; the certificate is :func:`league.competitions.certification.certify`'s
over a fixed, seeded list of games.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from arena.competitions import service
from arena.competitions.rules import CompetitionSettings, board_key, final_board_key
from arena.ladder.registration import register_builtin_agents
from arena.storage.db.base import utcnow
from arena.storage.db.repositories import competitions as comp_repo
from arena.storage.wiring import Services
from league.competitions.certification import CertificationConfig, certify
from league.evaluation.headtohead import Game

ENV = "tictactoe-v3"
ADMIN = service.Caller(None, "admin", True)
RULES = """# How to win

Beat the **reference agents**. Tables work:

| a | b |
|---|---|
| 1 | 2 |

<script>window.__pwned = true</script> [a trap](javascript:window.__pwned=true)
"""
AGENTS = ("heuristic", "heuristic:epsilon=0.5", "random")


@dataclass(frozen=True)
class SeededCompetitions:
    public: int
    private: int
    private_code: str
    finished: int
    agents: dict[str, int]


def _rating(agent_id: int, mu: float, sigma: float, games: int, wins: int, losses: int) -> dict[str, object]:
    return {"agent_id": agent_id, "role": "player", "env_id": ENV, "mu": mu, "sigma": sigma, "games": games,
            "wins": wins, "draws": games - wins - losses, "losses": losses, "last_match_seq": None}


def seed_competitions(services: Services) -> SeededCompetitions:
    """An open public competition with a team, its entry and a board; an open private one; a finished one."""
    now = utcnow()
    agents = services.sessions.write_transaction(lambda s: register_builtin_agents(s, ENV, AGENTS), what="agents")
    public = service.create_competition(services, ADMIN, CompetitionSettings(
        env_id=ENV, title="Spring cup", rules_md=RULES, opens_at=now - timedelta(hours=1),
        deadline=now + timedelta(days=2, hours=3), reference_agents=("random",)))
    private = service.create_competition(services, ADMIN, CompetitionSettings(
        env_id=ENV, title="Lab league", opens_at=now - timedelta(hours=1), deadline=now + timedelta(days=1),
        is_public=False))
    finished = service.create_competition(services, ADMIN, CompetitionSettings(
        env_id=ENV, title="Autumn cup", opens_at=now - timedelta(days=1), deadline=now + timedelta(minutes=5),
        reference_agents=("random",), top_k=1))
    for competition_id in (public, private, finished):
        service.open_competition(services, ADMIN, competition_id)

    def season(session: object) -> str:
        team = comp_repo.create_team(session, public, "Owls", "owls-code-1")
        comp_repo.add_entry(session, public, team, agents["heuristic"], None, now)
        comp_repo.upsert_board_ratings(session, board_key(public), [
            _rating(agents["heuristic"], 29.0, 2.0, 40, 30, 6), _rating(agents["random"], 21.0, 2.5, 40, 6, 30)])
        return comp_repo.get_competition(session, private).invite_code

    private_code = services.sessions.write_transaction(season, what="a season")
    pool = [agents[k] for k in AGENTS[:2]]  # the frozen pool: the team's two entries
    rng = random.Random(7)
    games = []
    for i in range(200):  # the stronger one wins 85% of its games, seats alternating
        first, second = (pool[0], pool[1]) if i % 2 == 0 else (pool[1], pool[0])
        strong_won = rng.random() < 0.85
        games.append(Game(first, second, 1.0 if strong_won == (first == pool[0]) else 0.0))
    certificate = certify(pool, games, CertificationConfig(top_k=1, floor=20))

    def final(session: object) -> None:
        team = comp_repo.create_team(session, finished, "Hawks", "hawks-code-1")
        for agent_id in pool:
            comp_repo.add_entry(session, finished, team, agent_id, None, now - timedelta(hours=2))
        comp_repo.freeze_entries(session, finished, pool)
        comp_repo.upsert_board_ratings(session, final_board_key(finished), [
            _rating(s.entry, s.mu, s.sigma, s.games, s.wins, s.losses) for s in certificate.standings])
        comp_repo.update_competition(session, finished, {
            "state": "finished", "deadline": now - timedelta(minutes=30), "merge_deadline": now - timedelta(minutes=30),
            "final_started_at": now - timedelta(minutes=30), "finished_at": now - timedelta(minutes=1),
            "final_result": certificate.to_json()})

    services.sessions.write_transaction(final, what="a final evaluation's result")
    return SeededCompetitions(public, private, private_code, finished, agents)
