"""How much to play and whom: the ladder scheduler, pure (no SQL, no clock, no Ray).

Matches go where the information is. :class:`LadderScheduler` looks at one env's
board (its active agents and their ratings) and returns a :class:`SchedulePlan`: the
line-ups of the next batch, or none and how long to wait. It is in one of three
phases:

``active``
    Some slot (an agent in a role) is *unsettled*: its sigma is above
    ``target_sigma`` (every new agent), or its rank range spans more than
    ``rank_span`` ranks while one more even match would still shrink its variance by
    at least ``min_relative_gain``. Batches of
    ``games_per_unsettled`` matches per unsettled slot (at most ``batch_size``) are
    chosen for expected information (:mod:`league.scheduling.lineups`), unsettled slots weighted
    1 and settled ones ``settled_need``, so newcomers get most of a batch.
``check``
    A burst of about ``check_games`` games per slot at full rate, after a retirement,
    at start-up, and every ``drift_every_s`` while settled. The next call judges it:
    if some rating moved more than ``drift_z`` standard deviations of what TrueSkill
    expected from those games (under the model the posterior mean is a martingale,
    its change has variance ``sigma_before^2 - sigma_after^2 + games * tau^2``), the
    board is not what the ratings say and another burst follows; otherwise settled.
``settled``
    A maintenance trickle of ``maintenance_rate`` matches per second, handed out in
    batches of ``maintenance_batch``; between them the plan says how long to wait.

A new agent makes the board ``active`` at once (it is unsettled); a retirement starts
a ``check``. The caller passes ``now`` (monotonic seconds) and should plan again after
the previous batch has been rated, so that a check is judged on its results.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from league.ratings.book import DEFAULT_TARGET_SIGMA, RatingBook
from league.ratings.information import expected_variance_reduction
from league.ratings.ranking import interval_bounds, rank_ranges
from league.ratings.rating import RatingEnv
from league.scheduling.lineups import SlotBoard, select_lineups

log = logging.getLogger(__name__)


class Phase(str, Enum):
    """What the scheduler is doing for a board (see the module docstring)."""

    ACTIVE = "active"
    CHECK = "check"
    SETTLED = "settled"


@dataclass(frozen=True)
class SchedulerConfig:
    """Knobs of the ladder scheduler (one per env).

    Attributes:
        target_sigma: A slot is unsettled while its sigma is above this.
        rank_span: Also unsettled while its rank range (from 95% intervals, within its
            role; :func:`league.ratings.ranking.rank_ranges`) spans more than this many ranks;
            ``None`` disables it. 4 aims at ranks known to +-2 with a rank to spare
            for the error of the estimated rank.
        min_relative_gain: ... but only while an even match would still cut its
            variance by this fraction (with TrueSkill's tau, sigma has a floor, and
            neighbours closer than it can never be told apart; this keeps the board
            from playing forever for them).
        settled_need: Weight of a settled slot's information relative to 1 for an
            unsettled one.
        batch_size: Most matches in one plan.
        games_per_unsettled: Matches per unsettled slot in an active batch.
        maintenance_rate: Matches per second once settled (the trickle); 0: none, a settled
            board plays only its drift checks.
        maintenance_batch: The trickle is handed out in batches of this many matches
            (also the smallest active batch).
        drift_every_s: Seconds between drift checks while settled.
        check_games: Games per slot in a check burst.
        drift_z: A check finds drift when some rating moved more than this many
            expected standard deviations.
    """

    target_sigma: float = DEFAULT_TARGET_SIGMA
    rank_span: int | None = 4
    min_relative_gain: float = 0.02
    settled_need: float = 0.05
    batch_size: int = 1024
    games_per_unsettled: int = 16
    maintenance_rate: float = 0.5
    maintenance_batch: int = 16
    drift_every_s: float = 1800.0
    check_games: int = 4
    drift_z: float = 4.0


@dataclass(frozen=True)
class SchedulePlan:
    """What to play now.

    Attributes:
        phase: The scheduler's phase after this call.
        lineups: Agent keys of every match to play, one per team, in team order.
        wait_s: With no line-ups: plan again after this many seconds (0 otherwise).
        reason: Why (for logs): "new agent", "retirement", "drift check", ...
    """

    phase: Phase
    lineups: list[tuple[str, ...]]
    wait_s: float
    reason: str


def unsettled_slots(board: SlotBoard, config: SchedulerConfig, *, env: RatingEnv) -> np.ndarray:
    """Boolean mask of the slots that still need measuring (see :class:`SchedulerConfig`)."""
    unsettled = board.sigma > config.target_sigma
    if config.rank_span is None:
        return unsettled
    drop, _ = expected_variance_reduction(board.mu, board.sigma, board.mu, board.sigma, env=env)
    improvable = drop > config.min_relative_gain * board.sigma**2
    for role in dict.fromkeys(board.roles):
        pool = board.pool(role)
        lo, hi = rank_ranges(*interval_bounds(board.mu[pool], board.sigma[pool]))
        unsettled[pool] |= (hi - lo + 1 > config.rank_span) & improvable[pool]
    return unsettled


def slot_board(agents: Sequence[str], roles: Sequence[str], book: RatingBook,
               plays: Mapping[str, str | None] | None = None) -> SlotBoard:
    """One slot per agent and distinct role it plays, with the book's ratings (need still 1).

    Args:
        plays: The one role an agent plays (a submitted hider plays only ``hider``);
            agents missing here or mapped to ``None`` play every role.
    """
    plays = plays or {}
    keys = [(a, r) for r in dict.fromkeys(roles) for a in agents if plays.get(a) in (None, r)]
    ratings = [book.rating(k) for k in keys]
    return SlotBoard(
        agents=[a for a, _ in keys], roles=[r for _, r in keys],
        mu=np.array([x.mu for x in ratings]), sigma=np.array([x.sigma for x in ratings]),
        need=np.ones(len(keys)),
    )


def information_lineups(
    agents: Sequence[str], team_roles: Sequence[str], book: RatingBook, n: int,
    rng: np.random.Generator, *, env: RatingEnv, config: SchedulerConfig,
    plays: Mapping[str, str | None] | None = None,
) -> list[tuple[str, ...]]:
    """``n`` line-ups for expected information, unsettled slots first.

    The batch-only half of :class:`LadderScheduler` (no phases, no pacing), for
    callers that fix the batch size themselves (benchmarks, challenges of many).

    Args:
        agents: Keys of the agents on the board.
        team_roles: The env's role of every team, in team order.
        book: Their ratings.
        n: Number of matches.
        rng: Source of randomness.
        env: The ladder's rating environment.
        config: Defines unsettled (``target_sigma``, ``rank_span``, ...).
        plays: The one role of agents that play only one (see :func:`slot_board`).
    """
    board = slot_board(sorted(set(agents)), team_roles, book, plays)
    board.need = np.where(unsettled_slots(board, config, env=env), 1.0, config.settled_need)
    return select_lineups(board, team_roles, n, rng, env=env)


class LadderScheduler:
    """Decides, call by call, how many matches a ladder plays and between whom.

    Args:
        team_roles: The env's role of every team, in team order
            (``("player", "player")``, ``("hider", "seeker")``).
        env: The ladder's rating environment.
        config: Knobs; the defaults suit a live ladder.
        seed: Seed of the line-up randomness.
    """

    def __init__(self, team_roles: Sequence[str], env: RatingEnv,
                 config: SchedulerConfig | None = None, seed: int = 0) -> None:
        if len(team_roles) < 2:
            raise ValueError("a rated match needs at least two teams")
        self.team_roles = tuple(team_roles)
        self.env = env
        self.config = config or SchedulerConfig()
        self.rng = np.random.default_rng(seed)
        self.phase = Phase.ACTIVE
        self._roster: frozenset[str] | None = None
        self._last_now: float | None = None
        self._credit = 0.0
        self._next_drift = math.inf
        self._baseline: dict[tuple[str, str], tuple[float, float, int]] | None = None

    def _min_agents(self) -> int:
        same_role = max(self.team_roles.count(r) for r in self.team_roles)
        return max(1, same_role)

    def _roster_event(self, roster: frozenset[str]) -> str | None:
        before, self._roster = self._roster, roster
        if before is None:
            return "start"
        if roster - before:
            return "new agent"
        if before - roster:
            return "retirement"
        return None

    def plan(self, agents: Sequence[str], book: RatingBook, now: float,
             plays: Mapping[str, str | None] | None = None) -> SchedulePlan:
        """The next batch for the board of ``agents`` (active agents of one env).

        Args:
            agents: Keys of the agents on the ladder now.
            book: Their ratings (missing ones read as the prior).
            now: Monotonic time in seconds (only differences matter).
            plays: The one role of agents that play only one (see :func:`slot_board`).
        """
        cfg = self.config
        elapsed = 0.0 if self._last_now is None else max(0.0, now - self._last_now)
        self._last_now = now
        event = self._roster_event(frozenset(agents))
        if len(set(agents)) < self._min_agents():
            return SchedulePlan(Phase.SETTLED, [], self._rest_s(), "not enough agents")
        board = slot_board(sorted(set(agents)), self.team_roles, book, plays)
        if any(board.pool(role).size == 0 for role in self.team_roles):
            return SchedulePlan(Phase.SETTLED, [], self._rest_s(), "a role has no agent")
        unsettled = unsettled_slots(board, cfg, env=self.env)
        board.need = np.where(unsettled, 1.0, cfg.settled_need)
        if unsettled.any():
            self.phase, self._baseline = Phase.ACTIVE, None
            n = min(cfg.batch_size, max(cfg.maintenance_batch, cfg.games_per_unsettled * int(unsettled.sum())))
            return self._batch(board, n, event or f"{int(unsettled.sum())} unsettled")
        if self.phase == Phase.ACTIVE and event is None:
            return self._settle(now, "every agent settled")
        if event in ("start", "retirement") or (self.phase == Phase.SETTLED and now >= self._next_drift):
            return self._check(board, book, event or "drift check")
        if self.phase == Phase.CHECK:
            drift = self._drift(board, book)
            if drift:
                return self._check(board, book, drift)
            return self._settle(now, "check found no drift")
        return self._trickle(board, elapsed, now)

    def _batch(self, board: SlotBoard, n: int, reason: str) -> SchedulePlan:
        lineups = select_lineups(board, self.team_roles, n, self.rng, env=self.env)
        return SchedulePlan(self.phase, lineups, 0.0, reason)

    def _rest_s(self) -> float:
        """How long to wait when there is nothing to play (with no trickle: a while)."""
        rate = self.config.maintenance_rate
        return 1.0 / rate if rate > 0 else 5.0

    def _settle(self, now: float, reason: str) -> SchedulePlan:
        cfg = self.config
        log.info("ladder settled (%s); %s", reason, f"maintenance at {cfg.maintenance_rate:.2f} matches/s"
                 if cfg.maintenance_rate > 0 else f"a drift check every {cfg.drift_every_s:.0f}s")
        self.phase, self._baseline, self._credit = Phase.SETTLED, None, 0.0
        self._next_drift = now + cfg.drift_every_s
        wait = cfg.maintenance_batch / cfg.maintenance_rate if cfg.maintenance_rate > 0 else cfg.drift_every_s
        return SchedulePlan(self.phase, [], wait, reason)

    def _check(self, board: SlotBoard, book: RatingBook, reason: str) -> SchedulePlan:
        log.info("ladder check burst: %s", reason)
        self.phase = Phase.CHECK
        self._baseline = {
            (a, r): (float(m), float(s), _games(book, (a, r)))
            for a, r, m, s in zip(board.agents, board.roles, board.mu, board.sigma)
        }
        games = self.config.check_games * len(board.agents) / len(self.team_roles)
        n = min(self.config.batch_size, max(self.config.maintenance_batch, math.ceil(games)))
        return self._batch(board, n, reason)

    def _drift(self, board: SlotBoard, book: RatingBook) -> str | None:
        """Why the last check burst says the board moved, or ``None`` if it did not."""
        tau_sq = self.env.tau**2
        worst, who = 0.0, ""
        for a, r, mu, sigma in zip(board.agents, board.roles, board.mu, board.sigma):
            before = (self._baseline or {}).get((a, r))
            played = 0 if before is None else _games(book, (a, r)) - before[2]
            if before is None or played <= 0:
                continue
            expected_var = max(before[1] ** 2 - sigma**2 + played * tau_sq, 1e-12)
            z = abs(mu - before[0]) / math.sqrt(expected_var)
            if z > worst:
                worst, who = z, f"{a} ({r})"
        return f"drift: {who} moved {worst:.1f} sd" if worst > self.config.drift_z else None

    def _trickle(self, board: SlotBoard, elapsed: float, now: float) -> SchedulePlan:
        cfg = self.config
        if cfg.maintenance_rate <= 0:  # no trickle: a settled board waits for its next drift check
            return SchedulePlan(Phase.SETTLED, [], max(0.0, self._next_drift - now), "settled")
        self._credit = min(self._credit + elapsed * cfg.maintenance_rate, float(cfg.maintenance_batch))
        if self._credit + 1e-9 >= cfg.maintenance_batch:
            self._credit -= cfg.maintenance_batch
            return self._batch(board, cfg.maintenance_batch, "maintenance")
        wait = (cfg.maintenance_batch - self._credit) / cfg.maintenance_rate
        return SchedulePlan(Phase.SETTLED, [], min(wait, max(0.0, self._next_drift - now)), "maintenance")


def _games(book: RatingBook, key: tuple[str, str]) -> int:
    found = book.standings.get(key)
    return 0 if found is None else found.games
