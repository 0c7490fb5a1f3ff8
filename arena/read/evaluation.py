"""Read models of the evaluation measures: probes, rankings beside TrueSkill, seats, integrity.

The measures are pure (``league/``, docs/evaluation.md); this module feeds them from the
match log through the repositories and turns their results into the JSON the API and
the pages share.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from arena.ladder.registration import ladder_rating_env
from arena.storage.db import repositories as repo
from envs.registry import get_spec
from league.evaluation.board_rankings import board_rankings
from league.evaluation.cycles import Cycle
from league.evaluation.headtohead import HeadToHead
from league.evaluation.integrity import suspicious_pairs
from league.evaluation.rating_dependence import RatedMatch, rating_dependence
from league.evaluation.seats import AgentSeats, SeatRecord, agent_seat_record, seat_advantage
from league.ratings.rating import Rating

INTEGRITY_ALPHA = 0.01
"""Family-wise significance of an integrity flag (see league.evaluation.integrity)."""
CYCLE_ALPHA = 0.05
"""Family-wise significance of a reported cycle (see league.evaluation.cycles)."""


def probe_public(p: repo.ProbeInfo) -> dict[str, Any]:
    """A probe as the API shows it (``ProbePublic``)."""
    progress = 1.0 if p.status == "done" else (min(1.0, p.env_steps / p.budget_env_steps)
                                              if p.budget_env_steps else 0.0)
    return {"id": p.id, "agent_id": p.agent_id, "env": p.env_id, "status": p.status,
            "budget_env_steps": p.budget_env_steps, "eval_games": p.eval_games, "seed": p.seed,
            "requested_by": p.requested_by, "env_steps": p.env_steps, "progress": progress,
            "games": p.games, "wins": p.wins, "draws": p.draws, "losses": p.losses,
            "win_rate": p.win_rate, "ci_low": p.ci_low, "ci_high": p.ci_high, "error": p.error,
            "created_at": p.created_at, "started_at": p.started_at, "finished_at": p.finished_at}


def _cycle_public(c: Cycle) -> dict[str, Any]:
    return {"agents": list(c.agents), "p_value": c.p_value, "adjusted_p": c.adjusted_p,
            "confidence": c.confidence,
            "links": [{"winner": e.winner, "loser": e.loser, "wins": e.wins, "draws": e.draws,
                       "losses": e.losses, "p_value": e.p_value} for e in c.edges]}


def rankings_public(ids: Sequence[int], wins: np.ndarray, draws: np.ndarray, losses: np.ndarray,
                    ratings: Mapping[int, Rating]) -> dict[str, Any]:
    """TrueSkill, alpha-Rank and Nash-averaging places of ``ids`` and the significant cycles.

    Returns:
        ``{"rankings": [...], "cycles": [...], "alpharank_alpha": ...}`` (``PayoffPublic`` fields).
    """
    h2h = HeadToHead(tuple(ids), wins, draws, losses)
    result = board_rankings(h2h, ratings, cycle_alpha=CYCLE_ALPHA)
    rows = [{"agent_id": a.agent, "trueskill_rank": a.trueskill_rank, "conservative": a.conservative,
             "alpharank_rank": a.alpharank_rank, "alpharank_mass": a.alpharank_mass, "nash_rank": a.nash_rank,
             "nash_skill": a.nash_skill, "nash_mass": a.nash_mass} for a in result.agents]
    return {"rankings": rows, "cycles": [_cycle_public(c) for c in result.cycles],
            "alpharank_alpha": result.alpha, "cycle_alpha": CYCLE_ALPHA}


def _record_public(r: SeatRecord) -> dict[str, Any]:
    return {"games": r.games, "wins": r.wins, "draws": r.draws, "losses": r.losses, "score": r.score}


def _agent_seats_public(s: AgentSeats, names: Mapping[int, str]) -> dict[str, Any]:
    return {"agent_id": s.agent, "name": names.get(s.agent, str(s.agent)), "first": _record_public(s.first),
            "second": _record_public(s.second), "difference": s.difference,
            "difference_ci": None if s.difference_ci is None else list(s.difference_ci), "imbalance": s.imbalance}


def _seat_records(counts: Sequence[tuple[int, int, str, int]]) -> dict[int, list[SeatRecord]]:
    records: dict[int, list[SeatRecord]] = defaultdict(lambda: [SeatRecord(), SeatRecord()])
    for agent, seat, result, n in counts:
        r = records[agent][seat]
        records[agent][seat] = SeatRecord(r.wins + n * (result == "W"), r.draws + n * (result == "D"),
                                          r.losses + n * (result == "L"))
    return records


def seats_data(session: Session, env_id: str) -> dict[str, Any]:
    """``SeatsPublic``: the env's first-mover record and edge, and every agent's results by seat.

    Rated matches between two different agents; the ladder plays each pairing in both
    seats, so the pooled first-mover score is not confounded by who sat where.
    """
    records = _seat_records(repo.seat_counts(session, env_id) if get_spec(env_id).num_seats == 2 else [])
    w = sum(r[0].wins for r in records.values())
    d = sum(r[0].draws for r in records.values())
    first = SeatRecord(w, d, sum(r[0].losses for r in records.values()))
    edge = seat_advantage(first, ladder_rating_env(session, env_id).beta)
    names = {a.id: a.name for a in repo.get_agents(session, list(records)).values()}
    agents = [_agent_seats_public(agent_seat_record(a, *r), names) for a, r in records.items()]
    agents.sort(key=lambda s: (-(s["first"]["games"] + s["second"]["games"]), s["agent_id"]))
    return {"env": env_id, "first_mover": _record_public(edge.first), "ci_low": edge.ci_low, "ci_high": edge.ci_high,
            "first_move_value": edge.value, "first_move_value_ci": list(edge.value_ci), "elo": edge.elo,
            "trueskill_mu": edge.trueskill_mu, "agents": agents}


def agent_seats_data(session: Session, agent_id: int, env_id: str) -> dict[str, Any] | None:
    """One agent's results by seat (``None`` without rated two-seat games)."""
    records = _seat_records(repo.seat_counts(session, env_id, agent_id)) if get_spec(env_id).num_seats == 2 else {}
    if agent_id not in records:
        return None
    return _agent_seats_public(agent_seat_record(agent_id, *records[agent_id]), {})


def integrity_data(session: Session, env_id: str) -> dict[str, Any]:
    """``IntegrityPublic``: pairs throwing games and ratings resting on one opponent, with evidence.

    Computed over the env's rated 1v1 matches with the ratings each had before
    (the ladder's rating events), owners from the agents (see docs/evaluation.md).
    """
    spec = get_spec(env_id)
    role = spec.roles[0]
    matches = [] if spec.num_seats != 2 or not spec.symmetric else [
        RatedMatch(m.a, m.b, m.score, Rating(*m.a_before), Rating(*m.b_before))
        for m in repo.rated_pairs(session, env_id, role)]
    ids = {a for m in matches for a in (m.a, m.b)}
    agents = repo.get_agents(session, list(ids))
    owners = {a: info.owner_id for a, info in agents.items()}
    owner_names = repo.user_names(session, {o for o in owners.values() if o is not None})
    rating_env = ladder_rating_env(session, env_id)
    pairs = suspicious_pairs(matches, owners, env=rating_env, alpha=INTEGRITY_ALPHA) if matches else []
    dependence = rating_dependence(matches, env=rating_env) if matches else []

    def who(agent_id: int) -> dict[str, Any]:
        info = agents[agent_id]
        return {"agent_id": agent_id, "name": info.name, "owner": owner_names.get(info.owner_id)}

    return {
        "env": env_id, "role": role, "matches": len(matches), "alpha": INTEGRITY_ALPHA,
        "pairs": [{"beneficiary": who(f.beneficiary), "thrower": who(f.thrower), "same_owner": f.same_owner,
                   "family": f.family, "wins": f.wins, "draws": f.draws, "losses": f.losses,
                   "expected_win_share": f.expected_win_share, "observed_win_share": f.observed_win_share,
                   "expected_score": f.expected_score, "observed_score": f.observed_score,
                   "p_value": f.p_value, "adjusted_p": f.adjusted_p} for f in pairs],
        "dependence": [{"agent": who(f.agent), "opponent": who(f.opponent), "direction": f.direction,
                        "mu": f.mu, "sigma": f.sigma, "mu_without": f.mu_without, "sigma_without": f.sigma_without,
                        "shift": f.shift, "shift_sigmas": abs(f.shift) / f.sigma_without, "games": f.games,
                        "games_vs_opponent": f.games_vs_opponent, "wins": f.wins,
                        "wins_vs_opponent": f.wins_vs_opponent} for f in dependence],
    }
