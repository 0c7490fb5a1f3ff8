"""The competitions' boards on the background service: the season's, then the final evaluation's.

A competition's board is a ladder of its own (:class:`~arena.ladder.dispatch.Ladder` with
``board = competition:<id>``): the same scheduler (the service's one
:class:`~arena.ladder.pacing.LadderPacer`, keyed by the board: unsettled agents first,
settled boards quiet), the same persisted queue (its own lane, so a restart resumes its
matches and nobody else's), the same recorder (exactly once, ratings in the same
transaction, into ``board_ratings``) and the same rebuild. Its pool is the competition's
active entries that passed validation and its reference agents; the env's public board
never sees these matches (they are stored ``rated = false`` with their board).

After a batch, entries move up the competition's divisions (if it has any) when their rating's
lower bound passes their division's boss (:func:`promote`). Each round also moves competitions
along: an open one past its deadline freezes its pool and enters the final evaluation
(:mod:`arena.competitions.final`), which plays until certified.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

from arena.competitions import final
from arena.competitions.rules import CompetitionState, board_key
from arena.core.agent_status import ACTIVE
from arena.ladder.dispatch import CONNECTED_KINDS, Ladder, LadderConfig, agent_source, open_ladder
from arena.ladder.lane import ConnectedLane
from arena.ladder.pacing import LadderPacer
from arena.runners import MatchRunner
from arena.storage.db import repositories as repo
from arena.storage.db.base import utcnow
from arena.storage.db.repositories import competitions as comp_repo
from arena.storage.wiring import Services
from league.competitions.divisions import Division, place
from league.ratings.rating import Rating

log = logging.getLogger(__name__)


class CompetitionBoards:
    """Plays every open competition's season board and every final evaluation, one batch a round.

    Args:
        services: The service's database and pool.
        runner: Where batches are played (the service's runner).
        pacer: The service's pacer (one scheduler per board key, beside the env boards').
        batch_size: Most matches per batch.
        stop: True once the service stops (nothing more is dispatched).
        clock: Monotonic seconds (the pacer's clock); ``now``: the wall clock deadlines are read on.
    """

    def __init__(self, services: Services, runner: MatchRunner, pacer: LadderPacer, *, batch_size: int = 256,
                 stop: Callable[[], bool] = lambda: False, clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = utcnow, lane: ConnectedLane | None = None,
                 online: Callable[[list[repo.AgentInfo]], list[repo.AgentInfo]] | None = None) -> None:
        self.services, self.runner, self.pacer = services, runner, pacer
        self.batch_size, self.stop, self.clock, self.now = batch_size, stop, clock, now
        self.lane, self.online = lane, online
        self.ladders: dict[str, Ladder] = {}
        self.finals = final.FinalEvaluations(services, runner, batch_size=batch_size, stop=stop, now=now, lane=lane)

    def round(self) -> int:
        """One batch per open competition and per final evaluation; returns matches recorded."""
        with self.services.sessions() as session:
            running = comp_repo.competitions_in(session, (CompetitionState.OPEN, CompetitionState.FINAL))
        played = 0
        for competition in running:
            if self.stop():
                break
            if competition.state == CompetitionState.OPEN and self.now() >= competition.deadline:
                final.start_final(self.services.sessions, competition.id, self.now())
                continue
            if competition.state == CompetitionState.OPEN:
                refresh_active(self.services, competition)
                played += self.season_round(competition)
            else:
                played += self.finals.round(competition)
        return played

    def season_round(self, competition: comp_repo.CompetitionInfo) -> int:
        """One batch of the season board: the pacer's line-ups over its pool; matches recorded."""
        board = board_key(competition.id)
        with self.services.sessions() as session:
            entries = [e.agent_id for e in comp_repo.entries(session, competition.id, active=True)]
            pool = repo.get_agents(session, entries + comp_repo.references(session, competition.id))
        agents = [a for a in pool.values() if a.status in ACTIVE]
        # Connected entries play while their client is online, in the connected lane (without one: never).
        agents = (self.online(agents) if self.online is not None and self.lane is not None
                  else [a for a in agents if a.kind not in CONNECTED_KINDS])
        if len(agents) < 2:
            return 0
        ladder = self.ladders.get(board)
        if ladder is None:
            config = LadderConfig(competition.env_id, batch_size=self.batch_size, seed=competition.seed,
                                  lane=board, board=board)
            ladder = self.ladders[board] = open_ladder(self.services.sessions, config)
            if self.lane is not None:  # what a previous service left queued in the board's connected lane
                self.lane.play_ladder(config, [agent_source(a) for a in agents], [], self.stop)
        if self.lane is not None and self.lane.take_recorded(board):
            ladder.reload_ratings()
        ladder.sync_agents([agent_source(a) for a in agents])
        if ladder.missing_roles():
            return 0
        plan = self.pacer.plan(board, ladder.spec.roles, sorted(ladder.sources), ladder.book, ladder.env,
                               self.clock(), plays=ladder.plays)
        lineups = plan.lineups[:self.batch_size]
        lineups = final.split_connected(self.lane, ladder, [a for a in agents if a.kind in CONNECTED_KINDS], lineups,
                                  self.stop)
        if not lineups:
            return 0
        recorded = ladder.run(self.runner, len(lineups), stop=self.stop, lineups=lineups).recorded
        if recorded and competition.divisions:
            promote(self.services, competition)
        return recorded


def refresh_active(services: Services, competition: comp_repo.CompetitionInfo) -> dict[int, bool]:
    """A team's latest ``active_entries`` that count: a rejected (or retired) agent gives its place back
    to the team's next latest entry. Read first, written only when a flag changed."""
    with services.sessions() as session:
        if not comp_repo.active_changes(session, competition.id, competition.active_entries):
            return {}

    def write(session) -> dict[int, bool]:
        changes = comp_repo.active_changes(session, competition.id, competition.active_entries)
        comp_repo.set_active(session, changes)
        return changes

    return services.sessions.write_transaction(write, what=f"refreshing competition {competition.id}'s entries")


def promote(services: Services, competition: comp_repo.CompetitionInfo) -> dict[int, int]:
    """Move the season's active entries up the divisions their ratings earned
    (:func:`league.competitions.divisions.place`: past a boss's ``mu`` by 3 sigma; never down);
    returns the moves (agent id -> division index)."""
    divisions = [Division(d["name"], d["boss"]) for d in competition.divisions or []]
    board = board_key(competition.id)

    def move(session) -> dict[int, int]:
        entries = comp_repo.entries(session, competition.id, active=True)
        bosses = [d.boss for d in divisions if d.boss is not None]
        stored = comp_repo.load_board_ratings(session, board, [e.agent_id for e in entries] + bosses)
        ratings = {agent_id: Rating(r.mu, r.sigma) for (agent_id, _), r in stored.items()}
        current = {e.agent_id: e.division for e in entries}
        placed = place(divisions, ratings, current)
        moved = {a: d for a, d in placed.items() if a in current and d != current[a]}
        comp_repo.set_divisions(session, competition.id, moved)
        return moved

    if not divisions:
        return {}
    return services.sessions.write_transaction(move, what=f"placing competition {competition.id}'s divisions")

