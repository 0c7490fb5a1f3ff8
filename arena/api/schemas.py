"""Request and response bodies of the HTTP API (pydantic).

Naming follows the FastAPI full-stack template: ``XCreate`` is what a client sends,
``XPublic`` what it gets back, ``XsPublic`` a page ``{data, count}``. Every error body
is :class:`ErrorPublic`: ``{"detail": "<what to fix>"}``, ``detail`` always a string.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arena.core.agent_status import AgentStatus
from arena.read.boards import LeaderboardRow
from arena.read.ratings import RatingStats

UserName = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$",
        description="1-64 characters: a letter, then letters, digits, '_', '.', '-'.",
        examples=["ada"],
    ),
]
MAX_ID = 2**31 - 1  # ids are 32-bit integer columns; larger values can never exist
AgentId = Annotated[int, Field(ge=1, le=MAX_ID)]


class ErrorPublic(BaseModel):
    detail: str = Field(description="What went wrong and how to fix it.")


class ConflictPublic(ErrorPublic):
    existing_id: int | None = Field(
        default=None, description="Id of the stored resource the request collides with."
    )


class ConfinementLayerPublic(BaseModel):
    active: bool
    detail: str = Field(description="What the layer does here, or why the kernel refused it.")


class OnnxSandboxPublic(BaseModel):
    mode: Literal["required", "best-effort"] = Field(description="ARENA_ONNX_CONFINEMENT, resolved.")
    layers: dict[str, ConfinementLayerPublic] = Field(
        description="rlimits, network, user, landlock, seccomp: what an ONNX worker process gets here.")
    refused: str | None = Field(
        description="Why ONNX models are refused here (a layer the mode requires is missing), else null.")


class HealthPublic(BaseModel):
    status: Literal["ok", "degraded"]
    database: str = Field(description="'ok' or the error reaching the database.")
    redis: str = Field(description="'ok' or the error reaching Redis.")
    onnx_sandbox: OnnxSandboxPublic | None = Field(
        default=None, description="The ONNX workers' confinement (ONNX uploads get 503 while it is "
        "refused; the rest of the service is unaffected, so status stays 'ok').")


class UserCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: UserName


class UserPublic(BaseModel):
    id: int
    name: str
    is_admin: bool
    created_at: datetime | None = None


class UserCreated(BaseModel):
    id: int
    name: str
    token: str = Field(description="The API token; shown only this once, stored hashed.")


class EnvPublic(BaseModel):
    id: str
    seats: list[str]
    teams: list[list[int]]
    roles: list[str]
    num_actions: int
    obs_shapes: list[list[int]]
    archs: list[str] = Field(description="Architectures a submitted checkpoint may use "
                             "(onnx: an ONNX model of any architecture, see docs/onnx.md).")
    symmetric: bool = Field(description="Every team plays the same role (ladders, payoff).")
    description: str


class EnvsPublic(BaseModel):
    data: list[EnvPublic]
    count: int


class RatingPublic(RatingStats):
    role: str


class AgentPublic(BaseModel):
    id: int
    key: str
    name: str
    env: str
    kind: Literal["builtin", "neural", "connected", "human"] = Field(
        description="builtin: a scripted baseline; neural: submitted weights (safetensors or "
        "ONNX); connected: played by its owner's process over the connected-agent protocol "
        "(docs/connected.md); human: a person playing in the browser."
    )
    format: Literal["safetensors", "onnx"] | None = Field(
        default=None, description="How a neural agent was submitted: safetensors weights of a "
        "registry architecture, or an ONNX model; null for builtin agents."
    )
    arch: str | None = Field(
        default=None, description="A neural agent's architecture: a registry arch (mlp, cnn) "
        "or onnx; null for builtin agents."
    )
    hparams: dict[str, Any] | None = Field(
        default=None, description="The spec's hyper-parameters (informational for onnx, e.g. "
        "source_arch); null for builtin agents."
    )
    owner: str | None
    role: str | None = Field(
        default=None, description="The role it plays for its whole team (hider, seeker, predator, "
        "prey, player); null: every role of the env (the scripted random agent)."
    )
    status: AgentStatus
    status_reason: str = Field(description="Why it is in its status: what a queued agent or one "
                               "that cannot be scheduled waits for, why it was rejected.")
    created_at: datetime
    ratings: list[RatingPublic]
    queue_position: int | None = Field(
        description="1-based place among the env's queued/validating agents; null otherwise."
    )
    expected_matches_to_settle: int | None = Field(
        description="Expected rated matches until sigma reaches the placement target; 0 when "
        "settled, null for rejected/retired agents."
    )
    published: bool = Field(
        default=False, description="Its owner published its weights: anyone may download them "
        "(GET /agents/{id}/weights and /spec). Private agents: only the owner and admins."
    )


class ConnectedAgentCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env: str = Field(max_length=64, examples=["connect_four-v3"])
    name: str = Field(min_length=1, max_length=100, pattern=r"^[\w .:+@-]+$", examples=["my-negamax"])
    role: str | None = Field(default=None, max_length=32,
                             description="The role it plays in a role env (hider, seeker, predator, prey); "
                             "omit in symmetric games.")


class AgentUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    published: bool = Field(strict=True,  # JSON true/false only, not 1 or "yes"
                            description="Publish (true) or unpublish (false) the agent's weights and spec.")


class AgentsPublic(BaseModel):
    data: list[AgentPublic]
    count: int


class LeaderboardPublic(BaseModel):
    env: str
    role: str
    count: int = Field(description="Agents on the whole board (retired agents are left off).")
    data: list[LeaderboardRow]


class MatchSummary(BaseModel):
    id: str
    seq: int
    env: str
    seats: list[str] = Field(description="Agent key in every seat.")
    agent_ids: list[int | None] = Field(description="Agent id in every seat.")
    scores: list[float]
    winner: int | None = Field(description="Winning team index; null for a draw.")
    termination: str
    created_at: datetime


class MatchPublic(MatchSummary):
    seed: int
    weights: list[str | None] = Field(description="sha256 of the weights in every seat.")
    actions: list[list[int]] = Field(description="[seat, action] pairs in play order.")
    forfeit_seat: int | None
    detail: str
    rated: bool


class MatchesPublic(BaseModel):
    data: list[MatchSummary]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next (older) page.")


class ChallengeCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env: str = Field(max_length=64, examples=["connect_four-v3"])
    agents: list[AgentId] = Field(
        min_length=1, max_length=8, description="Agent id per team, in team order."
    )
    matches: int = Field(default=2, ge=1, le=100, description="Seats alternate in symmetric games.")
    rated: bool = Field(
        default=False,
        description="Record through the ladder's ratings: admins only (ARENA_ADMIN_TOKEN). Challenges by "
        "users are unrated (they appear in the agents' match history, never move a rating); a user asking "
        "for a rated one gets 403.",
    )


class ChallengePublic(BaseModel):
    id: str = Field(description="Poll GET /challenges/{id} for its status and, once done, its results.")
    status: Literal["queued", "playing", "done", "failed"] = Field(
        description="queued (waiting for the background service), playing, done (results filled) or failed "
        "(error says why)."
    )
    env: str
    agents: list[int] = Field(description="Agent id per team, in team order.")
    rated: bool = Field(description="Whether the matches move ratings (only an admin's rated challenge does).")
    match_ids: list[str] = Field(description="Every match's id, fixed when the challenge was queued.")
    recorded: int = Field(description="Its matches recorded so far (progress).")
    results: list[MatchSummary] = Field(description="The matches, in match_ids order, once done (else empty).")
    error: str | None = Field(default=None, description="Why it failed.")
    created_at: datetime
    finished_at: datetime | None = None


class AgentRanksPublic(BaseModel):
    agent_id: int
    trueskill_rank: int | None = Field(description="Place by mu - 3 sigma.")
    conservative: float | None
    alpharank_rank: int = Field(description="Place by alpha-Rank stationary mass.")
    alpharank_mass: float
    nash_rank: int = Field(description="Place by Nash-averaged skill (the unexploited core shares place 1).")
    nash_skill: float = Field(description="Log-odds payoff against the max-entropy Nash mixture (0 = unbeaten).")
    nash_mass: float


class CycleLinkPublic(BaseModel):
    winner: int
    loser: int
    wins: int = Field(description="winner's wins against loser.")
    draws: int
    losses: int
    p_value: float = Field(description="One-sided sign test of winner > loser.")


class CyclePublic(BaseModel):
    agents: list[int] = Field(description="A beats B beats C beats A, in that order.")
    links: list[CycleLinkPublic]
    p_value: float
    adjusted_p: float = Field(description="Holm-adjusted over every tested triple.")
    confidence: float = Field(description="1 - adjusted_p.")


class PayoffAgent(BaseModel):
    id: int
    key: str
    name: str


class PayoffPublic(BaseModel):
    env: str
    role: str
    agents: list[PayoffAgent]
    win_rate: list[list[float | None]] = Field(
        description="Row agent's win rate against the column agent (draw = 1/2); null: never met."
    )
    games: list[list[int]]
    nash: list[float] = Field(description="Nash mixture of the zero-sum game win_rate - 1/2.")
    rankings: list[AgentRanksPublic] = Field(
        default_factory=list, description="Each agent's place by TrueSkill, alpha-Rank and Nash averaging."
    )
    cycles: list[CyclePublic] = Field(
        default_factory=list, description="Significant intransitive 3-cycles among these agents, with confidence."
    )
    alpharank_alpha: float | None = Field(default=None, description="alpha-Rank's selection intensity.")
    cycle_alpha: float | None = Field(default=None, description="Family-wise level of a reported cycle.")


class RatingPoint(BaseModel):
    match_seq: int
    role: str
    mu: float
    sigma: float
    created_at: datetime


class HistoryPublic(BaseModel):
    agent_id: int
    data: list[RatingPoint]


class GenerationPublic(BaseModel):
    generation: int
    episodes: int = Field(description="Episodes the phase rates are measured over.")
    rates: dict[str, float] = Field(description="Phase -> rate in [0, 1] among the generation's episodes.")
    ratings: dict[str, list[float]] = Field(description="Role -> [mu, sigma] of the generation's snapshot.")
    firsts: list[str] = Field(description="Phases that first happened in this generation.")


class PhaseFirstPublic(BaseModel):
    phase: str
    generation: int
    match_id: str = Field(description="The first recorded match where the phase happened (replayable).")


class ExploiterEntryPublic(BaseModel):
    generation: int
    role: str = Field(description="The env role the exploiter plays (hider, seeker).")
    index: int = Field(description="The exploiter's index within its role.")
    score: float = Field(description="Its score against the other role's main team in this generation "
                         "(a win 1, a draw 1/2).")
    edge: float = Field(description="That score less its own main team's score in self-play.")
    snapshot: str | None = Field(description="The opponent key it was frozen into its role's pool as "
                                 "(x0, x1, ...); null: not frozen in this generation.")
    reset: bool = Field(description="It started again from its main team's weights after this generation.")


class LeagueTimelinePublic(BaseModel):
    id: int
    name: str
    env_id: str
    phases: list[str] = Field(description="Phases in the order they are known to emerge.")
    roles: list[str]
    rows: list[GenerationPublic] = Field(description="The main teams' generations.")
    firsts: list[PhaseFirstPublic]
    exploiters: list[ExploiterEntryPublic] = Field(
        default_factory=list,
        description="Apart from the main teams: each exploiter's entry per generation, in generation order "
        "(empty for a league without exploiters).")


class ProbeCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    budget_env_steps: int | None = Field(
        default=None, ge=0, le=50_000_000,
        description="Env steps the exploiter trains for; default and most for non-admins: ARENA_PROBE_BUDGET_STEPS.",
    )
    seed: int = Field(default=0, ge=0, le=MAX_ID, description="Seeds the exploiter and the evaluation games.")


class ProbePublic(BaseModel):
    id: int
    agent_id: int
    env: str
    status: Literal["queued", "running", "done", "failed"]
    budget_env_steps: int = Field(description="The exploiter's training budget: compare probes at equal budgets.")
    eval_games: int
    seed: int
    requested_by: str = Field(description="Who asked: a user name, admin, or auto (queued when rated).")
    env_steps: int = Field(description="Env steps trained so far (all of them once done).")
    progress: float = Field(ge=0.0, le=1.0, description="Share of the budget trained (1 once done).")
    games: int | None
    wins: int | None = Field(description="Exploiter's wins in the evaluation games.")
    draws: int | None
    losses: int | None
    win_rate: float | None = Field(description="Exploiter's win rate against the agent: high = exploitable.")
    ci_low: float | None = Field(description="Lower end of the 95% Wilson interval of win_rate.")
    ci_high: float | None = Field(description="Upper end.")
    error: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class ProbesPublic(BaseModel):
    data: list[ProbePublic]
    count: int


class SeatRecordPublic(BaseModel):
    games: int
    wins: int
    draws: int
    losses: int
    score: float | None = Field(description="Points per game (a draw is 1/2); null without games.")


class AgentSeatsPublic(BaseModel):
    agent_id: int
    name: str
    first: SeatRecordPublic = Field(description="Results moving first.")
    second: SeatRecordPublic = Field(description="Results moving second.")
    difference: float | None = Field(description="first.score - second.score.")
    difference_ci: list[float] | None = Field(description="Its 95% interval.")
    imbalance: int = Field(description="Games first - games second (0 when the ladder balanced seats).")


class SeatsPublic(BaseModel):
    env: str
    first_mover: SeatRecordPublic = Field(description="The first mover's results over every rated game.")
    ci_low: float = Field(description="Lower end of the 95% interval of first_mover.score.")
    ci_high: float
    first_move_value: float | None = Field(description="2 score - 1: points per game the first seat is worth.")
    first_move_value_ci: list[float]
    elo: float | None = Field(description="The first move's edge in Elo points.")
    trueskill_mu: float | None = Field(description="The edge in TrueSkill mu of the env's ladder.")
    agents: list[AgentSeatsPublic]


class FlaggedAgent(BaseModel):
    agent_id: int
    name: str
    owner: str | None


class PairFlagPublic(BaseModel):
    beneficiary: FlaggedAgent = Field(description="Scored above the ratings' prediction.")
    thrower: FlaggedAgent = Field(description="Scored below it.")
    same_owner: bool
    family: Literal["same_owner", "other"]
    wins: int = Field(description="beneficiary's wins against thrower.")
    draws: int
    losses: int
    expected_win_share: float = Field(description="Predicted share of decisive games won by beneficiary.")
    observed_win_share: float
    expected_score: float
    observed_score: float
    p_value: float
    adjusted_p: float = Field(description="Holm-adjusted within the family; flagged at most alpha.")


class DependenceFlagPublic(BaseModel):
    agent: FlaggedAgent
    opponent: FlaggedAgent = Field(description="The opponent the agent's rating rests on.")
    direction: Literal["up", "down"]
    mu: float
    sigma: float
    mu_without: float = Field(description="mu replayed without the matches against opponent.")
    sigma_without: float
    shift: float
    shift_sigmas: float
    games: int
    games_vs_opponent: int
    wins: int
    wins_vs_opponent: int


class CloneFlagPublic(BaseModel):
    role: str = Field(description="The role whose positions were compared.")
    earlier: FlaggedAgent = Field(description="The agent registered first.")
    later: FlaggedAgent = Field(description="The agent registered later: the likely copy.")
    agreement: float = Field(description="Share of positions where both pick the same best action "
                             "(actions within 1% of the best count as tied).")
    mean_kl: float = Field(description="Mean symmetric KL divergence of their action distributions (nats).")
    positions: int


class CloneLinkPublic(BaseModel):
    a: int = Field(description="Agent id.")
    b: int = Field(description="Agent id.")
    agreement: float
    mean_kl: float


class CloneFamilyPublic(BaseModel):
    role: str
    owner: str | None = Field(description="The owner of every member (null: the service's own agents).")
    members: list[FlaggedAgent] = Field(description="Oldest first.")
    links: list[CloneLinkPublic] = Field(description="The near-duplicate pairs that join them.")


class NotFingerprintedPublic(BaseModel):
    agent_id: int
    name: str
    error: str = Field(description="Why its policy could not be run on the positions.")


class ClonesPublic(BaseModel):
    env: str
    positions: dict[str, int] = Field(description="Positions fingerprinted per role.")
    min_agreement: float = Field(description="A pair is a near-duplicate at or above this agreement ...")
    max_kl: float = Field(description="... and at or below this mean KL.")
    fingerprinted: int = Field(description="Neural agents fingerprinted.")
    flags: list[CloneFlagPublic] = Field(description="Near-duplicates of different owners.")
    families: list[CloneFamilyPublic] = Field(description="Near-duplicates of one owner: its versions.")
    not_fingerprinted: list[NotFingerprintedPublic]
    pending: list[int] = Field(default_factory=list, description="Agents whose fingerprints are queued for the "
                               "background service (not compared yet; ask again later).")


class IntegrityPublic(BaseModel):
    env: str
    role: str
    matches: int = Field(description="Rated 1v1 matches examined.")
    alpha: float = Field(description="Family-wise significance of a pair flag.")
    pairs: list[PairFlagPublic]
    dependence: list[DependenceFlagPublic]
    clones: ClonesPublic = Field(description="Agents of different owners that play as one policy "
                                 "(clone fingerprints, docs/evaluation.md).")


class FamilyMemberPublic(BaseModel):
    agent_id: int
    name: str
    status: AgentStatus
    created_at: datetime
    this: bool = Field(description="The agent asked about.")
    agreement: float = Field(description="Its agreement with the agent asked about.")
    mean_kl: float = Field(description="Its mean symmetric KL divergence from it (nats).")


class FamilyPublic(BaseModel):
    agent_id: int
    env: str
    role: str | None = Field(description="The role fingerprinted (null: not a neural agent).")
    positions: int = Field(description="Positions of the fingerprint (0: none).")
    min_agreement: float
    max_kl: float
    members: list[FamilyMemberPublic] = Field(
        description="Its owner's agents that play as one policy with it, itself included, oldest first; "
        "empty when it has no such version.")
    status: Literal["ready", "pending", "failed"] = Field(
        description="ready: compared on every fingerprint; pending (HTTP 202): fingerprints are queued for the "
        "background service (its own, or some of its owner's agents' listed in `pending`), ask again later; "
        "failed: its policy could not be fingerprinted (`error` says why).")
    pending: list[int] = Field(default_factory=list, description="Agents whose fingerprints are queued.")
    error: str | None = Field(default=None, description="Why it has no fingerprint (status failed).")
