"""The batched match loop for built-in board games (vectorized cores).

All matches of a call advance together, one ply per iteration. At each ply, the
rows whose mover is driven by the same policy are answered by one ``act`` call, so
a batch of 4,096 matches between two agents costs two forwards per ply. Where an agent
answers over the wire, the batch runs as two lanes, so its round trips overlap the
engine's own work.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from agents.policy import MatchRng, Policy
from arena.engine.guard import ILLEGAL, OK, ActResult, PolicyCaller
from arena.engine.records import (
    TERMINATION_CODE,
    TERMINATIONS,
    MatchJob,
    MatchRecord,
    Termination,
    forfeit_scores,
    gc_paused,
)
from envs.board_core import BoardCore
from envs.spec import EnvSpec

STEP_LIMIT = TERMINATION_CODE[Termination.STEP_LIMIT]
ALTERNATE = [0, 1] * 512  # seat of each ply in an alternating two-player game


def play_board_matches(
    spec: EnvSpec,
    core: BoardCore,
    jobs: list[MatchJob],
    policies: dict[str, Policy],
    caller: PolicyCaller,
    lanes: int | None = None,
) -> list[MatchRecord]:
    """Play ``jobs`` on a vectorized two-player core and return their records (in ``jobs``' order).

    ``lanes``: the batch is played as this many interleaved lanes; while one lane waits for
    an agent that answers over the wire, the engine steps the others. The default is
    :data:`WIRE_LANES` when a policy answers over the wire, else one. Every row draws from
    its own match's random stream, so the records do not depend on the lanes.
    """
    if lanes is None:
        wire = any(_over_the_wire(p) for p in policies.values())
        lanes = WIRE_LANES if wire and len(jobs) >= WIRE_LANES * MIN_LANE_ROWS else 1
    bounds = np.linspace(0, len(jobs), max(1, min(lanes, len(jobs))) + 1).astype(int)
    running = [_Lane(spec, core, jobs[a:b], policies, caller) for a, b in itertools.pairwise(bounds)]
    for lane in running:
        lane.ask()
    while any(lane.asked for lane in running):
        for lane in running:
            if lane.asked:
                lane.settle()
                lane.ask()
    with gc_paused():
        return [record for lane in running for record in lane.records()]


WIRE_LANES = 2
"""Lanes when an agent answers over the wire: its round trip for one lane overlaps the
engine's work (the other policies, the core) on the other."""
MIN_LANE_ROWS = 16
"""Fewer matches than this per lane: one lane (a round trip per ply either way)."""


def _over_the_wire(policy: Policy) -> bool:
    return hasattr(policy, "submit") and bool(getattr(policy, "answers_rows", False))


class _Lane:
    """One slice of the batch, one ply at a time: :meth:`ask` observes and asks the movers
    (over-the-wire policies first, answered later), :meth:`settle` takes the answers and
    plays them."""

    def __init__(self, spec: EnvSpec, core: BoardCore, jobs: list[MatchJob], policies: dict[str, Policy],
                 caller: PolicyCaller) -> None:
        n = len(jobs)
        self.spec, self.core, self.jobs, self.policies, self.caller = spec, core, jobs, policies, caller
        self.ids = sorted({a for job in jobs for a in job.agents})
        index = {a: i for i, a in enumerate(self.ids)}
        self.agent_idx = np.array([[index[a] for a in job.agents] for job in jobs], dtype=np.int64)
        self.seeds = np.array([job.seed for job in jobs], dtype=np.int64)
        self.batch = core.new_batch(n)
        self.actlog = np.full((n, spec.step_limit + 1), -1, dtype=np.int16)
        self.codes = np.full(n, TERMINATION_CODE[Termination.NORMAL], dtype=np.int8)
        self.forfeit_seat = np.full(n, -1, dtype=np.int8)
        self.live = np.ones(n, dtype=bool)
        self.details: dict[int, str] = {}
        self.asked: list[tuple[slice | np.ndarray, Callable[[], ActResult]]] = []
        self._rows = self._seat = self._plies = np.empty(0, dtype=np.int64)

    def ask(self) -> None:
        """Observe the live rows and ask their movers; nothing is asked once all are over."""
        rows = np.flatnonzero(self.live)
        self.asked = []
        if rows.size == 0:
            return
        batch, ids, policies = self.batch, self.ids, self.policies
        obs, mask = self.core.observe(batch, rows)
        seat = batch.to_move[rows]
        who = self.agent_idx[rows, seat]
        streams = MatchRng(self.seeds[rows], seat, batch.plies[rows])
        self._rows, self._seat, self._plies = rows, seat, batch.plies[rows]
        # Policies that answer over the wire go first: their round trips overlap the others' work.
        for p in sorted(np.unique(who).tolist(), key=lambda p: not hasattr(policies[ids[p]], "submit")):
            if len(ids) == 1:
                sel, rng = slice(None), streams
            else:
                sel = np.flatnonzero(who == p)
                rng = streams.subset(sel)
            self.asked.append((sel, self.caller.begin(policies[ids[p]], obs[sel], mask[sel], rng)))

    def settle(self) -> None:
        """Take the answers of the last :meth:`ask` and play them (or forfeit their rows)."""
        rows, seat, plies = self._rows, self._seat, self._plies
        actions = np.empty(rows.size, dtype=np.int64)
        row_codes = np.empty(rows.size, dtype=np.int8)
        for sel, answer in self.asked:
            res = answer()
            actions[sel], row_codes[sel] = res.actions, res.codes
            if res.detail:
                bad = rows[sel][res.codes != OK]
                self.details.update(dict.fromkeys(bad.tolist(), res.detail))
        self.asked = []
        logged = (row_codes == OK) | (row_codes == ILLEGAL)
        self.actlog[rows[logged], plies[logged]] = actions[logged]
        ok = row_codes == OK
        bad = rows[~ok]
        self.codes[bad], self.forfeit_seat[bad], self.live[bad] = row_codes[~ok], seat[~ok], False
        good = rows[ok]
        finished = self.core.play(self.batch, good, actions[ok])
        self.live[good[finished]] = False
        over = good[~finished & (self.batch.plies[good] >= self.spec.step_limit)]
        self.codes[over], self.live[over] = STEP_LIMIT, False

    def records(self) -> list[MatchRecord]:
        batch = self.batch
        rewards = self.core.rewards(batch, np.arange(len(self.jobs)))
        return _records(self.spec, self.jobs, batch.winner, batch.plies, self.actlog, rewards, self.codes,
                        self.forfeit_seat, self.details, self.policies)


_TERM_VALUES = [t.value for t in TERMINATIONS]
_TERM_FORFEIT = [t.is_forfeit for t in TERMINATIONS]


def _records(spec, jobs, winner, plies, actlog, rewards, codes, forfeit_seat, details, policies):
    """Assemble :class:`MatchRecord` objects (the only per-match Python loop)."""
    seat_team = spec.seat_team
    weights = {a: policies[a].weights_hash for a in {a for j in jobs for a in j.agents}}
    n_logged = (plies + (codes == ILLEGAL)).tolist()
    actlog_l, rewards_l = actlog.tolist(), rewards.tolist()
    codes_l, winner_l, offender_l = codes.tolist(), winner.tolist(), forfeit_seat.tolist()
    out = []
    for i, job in enumerate(jobs):
        code = codes_l[i]
        n = n_logged[i]
        actions = list(zip(ALTERNATE[:n], actlog_l[i][:n]))
        if _TERM_FORFEIT[code]:
            offender = offender_l[i]
            scores = forfeit_scores(spec.num_seats, seat_team, offender)
            win = 1 - offender
        else:
            offender = None
            scores = rewards_l[i]
            win = winner_l[i] if winner_l[i] >= 0 else None
        agents = job.agents
        out.append(MatchRecord(
            env=spec.env_id, seed=job.seed, seats=list(agents),
            weights=[weights[a] for a in agents], actions=actions, scores=scores,
            winner=win, termination=_TERM_VALUES[code], forfeit_seat=offender,
            match_id=job.match_id, detail=details.get(i, "") if details else "",
        ))
    return out
