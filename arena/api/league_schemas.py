"""Request and response bodies of the league API for outside trainers (``/api/v1/leagues``).

Kept apart from :mod:`arena.api.schemas` (same naming: ``XCreate`` in, ``XPublic`` out);
the league itself is :mod:`arena.training.outside_league`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from arena.api.schemas import AgentPublic

LearnerName = Field(default="main", pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,15}$",
                    description="The learner (one trainer's network): 1-16 letters, digits, '_', '-'.")
LeagueRole = Literal["main", "main_exploiter", "league_exploiter"]


def _not_a_bool(value: object) -> object:
    """JSON's true and false are no numbers (pydantic's lax mode would read them as 1 and 0)."""
    if isinstance(value, bool):
        raise PydanticCustomError("number_type", "Input should be a number, not true/false")
    return value


Count = Annotated[int, BeforeValidator(_not_a_bool)]
Share = Annotated[float, BeforeValidator(_not_a_bool)]


class LeagueCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$", examples=["my-league"],
                      description="1-32 letters, digits, '_', '-'; unique per env.")
    env: str = Field(max_length=64, examples=["connect_four-v3"])
    self_play: Share = Field(default=0.35, ge=0.0, le=1.0,
                             description="A main learner's share of games against its current weights.")
    baseline_share: Share = Field(default=0.5, ge=0.0, le=1.0,
                                  description="Share of a main learner's other games drawn among the board's "
                                  "scripted agents alone.")
    board_top: Count = Field(default=8, ge=0, le=64,
                           description="The best neural agents of the board that you may download (published, "
                           "or yours) join the league's past players.")


class LearnerPublic(BaseModel):
    name: str
    role: LeagueRole
    games: int = Field(description="Games reported, self-play included.")
    wins: int
    draws: int
    losses: int
    generation: int = Field(description="Snapshots pushed by this learner.")
    win_rates: dict[str, float] = Field(description="Smoothed, decayed win rate against every opponent "
                                        "reported (agent id -> rate): what PFSP reads.")


class LeagueSnapshotPublic(BaseModel):
    agent_id: int
    sha256: str
    learner: str
    role: LeagueRole
    generation: int


class OutsideLeaguePublic(BaseModel):
    id: int
    name: str
    env: str
    owner: str
    self_play: float
    baseline_share: float
    board_top: int
    learners: list[LearnerPublic]
    snapshots: list[LeagueSnapshotPublic]
    created_at: datetime


class OpponentPublic(BaseModel):
    opponent: str = Field(description="'self' (your current weights) or the agent id: what results name.")
    kind: Literal["self", "builtin", "snapshot", "agent"] = Field(
        description="self; builtin: a scripted agent (play it by its key); snapshot: one of the league's; "
        "agent: a neural agent of the board (download it: GET /agents/{id}/weights, or arena:<id>@<url>)."
    )
    agent_id: int | None
    key: str | None = Field(description="A scripted agent's name in arena.gym (random, heuristic, ...).")
    name: str
    probability: float
    win_rate: float = Field(description="The learner's smoothed win rate against it (0.5 unplayed).")
    games: float = Field(description="Decayed games the rate rests on.")


class OpponentsPublic(BaseModel):
    league: int
    learner: str
    role: LeagueRole
    distribution: list[OpponentPublic] = Field(description="Every opponent the learner may draw, with its "
                                               "PFSP probability (AlphaStar's roles, league/scheduling/roles.py).")
    sampled: list[OpponentPublic] = Field(description="n draws from the distribution, with replacement.")


class ResultCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    opponent: str = Field(pattern=r"^(self|[1-9][0-9]{0,9})$", description="'self' or the opponent's agent id.")
    wins: Count = Field(default=0, ge=0, le=1_000_000)
    draws: Count = Field(default=0, ge=0, le=1_000_000)
    losses: Count = Field(default=0, ge=0, le=1_000_000)


class ResultsCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    learner: str = LearnerName
    role: LeagueRole | None = Field(default=None, description="The learner's role (fixed by its first report "
                                    "or push; default: its name if that is a role, else main).")
    report_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$",
                                  description="Unique per report: a report sent again with it counts once.")
    results: list[ResultCreate] = Field(max_length=1024)


class ResultsPublic(BaseModel):
    applied: bool = Field(description="False: this report_id was applied before; nothing changed.")
    learner: LearnerPublic


class PushedSnapshotPublic(BaseModel):
    snapshot: LeagueSnapshotPublic
    agent: AgentPublic
