"""A competition's rules as values: its settings, its states, what may change once it opens,
the daily quota's window and Kaggle's merge rule. Pure: no SQL, no clock of its own.

States: ``draft -> open -> final -> finished``. An organizer opens a draft; the background
service moves an open competition to ``final`` at its deadline (the pool freezes) and to
``finished`` when the final evaluation is certified, spends its budget or reaches its end.

Once a competition has opened its settings are frozen, except the dates, which may only be
extended (never brought forward), and only before the deadline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from arena.core.errors import Conflict, InvalidParameter
from envs.registry import get_spec

SUBMISSION_PATHS = ("weights", "onnx", "connected")
"""How an entry may be submitted: safetensors weights, an ONNX model, a connected agent."""
DATE_FIELDS = ("opens_at", "deadline", "merge_deadline", "final_ends_at")


class CompetitionState(StrEnum):
    DRAFT = "draft"
    OPEN = "open"
    FINAL = "final"
    FINISHED = "finished"


def board_key(competition_id: int) -> str:
    """The season board's key (``matches.board``, ``board_ratings.board``)."""
    return f"competition:{competition_id}"


def final_board_key(competition_id: int) -> str:
    """The final evaluation's board key: its ratings restart from the prior."""
    return f"competition:{competition_id}:final"


@dataclass(frozen=True)
class CompetitionSettings:
    """Everything an organizer sets (frozen once open, but for extending the dates).

    Attributes:
        env_id, role: The env and the role entries play (``None``: the env's one role).
        final_ends_at: When the final evaluation stops at the latest; ``None``: when
            certified or when ``final_match_budget`` matches have been played.
        daily_submissions: Submissions per team per UTC day.
        active_entries: A team's latest submissions that play and count (Kaggle: 2).
        team_size: Most members of a team.
        merge_deadline: Teams may merge until then (default: the deadline).
        allowed_paths: Of :data:`SUBMISSION_PATHS`.
        top_k, confidence, tie_margin, final_floor: The certification's K, level, tie
            margin and the games every entry plays first.
    """

    env_id: str
    title: str
    opens_at: datetime
    deadline: datetime
    role: str | None = None
    rules_md: str = ""
    final_ends_at: datetime | None = None
    final_match_budget: int = 20_000
    daily_submissions: int = 5
    active_entries: int = 2
    team_size: int = 5
    merge_deadline: datetime | None = None
    allowed_paths: tuple[str, ...] = ("weights", "onnx")
    top_k: int = 10
    confidence: float = 0.95
    tie_margin: float = 0.03
    final_floor: int = 20
    is_public: bool = True
    reference_agents: tuple[str, ...] = field(default_factory=tuple)
    divisions: tuple[tuple[str, str | None], ...] | None = None
    """Divisions with bosses, bottom to top: ``(name, boss)``, the boss a reference agent (its
    builtin name or agent id), ``None`` for the top (:mod:`league.competitions.divisions`)."""

    def checked(self) -> CompetitionSettings:
        """These settings with the merge deadline filled in; raises what to fix.

        Raises:
            InvalidParameter: Dates out of order, a count out of range, an unknown path.
        """
        for name in DATE_FIELDS:
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise InvalidParameter(f"{name} must carry a time zone (e.g. 2026-12-01T00:00:00Z)")
        merge = self.merge_deadline or self.deadline
        if not self.opens_at < self.deadline:
            raise InvalidParameter("deadline must be after opens_at")
        if not self.opens_at <= merge <= self.deadline:
            raise InvalidParameter("merge_deadline must lie between opens_at and the deadline")
        if self.final_ends_at is not None and self.final_ends_at <= self.deadline:
            raise InvalidParameter("final_ends_at must be after the deadline (or null: until certified)")
        if self.divisions is not None:
            bosses = [boss for _, boss in self.divisions]
            if len(self.divisions) < 2 or None in bosses[:-1] or bosses[-1] is not None:
                raise InvalidParameter("divisions: at least two, bottom to top; every one but the top has a boss "
                                       "(a reference agent), the top none")
            if len(set(bosses[:-1])) != len(bosses) - 1 or not set(bosses[:-1]) <= set(self.reference_agents):
                raise InvalidParameter("divisions: each boss must be a different one of the reference agents")
        unknown = sorted(set(self.allowed_paths) - set(SUBMISSION_PATHS))
        if unknown or not self.allowed_paths:
            raise InvalidParameter(f"allowed_paths must be a non-empty subset of {', '.join(SUBMISSION_PATHS)}; "
                                   f"got {', '.join(self.allowed_paths) or 'none'}")
        return replace(self, merge_deadline=merge, allowed_paths=tuple(dict.fromkeys(self.allowed_paths)))


def changed_dates(stored: dict[str, Any], wanted: dict[str, Any], state: str, now: datetime) -> dict[str, Any]:
    """The updates allowed to a competition in ``state`` (``wanted``: field -> new value).

    A draft may change anything (the caller re-checks the whole settings); an open one
    only its dates, only later than they are, and only before its deadline.

    Raises:
        Conflict: A setting other than a date, a date brought forward, or past the deadline.
    """
    if state == CompetitionState.DRAFT:
        return wanted
    if state != CompetitionState.OPEN or now >= stored["deadline"]:
        raise Conflict("the competition's settings are frozen: it is past its deadline "
                       f"(state {state}); nothing can change now")
    frozen = sorted(k for k in wanted if k not in DATE_FIELDS and wanted[k] != stored.get(k))
    if frozen:
        raise Conflict(f"the competition is open: its settings are frozen ({', '.join(frozen)}); "
                       "only the dates may be extended, before the deadline")
    for name, value in wanted.items():
        before = stored.get(name)
        if name == "final_ends_at" and (before is None) != (value is None):
            raise Conflict("final_ends_at cannot switch between a date and 'until certified' once open")
        if before is not None and value is not None and value < before:
            raise Conflict(f"{name} may only be extended once the competition is open "
                           f"(now {before.isoformat()}, asked {value.isoformat()})")
    return wanted


def utc_day(now: datetime) -> tuple[datetime, datetime]:
    """The UTC day ``now`` falls in: ``(start, end)`` (the daily quota's window)."""
    start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return start, start + timedelta(days=1)


def days_running(opens_at: datetime, now: datetime) -> int:
    """UTC days the competition has been open at ``now``, today included (at least 1)."""
    return max(1, (utc_day(now)[0] - utc_day(opens_at)[0]).days + 1)


def merge_allowance(daily_submissions: int, opens_at: datetime, now: datetime) -> int:
    """Kaggle's merge rule: a merged team may have made at most this many submissions in all
    (the daily limit summed over every day the competition has run, today included)."""
    return daily_submissions * days_running(opens_at, now)


def retry_after_s(now: datetime) -> int:
    """Seconds until the next UTC day (when the daily quota resets)."""
    return max(1, math.ceil((utc_day(now)[1] - now).total_seconds()))


def is_two_player(env_id: str) -> bool:
    """Whether the final evaluation's certification applies: two teams of one seat (a 1v1 game)."""
    spec = get_spec(env_id)
    return len(spec.teams) == 2 and all(len(team) == 1 for team in spec.teams)

