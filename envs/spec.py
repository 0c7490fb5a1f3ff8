"""EnvSpec: what Arena needs to know about a game beyond the PettingZoo API.

Seats are the PettingZoo agent names in a fixed order. Seats are grouped into
teams; every team has a role (``player`` for symmetric games, ``predator``/``prey``
for simple_tag, ``hider``/``seeker`` for hide-and-seek). One policy drives a whole
team, so a match is "one agent per team".

The outcome rule turns cumulative per-seat rewards into per-seat scores, per-team
scores and a winning team (or a draw). :class:`EnvEntry` adds where the env's constructor
and vectorized core live (import paths, loaded by :mod:`envs.registry`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

OutcomeRule = Literal["higher_score", "first_team_if_positive"]


@dataclass(frozen=True)
class EnvSpec:
    """Static description of a registered environment.

    Attributes:
        env_id: Versioned id, e.g. ``connect_four-v3``.
        seats: PettingZoo agent names in seat order.
        teams: Seat indices of each team; a two-player game has ``((0,), (1,))``.
        roles: Role name of each team (same length as ``teams``).
        num_actions: Size of the discrete action space (every seat).
        obs_shapes: Shape of each seat's observation array (seats of one team share it).
        api: ``"aec"`` (turn based) or ``"parallel"`` (simultaneous moves).
        outcome: How the winner follows from team scores. ``higher_score``: the team
            with the strictly highest summed reward wins, ties are draws.
            ``first_team_if_positive``: team 0 wins if its summed reward is > 0,
            otherwise team 1 wins (e.g. predators win if they tagged the prey).
        step_limit: Maximum number of agent actions in one match before it ends
            with termination ``step_limit``.
        kwargs: Keyword arguments passed to the env constructor.
        description: One line for listings.
    """

    env_id: str
    seats: tuple[str, ...]
    teams: tuple[tuple[int, ...], ...]
    roles: tuple[str, ...]
    num_actions: int
    obs_shapes: tuple[tuple[int, ...], ...]
    api: Literal["aec", "parallel"] = "aec"
    outcome: OutcomeRule = "higher_score"
    step_limit: int = 1000
    kwargs: dict = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        if len(self.teams) != len(self.roles):
            raise ValueError(f"{self.env_id}: {len(self.teams)} teams but {len(self.roles)} roles")
        if len(self.obs_shapes) != len(self.seats):
            raise ValueError(f"{self.env_id}: one observation shape per seat is required")
        covered = sorted(s for team in self.teams for s in team)
        if covered != list(range(len(self.seats))) or not all(self.teams):
            raise ValueError(
                f"{self.env_id}: teams must partition the seats: every seat index "
                f"0..{len(self.seats) - 1} in exactly one non-empty team, got {self.teams}"
            )
        for team in self.teams:
            if len({tuple(self.obs_shapes[s]) for s in team}) != 1:
                raise ValueError(
                    f"{self.env_id}: seats of one team must share an observation shape, "
                    f"team {team} has {[self.obs_shapes[s] for s in team]}"
                )
        if self.api not in ("aec", "parallel"):
            raise ValueError(f"{self.env_id}: api must be 'aec' or 'parallel', got {self.api!r}")
        if self.outcome not in ("higher_score", "first_team_if_positive"):
            raise ValueError(
                f"{self.env_id}: outcome must be 'higher_score' or 'first_team_if_positive', "
                f"got {self.outcome!r}"
            )
        if self.outcome == "first_team_if_positive" and len(self.teams) != 2:
            raise ValueError(
                f"{self.env_id}: outcome 'first_team_if_positive' needs exactly 2 teams"
            )

    def team_obs_shape(self, team: int) -> tuple[int, ...]:
        """Observation shape of the seats of ``team``."""
        return self.obs_shapes[self.teams[team][0]]

    def team_of_role(self, role: str) -> int:
        """Index of the team playing ``role``."""
        return self.roles.index(role)

    @property
    def symmetric(self) -> bool:
        """True when every team has the same role (any agent can take any seat)."""
        return len(set(self.roles)) == 1

    @property
    def num_seats(self) -> int:
        return len(self.seats)

    @property
    def num_teams(self) -> int:
        return len(self.teams)

    @property
    def seat_team(self) -> tuple[int, ...]:
        """Team index of each seat."""
        out = [0] * self.num_seats
        for t, team in enumerate(self.teams):
            for s in team:
                out[s] = t
        return tuple(out)

    def team_scores(self, seat_scores: np.ndarray) -> np.ndarray:
        """Sum per-seat scores into per-team scores; works on ``(..., seats)`` arrays."""
        seat_scores = np.asarray(seat_scores, dtype=np.float64)
        return np.stack([seat_scores[..., list(team)].sum(-1) for team in self.teams], -1)

    def winner(self, seat_scores: np.ndarray) -> np.ndarray:
        """Winning team per row (``-1`` for a draw) from per-seat scores ``(n, seats)``."""
        team = self.team_scores(np.atleast_2d(seat_scores))
        if self.outcome == "first_team_if_positive":
            return np.where(team[:, 0] > 0, 0, 1).astype(np.int64)
        best = team.max(axis=1, keepdims=True)
        is_best = team == best
        unique = is_best.sum(axis=1) == 1
        return np.where(unique, is_best.argmax(axis=1), -1).astype(np.int64)


@dataclass(frozen=True)
class EnvEntry:
    """A registered environment: its spec, constructor and optional vectorized core.

    Attributes:
        spec: What Arena knows about the game.
        entry_point: ``"pkg.module:factory"`` returning a PettingZoo AEC or parallel env.
        vector_core: ``"pkg.module:Class"`` of a vectorized core, or ``None``.
    """

    spec: EnvSpec
    entry_point: str
    vector_core: str | None = None
