"""How much a live ladder plays and between whom: :mod:`league.scheduling.scheduler` on the service clock.

Two pieces, kept apart from the dispatch loop so that either can change alone:

* :func:`choose_lineups` is the ladder's pair-choice hook: every batch
  :class:`~arena.ladder.dispatch.Ladder` schedules without being told whom to pair is
  chosen here, for expected information (unsettled agents first, then the pairs whose
  result would shrink the ratings' uncertainty most; :mod:`league.scheduling.lineups`).
* :class:`LadderPacer` decides, round by round and env by env, *how many* matches to
  play: a board with new or unsettled agents plays at full rate; a **settled** board
  plays only a maintenance trickle (``ARENA_TRICKLE_MATCHES_PER_S`` per env; default 0:
  none, only its drift checks) until something changes.

A board is **settled** when every active agent in every role has ``sigma`` at most
``DEFAULT_TARGET_SIGMA`` (1.5) *and* a rank range (from 95% intervals, within its role)
spanning at most 4 ranks, or a range that one more even match could no longer shrink by
2% of its variance (neighbours closer than TrueSkill's noise floor can never be told
apart; see :class:`league.scheduling.scheduler.SchedulerConfig`). A settled board wakes up to full
rate when an agent joins (it is unsettled); a retirement, the service's start and a
periodic drift check (every ``drift_every_s``) each play a short check burst that
settles again unless some rating moved more than TrueSkill expected.

``ARENA_LADDER_SETTLE=false`` restores the old behaviour: play flat out, forever.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from arena.core.settings import Settings
from league.ratings.book import RatingBook
from league.ratings.rating import RatingEnv
from league.scheduling.scheduler import LadderScheduler, Phase, SchedulePlan, SchedulerConfig, information_lineups

LIVE = SchedulerConfig()
"""What counts as unsettled on a live ladder (the scheduler's defaults)."""


def choose_lineups(agents: Sequence[str], team_roles: Sequence[str], book: RatingBook, n: int,
                   rng: np.random.Generator, *, env: RatingEnv,
                   plays: Mapping[str, str | None] | None = None) -> list[tuple[str, ...]]:
    """``n`` line-ups (one agent key per team, in team order) chosen for expected information.

    Args:
        agents: Keys of the agents on the ladder.
        team_roles: The env's role of every team.
        book: Their ratings.
        n: Number of matches.
        rng: Source of randomness.
        env: The ladder's rating environment.
        plays: The one role each agent plays (missing or ``None``: every role).
    """
    return information_lineups(agents, team_roles, book, n, rng, env=env, config=LIVE, plays=plays)


@dataclass(frozen=True)
class PacingConfig:
    """Knobs of the pacing (from the settings; see the module docstring).

    Attributes:
        trickle_matches_per_s: Matches per second per env once its board has settled (0:
            none; a settled board plays only its drift checks).
        settle: ``False`` plays flat out forever (no settling, no trickle).
        batch_size: Most matches in one round of one env.
        trickle_batch: The trickle is played in batches of this many matches (fewer
            writes than one match at a time).
        drift_every_s: Seconds between drift checks of a settled board.
    """

    trickle_matches_per_s: float = 0.0
    settle: bool = True
    batch_size: int = 1024
    trickle_batch: int = 16
    drift_every_s: float = 1800.0

    def scheduler_config(self) -> SchedulerConfig:
        """The :class:`SchedulerConfig` of every env's scheduler."""
        return SchedulerConfig(
            batch_size=self.batch_size, maintenance_rate=self.trickle_matches_per_s,
            maintenance_batch=min(self.trickle_batch, self.batch_size), drift_every_s=self.drift_every_s,
        )


class LadderPacer:
    """One :class:`~league.scheduling.scheduler.LadderScheduler` per env, asked once per service round.

    Args:
        config: The pacing knobs.
        seed: Seed of the line-up randomness (each env derives its own).
    """

    def __init__(self, config: PacingConfig | None = None, seed: int = 0) -> None:
        self.config = config or PacingConfig()
        self.seed = seed
        self._schedulers: dict[str, LadderScheduler] = {}
        self._flat_rng = np.random.default_rng(seed)

    def phase(self, env_id: str) -> Phase | None:
        """The env's phase now (``None`` before its first plan)."""
        found = self._schedulers.get(env_id)
        return None if found is None else found.phase

    def plan(self, env_id: str, team_roles: Sequence[str], agents: Sequence[str], book: RatingBook,
             env: RatingEnv, now: float, plays: Mapping[str, str | None] | None = None) -> SchedulePlan:
        """What ``env_id``'s ladder plays this round (no line-ups: nothing, wait ``wait_s``).

        Args:
            env_id: The env.
            team_roles: Its role of every team.
            agents: Keys of its active agents now.
            book: Their ratings, after every batch recorded so far.
            env: The ladder's rating environment.
            now: Monotonic seconds.
            plays: The one role each agent plays (missing or ``None``: every role).
        """
        if not self.config.settle:
            lineups = choose_lineups(agents, team_roles, book, self.config.batch_size, self._flat_rng, env=env,
                                     plays=plays)
            return SchedulePlan(Phase.ACTIVE, lineups, 0.0, "flat out (ARENA_LADDER_SETTLE=false)")
        scheduler = self._schedulers.get(env_id)
        if scheduler is None:
            seed = int(np.random.SeedSequence([self.seed, len(self._schedulers)]).generate_state(1)[0])
            scheduler = LadderScheduler(team_roles, env, self.config.scheduler_config(), seed=seed)
            self._schedulers[env_id] = scheduler
        return scheduler.plan(agents, book, now, plays=plays)


def pacing_from_settings(settings: Settings) -> PacingConfig:
    """The pacing the ``ARENA_*`` settings ask for."""
    return PacingConfig(trickle_matches_per_s=settings.trickle_matches_per_s, settle=settings.ladder_settle)
