"""Tournaments on the service: created by an organizer, derived from the match log.

The formats are pure (:func:`league.competitions.tournaments.tournament`); this module
stores a tournament's seeded field and format (:func:`create_tournament`) and derives
everything else from the games recorded so far (:func:`derive`):

* every game has a match id fixed by the tournament, its round, table and game
  (:func:`game_match_id`), and is stored on the board ``tournament:<id>`` with
  ``rated = false`` (the env's ladder never sees it; it replays like any match);
* the results are the stored games' scores, the first entrant's, game by game; the rounds,
  the pending games, the crosstable and the standings follow. A round is paired once the
  one before is complete, so nothing here changes once played, and a service restarted
  mid-tournament finds the same state as the one that died.

Who may create one: an admin, or an organizer (a tournament of no competition), or the
organizer of its competition (entrants chosen, or the competition's top N in the order of
its final standings, else of its season board). Who may see one: anyone who may see its
competition (a private competition's tournaments are a 404 to non-members, as it is).
Playing is :mod:`arena.competitions.tournament_games`.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from arena.competitions import service
from arena.competitions.rules import is_two_player
from arena.core.agent_status import AgentStatus
from arena.core.errors import Forbidden, InvalidParameter, UnknownCompetition, UnknownTournament
from arena.ladder.registration import ladder_rating_env
from arena.read import competitions as read_competitions
from arena.storage.db import repositories as repo
from arena.storage.db.repositories import competitions as comp_repo
from arena.storage.db.repositories import tournaments as tour_repo
from arena.storage.wiring import Services
from envs.errors import UnknownAgent
from envs.registry import get_spec
from league.competitions.certification import FINAL_RATING_ENV
from league.competitions.tournaments import (
    Kind,
    MiniMatch,
    TournamentFormat,
    TournamentGame,
    TournamentState,
    total_rounds,
    tournament,
)

MAX_ENTRANTS = 64
MAX_GAMES = 15
_PLAYABLE = (AgentStatus.PLACEMENT, AgentStatus.RATED, AgentStatus.RETIRED)
_GAME_NAMESPACE = uuid.UUID("6f1c3a52-2b8e-4f0e-9a51-7d7c0e7a1f28")


@dataclass(frozen=True)
class TournamentSpec:
    """What an organizer asks for.

    Attributes:
        title: Its title.
        kind: ``round_robin``, ``double_round_robin``, ``swiss`` or ``single_elimination``.
        games: M, games per mini-match (seats alternated; an odd M avoids drawn mini-matches).
        rounds: Swiss: its rounds (``None``: ``ceil(log2 n)``).
        entrants: Agent ids, best seed first; ``None``: the competition's ``top``.
        competition_id: The competition it belongs to (``None``: a tournament of its own).
        top: With a competition and no ``entrants``: its best ``top`` entries.
        env_id: The env, for a tournament of no competition (else the competition's).
        seed_from_board: Seed the chosen ``entrants`` by the board (the competition's, else the
            env ladder's) rather than in the order given.
    """

    title: str
    kind: str
    games: int = 1
    rounds: int | None = None
    entrants: tuple[int, ...] | None = None
    competition_id: int | None = None
    top: int | None = None
    env_id: str | None = None
    seed_from_board: bool = False


def board_of(tournament_id: int) -> str:
    """The board a tournament's games are stored on."""
    return f"tournament:{int(tournament_id)}"


def game_match_id(info: tour_repo.TournamentInfo, round_: int, table: int, game: int) -> str:
    """The match id of a game, fixed before it is played (so it is recorded once, whoever plays it)."""
    return str(uuid.uuid5(_GAME_NAMESPACE, f"{info.id}:{info.seed}:{round_}:{table}:{game}"))


def format_of(info: tour_repo.TournamentInfo) -> TournamentFormat:
    return TournamentFormat(Kind(info.kind), games=info.games, rounds=info.rounds, seed=info.seed)


def derive(info: tour_repo.TournamentInfo, stored: dict[str, float]) -> tuple[TournamentState, dict]:
    """The tournament now, from ``stored`` (``{match id: seat 0's score}`` of its board):
    ``(state, results)``, results as :func:`~league.competitions.tournaments.tournament` takes them.

    Each mini-match's results are its games stored so far, in game order up to the first
    one missing (games are played at once, so a later one may land first)."""
    fmt = format_of(info)
    results: dict[tuple[int, int], list[float]] = {}
    while True:
        state = tournament(info.entrants, fmt, results)
        grew = False
        for mm in (m for rnd in state.rounds for m in rnd if m.pairing.b is not None and not m.complete):
            p, scores = mm.pairing, []
            for g in range(fmt.games):
                seat0 = stored.get(game_match_id(info, p.round, p.table, g))
                if seat0 is None:
                    break
                scores.append(seat0 if g % 2 == 0 else 1.0 - seat0)  # a opens the even games
            if len(scores) > len(mm.scores):
                results[(p.round, p.table)] = scores
                grew = True
        if not grew:
            return state, results


def load(session: Session, tournament_id: int) -> tuple[tour_repo.TournamentInfo, TournamentState, dict[str, float]]:
    """``(row, state, stored results by match id)`` of a tournament (no visibility check)."""
    info = tour_repo.get_tournament(session, tournament_id)
    if info is None:
        raise UnknownTournament(f"no tournament with id {tournament_id}")
    stored = tour_repo.game_results(session, board_of(info.id))
    state, _ = derive(info, stored)
    return info, state, stored


def to_play(info: tour_repo.TournamentInfo, state: TournamentState,
            stored: dict[str, float]) -> list[tuple[str, TournamentGame]]:
    """``(match id, game)`` of the current round's games not recorded yet (a mini-match's
    results stop at its first missing game; the games after it may be stored already)."""
    games = ((game_match_id(info, g.round, g.table, g.game), g) for g in state.pending_games())
    return [(match_id, g) for match_id, g in games if match_id not in stored]


# -- who sees, who creates ---------------------------------------------------------------
def visible(session: Session, tournament_id: int, caller: service.Caller | None) -> tour_repo.TournamentInfo:
    """The tournament if the caller may see it (its competition's rule; 404 otherwise)."""
    info = tour_repo.get_tournament(session, tournament_id)
    if info is None:
        raise UnknownTournament(f"no tournament with id {tournament_id}")
    if info.competition_id is not None:
        try:
            service.visible(session, info.competition_id, caller)
        except UnknownCompetition as exc:
            raise UnknownTournament(f"no tournament with id {tournament_id}") from exc
    return info


def _board_order(session: Session, competition: comp_repo.CompetitionInfo) -> list[int]:
    """Agent ids best first: the competition's published final standings, else its board's order."""
    if competition.final_result:
        return [s["entry"] for s in sorted(competition.final_result["standings"], key=lambda s: s["rank"])]
    final = read_competitions.is_final(competition)
    env = FINAL_RATING_ENV if final else ladder_rating_env(session, competition.env_id)
    return [r["agent_id"] for r in read_competitions.board_public(session, competition, final, env)[1]]


def _top(session: Session, competition: comp_repo.CompetitionInfo, n: int) -> list[int]:
    """The competition's best ``n`` entries (no reference agents), in its board's order."""
    entries = {e.agent_id for e in comp_repo.entries(session, competition.id)}
    return [a for a in _board_order(session, competition) if a in entries][:n]


def _seeded(session: Session, entrants: list[int], competition: comp_repo.CompetitionInfo | None) -> list[int]:
    """``entrants`` in the board's order: the competition's, else the env ladder's (``mu - 3 sigma``,
    best role); the unplaced after the placed, in the order given."""
    if competition is not None:
        rank = {a: i for i, a in enumerate(_board_order(session, competition))}
        return sorted(entrants, key=lambda a: (a not in rank, rank.get(a, 0)))
    best: dict[int, float] = {}
    for (agent_id, _), r in repo.load_ratings(session, entrants).items():
        best[agent_id] = max(best.get(agent_id, float("-inf")), r.conservative)
    return sorted(entrants, key=lambda a: (a not in best, -best.get(a, 0.0)))


def _entrants(session: Session, spec: TournamentSpec, env_id: str,
              competition: comp_repo.CompetitionInfo | None) -> list[int]:
    if spec.entrants is None:
        if competition is None or spec.top is None:
            raise InvalidParameter("give the entrants (agent ids, best seed first), or a competition and top N")
        entrants = _top(session, competition, spec.top)
    else:
        entrants = list(spec.entrants)
        if spec.seed_from_board:
            entrants = _seeded(session, entrants, competition)
    if len(entrants) < 2 or len(set(entrants)) != len(entrants) or len(entrants) > MAX_ENTRANTS:
        raise InvalidParameter(f"a tournament needs 2 to {MAX_ENTRANTS} distinct entrants; got {entrants}")
    agents = repo.get_agents(session, entrants)
    for agent_id in entrants:
        agent = agents.get(agent_id)
        if agent is None:
            raise UnknownAgent(f"no agent with id {agent_id}")
        if agent.env_id != env_id:
            raise InvalidParameter(f"agent {agent_id} plays {agent.env_id}, not {env_id}")
        if agent.kind == "human" or agent.key.startswith("file:"):
            raise InvalidParameter(f"agent {agent_id} is a {agent.kind} agent; tournaments take stored agents")
        if AgentStatus(agent.status) not in _PLAYABLE:
            raise InvalidParameter(f"agent {agent_id} is {agent.status}: only validated agents play tournaments")
    return entrants


def create_tournament(services: Services, caller: service.Caller, spec: TournamentSpec) -> int:
    """Store a tournament (``running``); the background service plays it. Returns its id.

    Raises:
        UnknownCompetition / UnknownAgent: 404. Forbidden: not its organizer (or an admin).
        InvalidParameter: a bad format, env or field.
    """
    try:
        kind = Kind(spec.kind)
    except ValueError:
        raise InvalidParameter(f"kind must be one of {[k.value for k in Kind]}") from None
    if not 1 <= spec.games <= MAX_GAMES or (spec.rounds is not None and not 1 <= spec.rounds <= MAX_ENTRANTS):
        raise InvalidParameter(f"games must be 1 to {MAX_GAMES}, and rounds 1 to {MAX_ENTRANTS}")
    if spec.rounds is not None and kind is not Kind.SWISS:
        raise InvalidParameter("rounds is set for a Swiss tournament only (the others' rounds follow the field)")

    def create(session: Session) -> int:
        competition = None
        if spec.competition_id is not None:
            competition = service.visible(session, spec.competition_id, caller)
            if not service.organizes(session, competition, caller):
                raise Forbidden(f"only the organizer of competition {competition.id} (or an admin) runs its "
                                "tournaments")
            env_id = competition.env_id
        else:
            organizer = caller.user_id is not None and comp_repo.is_organizer(session, caller.user_id)
            if not (caller.is_admin or organizer):
                raise Forbidden("only admins and organizers run tournaments")
            if spec.env_id is None:
                raise InvalidParameter("give the env of a tournament of no competition")
            env_id = spec.env_id
        get_spec(env_id)
        if not is_two_player(env_id):
            raise InvalidParameter(f"{env_id} is not a 1v1 game; tournaments pair two agents at a time")
        entrants = _entrants(session, spec, env_id, competition)
        return tour_repo.create_tournament(session, {
            "env_id": env_id, "competition_id": spec.competition_id, "title": spec.title, "kind": kind.value,
            "games": spec.games, "rounds": spec.rounds, "seed": secrets.randbits(62), "entrants": entrants,
            "created_by": caller.user_id})

    return services.sessions.write_transaction(create, what="creating a tournament")


# -- what pages and the API show ----------------------------------------------------------
def public(session: Session, info: tour_repo.TournamentInfo, state: TournamentState,
           stored: dict[str, float]) -> dict[str, Any]:
    """The tournament as the API answers it: field, rounds with every game, standings, crosstable."""
    agents = repo.get_agents(session, info.entrants)
    names = {a: agents[a].name if a in agents else str(a) for a in info.entrants}
    rounds = []
    for rnd in state.rounds:
        tables = []
        for mm in rnd:
            p = mm.pairing
            games = []
            if p.b is not None:
                for g in range(info.games):
                    match_id = game_match_id(info, p.round, p.table, g)
                    seat0 = stored.get(match_id)
                    first = p.a if g % 2 == 0 else p.b
                    games.append({"game": g, "match_id": match_id, "first": first, "second": p.b if first == p.a
                                  else p.a, "score_a": None if seat0 is None else
                                  (seat0 if g % 2 == 0 else 1.0 - seat0)})
            tables.append({"table": p.table, "a": p.a, "b": p.b, "complete": mm.complete,
                           "advances": _advances(info, mm),
                           "points_a": mm.points_a if mm.complete else None,
                           "points_b": mm.points_b if mm.complete and p.b is not None else None, "games": games})
        rounds.append({"round": rnd[0].pairing.round if rnd else len(rounds) + 1, "tables": tables})
    cross = state.crosstable()
    return {
        "id": info.id, "title": info.title, "env": info.env_id, "competition_id": info.competition_id,
        "kind": info.kind, "games": info.games, "seed": info.seed,
        "rounds_total": total_rounds(state.format, len(state.entrants)),
        "state": info.state, "error": info.error, "finished": state.finished, "created_at": info.created_at,
        "finished_at": info.finished_at, "games_played": len(stored),
        "entrants": [{"seed": i, "agent_id": a, "name": names[a]} for i, a in enumerate(info.entrants, 1)],
        "rounds": rounds,
        "standings": [{"rank": s.rank, "agent_id": s.entrant, "name": names[s.entrant], "points": s.points,
                       "tiebreak": s.tiebreak, "game_points": s.game_points, "played": s.played, "wins": s.wins,
                       "draws": s.draws, "losses": s.losses, "byes": s.byes} for s in state.standings],
        "crosstable": [{"agent_id": a, "against": [{"agent_id": b, "points": cross[a][b]}
                                                   for b in info.entrants if b in cross[a]]} for a in info.entrants],
    }



def _advances(info: tour_repo.TournamentInfo, mm: MiniMatch) -> int | None:
    """Who won the mini-match (``None``: not finished, or drawn); in elimination a drawn one goes to
    the higher seed and a bye to its entrant (the pure module's rule)."""
    p = mm.pairing
    if not mm.complete:
        return None
    if p.b is None:
        return p.a if info.kind == Kind.SINGLE_ELIMINATION.value else None
    if mm.points_a != mm.points_b:
        return p.a if mm.points_a > mm.points_b else p.b
    if info.kind != Kind.SINGLE_ELIMINATION.value:
        return None
    return p.a if info.entrants.index(p.a) < info.entrants.index(p.b) else p.b


def visible_list(session: Session, caller: service.Caller | None,
                 competition_id: int | None = None) -> list[tour_repo.TournamentInfo]:
    """Tournaments the caller may see, newest first: of ``competition_id`` (404 if it may not see
    that competition), else all of them whose competition it may see and those of none."""
    if competition_id is not None:
        service.visible(session, competition_id, caller)
        return tour_repo.tournaments(session, competition_id=competition_id)
    seen: dict[int, bool] = {}

    def may(info: tour_repo.TournamentInfo) -> bool:
        cid = info.competition_id
        if cid is not None and cid not in seen:
            competition = comp_repo.get_competition(session, cid)
            seen[cid] = competition is not None and service.may_see(session, competition, caller)
        return cid is None or seen[cid]

    return [info for info in tour_repo.tournaments(session) if may(info)]


def summary(info: tour_repo.TournamentInfo) -> dict[str, Any]:
    return {"id": info.id, "title": info.title, "env": info.env_id, "competition_id": info.competition_id,
            "kind": info.kind, "games": info.games, "state": info.state, "entrants": len(info.entrants),
            "created_at": info.created_at}
