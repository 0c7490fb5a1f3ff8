"""Request and response bodies of ``/api/v1/tournaments`` (pydantic; the naming of :mod:`arena.api.schemas`)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from arena.api.schemas import MAX_ID
from arena.competitions.tournaments import MAX_ENTRANTS, MAX_GAMES

Kind = Literal["round_robin", "double_round_robin", "swiss", "single_elimination"]


class TournamentCreate(BaseModel):
    """A new tournament, played at once by the background service (unrated on the ladder)."""

    title: str = Field(min_length=1, max_length=200)
    kind: Kind = Field(description="round_robin, double_round_robin, swiss (N rounds) or single_elimination "
                       "(seeded: the entrants' order).")
    games: int = Field(default=3, ge=1, le=MAX_GAMES, description="M: each pairing is a best-of-M mini-match on "
                       "M seeds, seats alternated (an odd M avoids drawn mini-matches).")
    rounds: int | None = Field(default=None, ge=1, le=MAX_ENTRANTS,
                               description="Swiss only: its rounds (default ceil(log2 n)).")
    entrants: list[int] | None = Field(default=None, min_length=2, max_length=MAX_ENTRANTS,
                                       description="Agent ids, best seed first; or give competition_id and top.")
    competition_id: int | None = Field(default=None, ge=1, le=MAX_ID,
                                       description="The competition it belongs to (its organizer creates it).")
    top: int | None = Field(default=None, ge=2, le=MAX_ENTRANTS,
                            description="With competition_id and no entrants: its best N entries (final standings "
                            "once published, else its board), seeded in that order.")
    env: str | None = Field(default=None, max_length=64,
                            description="The env of a tournament of no competition (else the competition's).")
    seed_from_board: bool = Field(default=False, description="Seed the entrants by the board (the "
                                  "competition's, else the env ladder's) instead of in the order given.")

    @model_validator(mode="after")
    def _field(self) -> TournamentCreate:
        if self.entrants is None and (self.competition_id is None or self.top is None):
            raise ValueError("give entrants, or competition_id and top")
        return self


class EntrantPublic(BaseModel):
    seed: int
    agent_id: int
    name: str


class TournamentGamePublic(BaseModel):
    game: int = Field(description="0-based; a opens the even games.")
    match_id: str = Field(description="Fixed before it is played; /matches/{id} replays it once recorded.")
    first: int = Field(description="Agent id in seat 0.")
    second: int
    score_a: float | None = Field(description="a's score (1, 1/2, 0); null: not played yet.")


class TablePublic(BaseModel):
    table: int
    a: int
    b: int | None = Field(description="null: a bye.")
    complete: bool
    advances: int | None = Field(description="Who won the mini-match (null: not finished, or drawn); in "
                                 "elimination who goes on (a drawn one: the higher seed; a bye: its entrant).")
    points_a: float | None
    points_b: float | None
    games: list[TournamentGamePublic]


class RoundPublic(BaseModel):
    round: int
    tables: list[TablePublic]


class TournamentStandingPublic(BaseModel):
    rank: int
    agent_id: int
    name: str
    points: float
    tiebreak: float = Field(description="Buchholz (Swiss), Sonneborn-Berger (round robin), round reached "
                            "(elimination).")
    game_points: float
    played: int
    wins: int
    draws: int
    losses: int
    byes: int


class MeetingPublic(BaseModel):
    agent_id: int
    points: list[float] = Field(description="Mini-match points against this opponent, one per finished meeting.")


class CrosstableRowPublic(BaseModel):
    agent_id: int
    against: list[MeetingPublic]


class TournamentHead(BaseModel):
    """What names a tournament, in its summary and in its full view alike."""

    id: int
    title: str
    env: str
    competition_id: int | None
    kind: Kind
    games: int


class TournamentPublic(TournamentHead):
    """A tournament now: its field, every round's tables and games, standings and crosstable."""

    rounds_total: int
    seed: int
    state: Literal["running", "finished", "failed"]
    error: str
    finished: bool
    created_at: datetime
    finished_at: datetime | None
    games_played: int
    entrants: list[EntrantPublic]
    rounds: list[RoundPublic]
    standings: list[TournamentStandingPublic]
    crosstable: list[CrosstableRowPublic]


class TournamentSummary(TournamentHead):
    state: Literal["running", "finished", "failed"]
    entrants: int
    created_at: datetime


class TournamentsPublic(BaseModel):
    data: list[TournamentSummary]
    count: int
