"""A league trained outside Arena: the state behind the league API (``/api/v1/leagues``).

A trainer running anywhere (SB3, CleanRL, your own loop) joins a league through
:class:`arena.client.league.LeagueClient`: it asks for opponents, plays them where it
trains, reports the results, and pushes snapshots, which are registered like submissions
(validated, rated on the ladder) and join the league's pool. Everything a restarted
trainer needs to go on is kept by the server, in the ``config`` JSON of the league's
``leagues`` row (no table of its own): the owner, the role constants, every learner (its
AlphaStar role, its decayed win-rate table, its game counts and generation), the
league's snapshots, and the ids of the latest reports (a report sent twice counts once).

Opponents are drawn by :func:`league.scheduling.outside_draws.opponent_draws` (pure:
PFSP in the learner's AlphaStar role over ``self``, the league's snapshots and the board);
:meth:`OutsideLeague.distribution` hands it the learner's table and the snapshots still
playing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from arena.core.errors import Conflict, InvalidParameter
from league.results import Record
from league.scheduling.matchmaking import WinRateTable
from league.scheduling.outside_draws import Candidate, Draw, PastPlayer, opponent_draws
from league.scheduling.roles import ROLES, SELF, RoleConfig, check_role

__all__ = ["LeagueSnapshot", "Learner", "OutsideLeague", "league_row_name"]

KIND = "outside"
"""``config["kind"]`` of a league trained through the league API."""
LEAGUE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
LEARNER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,15}$")
RECENT_REPORTS = 256
"""Report ids remembered, so a report retried after a lost answer counts once."""


def league_row_name(name: str, env_id: str) -> str:
    """The ``leagues.name`` (and snapshot pool) of outside league ``name`` on ``env_id``.

    Raises:
        InvalidParameter: ``name`` is not 1-32 letters, digits, ``_`` or ``-``.
    """
    if not isinstance(name, str) or not LEAGUE_NAME.match(name):
        raise InvalidParameter(f"league name {str(name)[:40]!r} must be 1-32 letters, digits, '_' or '-' "
                               "(starting with a letter or digit)")
    return f"outside.{name}.{env_id}"


@dataclass
class Learner(Record):
    """One learner of the league: its role, and what it has played."""

    role: str
    table: WinRateTable
    generation: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "table": self.table.to_json(), "games": self.games, "wins": self.wins,
                "draws": self.draws, "losses": self.losses, "generation": self.generation}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Learner:
        return cls(data["role"], WinRateTable.from_json(data["table"]), int(data["generation"]),
                   games=int(data["games"]), wins=int(data["wins"]), draws=int(data["draws"]),
                   losses=int(data["losses"]))


@dataclass(frozen=True)
class LeagueSnapshot:
    """A snapshot pushed into the league: a neural agent of the env."""

    agent_id: int
    sha256: str
    learner: str
    role: str
    generation: int


@dataclass
class OutsideLeague:
    """The state of one outside league (its ``leagues.config``)."""

    owner_id: int
    owner: str
    role_config: RoleConfig = field(default_factory=lambda: RoleConfig(baseline_share=0.5))
    board_top: int = 8
    decay: float = 0.99
    learners: dict[str, Learner] = field(default_factory=dict)
    snapshots: list[LeagueSnapshot] = field(default_factory=list)
    reports: list[str] = field(default_factory=list)

    def to_config(self) -> dict[str, Any]:
        """The JSON stored as the league's config."""
        return {"kind": KIND, "owner_id": self.owner_id, "owner": self.owner,
                "self_play": self.role_config.self_play, "baseline_share": self.role_config.baseline_share,
                "board_top": self.board_top, "decay": self.decay,
                "learners": {name: lr.to_json() for name, lr in self.learners.items()},
                "snapshots": [vars(s) for s in self.snapshots], "reports": list(self.reports)}

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> OutsideLeague | None:
        """The league stored in ``config``; ``None`` for a league Arena trains itself."""
        if config.get("kind") != KIND:
            return None
        return cls(int(config["owner_id"]), str(config["owner"]),
                   RoleConfig(self_play=float(config["self_play"]), baseline_share=float(config["baseline_share"])),
                   int(config["board_top"]), float(config["decay"]),
                   {name: Learner.from_json(lr) for name, lr in config["learners"].items()},
                   [LeagueSnapshot(**s) for s in config["snapshots"]], list(config["reports"]))

    # -- learners ----------------------------------------------------------------------
    def learner(self, name: str, role: str | None = None, *, create: bool = False) -> Learner:
        """Learner ``name`` (a fresh one, not stored unless ``create``, if it is new).

        A new learner's role is ``role``, else its name when that is a role, else ``main``.

        Raises:
            InvalidParameter: A malformed name or an unknown role.
            Conflict: ``role`` differs from the role the learner has.
        """
        if not isinstance(name, str) or not LEARNER_NAME.match(name):
            raise InvalidParameter(f"learner name {str(name)[:40]!r} must be 1-16 letters, digits, '_' or '-'")
        if role is not None and role not in ROLES:
            raise InvalidParameter(f"unknown league role {role[:40]!r}; use one of {', '.join(ROLES)}")
        found = self.learners.get(name)
        if found is not None:
            if role is not None and role != found.role:
                raise Conflict(f"learner {name!r} plays the role {found.role}, not {role}; "
                               "name another learner for another role")
            return found
        made = Learner(role or (name if name in ROLES else "main"), WinRateTable(self.decay))
        if create:
            self.learners[name] = made
        return made

    def record(self, learner: str, role: str | None, results: Iterable[tuple[str, int, int, int]],
               report_id: str | None = None) -> bool:
        """Book a trainer's results ``(opponent id, wins, draws, losses)`` for ``learner``.

        Results against ``self`` count in the learner's totals only (self-play reads 0.5).

        Returns:
            ``False`` if ``report_id`` was booked before (nothing changes), else ``True``.
        """
        if report_id is not None and report_id in self.reports:
            return False
        booked = self.learner(learner, role, create=True)
        for opponent, wins, draws, losses in results:
            games = wins + draws + losses
            booked.games += games
            booked.wins, booked.draws, booked.losses = booked.wins + wins, booked.draws + draws, booked.losses + losses
            if opponent != SELF:
                booked.table.record_many(opponent, games, wins + 0.5 * draws)
        if report_id is not None:
            self.reports = [*self.reports, report_id][-RECENT_REPORTS:]
        return True

    # -- snapshots ---------------------------------------------------------------------
    def parent(self, learner: str) -> str | None:
        """The sha256 of ``learner``'s latest snapshot (a new one's parent)."""
        return next((s.sha256 for s in reversed(self.snapshots) if s.learner == learner), None)

    def add_snapshot(self, learner: str, role: str | None, agent_id: int, sha256: str) -> LeagueSnapshot:
        """Add agent ``agent_id`` as ``learner``'s next generation (once: a retried push finds it)."""
        found = next((s for s in self.snapshots if s.agent_id == agent_id), None)
        if found is not None:
            return found
        booked = self.learner(learner, role, create=True)
        booked.generation += 1
        snapshot = LeagueSnapshot(agent_id, sha256, learner, booked.role, booked.generation)
        self.snapshots.append(snapshot)
        return snapshot

    # -- opponents ---------------------------------------------------------------------
    def distribution(self, learner: str, role: str | None, baselines: Sequence[Candidate],
                     board: Sequence[Candidate], snapshot_names: Mapping[int, str]
                     ) -> list[Draw]:
        """Every opponent ``learner`` may draw (:func:`~league.scheduling.outside_draws.opponent_draws`).

        Args:
            learner: The learner (new learners start with an empty table).
            role: Its role (checked against the stored one).
            baselines: The env's scripted agents on the board.
            board: The downloadable neural agents of the board (the league's own left out here).
            snapshot_names: Display names of the league's snapshots still playing (the
                others, rejected or retired, are not drawn).

        Raises:
            Conflict: A main exploiter with no main snapshot to exploit yet.
        """
        me = self.learner(learner, role)
        playing = [PastPlayer(Candidate(str(s.agent_id), "snapshot", s.agent_id, None, snapshot_names[s.agent_id]),
                              s.learner, s.role) for s in self.snapshots if s.agent_id in snapshot_names]
        try:
            return opponent_draws(learner, check_role(me.role), me.table, playing, baselines, board,
                                  self.role_config)
        except ValueError as exc:
            raise Conflict(f"learner {learner!r} ({me.role}) has no opponents yet: {exc}; push a snapshot "
                           "of a main learner first") from None
