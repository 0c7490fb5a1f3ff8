"""A league's strategy timeline: per-episode phases in, per-generation rates out, to the web.

A league's :class:`~league.evaluation.phases.PhaseTimeline` (saved with its state) gets episodes
from two sources:

* the trainer's own detectors, already aggregated per generation
  (``state.phases.add_rates(generation, rates, episodes)``), and
* recorded matches of the league's snapshots (:func:`scan_recorded_matches`): each is
  re-simulated (:func:`arena.read.grid_frames.match_phases`), counted for the newest
  generation among its seats, and, being replayable, can become the first occurrence
  of a phase that the web page links to.

:func:`fill_ratings` copies the ladder ratings of the snapshots into the timeline (per
generation and env role) and :func:`publish_timeline` writes it to the database
(``league_generations``), where the league page reads it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from arena.engine.records import MatchRecord
from arena.read.grid_frames import is_grid_env, match_phases
from arena.storage.db import Sessions
from arena.storage.db import repositories as repo
from arena.training.state import LeagueState
from envs.registry import get_spec
from league.evaluation.phases import PhaseTimeline

log = logging.getLogger(__name__)


def match_generation(state: LeagueState, seats: Sequence[str]) -> int | None:
    """The newest generation of the league's snapshots among ``seats`` (agent keys), if any."""
    gens = {s.key: s.generation for s in state.snapshots}
    found = [gens[k] for k in seats if k in gens]
    return max(found) if found else None


def add_recorded_matches(state: LeagueState, records: Iterable[MatchRecord]) -> int:
    """Count the phases of recorded matches of the league's snapshots; returns how many counted."""
    if not is_grid_env(state.env_id):
        return 0
    counted = 0
    for record in records:
        gen = match_generation(state, record.seats)
        if gen is None or record.env != state.env_id:
            continue
        try:
            values = match_phases(record)
        except Exception as exc:  # noqa: BLE001 - one bad record must not stop the timeline
            log.warning("cannot re-play match %s for its phases: %s", record.match_id, exc)
            continue
        state.phases.add_episode(gen, values, record.match_id)
        counted += 1
    return counted


def scan_recorded_matches(sessions: Sessions, state: LeagueState) -> int:
    """Add the league's matches recorded since the last scan (``state.phases_seq``)."""
    if not is_grid_env(state.env_id):  # no phase detectors: nothing to re-play
        return 0
    counted = 0
    with sessions() as session:
        for stored in repo.iter_matches(session, state.env_id, after_seq=state.phases_seq):
            counted += add_recorded_matches(state, [stored.to_record()])
            state.phases_seq = stored.seq
    return counted


def fill_ratings(state: LeagueState) -> None:
    """Put each rated snapshot's ``[mu, sigma]`` into the timeline, per generation and env role.

    A snapshot's role is its env role when it is one (``hider``, ``seeker``); snapshots
    of learners named after league roles (``main``) count for the env's first role.
    """
    roles = get_spec(state.env_id).roles
    for snap in state.snapshots:
        rating = state.ratings.get(snap.name)
        if rating is not None:
            role = snap.role if snap.role in roles else roles[0]
            state.phases.set_rating(snap.generation, role, *rating)


def timeline_rows(timeline: PhaseTimeline) -> list[dict]:
    """The ``league_generations`` rows of a timeline."""
    firsts: dict[int, dict[str, str]] = {}
    for occ in timeline.firsts.values():
        firsts.setdefault(occ.generation, {})[occ.phase] = occ.match_id
    return [{"generation": rec.generation, "episodes": rec.episodes, "phase_rates": rec.rates,
             "ratings": rec.ratings, "first_matches": firsts.get(rec.generation, {}),
             "exploiters": [e.to_json() for e in rec.exploiters]}
            for rec in timeline.rows()]


def publish_timeline(sessions: Sessions, league_id: int | None, timeline: PhaseTimeline) -> int:
    """Write a league's timeline to the database (``league_generations``), where its web page reads it.

    Any trainer with a :class:`~league.evaluation.phases.PhaseTimeline` and the id of its ``leagues``
    row can call this; returns the rows written (0 without a league id).
    """
    if league_id is None:
        return 0
    rows = timeline_rows(timeline)
    return sessions.write_transaction(lambda session: repo.replace_generations(session, league_id, rows),
                                      what=f"publishing league {league_id}'s strategy timeline", idempotent=True)


def refresh_timeline(sessions: Sessions, state: LeagueState) -> int:
    """Ratings and newly recorded matches into the timeline, then the timeline to the database.

    Returns:
        The number of recorded matches counted in this call.
    """
    fill_ratings(state)
    counted = scan_recorded_matches(sessions, state)
    publish_timeline(sessions, state.league_id, state.phases)
    return counted
