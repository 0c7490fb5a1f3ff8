"""``/leagues``, for outside trainers: join a league, draw opponents, report results, push snapshots.

The trainer side is :class:`arena.client.league.LeagueClient` (docs/league_api.md). The
league's state lives in its ``leagues`` row (:mod:`arena.training.outside_league`); the
opponents are drawn with Arena's own league logic (:mod:`league.scheduling.roles`). Only the league's
owner (or an admin) draws, reports and pushes; every write is under the write limits, and a
pushed snapshot also counts against the daily submission quota, like any submission.
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Query, Request, Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from arena.api.deps import LeagueIdPath, Principal, ServicesDep, SessionDep, StateDep, UserDep, WriterDep
from arena.api.errors import error_responses
from arena.api.league_schemas import (
    LeagueCreate,
    LeagueRole,
    OpponentsPublic,
    OutsideLeaguePublic,
    PushedSnapshotPublic,
    ResultsCreate,
    ResultsPublic,
)
from arena.api.schemas import AgentPublic
from arena.api.upload import read_form
from arena.core.errors import Conflict, Forbidden, InvalidParameter
from arena.ladder.registration import register_env
from arena.ladder.submissions import Submission, form_limits, parse_submission, submit_agent
from arena.read.boards import OFF_BOARD
from arena.read.summaries import agents_public
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from arena.training.outside_league import (
    LEARNER_NAME,
    Learner,
    OutsideLeague,
    league_row_name,
)
from envs.errors import InvalidSubmission, UnknownAgent
from envs.registry import get_spec
from league.scheduling.outside_draws import Candidate, sample_draws
from league.scheduling.roles import RoleConfig

router = APIRouter(tags=["league api"])
BOARD_SCAN = 256
"""Neural agents of the board looked at for the ``board_top`` downloadable ones."""


def _public_name(row_name: str, env_id: str) -> str:
    return row_name.removeprefix("outside.").removesuffix(f".{env_id}")


def _learner_public(name: str, learner: Learner) -> dict[str, Any]:
    rates = {str(o): learner.table.win_rate(o) for o in learner.table.opponents()}
    return {"name": name, "role": learner.role, "games": learner.games, "wins": learner.wins,
            "draws": learner.draws, "losses": learner.losses, "generation": learner.generation, "win_rates": rates}


def _league_public(info: repo.LeagueInfo, league: OutsideLeague) -> OutsideLeaguePublic:
    return OutsideLeaguePublic(
        id=info.id, name=_public_name(info.name, info.env_id), env=info.env_id, owner=league.owner,
        self_play=league.role_config.self_play, baseline_share=league.role_config.baseline_share,
        board_top=league.board_top, learners=[_learner_public(n, lr) for n, lr in league.learners.items()],
        snapshots=[vars(s) for s in league.snapshots], created_at=info.created_at)


def _outside(session: Session, league_id: int, *, lock: bool = False) -> tuple[repo.LeagueInfo, OutsideLeague]:
    """The outside league ``league_id``; 404 for none, or for a league Arena trains itself."""
    info = repo.get_league(session, league_id, lock=lock)
    league = None if info is None else OutsideLeague.from_config(info.config)
    if info is None or league is None:
        raise UnknownAgent(f"no league with id {league_id} that takes outside trainers "
                           "(create one with POST /api/v1/leagues)")
    return info, league


def _owned(league: OutsideLeague, user: Principal, league_id: int) -> None:
    if not user.is_admin and league.owner_id != user.user_id:
        raise Forbidden(f"league {league_id} is {league.owner}'s; only its owner trains it")


@router.post("/leagues", response_model=OutsideLeaguePublic, status_code=201,
             responses={200: {"model": OutsideLeaguePublic, "description": "Your league of that name, as stored."},
                        **error_responses(400, 401, 403, 404, 422, 429)})
def create_league(body: LeagueCreate, user: WriterDep, services: ServicesDep, response: Response) -> Any:
    """Create a league for your own trainer, or find yours: the same name and env answer 200
    with its stored state (learners, snapshots, win rates), so a restarted trainer goes on."""
    if user.user_id is None:
        raise InvalidParameter("a league belongs to a user: create it with a user's token, not the admin token")
    spec = get_spec(body.env)
    if not spec.symmetric:
        raise InvalidParameter(f"{body.env} has roles ({', '.join(dict.fromkeys(spec.roles))}); the league API "
                               "takes symmetric games (every team plays the same role)")
    row_name = league_row_name(body.name, body.env)

    def create(session: Session) -> tuple[int, bool]:
        found = repo.get_league_by_name(session, row_name)
        if found is not None:
            league = OutsideLeague.from_config(found.config)
            if league is None or league.owner_id != user.user_id:
                raise Forbidden(f"league {body.name!r} on {body.env} is someone else's; choose another name")
            return found.id, False
        register_env(session, body.env)
        league = OutsideLeague(user.user_id, user.name, RoleConfig(self_play=body.self_play,
                                                                   baseline_share=body.baseline_share),
                               body.board_top)
        return repo.create_league(session, row_name, body.env, league.to_config()), True

    league_id, created = services.sessions.write_transaction(create, what=f"creating league {row_name}")
    response.status_code = 201 if created else 200
    with services.sessions() as session:
        return _league_public(*_outside(session, league_id))


@router.get("/leagues/{league_id}", response_model=OutsideLeaguePublic, responses=error_responses(404, 422))
def get_league(league_id: LeagueIdPath, session: SessionDep) -> OutsideLeaguePublic:
    """An outside league: its learners (role, games, win rates, generation) and snapshots."""
    return _league_public(*_outside(session, league_id))


def _candidates(session: Session, state: Any, info: repo.LeagueInfo, league: OutsideLeague
                ) -> tuple[list[Candidate], list[Candidate], dict[int, str]]:
    """The board's scripted agents, its downloadable neural agents, and the league's live snapshots' names."""
    env_id = info.env_id
    baselines = [Candidate(str(a.id), "builtin", a.id, a.key, a.name)
                 for a in repo.list_agents(session, env_id) if a.kind == "builtin" and a.status not in OFF_BOARD]
    snapshots = repo.get_agents(session, [s.agent_id for s in league.snapshots])
    names = {i: a.name for i, a in snapshots.items() if a.status not in OFF_BOARD}
    board: list[Candidate] = []
    if league.board_top:
        rows = state.boards.get(session, env_id, get_spec(env_id).roles[0]).rows
        neural = [r.agent_id for r in rows if r.kind == "neural" and r.agent_id not in snapshots][:BOARD_SCAN]
        agents = repo.get_agents(session, neural)
        for agent_id in neural:
            a = agents.get(agent_id)
            if a is not None and (a.published or a.owner_id == league.owner_id) and len(board) < league.board_top:
                board.append(Candidate(str(a.id), "agent", a.id, a.key, a.name))
    return baselines, board, names


@router.get("/leagues/{league_id}/opponents", response_model=OpponentsPublic,
            responses=error_responses(401, 403, 404, 409, 422))
def opponents(
    league_id: LeagueIdPath, session: SessionDep, state: StateDep, user: UserDep,
    learner: Annotated[str, Query(pattern=LEARNER_NAME.pattern)] = "main",
    role: Annotated[LeagueRole | None, Query(description="The learner's AlphaStar role.")] = None,
    n: Annotated[int, Query(ge=1, le=1024, description="Opponents to draw.")] = 1,
    seed: Annotated[int | None, Query(ge=0, le=2**63 - 1, description="Seeds the draws (default: fresh).")] = None,
) -> dict[str, Any]:
    """PFSP over the league's snapshots and the board, in the learner's AlphaStar role (owner only)."""
    info, league = _outside(session, league_id)
    _owned(league, user, league_id)
    me = league.learner(learner, role)
    dist = league.distribution(learner, role, *_candidates(session, state, info, league))
    rows = [{"opponent": c.id, "kind": c.kind, "agent_id": c.agent_id, "key": c.key, "name": c.name,
             "probability": p, "win_rate": x, "games": g} for c, p, x, g in dist]
    drawn = sample_draws([r["probability"] for r in rows], n, np.random.default_rng(seed))
    return {"league": league_id, "learner": learner, "role": me.role, "distribution": rows,
            "sampled": [rows[i] for i in drawn]}


@router.post("/leagues/{league_id}/results", response_model=ResultsPublic,
             responses=error_responses(400, 401, 403, 404, 409, 422, 429))
def report_results(league_id: LeagueIdPath, body: ResultsCreate, user: WriterDep,
                   services: ServicesDep) -> dict[str, Any]:
    """Book the trainer's results against drawn opponents (owner only): they move the learner's
    win rates, hence its PFSP draws. A ``report_id`` sent again counts once."""
    def apply(session: Session) -> tuple[bool, dict[str, Any]]:
        info, league = _outside(session, league_id, lock=True)
        _owned(league, user, league_id)
        ids = {int(r.opponent) for r in body.results if r.opponent != "self"}
        known = repo.get_agents(session, ids)
        wrong = sorted(i for i in ids if i not in known or known[i].env_id != info.env_id)
        if wrong:
            raise InvalidParameter(f"no agent of {info.env_id} with id(s) {', '.join(map(str, wrong[:8]))}; "
                                   "report results against the opponents the league drew")
        applied = league.record(body.learner, body.role, [(r.opponent, r.wins, r.draws, r.losses)
                                                          for r in body.results], body.report_id)
        if applied:
            repo.set_league_config(session, league_id, league.to_config())
        return applied, _learner_public(body.learner, league.learner(body.learner))

    applied, learner = services.sessions.write_transaction(apply, what=f"results of league {league_id}")
    return {"applied": applied, "learner": learner}


PUSH_SCHEMA = {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["weights", "spec"],
    "properties": {
        "weights": {"type": "string", "format": "binary",
                    "description": "safetensors weights of a registry arch, or an ONNX model (.onnx)."},
        "spec": {"type": "string", "description": "agent.json: text or a file; its env is the league's."},
        "learner": {"type": "string", "description": "The learner it is a snapshot of (default main)."},
        "role": {"type": "string", "description": "The learner's role (main, main_exploiter, league_exploiter)."},
        "name": {"type": "string", "description": "Display name (default <league>-<learner>-g<generation>)."},
        "env": {"type": "string", "description": "Env id (default: the league's)."},
    },
}}}}


@router.post("/leagues/{league_id}/snapshots", status_code=201, response_model=PushedSnapshotPublic,
             responses={200: {"model": PushedSnapshotPublic, "description": "Those weights were yours already: "
                              "the stored agent, now a snapshot of the league."},
                        **error_responses(401, 403, 404, 409, 413, 422, 429)},
             openapi_extra={"requestBody": PUSH_SCHEMA})
async def push_snapshot(league_id: LeagueIdPath, request: Request, user: WriterDep, state: StateDep,
                        response: Response) -> dict[str, Any]:
    """Push a snapshot (owner only): validated and registered like a submission (POST /agents), so the
    ladder rates it, and it joins the league's pool as the learner's next generation."""
    services = state.services
    with services.sessions() as session:
        info, league = _outside(session, league_id)
    _owned(league, user, league_id)
    fields = await read_form(request, {**form_limits(services.settings.max_upload_bytes), "learner": 64, "role": 64})
    learner = fields.pop("learner", b"main").decode("utf-8", errors="replace").strip() or "main"
    role = fields.pop("role", b"").decode("utf-8", errors="replace").strip() or None
    booked = league.learner(learner, role)  # checks the name and role before anything is stored
    fields.setdefault("env", info.env_id.encode())
    if not fields.get("name"):
        fields["name"] = f"{_public_name(info.name, info.env_id)}-{learner}-g{booked.generation + 1}".encode()
    submission = parse_submission(fields)
    if submission.env != info.env_id:
        raise InvalidSubmission(f"league {league_id} plays {info.env_id}, not {submission.env[:64]}")

    def submit() -> tuple[int, bool]:
        try:
            if user.user_id is None:
                return _submit(services, user, submission, info, league, learner), True
            with state.limits.submission(user.user_id, info.env_id):
                return _submit(services, user, submission, info, league, learner), True
        except Conflict as exc:  # these weights were stored before: a retried push, or yours already
            with services.sessions() as session:
                agent = repo.get_agent(session, exc.existing_id) if exc.existing_id else None
            if agent is None or agent.owner_id != league.owner_id:
                raise
            return agent.id, False

    agent_id, created = await run_in_threadpool(submit)

    def join(session: Session) -> dict[str, Any]:
        _, fresh = _outside(session, league_id, lock=True)
        agent = repo.get_agent(session, agent_id)
        snapshot = fresh.add_snapshot(learner, role, agent_id, agent.snapshot_sha256)
        repo.set_league_config(session, league_id, fresh.to_config())
        return vars(snapshot)

    snapshot = await run_in_threadpool(services.sessions.write_transaction, join,
                                       what=f"adding a snapshot to league {league_id}")
    response.status_code = 201 if created else 200
    with services.sessions() as session:
        agent = AgentPublic(**agents_public(session, [repo.get_agent(session, agent_id)])[0])
    return {"snapshot": snapshot, "agent": agent}


def _submit(services: Services, user: Principal, submission: Submission, info: repo.LeagueInfo, league: OutsideLeague,
            learner: str) -> int:
    return submit_agent(services, user.user_id, user.name, submission, pool_name=info.name, league_id=info.id,
                        parent_sha256=league.parent(learner))
