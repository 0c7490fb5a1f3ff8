"""What the pages show: plain, JSON-ready dicts assembled through the repositories.

Each function takes an open session and plain values. Leaderboards and payoff
matrices are built by the API's own code (:mod:`arena.read.boards`), and the other
field names follow the JSON API (``/api/v1/...``), so the first, server-rendered
page and the live updates its script fetches from the API agree.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from arena.api.state import ApiState
from arena.core.agent_status import ACTIVE, WAITING
from arena.evaluation.probes import probe_supported
from arena.ladder.registration import ladder_rating_env
from arena.read import boards
from arena.read.evaluation import agent_seats_data, probe_public, seats_data
from arena.read.summaries import policy_format, rating_public
from arena.storage.db import repositories as repo
from arena.storage.db.repositories.retention import SITE_RECENT_MATCHES
from envs.registry import get_spec, list_envs
from envs.spec import EnvSpec
from league.ratings.book import DEFAULT_TARGET_SIGMA

# Most rating points drawn in a chart; longer histories are thinned evenly.
MAX_CHART_POINTS = 400


def iso(moment: datetime | None) -> str | None:
    """ISO 8601 text of a timestamp (``None`` stays ``None``)."""
    return None if moment is None else moment.isoformat()


def env_summaries(session: Session) -> list[dict[str, Any]]:
    """Every registered env with its roles and how many agents and matches it has."""
    out = []
    for spec in list_envs():
        out.append({
            "id": spec.env_id, "description": spec.description, "seats": list(spec.seats),
            "roles": list(dict.fromkeys(spec.roles)), "teams": [list(t) for t in spec.teams],
            "agents": len(repo.list_agents(session, spec.env_id)),
            "matches": repo.count_matches(session, spec.env_id),
        })
    return out


def load_board(
    session: Session, env_id: str, role: str, state: ApiState | None = None
) -> boards.Board:
    """The whole board of ``env_id``/``role``, from the API's cache when there is one."""
    if state is not None:
        return state.boards.get(session, env_id, role)
    return boards.read_board(session, env_id, role)


def leaderboard_data(
    session: Session, env_id: str, role: str, limit: int = 100, state: ApiState | None = None
) -> dict[str, Any]:
    """The leaderboard of ``env_id`` in ``role``, exactly as ``GET /api/v1/leaderboard``.

    Built by the API's own board code (:mod:`arena.read.boards`: ranked by
    ``mu - 3 sigma``, rank ranges from everyone's 95% intervals), so the rendered page
    and the rows its script fetches later agree to the last digit.

    Args:
        session: The session.
        env_id: The env.
        role: The role of the board.
        limit: Rows shown.
        state: The API's state (``app.state.api``) whose caches to share, if any.
    """
    board = load_board(session, env_id, role, state)
    rows = [row.model_dump(mode="json") for row in boards.board_page(board, limit, 0)]
    return {"env": env_id, "role": role, "count": len(board.rows), "data": rows}


def payoff_data(
    session: Session, env_id: str, top: int = 8, state: ApiState | None = None
) -> dict[str, Any]:
    """Win rates of the ``top`` agents and their Nash mixture, as ``GET /api/v1/envs/{env}/payoff``.

    Computed by :func:`arena.read.boards.payoff_matrix` (one aggregate query over the
    match participants; win rates and the Nash mixture of the meta-game from
    :mod:`league.evaluation.payoff`) and cached like the API's when ``state`` is given. Envs
    with distinct roles have no symmetric matrix: ``agents`` is empty and ``reason``
    says why.
    """
    spec = get_spec(env_id)
    if not spec.symmetric:
        return {"env": env_id, "agents": [], "win_rate": [], "games": [], "nash": [],
                "reason": f"{env_id} has distinct roles ({', '.join(dict.fromkeys(spec.roles))}); "
                          "the payoff matrix is for symmetric games"}
    role = spec.roles[0]
    board = load_board(session, env_id, role, state)
    if state is None:
        body = boards.payoff_matrix(session, board, top)
    else:
        version = repo.board_version(session, env_id, role)
        body = state.payoffs.get((env_id, role, top), version,
                                 lambda: boards.payoff_matrix(session, board, top))
    return {"env": env_id, "role": role, **body}


def waiting_data(session: Session, env_id: str, role: str, limit: int = 50) -> list[dict[str, Any]]:
    """Agents of ``env_id`` that may play ``role`` but wait (for validation, for an
    opponent), each with what it waits for: nothing waits without a reason."""
    statuses = [s.value for s in (*WAITING, *ACTIVE)]
    return [{"id": a.id, "name": a.name, "status": a.status, "reason": a.status_reason}
            for a in repo.waiting_agents(session, env_id, statuses, limit) if a.plays(role)]


def agent_data(session: Session, agent_id: int) -> dict[str, Any] | None:
    """An agent's page: info, ratings per role, chart points, matches, head-to-head."""
    agent = repo.get_agent(session, agent_id)
    if agent is None:
        return None
    spec = get_spec(agent.env_id)
    stored = repo.load_ratings(session, [agent_id])
    rating_env = ladder_rating_env(session, agent.env_id)
    ratings = [
        rating_public(r, agent.status, rating_env)
        for r in (stored.get((agent_id, role)) for role in dict.fromkeys(spec.roles)) if r is not None
    ]
    recent = repo.match_history(session, agent_id=agent_id, limit=SITE_RECENT_MATCHES).matches  # kept replays
    sha = agent.snapshot_sha256
    return {
        "id": agent.id, "key": agent.key, "name": agent.name, "env": agent.env_id,
        "kind": agent.kind, "status": agent.status, "status_reason": agent.status_reason,
        "role": agent.role if len(set(spec.roles)) > 1 else None, "published": agent.published,
        **policy_format(repo.snapshot_specs(session, [sha]).get(sha) if sha else None),
        "created_at": iso(agent.created_at), "ratings": ratings,
        "history": chart_history(session, agent_id),
        "recent": [match_summary(spec, m, agent.key) for m in recent],
        "head_to_head": head_to_head(session, agent_id, agent.env_id),
        "target_sigma": DEFAULT_TARGET_SIGMA,
        "probes": [{**probe_public(p), "created_at": iso(p.created_at), "started_at": iso(p.started_at),
                    "finished_at": iso(p.finished_at)} for p in repo.agent_probes(session, agent_id, 10)],
        "probe_supported": probe_supported(agent.env_id),
        "seats": agent_seats_data(session, agent_id, agent.env_id),
    }


def chart_history(session: Session, agent_id: int) -> dict[str, list[dict[str, Any]]]:
    """Rating points per role, ``{role: [{match_seq, mu, sigma, created_at}]}``.

    At most :data:`MAX_CHART_POINTS` per role: longer histories are thinned evenly,
    always keeping the first and the latest point.
    """
    by_role: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for seq, role, mu, sigma, created_at in repo.rating_points(session, agent_id):
        by_role[role].append({"match_seq": seq, "mu": mu, "sigma": sigma,
                              "created_at": iso(created_at)})
    out = {}
    for role, points in by_role.items():
        if len(points) > MAX_CHART_POINTS:
            step = (len(points) - 1) / (MAX_CHART_POINTS - 1)
            points = [points[round(i * step)] for i in range(MAX_CHART_POINTS)]
        out[role] = points
    return out


def _agent_teams(spec: EnvSpec, seats: list[str], key: str) -> list[int]:
    return [t for t, team in enumerate(spec.teams) if seats[team[0]] == key]


def match_summary(spec: EnvSpec, match: repo.StoredMatch, key: str | None = None) -> dict[str, Any]:
    """One line of a match list; with ``key``, the result from that agent's side."""
    teams = [match.seats[team[0]] for team in spec.teams]
    summary: dict[str, Any] = {
        "id": match.id, "seq": match.seq, "env": match.env_id, "teams": teams,
        "roles": list(spec.roles), "winner": match.winner, "termination": match.termination,
        "rated": match.rated, "moves": len(match.actions), "created_at": iso(match.created_at),
    }
    if key is not None:
        mine = _agent_teams(spec, match.seats, key)
        if len(mine) == 1:
            t = mine[0]
            summary["result"] = "D" if match.winner is None else ("W" if match.winner == t else "L")
            summary["opponents"] = [a for i, a in enumerate(teams) if i != t]
            summary["role"] = None if spec.symmetric else spec.roles[t]
        else:
            summary["result"], summary["opponents"], summary["role"] = "self", [key], None
    return summary


def head_to_head(session: Session, agent_id: int, env_id: str) -> list[dict[str, Any]]:
    """W/D/L of an agent against every opponent it met in ``env_id`` (rated or not).

    One aggregate query over the match participants
    (:func:`arena.storage.db.repositories.head_to_head`); opponents sorted by games played.
    """
    agents = {a.id: a for a in repo.list_agents(session, env_id)}
    pairs = repo.head_to_head(session, agents.keys())
    rows = []
    for (me, other), res in pairs.items():
        if me != agent_id:
            continue
        games = res["W"] + res["D"] + res["L"]
        rows.append({
            "agent_id": other, "name": agents[other].name, "key": agents[other].key,
            "games": games, "wins": res["W"], "draws": res["D"], "losses": res["L"],
            "score": (res["W"] + 0.5 * res["D"]) / games if games else None,
        })
    rows.sort(key=lambda r: (-r["games"], r["name"]))
    return rows


def match_data(session: Session, match_id: str) -> dict[str, Any] | None:
    """A match page: the record's summary with each seat's agent id, role and score."""
    match = repo.get_match(session, match_id)
    if match is None:
        return None
    spec = get_spec(match.env_id)
    participants = {p.seat: p for p in repo.get_participants(session, match.seq)}
    seats = []
    for seat, key in enumerate(match.seats):
        team = spec.seat_team[seat]
        p = participants.get(seat)
        seats.append({
            "seat": seat, "name": spec.seats[seat], "agent": key,
            "agent_id": p.agent_id if p else None, "team": team, "role": spec.roles[team],
            "score": match.scores[seat], "weights": match.weights[seat],
            "result": p.result if p else None,
        })
    summary = match_summary(spec, match)
    winner_name = None if match.winner is None else summary["teams"][match.winner]
    return {**summary, "seed": match.seed, "seats": seats, "winner_agent": winner_name,
            "forfeit_seat": match.forfeit_seat, "detail": match.detail,
            "league_id": match.league_id}


def env_seats(session: Session, env_id: str, state: ApiState | None = None) -> dict[str, Any]:
    """How much the first move is worth in ``env_id``, as ``GET /api/v1/envs/{env}/seats``."""
    if state is None:
        return seats_data(session, env_id)
    version = repo.board_version(session, env_id)
    return state.payoffs.get(("seats", env_id), version, lambda: seats_data(session, env_id))


def recent_matches(session: Session, env_id: str, limit: int = 20) -> list[dict[str, Any]]:
    """The newest matches of an env, as list lines."""
    spec = get_spec(env_id)
    page = repo.match_history(session, env_id=env_id, limit=limit)
    return [match_summary(spec, m) for m in page.matches]
