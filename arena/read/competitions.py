"""Read models of competitions shared by the API and the pages: the competition itself, its
teams, entries, and its boards (the season's and the final evaluation's).

A competition board is ranked like an env board (``mu - 3 sigma``, 95% intervals, rank
ranges of agents whose intervals overlap), over the competition's own pool: the active
entries and the reference agents (the season), or the frozen pool (the final evaluation).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from arena.competitions.rules import CompetitionState, board_key, final_board_key
from arena.storage.db import repositories as repo
from arena.storage.db.repositories import competitions as comp_repo
from league.ratings.ranking import interval_bounds, rank_ranges
from league.ratings.rating import RatingEnv


def competition_public(session: Session, competition: comp_repo.CompetitionInfo, organizer: bool) -> dict[str, Any]:
    """The ``CompetitionPublic`` fields (the invite code for its organizer only)."""
    c = competition
    return {
        "id": c.id, "env": c.env_id, "role": c.role, "title": c.title, "rules_md": c.rules_md, "state": c.state,
        "is_public": c.is_public, "invite_code": c.invite_code if organizer else None, "opens_at": c.opens_at,
        "deadline": c.deadline, "merge_deadline": c.merge_deadline, "final_ends_at": c.final_ends_at,
        "final_match_budget": c.final_match_budget, "daily_submissions": c.daily_submissions,
        "active_entries": c.active_entries, "team_size": c.team_size, "allowed_paths": list(c.allowed_paths),
        "top_k": c.top_k, "confidence": c.confidence, "tie_margin": c.tie_margin, "final_floor": c.final_floor,
        "reference_agents": comp_repo.references(session, c.id), "divisions": c.divisions, "created_at": c.created_at,
        "final_started_at": c.final_started_at, "finished_at": c.finished_at,
    }


def teams_public(session: Session, competition_id: int, my_team: int | None) -> list[dict[str, Any]]:
    """Every team with its members' names (the join code for its own members only)."""
    teams = comp_repo.teams(session, competition_id)
    members = comp_repo.team_members(session, [t.id for t in teams])
    names = repo.user_names(session, {u for ids in members.values() for u in ids})
    return [{"id": t.id, "name": t.name, "members": [names.get(u, str(u)) for u in members[t.id]],
             "join_code": t.join_code if t.id == my_team else None, "merged_into": t.merged_into} for t in teams]


def entries_public(session: Session, competition_id: int, team_id: int | None = None) -> list[dict[str, Any]]:
    teams = {t.id: t.name for t in comp_repo.teams(session, competition_id)}
    return [{"id": e.id, "team_id": e.team_id, "team": teams.get(e.team_id, ""), "agent_id": e.agent_id,
             "submitted_at": e.submitted_at, "active": e.active, "frozen": e.frozen}
            for e in comp_repo.entries(session, competition_id, team_id=team_id)]


def season_pool(session: Session, competition_id: int) -> tuple[list[int], list[int]]:
    """The season board's pool: ``(active entries' agent ids, reference agent ids)``."""
    return ([e.agent_id for e in comp_repo.entries(session, competition_id, active=True)],
            comp_repo.references(session, competition_id))


def board_public(session: Session, competition: comp_repo.CompetitionInfo, final: bool,
                 rating_env: RatingEnv) -> tuple[str, list[dict[str, Any]]]:
    """``(board key, rows)`` of the season board (``final``: the final evaluation's), best first.

    Agents of the pool not rated yet stand at the prior.
    """
    if final:
        board = final_board_key(competition.id)
        entries = comp_repo.entries(session, competition.id, frozen=True)
        references: list[int] = []
    else:
        board = board_key(competition.id)
        entries = comp_repo.entries(session, competition.id, active=True)
        references = comp_repo.references(session, competition.id)
    divisions = competition.divisions or []
    division_of = {e.agent_id: e.division for e in entries}
    division_of.update({d["boss"]: k for k, d in enumerate(divisions) if d["boss"] is not None})
    team_names = {t.id: t.name for t in comp_repo.teams(session, competition.id)}
    team_of = {e.agent_id: team_names.get(e.team_id) for e in entries}
    pool = list(dict.fromkeys([e.agent_id for e in entries] + references))
    agents = repo.get_agents(session, pool)
    stored = comp_repo.load_board_ratings(session, board, pool)
    role = competition.role or "player"
    rows = []
    for agent_id in pool:
        r = next((v for (a, _), v in stored.items() if a == agent_id), None)
        mu, sigma = (r.mu, r.sigma) if r is not None else (rating_env.mu, rating_env.sigma)
        rows.append({"agent_id": agent_id, "name": agents[agent_id].name if agent_id in agents else str(agent_id),
                     "team": team_of.get(agent_id), "reference": agent_id not in team_of,
                     "role": r.role if r is not None else role, "mu": mu, "sigma": sigma,
                     "conservative": mu - 3.0 * sigma, "games": r.games if r else 0, "wins": r.wins if r else 0,
                     "draws": r.draws if r else 0, "losses": r.losses if r else 0,
                     "division": divisions[division_of[agent_id]]["name"]
                     if divisions and not final and agent_id in division_of else None})
    rows.sort(key=lambda row: (-row["conservative"], row["agent_id"]))
    if rows:
        ranks = np.arange(1, len(rows) + 1)
        lo, hi = rank_ranges(*interval_bounds([r["mu"] for r in rows], [r["sigma"] for r in rows]), ranks)
        for row, rank, a, b in zip(rows, ranks.tolist(), lo.tolist(), hi.tolist(), strict=True):
            row.update(rank=rank, rank_lo=int(a), rank_hi=int(b))
    return board, rows


def is_final(competition: comp_repo.CompetitionInfo) -> bool:
    return competition.state in (CompetitionState.FINAL, CompetitionState.FINISHED)
