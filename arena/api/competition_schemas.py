"""Request and response bodies of ``/api/v1/competitions`` (pydantic; the naming of :mod:`arena.api.schemas`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, Field

from arena.api.schemas import AgentPublic
from arena.read.ratings import RatingRecord

Path = Literal["weights", "onnx", "connected"]
TeamName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9 _.:+-]{0,63}$",
                                description="1-64 characters: letters, digits, space and _.:+-")]
Code = Annotated[str, Field(min_length=4, max_length=32, pattern=r"^[A-Za-z0-9_-]+$")]


class DivisionCreate(BaseModel):
    """One division, bottom to top: its boss is one of the reference agents (none for the top)."""

    name: str = Field(min_length=1, max_length=64)
    boss: str | None = Field(default=None, max_length=200, description="A reference agent: builtin name or id.")


class CompetitionCreate(BaseModel):
    """A new competition (a draft until its organizer opens it)."""

    env: str = Field(max_length=64, description="Env id.", examples=["connect_four-v3"])
    role: str | None = Field(default=None, max_length=32, description="The role entries play (role envs).")
    title: str = Field(min_length=1, max_length=200)
    rules_md: str = Field(default="", max_length=50_000, description="The rules, as Markdown.")
    opens_at: AwareDatetime
    deadline: AwareDatetime = Field(description="Submissions close; the final evaluation starts.")
    final_ends_at: AwareDatetime | None = Field(
        default=None, description="The final evaluation stops by then at the latest; null: until certified "
        "(or final_match_budget matches).")
    final_match_budget: int = Field(default=20_000, ge=2, le=10_000_000)
    daily_submissions: int = Field(default=5, ge=1, le=1000, description="Per team per UTC day.")
    active_entries: int = Field(default=2, ge=1, le=100, description="A team's latest submissions that count.")
    team_size: int = Field(default=5, ge=1, le=1000)
    merge_deadline: AwareDatetime | None = Field(default=None, description="Default: the deadline.")
    allowed_paths: list[Path] = Field(default=["weights", "onnx"], min_length=1, max_length=3)
    top_k: int = Field(default=10, ge=1, le=1000, description="K: the ranks the final evaluation certifies.")
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    tie_margin: float = Field(default=0.03, gt=0.0, lt=0.5,
                              description="Entries whose head-to-head win probability is within 0.5 ± this "
                              "may be declared tied.")
    final_floor: int = Field(default=20, ge=0, le=100_000, description="Games every entry plays in the final first.")
    is_public: bool = Field(default=True, description="False: only members (by invite code) see it.")
    reference_agents: list[str] = Field(default=[], max_length=50,
                                        description="Builtin names or agent ids of the env: baselines on the board.")
    divisions: list[DivisionCreate] | None = Field(
        default=None, max_length=20, description="CodinGame's leagues, bottom to top: an entry moves up when its "
        "rating's lower bound (mu - 3 sigma) passes its division's boss's mu, and never down.")


class CompetitionUpdate(BaseModel):
    """Changes to a competition: anything while a draft; once open, only later dates, before the deadline."""

    title: str | None = Field(default=None, min_length=1, max_length=200)
    rules_md: str | None = Field(default=None, max_length=50_000)
    opens_at: AwareDatetime | None = None
    deadline: AwareDatetime | None = None
    final_ends_at: AwareDatetime | None = None
    final_match_budget: int | None = Field(default=None, ge=2, le=10_000_000)
    daily_submissions: int | None = Field(default=None, ge=1, le=1000)
    active_entries: int | None = Field(default=None, ge=1, le=100)
    team_size: int | None = Field(default=None, ge=1, le=1000)
    merge_deadline: AwareDatetime | None = None
    allowed_paths: list[Path] | None = Field(default=None, min_length=1, max_length=3)
    top_k: int | None = Field(default=None, ge=1, le=1000)
    confidence: float | None = Field(default=None, gt=0.5, lt=1.0)
    tie_margin: float | None = Field(default=None, gt=0.0, lt=0.5)
    final_floor: int | None = Field(default=None, ge=0, le=100_000)
    is_public: bool | None = None
    reference_agents: list[str] | None = Field(default=None, max_length=50)


class CompetitionPublic(BaseModel):
    id: int
    env: str
    role: str | None
    title: str
    rules_md: str
    state: Literal["draft", "open", "final", "finished"]
    is_public: bool
    invite_code: str | None = Field(description="Shown to its organizer only (private competitions).")
    opens_at: datetime
    deadline: datetime
    merge_deadline: datetime
    final_ends_at: datetime | None
    final_match_budget: int
    daily_submissions: int
    active_entries: int
    team_size: int
    allowed_paths: list[str]
    top_k: int
    confidence: float
    tie_margin: float
    final_floor: int
    reference_agents: list[int] = Field(description="Agent ids of the reference agents.")
    divisions: list[dict[str, Any]] | None = Field(default=None,
                                                   description="Bottom to top: name and boss (an agent id).")
    created_at: datetime
    final_started_at: datetime | None
    finished_at: datetime | None


class CompetitionsPublic(BaseModel):
    data: list[CompetitionPublic]
    count: int


class JoinCompetition(BaseModel):
    invite_code: Code | None = Field(default=None, description="A private competition's invite code.")


class OrganizerPublic(BaseModel):
    user_id: int
    name: str


class TeamCreate(BaseModel):
    name: TeamName


class TeamJoin(BaseModel):
    join_code: Code = Field(description="The team's join code (its members see it).")


class TeamMerge(BaseModel):
    join_code: Code = Field(description="The join code of the team to merge into yours.")


class TeamPublic(BaseModel):
    id: int
    name: str
    members: list[str]
    join_code: str | None = Field(description="Shown to the team's members only.")
    merged_into: int | None


class TeamsPublic(BaseModel):
    data: list[TeamPublic]
    count: int


class QuotaPublic(BaseModel):
    """My team's submissions today (UTC)."""

    team_id: int
    team: str
    used_today: int
    left_today: int
    resets_at: datetime
    active_entries: list[int] = Field(description="Agent ids of the team's active entries.")


class EntryPublic(BaseModel):
    id: int
    team_id: int
    team: str
    agent_id: int
    submitted_at: datetime
    active: bool
    frozen: bool


class ConnectedEntryCreate(BaseModel):
    """A connected agent as your team's entry: your own process plays it (``arena connect``)."""

    name: TeamName = Field(description="The agent's name (a new one: each entry is a new agent).")


class EntriesPublic(BaseModel):
    data: list[EntryPublic]
    count: int


class EntryCreated(BaseModel):
    entry: EntryPublic
    agent: AgentPublic


class BoardRowPublic(RatingRecord):
    """One agent on a competition's board (the season's, or the final evaluation's)."""

    rank: int
    rank_lo: int
    rank_hi: int
    agent_id: int
    name: str
    team: str | None = Field(description="The entry's team; null: a reference agent.")
    reference: bool
    role: str
    division: str | None = Field(default=None, description="Its division (a boss: the one it guards).")


class CompetitionBoardPublic(BaseModel):
    competition_id: int
    board: str
    data: list[BoardRowPublic]
    count: int


class StandingsPublic(BaseModel):
    """The final evaluation's standings and certificate (frozen once finished)."""

    competition_id: int
    state: str
    final: bool = Field(description="True once finished: the standings are frozen.")
    certified: bool
    matches: int
    result: dict[str, Any] | None = Field(
        description="league.competitions.certification.Certificate.to_json, entries by agent id: standings "
        "(rank, rank range, mu, sigma, games, W/D/L) and the tested pairs (status, confidence, bounds).")
