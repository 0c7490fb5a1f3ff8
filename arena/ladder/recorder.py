"""Recording finished matches: exactly once, with ratings in the same transaction.

Every match id exists before the match is dispatched. Recording a batch is one
transaction: ``INSERT ... ON CONFLICT (id) DO NOTHING RETURNING id, seq`` tells which
records are new; only those are rated (in sequence order) and their participants,
rating events and ratings written. A batch re-dispatched after a worker died, or
delivered twice, therefore changes nothing the second time.

A batch's ratings are computed in waves of matches with no agent in common, one
vectorized update per wave (:meth:`league.ratings.book.RatingBook.apply_batch`): the
same numbers, to the bit, as rating the matches one at a time, so a rebuild from the
log (which cuts it into other batches) still equals the live ratings.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from sqlalchemy.orm import Session

from arena.core.metrics import observe_batch
from arena.engine import MatchRecord
from arena.engine.records import gc_paused
from arena.ladder.registration import ladder_rating_env
from arena.storage.db import Sessions
from arena.storage.db import repositories as repo
from arena.storage.db.repositories import competitions as competitions_repo
from envs.spec import EnvSpec
from league.ratings.book import MatchResult, RatingBook, Standing
from league.ratings.rating import Rating, RatingEnv

log = logging.getLogger(__name__)

# A board is the env's ladder (``None``) or one beside it (``competition:<id>``): the same
# rating code, recorder and rebuild; its matches are stored with ``board`` set and
# ``rated = false`` (not rated on the ladder), its ratings in ``board_ratings``.

# Rated matches a rebuild hands to RatingBook.apply_batch at a time (any size gives the
# same ratings; larger batches make wider waves).
REBUILD_BATCH = 10_000


@dataclass
class RecordOutcome:
    """What one :meth:`MatchRecorder.record` call did."""

    inserted: int
    duplicates: int
    book: RatingBook


def load_book(session: Session, env: RatingEnv, agent_ids: dict[str, int], board: str | None = None) -> RatingBook:
    """The stored standings of ``agent_ids`` (key -> id) on ``board`` (``None``: the env's ladder)
    as a :class:`RatingBook`."""
    keys = {v: k for k, v in agent_ids.items()}
    stored = (repo.load_ratings(session, list(agent_ids.values())) if board is None
              else competitions_repo.load_board_ratings(session, board, list(agent_ids.values())))
    return RatingBook(env, {
        (keys[aid], role): Standing(Rating(r.mu, r.sigma), r.last_match_seq, games=r.games, wins=r.wins,
                                    draws=r.draws, losses=r.losses)
        for (aid, role), r in stored.items()
    })


def book_rows(book: RatingBook, spec: EnvSpec, agent_ids: dict[str, int], keys=None) -> list[dict]:
    """``upsert_ratings`` rows for ``keys`` (default: every standing in the book)."""
    rows = []
    for agent, role in keys if keys is not None else book.standings:
        st = book.standings[(agent, role)]
        rows.append({
            "agent_id": agent_ids[agent], "role": role, "env_id": spec.env_id,
            "mu": st.rating.mu, "sigma": st.rating.sigma, "games": st.games, "wins": st.wins,
            "draws": st.draws, "losses": st.losses, "last_match_seq": st.last_match,
        })
    return rows


def participant_rows(spec: EnvSpec, record: MatchRecord, seq: int, agent_ids: dict[str, int]) -> list[dict]:
    rows = []
    for seat, agent in enumerate(record.seats):
        team = spec.seat_team[seat]
        result = "D" if record.winner is None else ("W" if record.winner == team else "L")
        rows.append({"match_seq": seq, "seat": seat, "agent_id": agent_ids[agent], "team": team,
                     "role": spec.roles[team], "score": float(record.scores[seat]), "result": result})
    return rows


class MatchRecorder:
    """Writes match results and rating updates for one env's ladder.

    Args:
        sessions: Session factory of the Arena database.
        spec: The env's spec (teams and roles decide how a match is rated).
        env: The ladder's TrueSkill environment.
        league_id: League the matches belong to, if any.
        board: The board the matches are rated on (``None``: the env's ladder).
    """

    def __init__(self, sessions: Sessions, spec: EnvSpec, env: RatingEnv,
                 league_id: int | None = None, db_retry_s: float = 120.0, board: str | None = None) -> None:
        self.sessions, self.spec, self.env, self.league_id = sessions, spec, env, league_id
        self.db_retry_s = db_retry_s
        self.board = board

    def record(self, records: list[MatchRecord], agent_ids: dict[str, int]) -> RecordOutcome:
        """Record ``records`` once; rate the newly inserted ones in sequence order.

        The transaction also removes the records from the persisted match queue. While
        the database is unreachable it is retried (up to ``db_retry_s``); a retry after
        a commit whose acknowledgement was lost finds every record already there.

        Raises:
            ServiceUnavailable: The database stayed unreachable for ``db_retry_s``.
        """
        started = time.perf_counter()
        with gc_paused():
            fresh, book, rating_seconds = self.sessions.write_transaction(
                lambda session: self._record(session, records, agent_ids), timeout_s=self.db_retry_s,
                what=f"recording {len(records)} {self.spec.env_id} matches", idempotent=True)
        return self._report(records, agent_ids, fresh, book, started, rating_seconds)

    def _record(self, session: Session, records: list[MatchRecord],
                agent_ids: dict[str, int]) -> tuple[list[tuple[int, MatchRecord]], RatingBook, float]:
        spec = self.spec
        board = self.board
        rows = [repo.match_row(r, league_id=self.league_id, rated=board is None, board=board) for r in records]
        new = repo.insert_matches(session, rows)
        repo.dequeue_matches(session, [r.match_id for r in records])
        fresh = sorted((new[r.match_id], r) for r in records if r.match_id in new)
        involved = {a: agent_ids[a] for _, r in fresh for a in r.seats}
        book = load_book(session, self.env, involved, board)
        rating_started = time.perf_counter()
        events, participants, touched = [], [], set()
        rated = book.apply_batch([MatchResult([rec.seats[team[0]] for team in spec.teams], spec.roles,
                                              rec.winner, seq) for seq, rec in fresh])
        for (seq, rec), changes in zip(fresh, rated, strict=True):
            for ch in changes:
                touched.add((ch.agent, ch.role))
                events.append({
                    "match_seq": seq, "agent_id": involved[ch.agent], "role": ch.role,
                    "mu_before": ch.before.mu, "sigma_before": ch.before.sigma,
                    "mu_after": ch.after.mu, "sigma_after": ch.after.sigma,
                })
            participants.extend(participant_rows(spec, rec, seq, involved))
        rating_seconds = time.perf_counter() - rating_started
        repo.insert_participants(session, participants)
        rows = book_rows(book, spec, involved, sorted(touched))
        if board is None:
            repo.insert_rating_events(session, events)
            repo.upsert_ratings(session, rows)
        else:
            competitions_repo.upsert_board_ratings(session, board, rows)
        return fresh, book, rating_seconds

    def _report(self, records: list[MatchRecord], agent_ids: dict[str, int], fresh: list[tuple[int, MatchRecord]],
                book: RatingBook, started: float, rating_seconds: float) -> RecordOutcome:
        spec = self.spec
        observe_batch([rec for _, rec in fresh], commit_seconds=time.perf_counter() - started,
                      rating_seconds=rating_seconds)
        duplicates = len(records) - len(fresh)
        if duplicates:
            log.info("%d of %d match results were already recorded; ignored", duplicates, len(records),
                     extra={"env": spec.env_id, "duplicates": duplicates})
        if fresh:
            log.debug("recorded %d matches", len(fresh), extra={
                "env": spec.env_id, "seq_first": fresh[0][0], "seq_last": fresh[-1][0]})
        for seq, rec in fresh:
            if rec.forfeit_seat is not None:
                agent = rec.seats[rec.forfeit_seat]
                log.info("match forfeited: %s", rec.detail or rec.termination, extra={
                    "env": spec.env_id, "match_id": rec.match_id, "match_seq": seq, "agent": agent,
                    "agent_id": agent_ids.get(agent), "reason": rec.termination})
        return RecordOutcome(inserted=len(fresh), duplicates=duplicates, book=book)


def record_unrated(sessions: Sessions, spec: EnvSpec, records: list[MatchRecord],
                   agent_ids: dict[str, int]) -> int:
    """Store matches that move no rating (validation episodes, unrated challenges).

    Exactly once like rated ones (by match id), with their participants, so they appear
    in the agents' match histories and replay like any match.

    Returns:
        How many of ``records`` were new.
    """
    def store(session: Session) -> int:
        new = repo.insert_matches(session, [repo.match_row(r, rated=False) for r in records])
        repo.insert_participants(session, [row for r in records if r.match_id in new
                                           for row in participant_rows(spec, r, new[r.match_id], agent_ids)])
        return len(new)

    return sessions.write_transaction(store, what=f"storing {len(records)} unrated {spec.env_id} matches",
                                      idempotent=True)


@dataclass
class RebuildReport:
    """Ratings recomputed from the match log, compared with the live table."""

    matches: int
    standings: int
    mismatches: list[str]

    @property
    def equal(self) -> bool:
        return not self.mismatches


def rebuild_ratings(sessions: Sessions, spec: EnvSpec, *, write: bool = False, board: str | None = None,
                    rating_env: RatingEnv | None = None) -> RebuildReport:
    """Recompute every rating of ``spec.env_id`` (of ``board``, if given) from the match log in sequence order.

    Uses the TrueSkill constants stored with the env (the ones its ladder rated with;
    ``rating_env`` for a board with constants of its own) and compares the result with the
    live ratings field by field (exact float equality); with ``write=True`` the live table
    is replaced by the rebuilt one.
    """
    def rebuild(session: Session) -> tuple[int, RatingBook, list[str]]:
        env = rating_env or ladder_rating_env(session, spec.env_id)
        agents = {a.key: a.id for a in repo.list_agents(session, spec.env_id)}
        book = RatingBook(env)
        count, pending = 0, []
        for match in repo.iter_matches(session, env_id=spec.env_id, board=board):
            if match.rated or board is not None:
                pending.append(MatchResult([match.seats[team[0]] for team in spec.teams], spec.roles,
                                           match.winner, match.seq))
                if len(pending) == REBUILD_BATCH:
                    book.apply_batch(pending)
                    pending = []
            count += 1
        book.apply_batch(pending)
        mismatches = _diff(book, load_book(session, env, agents, board))
        if write and board is None:
            repo.clear_ratings(session, spec.env_id)
            repo.upsert_ratings(session, book_rows(book, spec, agents))
        elif write:
            competitions_repo.clear_board_ratings(session, board)
            competitions_repo.upsert_board_ratings(session, board, book_rows(book, spec, agents))
        return count, book, mismatches

    if write:
        count, book, mismatches = sessions.write_transaction(rebuild, what=f"rebuilding {spec.env_id} ratings")
    else:
        with sessions() as session:  # a read: one snapshot, concurrent with the ladder's writes
            count, book, mismatches = rebuild(session)
    return RebuildReport(matches=count, standings=len(book.standings), mismatches=mismatches)


def _diff(rebuilt: RatingBook, live: RatingBook) -> list[str]:
    out = []
    for key in sorted(set(rebuilt.standings) | set(live.standings)):
        a, b = rebuilt.standings.get(key), live.standings.get(key)
        if a != b:
            out.append(f"{key[0]} ({key[1]}): rebuilt {a}, live {b}")
    return out
