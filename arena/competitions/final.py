"""The final evaluation driver: frozen pool, ratings from the prior, batches until certified.

At the deadline (:func:`start_final`, one transaction under the competition's row lock)
every team's active entries that passed validation are frozen: the pool, whatever happens
to those agents later. Each round (:meth:`FinalEvaluations.round`) then

1. reads the final board's matches from the match log in ``seq`` order and folds them
   into :class:`league.competitions.certification.FinalEvaluation` (TrueSkill from the prior,
   no drift; the seat-balanced head-to-head units; the anytime-valid bounds);
2. stops, freezing the standings and the certificate into the competition row, when it is
   certified, when ``final_match_budget`` matches are recorded, or at ``final_ends_at``;
3. else plays the next batch from :func:`league.competitions.final_schedule.final_pairings`
   (the floor first, then the open pairs) through the ladder's dispatch and recorder on the
   board ``competition:<id>:final`` (its own lane of the persisted queue).

Nothing is kept in memory between rounds: the state is the match log and the competition
row, so a service killed mid-batch resumes where it was (the queued batch is replayed with
the same ids and seeds, each match recorded once), and the schedule's randomness is seeded
by the competition's seed and the number of matches recorded. :func:`recompute` derives the
certificate the same way from the log, for ``arena competition verify``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from arena.competitions.rules import CompetitionState, final_board_key
from arena.core.agent_status import ACTIVE
from arena.ladder.dispatch import CONNECTED_KINDS, Ladder, LadderConfig, agent_source
from arena.ladder.lane import ConnectedLane
from arena.runners import MatchRunner
from arena.storage.db import Sessions
from arena.storage.db import repositories as repo
from arena.storage.db.base import utcnow
from arena.storage.db.repositories import competitions as comp_repo
from arena.storage.wiring import Services
from league.competitions.certification import (
    FINAL_RATING_ENV,
    Certificate,
    CertificationConfig,
    FinalEvaluation,
)
from league.competitions.final_schedule import final_pairings
from league.evaluation.headtohead import Game
from league.ratings.rating import RatingEnv

log = logging.getLogger(__name__)

FINAL_SEED_SALT = 0xF1_4A1
"""Mixed into the competition's seed so the final's match seeds never repeat the season's."""


def certification_config(competition: comp_repo.CompetitionInfo) -> CertificationConfig:
    return CertificationConfig(top_k=competition.top_k, confidence=competition.confidence,
                               tie_margin=competition.tie_margin, floor=competition.final_floor)


def start_final(sessions: Sessions, competition_id: int, now: datetime) -> bool:
    """``open -> final`` once past the deadline: freeze the pool; ``False`` if it was not due (or done)."""
    def start(session) -> bool:
        competition = comp_repo.get_competition(session, competition_id, lock=True)
        if competition is None or competition.state != CompetitionState.OPEN or now < competition.deadline:
            return False
        comp_repo.set_active(session, comp_repo.active_changes(session, competition_id, competition.active_entries))
        active = comp_repo.entries(session, competition_id, active=True)
        agents = repo.get_agents(session, [e.agent_id for e in active])
        pool = [e.agent_id for e in active if e.agent_id in agents and agents[e.agent_id].status in ACTIVE]
        comp_repo.freeze_entries(session, competition_id, pool)
        comp_repo.update_competition(session, competition_id, {"state": CompetitionState.FINAL.value,
                                                               "final_started_at": now})
        log.info("competition %d: the final evaluation starts with %d entries", competition_id, len(pool))
        return True

    return sessions.write_transaction(start, what=f"freezing competition {competition_id}'s pool")


def games_of(matches: Iterable[repo.StoredMatch], ids: dict[str, int]) -> list[Game]:
    """The final evaluation's games (agent ids by seat, seat 0's score) from its matches in log order."""
    return [Game(ids[m.seats[0]], ids[m.seats[1]], 0.5 if m.winner is None else (1.0 if m.winner == 0 else 0.0))
            for m in matches]


def evaluation_of(session, competition: comp_repo.CompetitionInfo) -> tuple[FinalEvaluation, int, dict]:
    """``(evaluation, matches recorded, agents by id)`` of the final board, from the match log."""
    pool = [e.agent_id for e in comp_repo.entries(session, competition.id, frozen=True)]
    agents = repo.get_agents(session, pool)
    evaluation = FinalEvaluation(pool, certification_config(competition), FINAL_RATING_ENV)
    matches = list(repo.iter_matches(session, env_id=competition.env_id, board=final_board_key(competition.id)))
    evaluation.add(games_of(matches, {a.key: a.id for a in agents.values()}))
    return evaluation, len(matches), agents


def published(certificate: Certificate, matches: int, reason: str) -> dict[str, Any]:
    """What a finished competition publishes: the certificate (entries by agent id), the match
    count and why it stopped, as the JSON it is stored as (so a recomputation compares equal)."""
    return json.loads(json.dumps({**certificate.to_json(), "matches": matches, "stopped": reason}, allow_nan=False))


def recompute(entries: Sequence[int], games: Iterable[Game], config: CertificationConfig) -> Certificate:
    """The certificate from the pool (in entry order) and the final games in log order (the verifier's)."""
    evaluation = FinalEvaluation(list(entries), config, FINAL_RATING_ENV)
    evaluation.add(games)
    return evaluation.certificate()


class FinalEvaluations:
    """Plays the final evaluations, one batch per competition per round (module doc)."""

    def __init__(self, services: Services, runner: MatchRunner, *, batch_size: int = 256,
                 stop: Callable[[], bool] = lambda: False, now: Callable[[], datetime] = utcnow,
                 lane: ConnectedLane | None = None) -> None:
        self.services, self.runner, self.batch_size, self.stop, self.now = services, runner, batch_size, stop, now
        self.lane = lane

    def round(self, competition: comp_repo.CompetitionInfo) -> int:
        """One batch of ``competition``'s final evaluation, or its end; returns matches recorded."""
        with self.services.sessions() as session:
            evaluation, played, agents = evaluation_of(session, competition)
        certificate = evaluation.certificate()
        reason = self._stop_reason(competition, certificate, played)
        if reason:
            self._finish(competition.id, published(certificate, played, reason))
            return 0
        rng = np.random.default_rng([competition.seed, played])
        games = final_pairings(certificate, min(self.batch_size, competition.final_match_budget - played), rng)
        keys = {a.id: a.key for a in agents.values()}
        lineups = [(keys[g.first], keys[g.second]) for g in games]
        board = final_board_key(competition.id)
        config = LadderConfig(competition.env_id, batch_size=self.batch_size,
                              seed=competition.seed ^ FINAL_SEED_SALT, lane=board, board=board)
        ladder = Ladder(self.services.sessions, config, FINAL_RATING_ENV)
        ladder.sync_agents([agent_source(a) for a in agents.values()])
        # A connected entry plays in the lane whether or not its client is there: offline, it forfeits
        # (the usual rules); while the lane still plays the last such batch, its pairs wait a round.
        connected = [a for a in agents.values() if a.kind in CONNECTED_KINDS]
        lineups = split_connected(self.lane, ladder, connected, lineups, self.stop, FINAL_RATING_ENV)
        if not lineups:
            return 0
        return ladder.run(self.runner, len(lineups), stop=self.stop, lineups=lineups).recorded

    def _stop_reason(self, competition: comp_repo.CompetitionInfo, certificate: Certificate, played: int) -> str:
        if len(certificate.standings) < 2:
            return "fewer than two entries in the frozen pool"
        if certificate.certified:
            return "certified"
        if played >= competition.final_match_budget:
            return "match budget spent"
        if competition.final_ends_at is not None and self.now() >= competition.final_ends_at:
            return "end of the final evaluation"
        return ""

    def _finish(self, competition_id: int, result: dict[str, Any]) -> None:
        def finish(session) -> None:
            competition = comp_repo.get_competition(session, competition_id, lock=True)
            if competition is None or competition.state != CompetitionState.FINAL:
                return
            comp_repo.update_competition(session, competition_id, {
                "state": CompetitionState.FINISHED.value, "finished_at": self.now(), "final_result": result})
            log.info("competition %d finished: %s after %d matches", competition_id, result["stopped"],
                     result["matches"])

        self.services.sessions.write_transaction(finish, what=f"freezing competition {competition_id}'s standings")


def split_connected(lane: ConnectedLane | None, ladder: Ladder, connected: list[repo.AgentInfo],
                    lineups: list[tuple[str, ...]], stop: Callable[[], bool],
                    rating_env: RatingEnv | None = None) -> list[tuple[str, ...]]:
    """Hand the line-ups with a connected agent to the lane (played beside the loop, recorded on the
    same board; dropped this round if the board's lane is still busy); returns the others, for the runner."""
    keys = {a.key for a in connected}
    if lane is None or not keys:
        return lineups
    theirs = [lu for lu in lineups if keys.intersection(lu)]
    if theirs:
        lane.play_ladder(ladder.config, list(ladder.sources.values()), theirs, stop, rating_env)
    return [lu for lu in lineups if not keys.intersection(lu)]
