"""``/envs``: the registered games, each env's payoff matrix, and its match log as a file."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import StreamingResponse

from agents.archs import ARCHS
from agents.checkpoint_spec import ONNX_ARCH
from arena.api.deps import SessionDep, StateDep
from arena.api.errors import error_responses
from arena.api.schemas import EnvPublic, EnvsPublic, PayoffPublic, SeatsPublic
from arena.core.errors import InvalidParameter
from arena.read.boards import payoff_matrix
from arena.read.evaluation import seats_data
from arena.storage.db import repositories as repo
from envs.registry import get_spec, list_envs
from envs.spec import EnvSpec

router = APIRouter(tags=["envs"])
EnvId = Annotated[str, Path(max_length=64, description="Env id, e.g. connect_four-v3.")]


def env_public(spec: EnvSpec) -> EnvPublic:
    return EnvPublic(
        id=spec.env_id, seats=list(spec.seats), teams=[list(t) for t in spec.teams],
        roles=list(spec.roles), num_actions=spec.num_actions,
        obs_shapes=[list(s) for s in spec.obs_shapes], archs=sorted([*ARCHS, ONNX_ARCH]),
        symmetric=spec.symmetric, description=spec.description,
    )


@router.get("/envs", response_model=EnvsPublic)
def envs() -> EnvsPublic:
    """Every registered env, with the architectures a submission may use."""
    data = [env_public(spec) for spec in list_envs()]
    return EnvsPublic(data=data, count=len(data))


@router.get("/envs/{env}", response_model=EnvPublic, responses=error_responses(404, 422))
def env(env: EnvId) -> EnvPublic:
    """One env."""
    return env_public(get_spec(env))


@router.get("/envs/{env}/payoff", response_model=PayoffPublic, responses=error_responses(404, 422))
def payoff(
    env: EnvId,
    session: SessionDep,
    state: StateDep,
    top: Annotated[int, Query(ge=1, le=32, description="Agents, best conservative rating first.")] = 8,
) -> PayoffPublic:
    """Head-to-head win rates of the env's top agents and the Nash mixture over them."""
    spec = get_spec(env)
    if not spec.symmetric:
        raise InvalidParameter(
            f"payoff matrices are computed for symmetric envs; {env} has roles "
            f"{', '.join(dict.fromkeys(spec.roles))}"
        )
    role = spec.roles[0]
    version = repo.board_version(session, env)
    board = state.boards.get(session, env, role, version)
    body = state.payoffs.get((env, role, top), version, lambda: payoff_matrix(session, board, top))
    return PayoffPublic(env=env, role=role, **body)


@router.get("/envs/{env}/seats", response_model=SeatsPublic, responses=error_responses(404, 422))
def seats(env: EnvId, session: SessionDep, state: StateDep) -> SeatsPublic:
    """Results by seat over the env's rated games: how much the first move is worth (points per game,
    Elo, TrueSkill mu, with 95% intervals) and every agent's record as first and as second mover."""
    get_spec(env)
    version = repo.board_version(session, env)
    return SeatsPublic(**state.payoffs.get(("seats", env), version, lambda: seats_data(session, env)))


MATCH_LOG_ROWS = 250_000
"""Most matches one match-log download holds (``limit``'s default and ceiling)."""


def match_log_responses(description: str, *errors: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a match-log download: the streamed file (``description``) and the ``errors``."""
    return {200: {"description": description,
                  "content": {media: {"schema": {"type": "string", "format": "binary"}}
                              for media in ("application/vnd.apache.parquet", "text/csv")}},
            **error_responses(*errors)}


def match_log_file(body: Iterator[bytes], format: str, name: str) -> StreamingResponse:
    """A streamed match-log download, saved as ``<name>-matches.<format>``."""
    from arena.datasets.match_log import MEDIA_TYPES  # pyarrow: loaded on first download

    return StreamingResponse(body, media_type=MEDIA_TYPES[format], headers={
        "Content-Disposition": f'attachment; filename="{name}-matches.{format}"'})


@router.get(
    "/envs/{env}/matches/export",
    response_class=StreamingResponse,
    responses=match_log_responses("The match log as a Parquet or CSV file, streamed.", 404, 422, 429),
)
def export_matches(
    env: EnvId,
    state: StateDep,
    format: Annotated[Literal["parquet", "csv"], Query(description="parquet or csv.")] = "parquet",
    after: Annotated[int, Query(ge=0, le=2**63 - 1, description="Only matches with a larger match_seq "
                                "(the last row's match_seq of the previous download).")] = 0,
    limit: Annotated[int, Query(ge=1, le=MATCH_LOG_ROWS, description="Most matches in this file.")] = MATCH_LOG_ROWS,
) -> StreamingResponse:
    """The env's rated matches with the ratings they were played at, one row per match, oldest first:
    id, time, seed, outcome, termination, and per seat the agent, its score and its TrueSkill
    mu/sigma before and after (docs/datasets.md). Streamed page by page; a file holds the
    matches recorded before the request, after ``after``, at most ``limit``."""
    from arena.datasets.match_log import stream_match_log  # pyarrow: loaded on first download

    spec = get_spec(env)
    body = state.downloads.stream(stream_match_log(state.services.sessions, spec, format, after, limit))
    return match_log_file(body, format, env)
