"""Request and response bodies of people's games (``POST /agents/{id}/play``) and the humans boards.

Kept apart from :mod:`arena.api.schemas` (same naming: ``XCreate`` in, ``XPublic`` out);
the games themselves are :mod:`arena.ladder.people`, the boards :mod:`arena.read.humans`.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from arena.read.ratings import RatingRecord


class PlayCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seat: int | None = Field(default=None, ge=0, le=1,
                             description="Your seat: 0 moves first, 1 second; null: drawn at random.")


class PlayPublic(BaseModel):
    match_id: str = Field(description="The match's id; its replay is /matches/{match_id} once it ends.")
    human_agent_id: int = Field(description="The agent you play as (yours when signed in, else a guest's).")
    seat: int = Field(description="Your seat (0 moves first).")
    play_token: str = Field(description="Send it as 'token' in the WebSocket's hello; it plays only "
                            "human_agent_id, until the match ends (an hour at most).")
    ws_path: str = Field(description="The WebSocket to connect to (connected-agent protocol v1).")


class HumanRow(RatingRecord):
    rank: int
    user_id: int
    name: str
    agent_id: int = Field(description="The person's human agent of this env.")
    ci_low: float
    ci_high: float
    last_match_at: datetime | None


class HumansPublic(BaseModel):
    env: str
    count: int = Field(description="People on the board.")
    data: list[HumanRow]
